#include "ops/linear_attention/linear_attention_node.h"

#include <cmath>
#include <cstdio>

#include "graph/json_util.h"
#include "ops/common/port_checks.h"

namespace frost::detail {

template <class Attr>
error_t DeltaRuleNode<Attr>::validate_inputs(int64_t& sequences) const {
  const TensorPtr q = this->in(LinIn::Q), k = this->in(LinIn::K), v = this->in(LinIn::V);
  const TensorPtr g = this->in(LinIn::G), beta = this->in(LinIn::BETA);
  for (const auto& [port, t] : {std::pair{"Q", q}, {"K", k}, {"V", v}, {"G", g}, {"BETA", beta}})
    FROST_CHECK(expect_type(*this, port, t, is_value_type(t->get_data_type()), "FLOAT, HALF, BFLOAT16 or DOUBLE"));
  const auto& qd = q->get_dim();
  if (qd.size() != 4) return attr_error(*this, "Q.dim", dims_string(qd), "must have rank 4 [B, T, H, K]");
  FROST_CHECK(expect_dims(*this, "K", k, qd, "(K has Q's dims)"));
  const auto& vd = v->get_dim();
  if (vd.size() != 4 || vd[0] != qd[0] || vd[1] != qd[1])
    return attr_error(*this, "V.dim", dims_string(vd),
                      "must be [" + std::to_string(qd[0]) + ", " + std::to_string(qd[1]) + ", HV, V] like Q's [B, T]",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  const int64_t batch = qd[0], len = qd[1], heads = qd[2], key_dim = qd[3], value_heads = vd[2], value_dim = vd[3];
  if (value_heads % heads != 0)
    return attr_error(*this, "V.dim", dims_string(vd),
                      "value heads " + std::to_string(value_heads) + " must be a multiple of Q's " +
                          std::to_string(heads) + " heads");
  std::vector<int64_t> g_dims{batch, len, value_heads};
  if (kPerKeyDecay) g_dims.push_back(key_dim);
  FROST_CHECK(expect_dims(*this, "G", g, g_dims, kPerKeyDecay ? "(KDA: [B, T, HV, K])" : "(GDN: [B, T, HV])"));
  FROST_CHECK(expect_dims(*this, "BETA", beta, {batch, len, value_heads}, "([B, T, HV])"));
  if (this->attr.scale && !std::isfinite(*this->attr.scale)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(*this->attr.scale));
    return attr_error(*this, "scale", buf, "must be finite");
  }

  sequences = batch;
  if (const TensorPtr cu = this->in(LinIn::CU_SEQLENS)) {
    const DataType_t dt = cu->get_data_type();
    FROST_CHECK(
        expect_type(*this, "CU_SEQLENS", cu, dt == DataType_t::INT32 || dt == DataType_t::INT64, "INT32 or INT64"));
    if (cu->get_dim().size() != 1 || cu->get_dim()[0] < 2)
      return attr_error(*this, "CU_SEQLENS.dim", dims_string(cu->get_dim()), "must be [N + 1] with N >= 1");
    if (batch != 1)
      return attr_error(*this, "Q.dim", dims_string(qd), "B must be 1 with CU_SEQLENS (sequences are packed along T)");
    sequences = cu->get_dim()[0] - 1;
  }
  const TensorPtr init = this->in(LinIn::INITIAL_STATE), indices = this->in(LinIn::STATE_INDICES);
  const std::vector<int64_t> state_tail{value_heads, key_dim, value_dim};
  if (indices) {
    FROST_CHECK(expect_type(*this, "STATE_INDICES", indices, indices->get_data_type() == DataType_t::INT32, "INT32"));
    FROST_CHECK(expect_dims(*this, "STATE_INDICES", indices, {sequences}, "(one row per sequence)"));
    if (!init)
      return attr_error(*this, "INITIAL_STATE", "null", "STATE_INDICES index into an initial-state pool",
                        error_code_t::ATTRIBUTE_NOT_SET);
  }
  if (init) {
    FROST_CHECK(expect_type(*this, "INITIAL_STATE", init, is_state_type(init->get_data_type()), "FLOAT or DOUBLE"));
    const auto& sd = init->get_dim();
    const bool pool = indices != nullptr;  // a pool has any number of rows
    if (sd.size() != 4 || std::vector<int64_t>(sd.begin() + 1, sd.end()) != state_tail || (!pool && sd[0] != sequences))
      return attr_error(*this, "INITIAL_STATE.dim", dims_string(sd),
                        std::string("must be [") + (pool ? "P" : std::to_string(sequences)) + ", " +
                            std::to_string(value_heads) + ", " + std::to_string(key_dim) + ", " +
                            std::to_string(value_dim) + "]" + (pool ? " (a pool)" : " [N, HV, K, V]"),
                        error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  const TensorPtr d_o = this->in(LinIn::DO), d_final = this->in(LinIn::D_FINAL_STATE);
  if (!kBackward) {
    if (d_o) return attr_error(*this, "DO", describe(d_o), "is a backward input");
    if (d_final) return attr_error(*this, "D_FINAL_STATE", describe(d_final), "is a backward input");
    return {};
  }
  FROST_CHECK(expect_type(*this, "DO", d_o, is_value_type(d_o->get_data_type()), "FLOAT, HALF, BFLOAT16 or DOUBLE"));
  FROST_CHECK(expect_dims(*this, "DO", d_o, {batch, len, value_heads, value_dim}, "(O's dims [B, T, HV, V])"));
  if (d_final) {
    FROST_CHECK(
        expect_type(*this, "D_FINAL_STATE", d_final, is_state_type(d_final->get_data_type()), "FLOAT or DOUBLE"));
    std::vector<int64_t> want{init ? init->get_dim()[0] : sequences};
    want.insert(want.end(), state_tail.begin(), state_tail.end());
    FROST_CHECK(expect_dims(*this, "D_FINAL_STATE", d_final, want, "(the final state's dims)"));
  }
  return {};
}

template <class Attr>
error_t DeltaRuleNode<Attr>::infer_outputs(const GraphContext& ctx, int64_t sequences) {
  const TensorPtr q = this->in(LinIn::Q), v = this->in(LinIn::V), init = this->in(LinIn::INITIAL_STATE);
  const auto& vd = v->get_dim();
  std::vector<int64_t> state_dims{init ? init->get_dim()[0] : sequences, vd[2], q->get_dim()[3], vd[3]};
  std::vector<std::pair<const char*, TensorPtr>> values, states;
  if constexpr (!kBackward) {
    FROST_CHECK(infer_output(*this, ctx, "O", this->out(LinOut::O), {vd[0], vd[1], vd[2], vd[3]}, v));
    values.emplace_back("O", this->out(LinOut::O));
    const TensorPtr final_state = this->out(LinOut::FINAL_STATE);
    if (this->attr.output_final_state && !final_state)
      return attr_error(*this, "FINAL_STATE", "null", "output_final_state needs a FINAL_STATE output",
                        error_code_t::ATTRIBUTE_NOT_SET);
    if (!this->attr.output_final_state && final_state)
      return attr_error(*this, "FINAL_STATE", describe(final_state), "is bound but output_final_state is off");
    if (final_state) {
      FROST_CHECK(infer_output(*this, ctx, "FINAL_STATE", final_state, state_dims, init ? init : v, DataType_t::FLOAT));
      states.emplace_back("FINAL_STATE", final_state);
    }
  } else {
    const std::pair<const char*, LinIn> grads[5] = {
        {"DQ", LinIn::Q}, {"DK", LinIn::K}, {"DV", LinIn::V}, {"DG", LinIn::G}, {"DBETA", LinIn::BETA}};
    const LinOut grad_ports[5] = {LinOut::DQ, LinOut::DK, LinOut::DV, LinOut::DG, LinOut::DBETA};
    for (int i = 0; i < 5; ++i) {
      const TensorPtr src = this->in(grads[i].second), t = this->out(grad_ports[i]);
      FROST_CHECK(infer_output(*this, ctx, grads[i].first, t, src->get_dim(), src));
      values.emplace_back(grads[i].first, t);
    }
    const TensorPtr d_init = this->out(LinOut::D_INITIAL_STATE);
    if (init && !d_init)
      return attr_error(*this, "D_INITIAL_STATE", "null", "an initial state needs a D_INITIAL_STATE output",
                        error_code_t::ATTRIBUTE_NOT_SET);
    if (!init && d_init)
      return attr_error(*this, "D_INITIAL_STATE", describe(d_init), "is bound without INITIAL_STATE");
    if (d_init) {
      FROST_CHECK(infer_output(*this, ctx, "D_INITIAL_STATE", d_init, state_dims, init, DataType_t::FLOAT));
      states.emplace_back("D_INITIAL_STATE", d_init);
    }
  }
  for (const auto& [port, t] : values)
    FROST_CHECK(expect_type(*this, port, t, is_value_type(t->get_data_type()), "FLOAT, HALF, BFLOAT16 or DOUBLE"));
  for (const auto& [port, t] : states)
    FROST_CHECK(expect_type(*this, port, t, is_state_type(t->get_data_type()), "FLOAT or DOUBLE"));
  return {};
}

template <class Attr>
error_t DeltaRuleNode<Attr>::infer_and_validate(const GraphContext& ctx) {
  if (kBackward)
    FROST_CHECK(require_ports(*this, {"DQ", "DK", "DV", "DG", "DBETA", "Q", "K", "V", "G", "BETA", "DO"}));
  else
    FROST_CHECK(require_ports(*this, {"O", "Q", "K", "V", "G", "BETA"}));
  // The other direction's outputs must stay empty.
  if (kBackward)
    FROST_CHECK(reject_bound(*this, {"O", "FINAL_STATE"}, "is a forward output"));
  else
    FROST_CHECK(reject_bound(*this, {"DQ", "DK", "DV", "DG", "DBETA", "D_INITIAL_STATE"}, "is a backward output"));
  int64_t sequences = 0;
  FROST_CHECK(validate_inputs(sequences));
  return infer_outputs(ctx, sequences);
}

template <class Attr>
void DeltaRuleNode<Attr>::attributes_to_json(json& j) const {
  write_opt(j, "scale", this->attr.scale);
  j["use_qk_l2norm_in_kernel"] = this->attr.use_qk_l2norm_in_kernel;
  if constexpr (!kBackward) j["output_final_state"] = this->attr.output_final_state;
}

template <class Attr>
error_t DeltaRuleNode<Attr>::attributes_from_json(const json& j) {
  FROST_CHECK(read_opt_float(j, "scale", this->attr.scale));
  FROST_CHECK(read_bool(j, "use_qk_l2norm_in_kernel", this->attr.use_qk_l2norm_in_kernel));
  if constexpr (!kBackward) FROST_CHECK(read_bool(j, "output_final_state", this->attr.output_final_state));
  return {};
}

template class DeltaRuleNode<graph::Gdn_attributes>;
template class DeltaRuleNode<graph::Kda_attributes>;
template class DeltaRuleNode<graph::Gdn_backward_attributes>;
template class DeltaRuleNode<graph::Kda_backward_attributes>;

namespace {

const OpRegistrar kGdn(std::string(GdnNode::kTag), [] { return std::make_unique<GdnNode>(); });
const OpRegistrar kKda(std::string(KdaNode::kTag), [] { return std::make_unique<KdaNode>(); });
const OpRegistrar kGdnBackward(std::string(GdnBackwardNode::kTag), [] { return std::make_unique<GdnBackwardNode>(); });
const OpRegistrar kKdaBackward(std::string(KdaBackwardNode::kTag), [] { return std::make_unique<KdaBackwardNode>(); });

}  // namespace
}  // namespace frost::detail
