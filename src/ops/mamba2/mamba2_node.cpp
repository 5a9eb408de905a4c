#include "ops/mamba2/mamba2_node.h"

#include <cmath>
#include <cstdio>

#include "graph/json_util.h"
#include "ops/common/builder_util.h"
#include "ops/common/port_checks.h"

namespace frost::detail {
namespace {

constexpr const char* kValueTypes = "FLOAT, HALF, BFLOAT16 or DOUBLE";

std::string number(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

error_t Mamba2Node::validate_inputs(int64_t& sequences) const {
  const TensorPtr x = in(MambaIn::X), dt = in(MambaIn::DT), a = in(MambaIn::A), b = in(MambaIn::B), c = in(MambaIn::C);
  for (const auto& [port, t] : {std::pair{"X", x}, {"DT", dt}, {"A", a}, {"B", b}, {"C", c}})
    FROST_CHECK(expect_type(*this, port, t, is_value_type(t->get_data_type()), kValueTypes));
  const auto& xd = x->get_dim();
  if (xd.size() != 4) return attr_error(*this, "X.dim", dims_string(xd), "must have rank 4 [B, T, H, P]");
  const int64_t batch = xd[0], len = xd[1], heads = xd[2], head_dim = xd[3];
  FROST_CHECK(expect_dims(*this, "DT", dt, {batch, len, heads}, "([B, T, H])"));
  FROST_CHECK(expect_dims(*this, "A", a, {heads}, "([H])"));
  const auto& bd = b->get_dim();
  if (bd.size() != 4 || bd[0] != batch || bd[1] != len)
    return attr_error(*this, "B.dim", dims_string(bd),
                      "must be [" + std::to_string(batch) + ", " + std::to_string(len) + ", G, N] like X's [B, T]",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (heads % bd[2] != 0)
    return attr_error(*this, "B.dim", dims_string(bd),
                      "groups " + std::to_string(bd[2]) + " must divide X's " + std::to_string(heads) + " heads");
  FROST_CHECK(expect_dims(*this, "C", c, bd, "(C has B's dims)"));
  if (const TensorPtr d = in(MambaIn::D)) {
    FROST_CHECK(expect_type(*this, "D", d, is_value_type(d->get_data_type()), kValueTypes));
    if (d->get_dim() != std::vector<int64_t>{heads} && d->get_dim() != std::vector<int64_t>{heads, head_dim})
      return attr_error(*this, "D.dim", dims_string(d->get_dim()),
                        "must be [" + std::to_string(heads) + "] or [" + std::to_string(heads) + ", " +
                            std::to_string(head_dim) + "]",
                        error_code_t::SHAPE_DEDUCTION_FAILED);
  }
  if (const TensorPtr z = in(MambaIn::Z)) {
    FROST_CHECK(expect_type(*this, "Z", z, is_value_type(z->get_data_type()), kValueTypes));
    FROST_CHECK(expect_dims(*this, "Z", z, xd, "(Z has X's dims)"));
  }
  if (const TensorPtr bias = in(MambaIn::DT_BIAS)) {
    FROST_CHECK(expect_type(*this, "DT_BIAS", bias, is_value_type(bias->get_data_type()), kValueTypes));
    FROST_CHECK(expect_dims(*this, "DT_BIAS", bias, {heads}, "([H])"));
  }
  for (const auto& [name, v] : {std::pair{"dt_min", attr.dt_min}, {"dt_max", attr.dt_max}})
    if (v && std::isnan(*v)) return attr_error(*this, name, number(*v), "must be a number");
  if (attr.dt_min && attr.dt_max && *attr.dt_min > *attr.dt_max)
    return attr_error(*this, "dt_min", number(*attr.dt_min), "must not exceed dt_max = " + number(*attr.dt_max));

  sequences = batch;
  if (const TensorPtr cu = in(MambaIn::CU_SEQLENS)) {
    const DataType_t t = cu->get_data_type();
    FROST_CHECK(
        expect_type(*this, "CU_SEQLENS", cu, t == DataType_t::INT32 || t == DataType_t::INT64, "INT32 or INT64"));
    if (cu->get_dim().size() != 1 || cu->get_dim()[0] < 2)
      return attr_error(*this, "CU_SEQLENS.dim", dims_string(cu->get_dim()), "must be [S + 1] with S >= 1");
    if (batch != 1)
      return attr_error(*this, "X.dim", dims_string(xd), "B must be 1 with CU_SEQLENS (sequences are packed along T)");
    sequences = cu->get_dim()[0] - 1;
  }
  if (const TensorPtr init = in(MambaIn::INITIAL_STATE)) {
    FROST_CHECK(expect_type(*this, "INITIAL_STATE", init, is_state_type(init->get_data_type()), "FLOAT or DOUBLE"));
    FROST_CHECK(expect_dims(*this, "INITIAL_STATE", init, {sequences, heads, head_dim, bd[3]}, "([S, H, P, N])"));
  }
  return {};
}

error_t Mamba2Node::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"Y", "X", "DT", "A", "B", "C"}));
  int64_t sequences = 0;
  FROST_CHECK(validate_inputs(sequences));
  const TensorPtr x = in(MambaIn::X), y = out(MambaOut::Y), final_state = out(MambaOut::FINAL_STATE);
  FROST_CHECK(infer_output(*this, ctx, "Y", y, x->get_dim(), x));
  FROST_CHECK(expect_type(*this, "Y", y, is_value_type(y->get_data_type()), kValueTypes));
  if (attr.output_final_state && !final_state)
    return attr_error(*this, "FINAL_STATE", "null", "output_final_state needs a FINAL_STATE output",
                      error_code_t::ATTRIBUTE_NOT_SET);
  if (!attr.output_final_state && final_state)
    return attr_error(*this, "FINAL_STATE", describe(final_state), "is bound but output_final_state is off");
  if (!final_state) return {};
  const auto& xd = x->get_dim();
  const TensorPtr init = in(MambaIn::INITIAL_STATE);
  FROST_CHECK(infer_output(*this, ctx, "FINAL_STATE", final_state,
                           {sequences, xd[2], xd[3], in(MambaIn::B)->get_dim()[3]}, init ? init : x,
                           DataType_t::FLOAT));
  return expect_type(*this, "FINAL_STATE", final_state, is_state_type(final_state->get_data_type()), "FLOAT or DOUBLE");
}

void Mamba2Node::attributes_to_json(json& j) const {
  j["dt_softplus"] = attr.dt_softplus;
  write_opt(j, "dt_min", attr.dt_min);
  write_opt(j, "dt_max", attr.dt_max);
  j["output_final_state"] = attr.output_final_state;
}

error_t Mamba2Node::attributes_from_json(const json& j) {
  FROST_CHECK(read_bool(j, "dt_softplus", attr.dt_softplus));
  FROST_CHECK(read_opt_float(j, "dt_min", attr.dt_min));
  FROST_CHECK(read_opt_float(j, "dt_max", attr.dt_max));
  return read_bool(j, "output_final_state", attr.output_final_state);
}

namespace {
const OpRegistrar kMamba2(std::string(Mamba2Node::kTag), [] { return std::make_unique<Mamba2Node>(); });
}  // namespace

}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 2> Graph::mamba2(TensorPtr x, TensorPtr dt, TensorPtr a, TensorPtr b, TensorPtr c,
                                       Mamba2_attributes attr) {
  using namespace detail;
  GraphState& g = state();
  default_name(g, attr, Mamba2Node::kTag);
  require_inputs(g, attr.name, Mamba2Node::kTag, {{"X", &x}, {"DT", &dt}, {"A", &a}, {"B", &b}, {"C", &c}});
  attr.inputs[MambaIn::X] = std::move(x);
  attr.inputs[MambaIn::DT] = std::move(dt);
  attr.inputs[MambaIn::A] = std::move(a);
  attr.inputs[MambaIn::B] = std::move(b);
  attr.inputs[MambaIn::C] = std::move(c);
  const TensorPtr y = attr.outputs[MambaOut::Y] = make_output(g, attr.name, "Y");
  TensorPtr final_state;
  if (attr.output_final_state)
    final_state = attr.outputs[MambaOut::FINAL_STATE] = make_output(g, attr.name, "FINAL_STATE");
  add_node(g, std::make_unique<Mamba2Node>(std::move(attr)));
  return {y, final_state};
}

}  // namespace frost::graph
