// Nodes of rotary position embedding: ROPE and ROPE_BACKWARD (frost's own ops).
#pragma once

#include <array>

#include "frost/ops/rope.h"
#include "graph/attr_node.h"

namespace frost::detail {

using RopeIn = graph::RopeInput;
using RopeOut = graph::RopeOutput;

template <>
struct PortNames<graph::Rope_attributes> {
  static constexpr std::array<std::pair<RopeIn, const char*>, 3> inputs{
      {{RopeIn::X, "X"}, {RopeIn::COS, "COS"}, {RopeIn::SIN, "SIN"}}};
  static constexpr std::array<std::pair<RopeOut, const char*>, 1> outputs{{{RopeOut::Y, "Y"}}};
};

template <>
struct PortNames<graph::Rope_backward_attributes> {
  static constexpr std::array<std::pair<RopeIn, const char*>, 3> inputs{
      {{RopeIn::DY, "DY"}, {RopeIn::COS, "COS"}, {RopeIn::SIN, "SIN"}}};
  static constexpr std::array<std::pair<RopeOut, const char*>, 1> outputs{{{RopeOut::DX, "DX"}}};
};

class RopeNode final : public AttrNode<graph::Rope_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "ROPE";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

class RopeBackwardNode final : public AttrNode<graph::Rope_backward_attributes> {
 public:
  using AttrNode::AttrNode;
  static constexpr std::string_view kTag = "ROPE_BACKWARD";
  std::string_view tag() const override { return kTag; }
  error_t infer_and_validate(const GraphContext&) override;
  void attributes_to_json(json&) const override;
  error_t attributes_from_json(const json&) override;
  error_t run_reference(RefExec&) const override;
};

}  // namespace frost::detail
