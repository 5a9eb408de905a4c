// Graph:: builders of the linear attention family.
#include "ops/common/builder_util.h"
#include "ops/linear_attention/linear_attention_node.h"

namespace frost::detail {
namespace {

template <class Attr>
void bind_inputs(GraphState& g, Attr& a, TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr decay, TensorPtr beta) {
  default_name(g, a, DeltaRuleOp<Attr>::kTag);
  require_inputs(g, a.name, DeltaRuleOp<Attr>::kTag, {{"Q", &q}, {"K", &k}, {"V", &v}, {"G", &decay}, {"BETA", &beta}});
  a.inputs[LinIn::Q] = std::move(q);
  a.inputs[LinIn::K] = std::move(k);
  a.inputs[LinIn::V] = std::move(v);
  a.inputs[LinIn::G] = std::move(decay);
  a.inputs[LinIn::BETA] = std::move(beta);
}

template <class Attr>
std::array<TensorPtr, 2> add_forward(GraphState& g, Attr a, TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr decay,
                                     TensorPtr beta) {
  bind_inputs(g, a, std::move(q), std::move(k), std::move(v), std::move(decay), std::move(beta));
  const TensorPtr o = a.outputs[LinOut::O] = make_output(g, a.name, "O");
  TensorPtr final_state;
  if (a.output_final_state) final_state = a.outputs[LinOut::FINAL_STATE] = make_output(g, a.name, "FINAL_STATE");
  add_node(g, std::make_unique<DeltaRuleNode<Attr>>(std::move(a)));
  return {o, final_state};
}

template <class Attr>
std::array<TensorPtr, 6> add_backward(GraphState& g, Attr a, TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr decay,
                                      TensorPtr beta, TensorPtr d_o) {
  bind_inputs(g, a, std::move(q), std::move(k), std::move(v), std::move(decay), std::move(beta));
  require_inputs(g, a.name, DeltaRuleOp<Attr>::kTag, {{"DO", &d_o}});
  a.inputs[LinIn::DO] = std::move(d_o);
  std::array<TensorPtr, 6> r;
  const std::pair<LinOut, const char*> ports[5] = {
      {LinOut::DQ, "DQ"}, {LinOut::DK, "DK"}, {LinOut::DV, "DV"}, {LinOut::DG, "DG"}, {LinOut::DBETA, "DBETA"}};
  for (size_t i = 0; i < 5; ++i) r[i] = a.outputs[ports[i].first] = make_output(g, a.name, ports[i].second);
  if (a.inputs.count(LinIn::INITIAL_STATE) && a.inputs[LinIn::INITIAL_STATE])
    r[5] = a.outputs[LinOut::D_INITIAL_STATE] = make_output(g, a.name, "D_INITIAL_STATE");
  add_node(g, std::make_unique<DeltaRuleNode<Attr>>(std::move(a)));
  return r;
}

}  // namespace
}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 2> Graph::gdn(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr g, TensorPtr beta,
                                    Gdn_attributes a) {
  return detail::add_forward(state(), std::move(a), std::move(q), std::move(k), std::move(v), std::move(g),
                             std::move(beta));
}

std::array<TensorPtr, 2> Graph::kda(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr g, TensorPtr beta,
                                    Kda_attributes a) {
  return detail::add_forward(state(), std::move(a), std::move(q), std::move(k), std::move(v), std::move(g),
                             std::move(beta));
}

std::array<TensorPtr, 6> Graph::gdn_backward(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr g, TensorPtr beta,
                                             TensorPtr d_o, Gdn_backward_attributes a) {
  return detail::add_backward(state(), std::move(a), std::move(q), std::move(k), std::move(v), std::move(g),
                              std::move(beta), std::move(d_o));
}

std::array<TensorPtr, 6> Graph::kda_backward(TensorPtr q, TensorPtr k, TensorPtr v, TensorPtr g, TensorPtr beta,
                                             TensorPtr d_o, Kda_backward_attributes a) {
  return detail::add_backward(state(), std::move(a), std::move(q), std::move(k), std::move(v), std::move(g),
                              std::move(beta), std::move(d_o));
}

}  // namespace frost::graph
