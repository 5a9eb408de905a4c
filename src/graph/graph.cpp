// Graph declaration and validation.
#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/dtype_convert.h"
#include "graph/graph_state.h"
#include "graph/shape_util.h"

namespace frost::graph {

using detail::GraphState;

int64_t Tensor_attributes::get_volume() const {
  if (dim_.empty()) return 0;
  auto v = detail::checked_volume(dim_);
  return v ? *v : 0;
}

Graph::Graph() : state_(std::make_unique<GraphState>()) {}
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

Graph& Graph::set_io_data_type(DataType_t t) { state_->ctx.io_data_type = t; return *this; }
Graph& Graph::set_intermediate_data_type(DataType_t t) { state_->ctx.intermediate_data_type = t; return *this; }
Graph& Graph::set_compute_data_type(DataType_t t) { state_->ctx.compute_data_type = t; return *this; }
Graph& Graph::set_name(std::string n) { state_->ctx.name = std::move(n); return *this; }
Graph& Graph::set_dynamic_shape_enabled(bool v) { state_->ctx.dynamic_shape_enabled = v; return *this; }
Graph& Graph::set_override_shape_enabled(bool v) { state_->ctx.override_shape_enabled = v; return *this; }
Graph& Graph::set_sm_count(int32_t v) { state_->ctx.sm_count = v; return *this; }
Graph& Graph::set_sm_version(int32_t v) { state_->ctx.sm_version = v; return *this; }

const std::vector<TensorPtr>& Graph::get_tensors() const { return state_->tensors; }

TensorPtr Graph::tensor(const Tensor_attributes& a) {
  auto t = std::make_shared<Tensor_attributes>(a);
  if (t->get_name().empty()) t->set_name("tensor_" + std::to_string(state_->tensors.size()));
  state_->tensors.push_back(t);
  state_->invalidate_plans();
  if (state_->stage > detail::Stage::DECLARED) state_->stage = detail::Stage::DECLARED;
  return t;
}

namespace {
TensorPtr scalar(Graph& g, double v, DataType_t dt) {
  Tensor_attributes a;
  a.set_dim({1}).set_stride({1}).set_data_type(dt).set_pass_by_value(v);
  return g.tensor(a);
}
}  // namespace

TensorPtr Graph::tensor(float v) { return scalar(*this, v, DataType_t::FLOAT); }
TensorPtr Graph::tensor(double v) { return scalar(*this, v, DataType_t::DOUBLE); }
TensorPtr Graph::tensor(int32_t v) { return scalar(*this, v, DataType_t::INT32); }
TensorPtr Graph::tensor(int64_t v) { return scalar(*this, static_cast<double>(v), DataType_t::INT64); }

TensorPtr Graph::tensor_like(const TensorPtr& like, std::string name) {
  Tensor_attributes a;
  if (like) a = *like;
  a.clear_uid().set_is_virtual(false).set_name(std::move(name));
  return tensor(a);
}

}  // namespace frost::graph

namespace frost::detail {

const Node* GraphState::producer_of(const TensorPtr& t) const {
  for (const auto& n : nodes)
    for (const auto& p : n->outputs())
      if (*p.slot == t) return n.get();
  return nullptr;
}

void add_node(GraphState& g, std::unique_ptr<Node> node) {
  if (node->name().empty()) node->set_name(std::string(node->tag()) + "_" + std::to_string(g.nodes.size()));
  g.nodes.push_back(std::move(node));
  g.invalidate_plans();
  g.stage = Stage::DECLARED;
}

TensorPtr make_output(GraphState& g, const std::string& node_name, std::string_view port) {
  auto t = std::make_shared<graph::Tensor_attributes>();
  t->set_name(node_name + "::" + std::string(port)).set_is_virtual(true);
  g.tensors.push_back(t);
  return t;
}

namespace {

void fill_defaults(const GraphContext& ctx, graph::Tensor_attributes& t) {
  if (t.get_stride().empty() && !t.get_dim().empty()) t.set_stride(packed_strides(t.get_dim()));
  if (t.get_data_type() == DataType_t::NOT_SET)
    t.set_data_type(t.get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type);
}

error_t validate_graph(GraphState& g) {
  FROST_CHECK(g.deferred_error);
  if (g.nodes.empty()) return {error_code_t::INVALID_VALUE, "graph has no operations"};
  std::unordered_set<const graph::Tensor_attributes*> written;
  for (auto& node : g.nodes) {
    const std::string where = "node '" + node->name() + "' (" + std::string(node->tag()) + ")";
    for (auto& p : node->inputs()) {
      if (!*p.slot) continue;
      auto& t = **p.slot;
      if (t.get_is_virtual() && !written.count(&t))
        return {error_code_t::INVALID_VALUE, where + ": input " + p.name + " is virtual tensor '" + t.get_name() +
                                                 "', which no earlier node writes"};
      fill_defaults(g.ctx, t);
      FROST_CHECK(check_tensor(t, where + " input " + p.name));
    }
    for (auto& p : node->outputs()) {
      if (!*p.slot) continue;
      if (written.count(p.slot->get()))
        return {error_code_t::INVALID_VALUE, where + ": output " + p.name + " tensor '" + (*p.slot)->get_name() +
                                                 "' is already written by another node"};
      if ((*p.slot)->get_is_pass_by_value())
        return {error_code_t::INVALID_VALUE, where + ": output " + p.name + " cannot be a pass-by-value tensor"};
    }
    FROST_CHECK(node->infer_and_validate(g.ctx));
    for (auto& p : node->outputs()) {
      if (!*p.slot) continue;
      auto& t = **p.slot;
      fill_defaults(g.ctx, t);
      FROST_CHECK(check_tensor(t, where + " output " + p.name));
      written.insert(&t);
    }
  }
  // UIDs: keep the user's, reject duplicates, assign the rest.
  std::vector<graph::Tensor_attributes*> all;
  std::unordered_set<graph::Tensor_attributes*> seen;
  auto collect = [&](const TensorPtr& t) {
    if (t && seen.insert(t.get()).second) all.push_back(t.get());
  };
  for (auto& node : g.nodes)
    for (auto& p : node->ports()) {
      collect(*p.slot);
      if (*p.slot) collect((*p.slot)->get_ragged_offset());
    }
  std::unordered_map<int64_t, const graph::Tensor_attributes*> by_uid;
  int64_t max_uid = 0;
  for (auto* t : all) {
    if (!t->has_uid()) continue;
    auto [it, fresh] = by_uid.emplace(t->get_uid(), t);
    if (!fresh)
      return {error_code_t::INVALID_VALUE, "tensors '" + it->second->get_name() + "' and '" + t->get_name() +
                                               "' share uid " + std::to_string(t->get_uid())};
    max_uid = std::max(max_uid, t->get_uid());
  }
  for (auto* t : all)
    if (!t->has_uid()) t->set_uid(++max_uid);
  g.bound_tensors.clear();
  std::unordered_set<const graph::Tensor_attributes*> bound;
  auto bind = [&](const TensorPtr& t) {
    if (t && !t->get_is_virtual() && !t->get_is_pass_by_value() && bound.insert(t.get()).second) g.bound_tensors.push_back(t);
  };
  for (auto& node : g.nodes)
    for (auto& p : node->ports())
      if (*p.slot) {
        bind(*p.slot);
        bind((*p.slot)->get_ragged_offset());
      }
  return {};
}

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

error_t Graph::validate() {
  state_->invalidate_plans();
  state_->stage = detail::Stage::DECLARED;
  FROST_CHECK(detail::validate_graph(*state_));
  state_->stage = detail::Stage::VALIDATED;
  return {};
}

}  // namespace frost::graph
