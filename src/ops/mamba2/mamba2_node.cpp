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

template <class Attr>
error_t Mamba2Node<Attr>::validate_inputs(int64_t& sequences) const {
  const auto& attr = this->attr;
  auto in = [this](MambaIn port) { return this->in(port); };
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
  const std::vector<int64_t> state_dims{sequences, heads, head_dim, bd[3]};
  if (const TensorPtr init = in(MambaIn::INITIAL_STATE)) {
    FROST_CHECK(expect_type(*this, "INITIAL_STATE", init, is_state_type(init->get_data_type()), "FLOAT or DOUBLE"));
    FROST_CHECK(expect_dims(*this, "INITIAL_STATE", init, state_dims, "([S, H, P, N])"));
  }
  const TensorPtr d_y = in(MambaIn::DY), d_final = in(MambaIn::D_FINAL_STATE);
  if (!kBackward) {
    if (d_y) return attr_error(*this, "DY", describe(d_y), "is a backward input");
    if (d_final) return attr_error(*this, "D_FINAL_STATE", describe(d_final), "is a backward input");
    return {};
  }
  FROST_CHECK(expect_type(*this, "DY", d_y, is_value_type(d_y->get_data_type()), kValueTypes));
  FROST_CHECK(expect_dims(*this, "DY", d_y, xd, "(Y's dims [B, T, H, P])"));
  if (d_final) {
    FROST_CHECK(
        expect_type(*this, "D_FINAL_STATE", d_final, is_state_type(d_final->get_data_type()), "FLOAT or DOUBLE"));
    FROST_CHECK(expect_dims(*this, "D_FINAL_STATE", d_final, state_dims, "(the final state's dims)"));
  }
  return {};
}

template <class Attr>
error_t Mamba2Node<Attr>::infer_outputs(const GraphContext& ctx, int64_t sequences) {
  auto in = [this](MambaIn port) { return this->in(port); };
  auto out = [this](MambaOut port) { return this->out(port); };
  const TensorPtr x = in(MambaIn::X), init = in(MambaIn::INITIAL_STATE);
  const auto& xd = x->get_dim();
  const std::vector<int64_t> state_dims{sequences, xd[2], xd[3], in(MambaIn::B)->get_dim()[3]};
  // Outputs in pairs with what their dims and layout follow; a null `like` means an optional input not given,
  // whose gradient must then stay unbound.
  struct Follows {
    const char* port;
    MambaOut out;
    TensorPtr like;
    bool state;
  };
  std::vector<Follows> outputs;
  if constexpr (!kBackward) {
    outputs.push_back({"Y", MambaOut::Y, x, false});
    const TensorPtr final_state = out(MambaOut::FINAL_STATE);
    if (this->attr.output_final_state && !final_state)
      return attr_error(*this, "FINAL_STATE", "null", "output_final_state needs a FINAL_STATE output",
                        error_code_t::ATTRIBUTE_NOT_SET);
    if (!this->attr.output_final_state && final_state)
      return attr_error(*this, "FINAL_STATE", describe(final_state), "is bound but output_final_state is off");
    if (final_state) outputs.push_back({"FINAL_STATE", MambaOut::FINAL_STATE, init ? init : x, true});
  } else {
    outputs = {{"DX", MambaOut::DX, x, false},
               {"DDT", MambaOut::DDT, in(MambaIn::DT), false},
               {"DA", MambaOut::DA, in(MambaIn::A), false},
               {"DB", MambaOut::DB, in(MambaIn::B), false},
               {"DC", MambaOut::DC, in(MambaIn::C), false}};
    const std::tuple<const char*, MambaOut, MambaIn, bool> optionals[] = {
        {"DD", MambaOut::DD, MambaIn::D, false},
        {"DZ", MambaOut::DZ, MambaIn::Z, false},
        {"DDT_BIAS", MambaOut::DDT_BIAS, MambaIn::DT_BIAS, false},
        {"D_INITIAL_STATE", MambaOut::D_INITIAL_STATE, MambaIn::INITIAL_STATE, true}};
    for (const auto& [port, o, source, state] : optionals) {
      const TensorPtr src = in(source), t = out(o);
      if (src && !t)
        return attr_error(*this, port, "null", "its input is given, so its gradient must be bound",
                          error_code_t::ATTRIBUTE_NOT_SET);
      if (!src && t) return attr_error(*this, port, describe(t), "is bound but its input is not given");
      if (src) outputs.push_back({port, o, src, state});
    }
  }
  for (const auto& f : outputs) {
    const TensorPtr t = out(f.out);
    const std::vector<int64_t> dims = f.state ? state_dims : f.like->get_dim();
    FROST_CHECK(infer_output(*this, ctx, f.port, t, dims, f.like, f.state ? DataType_t::FLOAT : DataType_t::NOT_SET));
    if (f.state)
      FROST_CHECK(expect_type(*this, f.port, t, is_state_type(t->get_data_type()), "FLOAT or DOUBLE"));
    else
      FROST_CHECK(expect_type(*this, f.port, t, is_value_type(t->get_data_type()), kValueTypes));
  }
  return {};
}

template <class Attr>
error_t Mamba2Node<Attr>::infer_and_validate(const GraphContext& ctx) {
  if (kBackward)
    FROST_CHECK(require_ports(*this, {"DX", "DDT", "DA", "DB", "DC", "X", "DT", "A", "B", "C", "DY"}));
  else
    FROST_CHECK(require_ports(*this, {"Y", "X", "DT", "A", "B", "C"}));
  // The other direction's outputs must stay empty.
  if (kBackward)
    FROST_CHECK(reject_bound(*this, {"Y", "FINAL_STATE"}, "is a forward output"));
  else
    FROST_CHECK(reject_bound(*this, {"DX", "DDT", "DA", "DB", "DC", "DD", "DZ", "DDT_BIAS", "D_INITIAL_STATE"},
                             "is a backward output"));
  int64_t sequences = 0;
  FROST_CHECK(validate_inputs(sequences));
  return infer_outputs(ctx, sequences);
}

template <class Attr>
void Mamba2Node<Attr>::attributes_to_json(json& j) const {
  j["dt_softplus"] = this->attr.dt_softplus;
  write_opt(j, "dt_min", this->attr.dt_min);
  write_opt(j, "dt_max", this->attr.dt_max);
  if constexpr (!kBackward) j["output_final_state"] = this->attr.output_final_state;
}

template <class Attr>
error_t Mamba2Node<Attr>::attributes_from_json(const json& j) {
  FROST_CHECK(read_bool(j, "dt_softplus", this->attr.dt_softplus));
  FROST_CHECK(read_opt_float(j, "dt_min", this->attr.dt_min));
  FROST_CHECK(read_opt_float(j, "dt_max", this->attr.dt_max));
  if constexpr (!kBackward) FROST_CHECK(read_bool(j, "output_final_state", this->attr.output_final_state));
  return {};
}

template class Mamba2Node<graph::Mamba2_attributes>;
template class Mamba2Node<graph::Mamba2_backward_attributes>;

namespace {
const OpRegistrar kMamba2(std::string(Mamba2ForwardNode::kTag), [] { return std::make_unique<Mamba2ForwardNode>(); });
const OpRegistrar kMamba2Backward(std::string(Mamba2BackwardNode::kTag),
                                  [] { return std::make_unique<Mamba2BackwardNode>(); });

// X, DT, A, B and C bound, in the node's name.
template <class Attr>
void bind_inputs(GraphState& g, Attr& a, TensorPtr x, TensorPtr dt, TensorPtr aa, TensorPtr b, TensorPtr c) {
  default_name(g, a, Mamba2Node<Attr>::kTag);
  require_inputs(g, a.name, Mamba2Node<Attr>::kTag, {{"X", &x}, {"DT", &dt}, {"A", &aa}, {"B", &b}, {"C", &c}});
  a.inputs[MambaIn::X] = std::move(x);
  a.inputs[MambaIn::DT] = std::move(dt);
  a.inputs[MambaIn::A] = std::move(aa);
  a.inputs[MambaIn::B] = std::move(b);
  a.inputs[MambaIn::C] = std::move(c);
}

}  // namespace

}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 2> Graph::mamba2(TensorPtr x, TensorPtr dt, TensorPtr a, TensorPtr b, TensorPtr c,
                                       Mamba2_attributes attr) {
  using namespace detail;
  GraphState& g = state();
  bind_inputs(g, attr, std::move(x), std::move(dt), std::move(a), std::move(b), std::move(c));
  const TensorPtr y = attr.outputs[MambaOut::Y] = make_output(g, attr.name, "Y");
  TensorPtr final_state;
  if (attr.output_final_state)
    final_state = attr.outputs[MambaOut::FINAL_STATE] = make_output(g, attr.name, "FINAL_STATE");
  add_node(g, std::make_unique<Mamba2ForwardNode>(std::move(attr)));
  return {y, final_state};
}

std::array<TensorPtr, 9> Graph::mamba2_backward(TensorPtr x, TensorPtr dt, TensorPtr a, TensorPtr b, TensorPtr c,
                                                TensorPtr d_y, Mamba2_backward_attributes attr) {
  using namespace detail;
  GraphState& g = state();
  bind_inputs(g, attr, std::move(x), std::move(dt), std::move(a), std::move(b), std::move(c));
  require_inputs(g, attr.name, Mamba2BackwardNode::kTag, {{"DY", &d_y}});
  attr.inputs[MambaIn::DY] = std::move(d_y);
  const std::tuple<MambaOut, const char*, std::optional<MambaIn>> ports[9] = {
      {MambaOut::DX, "DX", {}},
      {MambaOut::DDT, "DDT", {}},
      {MambaOut::DA, "DA", {}},
      {MambaOut::DB, "DB", {}},
      {MambaOut::DC, "DC", {}},
      {MambaOut::DD, "DD", MambaIn::D},
      {MambaOut::DZ, "DZ", MambaIn::Z},
      {MambaOut::DDT_BIAS, "DDT_BIAS", MambaIn::DT_BIAS},
      {MambaOut::D_INITIAL_STATE, "D_INITIAL_STATE", MambaIn::INITIAL_STATE}};
  std::array<TensorPtr, 9> r;
  for (size_t i = 0; i < 9; ++i) {
    const auto& [port, name, source] = ports[i];
    if (source && !(attr.inputs.count(*source) && attr.inputs[*source])) continue;  // its input is not given
    r[i] = attr.outputs[port] = make_output(g, attr.name, name);
  }
  add_node(g, std::make_unique<Mamba2BackwardNode>(std::move(attr)));
  return r;
}

}  // namespace frost::graph
