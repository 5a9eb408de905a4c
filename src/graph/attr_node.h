// A node whose attributes are one of the public *_attributes classes. Each op specializes
// PortNames<Attr> with the JSON names of its ports; a node that binds another subset of the same
// attributes' ports (as the MXFP8 attention does with the FP8 attention's classes) names its own.
#pragma once

#include <array>
#include <utility>

#include "graph/node.h"

namespace frost::detail {

template <class Attr>
struct PortNames;  // static constexpr arrays `inputs` and `outputs` of {enum, "NAME"}

template <class Attr, class Ports = PortNames<Attr>>
class AttrNode : public Node {
 public:
  using In = typename Attr::input_names;
  using Out = typename Attr::output_names;

  Attr attr;

  AttrNode() = default;
  explicit AttrNode(Attr a) : attr(std::move(a)) {}

  const std::string& name() const override { return attr.name; }
  void set_name(std::string n) override { attr.name = std::move(n); }
  DataType_t compute_data_type() const override { return attr.compute_data_type; }
  void set_compute_data_type(DataType_t t) override { attr.compute_data_type = t; }

  std::vector<Port> ports() override {
    std::vector<Port> p;
    for (const auto& [e, n] : Ports::inputs) p.push_back({n, &attr.inputs[e], false});
    for (const auto& [e, n] : Ports::outputs) p.push_back({n, &attr.outputs[e], true});
    return p;
  }

  TensorPtr in(In e) const {
    auto it = attr.inputs.find(e);
    return it == attr.inputs.end() ? nullptr : it->second;
  }
  TensorPtr out(Out e) const {
    auto it = attr.outputs.find(e);
    return it == attr.outputs.end() ? nullptr : it->second;
  }
};

}  // namespace frost::detail
