#include "ops/matmul/matmul_fp8_node.h"

#include "graph/json_util.h"
#include "ops/common/builder_util.h"
#include "ops/common/fp8_scaling.h"

namespace frost::detail {

using graph::MatmulFp8Input;
using graph::MatmulFp8Output;

namespace {

bool is_c_type(DataType_t t) {
  return is_fp8(t) || t == DataType_t::HALF || t == DataType_t::BFLOAT16 || t == DataType_t::FLOAT;
}

}  // namespace

MatmulTensors MatmulFp8Node::operands() const {
  return {in(MatmulFp8Input::A), in(MatmulFp8Input::B), in(MatmulFp8Input::M_OVERRIDE), in(MatmulFp8Input::N_OVERRIDE),
          in(MatmulFp8Input::K_OVERRIDE)};
}

int64_t MatmulFp8Node::head_group() const {
  const auto& a = in(MatmulFp8Input::A)->get_dim();
  const auto& b = in(MatmulFp8Input::B)->get_dim();
  const auto& c = out(MatmulFp8Output::C)->get_dim();
  // Validation admitted C with fewer heads only for rank-4 operands of equal head extent.
  if (a.size() != 4 || b.size() != 4 || c.size() != 4 || a[1] != b[1] || c[1] == a[1]) return 1;
  return a[1] / c[1];
}

error_t MatmulFp8Node::infer_and_validate(const GraphContext& ctx) {
  FROST_CHECK(require_ports(*this, {"C", "AMAX_C"}));
  std::vector<int64_t> dims;
  FROST_CHECK(matmul_shape(*this, operands(), dims));
  const std::pair<const char*, MatmulFp8Input> scales[3] = {{"DESCALE_A", MatmulFp8Input::DESCALE_A},
                                                            {"DESCALE_B", MatmulFp8Input::DESCALE_B},
                                                            {"SCALE_C", MatmulFp8Input::SCALE_C}};
  for (const auto& [port, e] : scales) FROST_CHECK(check_scale_scalar(*this, port, in(e), true));

  const TensorPtr a = in(MatmulFp8Input::A), b = in(MatmulFp8Input::B), c = out(MatmulFp8Output::C);
  if (c->get_dim().empty()) c->set_dim(dims);
  const auto& cd = c->get_dim();
  // The grouped-query form: rank-4 A and B with the same heads h, and C declared with h / g heads.
  const bool grouped = dims.size() == 4 && cd.size() == 4 && a->get_dim().size() == 4 && b->get_dim().size() == 4 &&
                       a->get_dim()[1] == b->get_dim()[1] && cd[1] > 0 && cd[1] != dims[1] && dims[1] % cd[1] == 0 &&
                       cd[0] == dims[0] && cd[2] == dims[2] && cd[3] == dims[3];
  if (cd != dims && !grouped)
    return attr_error(*this, "C.dim", dims_string(cd),
                      "A and B give " + dims_string(dims) + " (or, rank 4, a head count dividing " +
                          (dims.size() == 4 ? std::to_string(dims[1]) : std::string("theirs")) + ")",
                      error_code_t::SHAPE_DEDUCTION_FAILED);
  if (grouped && (in(MatmulFp8Input::M_OVERRIDE) || in(MatmulFp8Input::N_OVERRIDE) || in(MatmulFp8Input::K_OVERRIDE)))
    return attr_error(*this, "C.dim", dims_string(cd), "the grouped-query reduction takes no m/n/k overrides");
  // C follows the graph's io (or intermediate) type; with none declared, it takes A's type.
  const DataType_t context_type = c->get_is_virtual() ? ctx.intermediate_data_type : ctx.io_data_type;
  if (c->get_data_type() == DataType_t::NOT_SET && context_type == DataType_t::NOT_SET)
    c->set_data_type(a->get_data_type());
  const DataType_t c_type = c->get_data_type() == DataType_t::NOT_SET ? context_type : c->get_data_type();
  if (!is_c_type(c_type))
    return attr_error(*this, "C.data_type", to_string(c_type), "must be FP8_E4M3, FP8_E5M2, HALF, BFLOAT16 or FLOAT");
  return infer_amax_output(*this, "AMAX_C", out(MatmulFp8Output::AMAX_C));
}

void MatmulFp8Node::attributes_to_json(json& j) const { j["padding_value"] = attr.padding_value; }

error_t MatmulFp8Node::attributes_from_json(const json& j) {
  return read_double(j, "padding_value", attr.padding_value);
}

namespace {
const OpRegistrar kRegister(std::string(MatmulFp8Node::kTag), [] { return std::make_unique<MatmulFp8Node>(); });
}  // namespace

error_t MatmulFp8Node::run_reference(RefExec& ex) const {
  const TensorPtr c = out(MatmulFp8Output::C);
  const int64_t group = head_group();
  return with_precision(ex, [&](auto zero) -> error_t {
    using T = decltype(zero);
    std::vector<int64_t> product_dims = c->get_dim();
    product_dims[1] *= group;
    Array<T> product(product_dims);
    FROST_CHECK(matmul_reference(*this, ex, operands(), static_cast<T>(attr.padding_value), product));
    Array<T> cv(c->get_dim());
    if (group == 1) {
      cv = std::move(product);
    } else {
      // Heads g*hc .. g*hc + g - 1 of the product sum into head hc of C, in head order.
      const int64_t heads = c->get_dim()[1], plane = c->get_dim()[2] * c->get_dim()[3];
      for (int64_t bt = 0; bt < c->get_dim()[0]; ++bt)
        for (int64_t hc = 0; hc < heads; ++hc)
          for (int64_t g = 0; g < group; ++g) {
            const T* src = &product[((bt * heads + hc) * group + g) * plane];
            T* dst = &cv[(bt * heads + hc) * plane];
            for (int64_t e = 0; e < plane; ++e) dst[e] += src[e];
          }
    }
    const T descale = ex.load<T>(in(MatmulFp8Input::DESCALE_A))[0] * ex.load<T>(in(MatmulFp8Input::DESCALE_B))[0];
    for (T& x : cv.v) x *= descale;
    const T amax = amax_of(cv.v);
    scale_for_store(cv.v, ex.load<T>(in(MatmulFp8Input::SCALE_C))[0], c->get_data_type());
    ex.store(c, cv);
    ex.store(out(MatmulFp8Output::AMAX_C), Array<T>({1, 1, 1, 1}, amax));
    return {};
  });
}

}  // namespace frost::detail

namespace frost::graph {

std::array<TensorPtr, 2> Graph::matmul_fp8(TensorPtr a, TensorPtr b, TensorPtr descale_a, TensorPtr descale_b,
                                           TensorPtr scale_c, Matmul_fp8_attributes attr) {
  using detail::MatmulFp8Node;
  using I = MatmulFp8Input;
  auto& g = state();
  detail::default_name(g, attr, MatmulFp8Node::kTag);
  detail::require_inputs(
      g, attr.name, MatmulFp8Node::kTag,
      {{"A", &a}, {"B", &b}, {"DESCALE_A", &descale_a}, {"DESCALE_B", &descale_b}, {"SCALE_C", &scale_c}});
  attr.inputs[I::A] = std::move(a);
  attr.inputs[I::B] = std::move(b);
  attr.inputs[I::DESCALE_A] = std::move(descale_a);
  attr.inputs[I::DESCALE_B] = std::move(descale_b);
  attr.inputs[I::SCALE_C] = std::move(scale_c);
  const TensorPtr c = attr.outputs[MatmulFp8Output::C] = detail::make_output(g, attr.name, "C");
  const TensorPtr amax = attr.outputs[MatmulFp8Output::AMAX_C] = detail::make_output(g, attr.name, "AMAX_C");
  detail::add_node(g, std::make_unique<MatmulFp8Node>(std::move(attr)));
  return {c, amax};
}

}  // namespace frost::graph
