// Batchnorm (training, inference, backward) against naive per-channel formulas written in double.
#include <cmath>
#include <memory>
#include <tuple>

#include "batchnorm_naive.h"
#include "graph/shape_util.h"

namespace frost::test {
namespace {

using namespace bn;

using Param = std::tuple<DT, int>;
std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" + kCases[std::get<1>(info.param)].label;
}

// ---- Training forward with the running-statistics update ----

class BatchnormTraining : public ::testing::TestWithParam<Param> {};

TEST_P(BatchnormTraining, MatchesNaiveAndUpdatesRunningStats) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(100 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt));
  BnData d = random_data(c.x, rng);
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const Dims ch = channel_dims(c.x);
  auto x = input(g, "x", c.x, dt, c.x_stride);
  auto scale = input(g, "scale", ch), bias = input(g, "bias", ch);
  auto prev_mean = input(g, "prev_mean", ch), prev_var = input(g, "prev_var", ch);
  auto attr = graph::Batchnorm_attributes()
                  .set_epsilon(g.tensor(static_cast<float>(d.eps)))
                  .set_previous_running_stats(prev_mean, prev_var, g.tensor(static_cast<float>(d.momentum)));
  const auto out = g.batchnorm(x, scale, bias, attr);
  for (const auto& t : out) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(out[0]->get_dim(), c.x);
  EXPECT_EQ(out[0]->get_stride(), detail::strides_like(c.x, x->get_stride()));  // X's order, packed
  EXPECT_EQ(out[0]->get_data_type(), dt);
  for (int k = 1; k < 5; ++k) {
    EXPECT_EQ(out[k]->get_dim(), ch);
    EXPECT_EQ(out[k]->get_data_type(), DT::FLOAT);
  }
  HostTensor xb(x), sb(scale), bb(bias), pmb(prev_mean), pvb(prev_var);
  put(xb, d.x);
  put(sb, d.scale);
  put(bb, d.bias);
  put(pmb, d.prev_mean);
  put(pvb, d.prev_var);
  std::vector<HostTensor*> pack{&xb, &sb, &bb, &pmb, &pvb};
  auto outs = poisoned({out.begin(), out.end()}, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const BnForward want = naive_forward(d);
  EXPECT_CLOSE(outs[0]->values(), want.y, tol(dt, want.y));
  EXPECT_CLOSE(outs[1]->values(), want.mean, tol(DT::FLOAT, want.mean));
  EXPECT_CLOSE(outs[2]->values(), want.inv, tol(DT::FLOAT, want.inv));
  EXPECT_CLOSE(outs[3]->values(), want.next_mean, tol(DT::FLOAT, want.next_mean));
  EXPECT_CLOSE(outs[4]->values(), want.next_var, tol(DT::FLOAT, want.next_var));
  // The biased variance would be a different running update: the check can tell them apart.
  Values biased(want.next_var.size());
  for (size_t k = 0; k < biased.size(); ++k) biased[k] = (1 - d.momentum) * d.prev_var[k] + d.momentum * want.var[k];
  EXPECT_GT(compare(biased, want.next_var).max_abs, 10 * tol(DT::FLOAT, want.next_var));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchnormTraining,
                         ::testing::Combine(::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF),
                                            ::testing::Range(0, 5)),
                         param_name);

TEST(BatchnormTrainingNoRunningStats, OutputsOnlyTheSavedStatistics) {
  std::mt19937_64 rng(5);
  BnData d = random_data({4, 3, 2}, rng);
  graph::Graph g;
  g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  auto x = input(g, "x", d.xd), scale = input(g, "scale", {1, 3, 1}), bias = input(g, "bias", {1, 3, 1});
  const auto out = g.batchnorm(x, scale, bias, graph::Batchnorm_attributes().set_epsilon(g.tensor(1e-5f)));
  EXPECT_EQ(out[3], nullptr);
  EXPECT_EQ(out[4], nullptr);
  for (int k = 0; k < 3; ++k) out[k]->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  HostTensor xb(x), sb(scale), bb(bias);
  put(xb, d.x);
  put(sb, d.scale);
  put(bb, d.bias);
  std::vector<HostTensor*> pack{&xb, &sb, &bb};
  auto outs = poisoned({out[0], out[1], out[2]}, pack);
  auto e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  d.prev_mean = d.prev_var = Values(3, 0.0);
  const BnForward want = naive_forward(d);
  EXPECT_CLOSE(outs[0]->values(), want.y, 1e-5);
  EXPECT_CLOSE(outs[2]->values(), want.inv, 1e-5);
}

// ---- Inference ----

class BatchnormInference : public ::testing::TestWithParam<Param> {};

TEST_P(BatchnormInference, MatchesNaive) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(200 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt));
  BnData d = random_data(c.x, rng);
  Values mean = d.prev_mean, inv = d.prev_var;  // any per-channel values
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const Dims ch = channel_dims(c.x);
  auto x = input(g, "x", c.x, dt, c.x_stride);
  auto mt = input(g, "mean", ch), it = input(g, "inv", ch), st = input(g, "scale", ch), bt = input(g, "bias", ch);
  auto y = g.batchnorm_inference(x, mt, it, st, bt, graph::Batchnorm_inference_attributes());
  y->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  EXPECT_EQ(y->get_stride(), detail::strides_like(c.x, x->get_stride()));  // X's order, packed
  HostTensor xb(x), mb(mt), ib(it), sb(st), bb(bt), yb(y);
  put(xb, d.x);
  put(mb, mean);
  put(ib, inv);
  put(sb, d.scale);
  put(bb, d.bias);
  yb.poison();
  auto e = build_and_run(g, {&xb, &mb, &ib, &sb, &bb, &yb});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  Values want(d.x.size());
  for (size_t n = 0; n < want.size(); ++n) {
    const size_t k = d.channel_of(n);
    want[n] = (d.x[n] - mean[k]) * inv[k] * d.scale[k] + d.bias[k];
  }
  EXPECT_CLOSE(yb.values(), want, tol(dt, want));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchnormInference,
                         ::testing::Combine(::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF),
                                            ::testing::Range(0, 5)),
                         param_name);

// ---- Backward ----

class BatchnormBackward : public ::testing::TestWithParam<Param> {};

TEST_P(BatchnormBackward, MatchesNaive) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(300 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt));
  BnData d = random_data(c.x, rng);
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const Dims ch = channel_dims(c.x);
  auto x = input(g, "x", c.x, dt, c.x_stride), dy = input(g, "dy", c.x, dt, c.x_stride);
  auto st = input(g, "scale", ch), mt = input(g, "mean", ch), it = input(g, "inv", ch);
  auto grads =
      g.batchnorm_backward(dy, x, st, graph::Batchnorm_backward_attributes().set_saved_mean_and_inv_variance(mt, it));
  for (auto& t : grads) t->set_output(true);
  grads[1]->set_data_type(DT::FLOAT);
  grads[2]->set_data_type(DT::FLOAT);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(grads[0]->get_stride(), detail::strides_like(c.x, x->get_stride()));  // X's order, packed
  EXPECT_EQ(grads[1]->get_dim(), ch);
  HostTensor xb(x), dyb(dy), sb(st), mb(mt), ib(it);
  put(xb, d.x);
  put(dyb, d.dy);
  put(sb, d.scale);
  BnForward fwd = naive_forward(d);  // the saved statistics of the stored x, in FP32
  put(mb, fwd.mean);
  put(ib, fwd.inv);
  std::vector<HostTensor*> pack{&xb, &dyb, &sb, &mb, &ib};
  auto outs = poisoned({grads.begin(), grads.end()}, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const BnBackward want = naive_backward(d, fwd.mean, fwd.inv);
  EXPECT_CLOSE(outs[0]->values(), want.dx, tol(dt, want.dx));
  EXPECT_CLOSE(outs[1]->values(), want.dscale, tol(DT::FLOAT, want.dscale) * 10);
  EXPECT_CLOSE(outs[2]->values(), want.dbias, tol(DT::FLOAT, want.dbias) * 10);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchnormBackward,
                         ::testing::Combine(::testing::Values(DT::FLOAT, DT::BFLOAT16, DT::HALF),
                                            ::testing::Range(0, 5)),
                         param_name);

// ---- fp64: forward and backward chained, against central differences ----

TEST(BatchnormGradientFp64, MatchesFiniteDifferences) {
  std::mt19937_64 rng(400);
  const Dims xd = {3, 2, 2, 3};
  BnData d = random_data(xd, rng);
  graph::Graph g;
  g.set_io_data_type(DT::DOUBLE).set_intermediate_data_type(DT::DOUBLE).set_compute_data_type(DT::DOUBLE);
  const Dims ch = channel_dims(xd);
  const Dims nhwc = {12, 1, 6, 2};
  auto x = input(g, "x", xd, DT::DOUBLE, nhwc), dy = input(g, "dy", xd, DT::DOUBLE, nhwc);
  auto st = input(g, "scale", ch, DT::DOUBLE), bt = input(g, "bias", ch, DT::DOUBLE);
  auto fwd = g.batchnorm(x, st, bt, graph::Batchnorm_attributes().set_epsilon(g.tensor(d.eps)));
  auto grads = g.batchnorm_backward(
      dy, x, st, graph::Batchnorm_backward_attributes().set_saved_mean_and_inv_variance(fwd[1], fwd[2]));
  fwd[0]->set_output(true);
  for (auto& t : grads) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  HostTensor xb(x), dyb(dy), sb(st), bb(bt);
  put(xb, d.x);
  put(dyb, d.dy);
  put(sb, d.scale);
  put(bb, d.bias);
  std::vector<HostTensor*> pack{&xb, &dyb, &sb, &bb};
  auto outs = poisoned({fwd[0], grads[0], grads[1], grads[2]}, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  d.prev_mean = d.prev_var = Values(2, 0.0);
  EXPECT_CLOSE(outs[0]->values(), naive_forward(d).y, 1e-12);
  const Values fd_x = finite_difference(d, &BnData::x);
  const Values fd_scale = finite_difference(d, &BnData::scale);
  const Values fd_bias = finite_difference(d, &BnData::bias);
  auto fd_tol = [](const Values& want) { return 1e-7 * std::max(1.0, max_abs(want)); };
  EXPECT_CLOSE(outs[1]->values(), fd_x, fd_tol(fd_x));
  EXPECT_CLOSE(outs[2]->values(), fd_scale, fd_tol(fd_scale));
  EXPECT_CLOSE(outs[3]->values(), fd_bias, fd_tol(fd_bias));
  // The check can fail: the gradient without the statistics' terms (scale * inv * dy) is caught.
  const BnForward f = naive_forward(d);
  Values wrong(fd_x.size());
  for (size_t n = 0; n < wrong.size(); ++n) wrong[n] = d.scale[d.channel_of(n)] * f.inv[d.channel_of(n)] * d.dy[n];
  EXPECT_GT(compare(wrong, fd_x).max_abs, 100 * fd_tol(fd_x));
}

// ---- Errors ----

void expect_error(graph::Graph& g, error_code_t code, std::initializer_list<const char*> needles) {
  const auto e = g.validate();
  EXPECT_EQ(e.get_code(), code) << e.get_message();
  for (const char* n : needles) EXPECT_NE(e.get_message().find(n), std::string::npos) << e.get_message();
}

// x [4, 3, 5] with per-channel scale and bias.
struct Decl {
  graph::Graph g;
  TensorPtr x, scale, bias;
  explicit Decl(Dims x_dims = {4, 3, 5}) {
    g.set_io_data_type(DT::FLOAT);
    x = input(g, "x", x_dims);
    scale = input(g, "scale", {1, 3, 1});
    bias = input(g, "bias", {1, 3, 1});
  }
  graph::Batchnorm_attributes bn() {
    return graph::Batchnorm_attributes().set_name("bn0").set_epsilon(g.tensor(1e-5f));
  }
};

TEST(BatchnormErrors, MissingOperands) {
  Decl d;
  d.g.batchnorm(d.x, d.scale, d.bias, d.bn().set_epsilon(nullptr));
  expect_error(d.g, error_code_t::ATTRIBUTE_NOT_SET, {"bn0", "BATCHNORM", "'EPSILON'", "null"});
  Decl b;
  b.g.batchnorm(b.x, nullptr, b.bias, b.bn());
  expect_error(b.g, error_code_t::ATTRIBUTE_NOT_SET, {"bn0", "'SCALE'"});
  Decl r;  // running statistics without momentum
  r.g.batchnorm(r.x, r.scale, r.bias, r.bn().set_previous_running_stats(r.scale, r.bias, nullptr));
  expect_error(r.g, error_code_t::ATTRIBUTE_NOT_SET, {"bn0", "'MOMENTUM'", "null"});
  Decl s;
  s.g.batchnorm_backward(input(s.g, "dy", {4, 3, 5}), s.x, s.scale,
                         graph::Batchnorm_backward_attributes().set_name("dbn"));
  expect_error(s.g, error_code_t::ATTRIBUTE_NOT_SET, {"dbn", "BATCHNORM_BACKWARD", "'MEAN'"});
}

TEST(BatchnormErrors, BadShapes) {
  Decl d;
  d.g.batchnorm(d.x, input(d.g, "s", {1, 4, 1}), d.bias, d.bn());
  expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"bn0", "'SCALE.dim'", "[1, 4, 1]", "[1, 3, 1]"});
  Decl r(Dims{5});
  r.g.batchnorm(r.x, r.scale, r.bias, r.bn());
  expect_error(r.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"bn0", "'X.dim'", "[5]"});
  Decl m;
  m.g.batchnorm(m.x, m.scale, m.bias, m.bn().set_previous_running_stats(m.scale, m.bias, input(m.g, "mom", {2})));
  expect_error(m.g, error_code_t::INVALID_VALUE, {"bn0", "'MOMENTUM.dim'", "[2]"});
  Decl one(Dims{1, 3, 1});  // one value per channel: no unbiased running variance
  one.g.batchnorm(one.x, one.scale, one.bias,
                  one.bn().set_previous_running_stats(one.scale, one.bias, one.g.tensor(0.1f)));
  expect_error(one.g, error_code_t::INVALID_VALUE, {"bn0", "'X.dim'", "[1, 3, 1]", "at least 2"});
  Decl b;
  b.g.batchnorm_backward(
      input(b.g, "dy", {4, 3, 6}), b.x, b.scale,
      graph::Batchnorm_backward_attributes().set_name("dbn").set_saved_mean_and_inv_variance(b.bias, b.bias));
  expect_error(b.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"dbn", "'DY.dim'", "[4, 3, 6]"});
  Decl i;
  i.g.batchnorm_inference(i.x, input(i.g, "mean", {4, 3, 1}), i.bias, i.scale, i.bias,
                          graph::Batchnorm_inference_attributes().set_name("bni"));
  expect_error(i.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"bni", "BATCHNORM_INFERENCE", "'MEAN.dim'", "[4, 3, 1]"});
  Decl y;
  y.g.batchnorm(y.x, y.scale, y.bias, y.bn())[0]->set_dim({4, 3, 6});
  expect_error(y.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"bn0", "'Y.dim'", "[4, 3, 6]", "[4, 3, 5]"});
  Decl t;
  t.x->set_data_type(DT::INT32);
  t.g.batchnorm(t.x, t.scale, t.bias, t.bn());
  expect_error(t.g, error_code_t::INVALID_VALUE, {"bn0", "'X.data_type'", "INT32"});
}

TEST(BatchnormErrors, SplitPieces) {
  Decl d;
  auto eps = d.g.tensor(1e-5f);
  d.g.bn_finalize(input(d.g, "sum", {4, 3, 1}), d.scale, d.scale, d.bias, eps, d.g.tensor(int64_t{20}),
                  graph::BN_finalize_attributes().set_name("fin"));
  expect_error(d.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"fin", "BN_FINALIZE", "'SUM.dim'", "[4, 3, 1]"});
  Decl c;
  c.g.bn_finalize(c.scale, c.scale, c.scale, c.bias, c.g.tensor(1e-5f), input(c.g, "count", {1, 3, 1}),
                  graph::BN_finalize_attributes().set_name("fin"));
  expect_error(c.g, error_code_t::INVALID_VALUE, {"fin", "'ACCUM_COUNT.dim'", "[1, 3, 1]"});
  Decl w;
  w.g.dbn_weight(input(w.g, "dy", {4, 3, 5}), w.x, w.scale, input(w.g, "inv", {1, 3, 5}), w.scale,
                 graph::DBN_weight_attributes().set_name("dw"));
  expect_error(w.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"dw", "DBN_WEIGHT", "'INV_VARIANCE.dim'", "[1, 3, 5]"});
  Decl s(Dims{7});
  s.g.genstats(s.x, graph::Genstats_attributes().set_name("gs"));
  expect_error(s.g, error_code_t::SHAPE_DEDUCTION_FAILED, {"gs", "GENSTATS", "'X.dim'", "[7]"});
}

}  // namespace
}  // namespace frost::test
