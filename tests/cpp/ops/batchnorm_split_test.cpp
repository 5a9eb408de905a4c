// The split batchnorm pieces (genstats -> bn_finalize, dbn_weight) and JSON of the whole batchnorm family.
#include <cmath>
#include <memory>
#include <tuple>

#include "batchnorm_naive.h"

namespace frost::test {
namespace {

using namespace bn;

using Param = std::tuple<DT, int>;
std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" + kCases[std::get<1>(info.param)].label;
}

// ---- Split batchnorm: genstats -> bn_finalize, and dbn_weight ----

class BatchnormSplit : public ::testing::TestWithParam<Param> {};

TEST_P(BatchnormSplit, GenstatsThenFinalizeMatchNaive) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(500 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt));
  BnData d = random_data(c.x, rng);
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const Dims ch = channel_dims(c.x);
  auto x = input(g, "x", c.x, dt, c.x_stride);
  auto st = input(g, "scale", ch), bt = input(g, "bias", ch);
  auto pm = input(g, "prev_mean", ch), pv = input(g, "prev_var", ch);
  auto sums = g.genstats(x, graph::Genstats_attributes());
  const auto count = static_cast<int64_t>(d.per_channel_count());
  auto fin = g.bn_finalize(
      sums[0], sums[1], st, bt, g.tensor(static_cast<float>(d.eps)), g.tensor(count),
      graph::BN_finalize_attributes().set_previous_running_stats(pm, pv, g.tensor(static_cast<float>(d.momentum))));
  std::vector<TensorPtr> outputs = {sums[0], sums[1]};
  outputs.insert(outputs.end(), fin.begin(), fin.end());
  for (auto& t : outputs) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (auto& t : outputs) {
    EXPECT_EQ(t->get_dim(), ch) << t->get_name();
    EXPECT_EQ(t->get_data_type(), DT::FLOAT) << t->get_name();
  }
  HostTensor xb(x), sb(st), bb(bt), pmb(pm), pvb(pv);
  put(xb, d.x);
  put(sb, d.scale);
  put(bb, d.bias);
  put(pmb, d.prev_mean);
  put(pvb, d.prev_var);
  std::vector<HostTensor*> pack{&xb, &sb, &bb, &pmb, &pvb};
  auto outs = poisoned(outputs, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  Values sum(d.channels(), 0.0), sq_sum(d.channels(), 0.0);
  for (size_t n = 0; n < d.x.size(); ++n) {
    sum[d.channel_of(n)] += d.x[n];
    sq_sum[d.channel_of(n)] += d.x[n] * d.x[n];
  }
  EXPECT_CLOSE(outs[0]->values(), sum, 1e-5 * std::max(1.0, max_abs(sq_sum)));
  EXPECT_CLOSE(outs[1]->values(), sq_sum, 1e-5 * std::max(1.0, max_abs(sq_sum)));
  // Finalize agrees with batchnorm's definition: y = eq_scale * x + eq_bias.
  const BnForward want = naive_forward(d);
  Values eq_scale(d.channels()), eq_bias(d.channels());
  for (size_t k = 0; k < d.channels(); ++k) {
    eq_scale[k] = d.scale[k] * want.inv[k];
    eq_bias[k] = d.bias[k] - want.mean[k] * eq_scale[k];
  }
  // E[x^2] - E[x]^2 in fp32 loses digits against the two-pass variance: a looser bound.
  const double t = 2e-4;
  EXPECT_CLOSE(outs[2]->values(), eq_scale, t * max_abs(eq_scale));
  EXPECT_CLOSE(outs[3]->values(), eq_bias, t * std::max(1.0, max_abs(eq_bias)));
  EXPECT_CLOSE(outs[4]->values(), want.mean, t);
  EXPECT_CLOSE(outs[5]->values(), want.inv, t * max_abs(want.inv));
  EXPECT_CLOSE(outs[6]->values(), want.next_mean, t);
  EXPECT_CLOSE(outs[7]->values(), want.next_var, t * max_abs(want.next_var));
}

TEST_P(BatchnormSplit, DbnWeightCoefficientsRebuildDx) {
  const auto [dt, ci] = GetParam();
  const Case& c = kCases[ci];
  std::mt19937_64 rng(600 + static_cast<uint64_t>(ci) * 31 + static_cast<uint64_t>(dt));
  BnData d = random_data(c.x, rng);
  graph::Graph g;
  g.set_io_data_type(dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const Dims ch = channel_dims(c.x);
  auto x = input(g, "x", c.x, dt, c.x_stride), dy = input(g, "dy", c.x, dt, c.x_stride);
  auto st = input(g, "scale", ch), mt = input(g, "mean", ch), it = input(g, "inv", ch);
  auto out = g.dbn_weight(dy, x, mt, it, st, graph::DBN_weight_attributes());
  for (auto& t : out) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  HostTensor xb(x), dyb(dy), sb(st), mb(mt), ib(it);
  put(xb, d.x);
  put(dyb, d.dy);
  put(sb, d.scale);
  BnForward fwd = naive_forward(d);
  put(mb, fwd.mean);
  put(ib, fwd.inv);
  std::vector<HostTensor*> pack{&xb, &dyb, &sb, &mb, &ib};
  auto outs = poisoned({out.begin(), out.end()}, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const BnBackward want = naive_backward(d, fwd.mean, fwd.inv);
  EXPECT_CLOSE(outs[0]->values(), want.dscale, 1e-4 * std::max(1.0, max_abs(want.dscale)));
  EXPECT_CLOSE(outs[1]->values(), want.dbias, 1e-4 * std::max(1.0, max_abs(want.dbias)));
  const Values a = outs[2]->values(), b = outs[3]->values(), k = outs[4]->values();
  Values dx(d.x.size());
  for (size_t n = 0; n < dx.size(); ++n) {
    const size_t ch_n = d.channel_of(n);
    dx[n] = a[ch_n] * d.dy[n] + b[ch_n] * d.x[n] + k[ch_n];
  }
  EXPECT_CLOSE(dx, want.dx, 1e-4 * std::max(1.0, max_abs(want.dx)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchnormSplit,
                         ::testing::Combine(::testing::Values(DT::FLOAT, DT::BFLOAT16), ::testing::Range(0, 5)),
                         param_name);

// ---- JSON ----

TEST(BatchnormJson, RoundTripRunsBitwiseEqual) {
  graph::Graph g;
  g.set_io_data_type(DT::HALF).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const Dims xd = {2, 3, 4, 5}, ch = {1, 3, 1, 1}, nhwc = {60, 1, 15, 3};
  const std::vector<TensorPtr> ins = {input(g, "x", xd, DT::HALF, nhwc),    input(g, "dy", xd, DT::HALF, nhwc),
                                      input(g, "scale", ch, DT::FLOAT),     input(g, "bias", ch, DT::FLOAT),
                                      input(g, "prev_mean", ch, DT::FLOAT), input(g, "prev_var", ch, DT::FLOAT)};
  const TensorPtr &x = ins[0], &dy = ins[1], &scale = ins[2], &bias = ins[3];
  auto eps = g.tensor(1e-5f);
  auto momentum = g.tensor(0.25f);
  auto bn =
      g.batchnorm(x, scale, bias,
                  graph::Batchnorm_attributes().set_epsilon(eps).set_previous_running_stats(ins[4], ins[5], momentum));
  auto y_inf = g.batchnorm_inference(x, bn[1], bn[2], scale, bias, graph::Batchnorm_inference_attributes());
  auto grads = g.batchnorm_backward(
      dy, x, scale, graph::Batchnorm_backward_attributes().set_saved_mean_and_inv_variance(bn[1], bn[2]));
  auto sums = g.genstats(x, graph::Genstats_attributes());
  auto fin = g.bn_finalize(sums[0], sums[1], scale, bias, eps, g.tensor(int64_t{40}), graph::BN_finalize_attributes());
  auto dw = g.dbn_weight(dy, x, bn[1], bn[2], scale, graph::DBN_weight_attributes());
  std::vector<TensorPtr> outputs(bn.begin(), bn.end());
  outputs.push_back(y_inf);
  outputs.insert(outputs.end(), grads.begin(), grads.end());
  outputs.insert(outputs.end(), fin.begin(), fin.begin() + 4);
  outputs.insert(outputs.end(), dw.begin(), dw.end());
  EXPECT_EQ(fin[4], nullptr);
  for (auto& o : outputs) o->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::string text;
  ASSERT_TRUE(g.serialize(text).is_good());
  for (const char* needle :
       {"\"BATCHNORM\"", "\"BATCHNORM_INFERENCE\"", "\"BATCHNORM_BACKWARD\"", "\"GENSTATS\"", "\"BN_FINALIZE\"",
        "\"DBN_WEIGHT\"", "\"PREV_RUNNING_MEAN\"", "\"NEXT_RUNNING_VAR\"", "\"ACCUM_COUNT\"", "\"EQ_SCALE_X\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
  std::mt19937_64 rng(11);
  std::vector<std::unique_ptr<HostTensor>> bufs;
  std::vector<HostTensor*> pack;
  for (const auto& t : ins) {
    bufs.push_back(std::make_unique<HostTensor>(t));
    bufs.back()->fill_random(rng, 0.5, 1.5);
  }
  for (auto& b : bufs) pack.push_back(b.get());
  auto outs = poisoned(outputs, pack);
  e = build_and_run(g, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::vector<std::vector<uint8_t>> first;
  for (auto& o : outs) {
    first.push_back(o->bytes);
    o->poison();
  }
  graph::Graph replay;
  e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  e = build_and_run(replay, pack);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(outs[i]->bytes, first[i]) << outputs[i]->get_name();
  std::string again;
  ASSERT_TRUE(replay.serialize(again).is_good());
  EXPECT_EQ(again, text);
}

}  // namespace
}  // namespace frost::test
