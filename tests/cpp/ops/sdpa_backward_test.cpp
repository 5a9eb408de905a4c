// sdpa_backward against a naive double-precision backward (every feature, storage types, layouts)
// and, in the fp64 mode, against central differences of the forward reference.
#include "ops/sdpa_backward_harness.h"

namespace frost::test::sdpa_backward {
namespace {

class SdpaBackwardCases : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaBackwardCases, MatchesNaiveGradients) {
  const Case& c = GetParam();
  const Data d = random_data(c, std::hash<std::string>{}(c.label));
  const SdpaProblem p = naive_problem(c, d);
  const SdpaNaiveResult fwd = sdpa_naive(p, d.q, d.k, d.v, d.bias, d.sink);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  auto e = build_and_run(s->g, s->all());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  // The naive side recomputes the softmax from Q, K, V; the graph reads O and Stats as stored.
  expect_gradients_close(read_gradients(*s), sdpa_backward_naive(p, d.q, d.k, d.v, d.d_o, d.bias, d.sink),
                         tolerance(c));
}

std::vector<Case> sweep_cases() {
  auto none = [](Case&) {};
  auto causal = [](bool bottom_right) {
    return [bottom_right](Case& c) { c.p.right_bound = 0, c.p.bottom_right = bottom_right; };
  };
  return {
      make_case("plain_17x33", base(), none),
      make_case("plain_33x17", base(33, 17), none),
      make_case("single_query_and_key", base(1, 1), none),
      make_case("decode_1x33", base(1, 33), none),
      make_case("equal_head_dims", base(), [](Case& c) { c.p.d_v = 12; }),
      make_case("causal_top_left_33x17", base(33, 17), causal(false)),
      make_case("causal_bottom_right_17x33", base(), causal(true)),
      make_case("causal_bottom_right_33x17_masked_rows", base(33, 17), causal(true)),
      make_case("causal_bottom_right_111x17_masked_rows", base(111, 17), causal(true)),
      make_case("plain_17x111", base(17, 111), none),
      make_case("sliding_window_bottom_right", base(),
                [](Case& c) { c.p.left_bound = 5, c.p.right_bound = 0, c.p.bottom_right = true; }),
      make_case("band_both_bounds", base(33, 17), [](Case& c) { c.p.left_bound = 5, c.p.right_bound = 3; }),
      make_case("padding", base(),
                [](Case& c) {
                  c.p.seq_len_q = {17, 5}, c.p.seq_len_kv = {33, 9};
                }),
      make_case("padding_empty", base(),
                [](Case& c) {
                  c.p.seq_len_q = {0, 17}, c.p.seq_len_kv = {0, 1};
                }),
      make_case("padding_causal_bottom_right", base(),
                [](Case& c) {
                  c.p.seq_len_q = {9, 17}, c.p.seq_len_kv = {20, 12}, c.p.right_bound = 0, c.p.bottom_right = true;
                }),
      make_case("gqa_4_2_bshd", base(), [](Case& c) { c.p.h_k = 2, c.p.h_v = 2, c.layout = Layout::BSHD; }),
      make_case("mqa_bshd_causal", base(),
                [](Case& c) {
                  c.p.h_k = 1, c.p.h_v = 1, c.layout = Layout::BSHD, c.p.right_bound = 0, c.p.bottom_right = true;
                }),
      make_case("gqa_k2_v1", base(), [](Case& c) { c.p.h_k = 2, c.p.h_v = 1; }),
      make_case("bias_per_head", base(),
                [](Case& c) {
                  c.p.bias_dim = {1, 4, 17, 33};
                }),
      make_case("bias_per_batch_causal", base(33, 17),
                [](Case& c) {
                  c.p.bias_dim = {2, 1, 33, 17}, c.p.right_bound = 0;
                }),
      make_case("bias_shared_bshd", base(),
                [](Case& c) {
                  c.p.bias_dim = {1, 1, 17, 33}, c.layout = Layout::BSHD;
                }),
      make_case("bias_full", base(),
                [](Case& c) {
                  c.p.bias_dim = {2, 4, 17, 33};
                }),
      make_case("alibi_causal", base(),
                [](Case& c) { c.p.alibi = true, c.p.right_bound = 0, c.p.bottom_right = true; }),
      make_case("alibi_3_heads", base(33, 17), [](Case& c) { c.p.alibi = true, c.p.h_q = c.p.h_k = c.p.h_v = 3; }),
      make_case("sink", base(), [](Case& c) { c.p.sink = true; }),
      make_case("sink_masked_rows", base(33, 17),
                [](Case& c) { c.p.sink = true, c.p.right_bound = 0, c.p.bottom_right = true; }),
      make_case("scale_tensor", base(), [](Case& c) { c.scale_as = ScaleAs::TENSOR; }),
      make_case("scale_pass_by_value", base(), [](Case& c) { c.scale_as = ScaleAs::PASS_BY_VALUE; }),
      make_case("scale_omitted", base(), [](Case& c) { c.scale_as = ScaleAs::OMITTED; }),
      make_case("stats_log2_sink", base(), [](Case& c) { c.p.stats_use_log2 = true, c.p.sink = true; }),
      make_case("bf16_bshd_causal", base(),
                [](Case& c) { c.io = DataType_t::BFLOAT16, c.layout = Layout::BSHD, c.p.right_bound = 0; }),
      make_case("bf16_gqa_bias", base(33, 17),
                [](Case& c) {
                  c.io = DataType_t::BFLOAT16, c.p.h_k = 2, c.p.h_v = 2, c.p.bias_dim = {1, 4, 33, 17};
                }),
      make_case("fp16_padding_sink", base(),
                [](Case& c) {
                  c.io = DataType_t::HALF, c.p.seq_len_q = {17, 3}, c.p.seq_len_kv = {20, 33}, c.p.sink = true;
                }),
      make_case("fp64_everything", base(33, 17),
                [](Case& c) {
                  c.io = DataType_t::DOUBLE, c.fp64 = true, c.p.h_k = 2, c.p.h_v = 1, c.p.bias_dim = {2, 1, 33, 17};
                  c.p.seq_len_q = {30, 33}, c.p.seq_len_kv = {17, 9}, c.p.left_bound = 6, c.p.right_bound = 2;
                  c.p.bottom_right = true, c.p.sink = true, c.p.stats_use_log2 = true, c.p.alibi = true;
                  c.scale_as = ScaleAs::TENSOR;
                }),
  };
}

INSTANTIATE_TEST_SUITE_P(Sweep, SdpaBackwardCases, ::testing::ValuesIn(sweep_cases()),
                         [](const auto& info) { return info.param.label; });

// ---- fp64: gradients against central differences of the forward reference ----

// The forward graph in fp64, built once and run on changed operands to give the loss sum(dO * O).
struct Forward : Bound {
  TensorPtr o, stats;
  Handle handle = cpu_handle();
  std::unordered_map<int64_t, void*> pack;
  std::vector<uint8_t> workspace;
};

std::unique_ptr<Forward> make_forward(const Case& c, const Data& d) {
  auto f = std::make_unique<Forward>();
  with_types(f->g, c);
  SDPA_attributes a;
  a.set_generate_stats(true);
  declare_inputs(*f, c, d, a);
  auto [o, stats] = f->g.sdpa(f->q, f->k, f->v, a);
  f->o = o, f->stats = stats;
  o->set_output(true);
  stats->set_output(true);
  if (auto e = f->g.build(f->handle, {HeurMode_t::A}); e.is_bad()) {
    ADD_FAILURE() << e.get_message();
    return nullptr;
  }
  bind_inputs(*f, c.p, d);
  f->buffer(o), f->buffer(stats);
  for (auto& b : f->buffers) f->pack[b->t->get_uid()] = b->data();
  int64_t ws = 0;
  EXPECT_TRUE(f->g.get_workspace_size(ws).is_good());
  f->workspace.resize(static_cast<size_t>(ws) + 1);
  return f;
}

double loss(Forward& f, const Data& d) {
  f.set(f.q, d.q), f.set(f.k, d.k), f.set(f.v, d.v);
  if (f.bias) f.set(f.bias, d.bias);
  if (f.sink) f.set(f.sink, d.sink);
  EXPECT_TRUE(f.g.execute(f.handle, f.pack, f.workspace.data()).is_good());
  const std::vector<double> o = f.buffer(f.o).values();
  double sum = 0;
  for (size_t n = 0; n < o.size(); ++n) sum += o[n] * d.d_o[n];
  return sum;
}

// Central differences with a step of 2^-12: exact in DOUBLE and, for the sink's multiples of 2^-8,
// in FLOAT; the truncation error (step^2 / 6 times a third derivative) stays near 1e-8.
std::vector<double> central_differences(Forward& f, Data d, std::vector<double> Data::*operand) {
  constexpr double kStep = 1.0 / 4096;
  std::vector<double>& x = d.*operand;
  std::vector<double> grad(x.size());
  for (size_t n = 0; n < x.size(); ++n) {
    const double x0 = x[n];
    x[n] = x0 + kStep;
    const double up = loss(f, d);
    x[n] = x0 - kStep;
    const double down = loss(f, d);
    x[n] = x0;
    grad[n] = (up - down) / (2 * kStep);
  }
  return grad;
}

class SdpaBackwardFp64 : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaBackwardFp64, MatchesFiniteDifferences) {
  const Case& c = GetParam();
  const Data d = random_data(c, std::hash<std::string>{}(c.label) + 1);
  auto f = make_forward(c, d);
  ASSERT_TRUE(f);
  loss(*f, d);
  auto s = make_backward(c, d, f->buffer(f->o).values(), f->buffer(f->stats).values());
  ASSERT_TRUE(s);
  auto e = build_and_run(s->g, s->all());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  SdpaGradients fd;
  fd.dq = central_differences(*f, d, &Data::q);
  fd.dk = central_differences(*f, d, &Data::k);
  fd.dv = central_differences(*f, d, &Data::v);
  fd.dbias = central_differences(*f, d, &Data::bias);
  fd.dsink = central_differences(*f, d, &Data::sink);
  {
    SCOPED_TRACE("graph");
    expect_gradients_close(read_gradients(*s), fd, tolerance(c));
  }
  {
    SCOPED_TRACE("naive");
    expect_gradients_close(sdpa_backward_naive(naive_problem(c, d), d.q, d.k, d.v, d.d_o, d.bias, d.sink), fd, 1e-7);
  }
}

SdpaProblem tiny(int64_t s_q = 3, int64_t s_kv = 5) {
  SdpaProblem p;
  p.b = 2, p.h_q = 2, p.h_k = 2, p.h_v = 2, p.s_q = s_q, p.s_kv = s_kv, p.d_qk = 3, p.d_v = 2;
  p.attn_scale = 0.7;
  return p;
}

std::vector<Case> finite_difference_cases() {
  auto fp64 = [](std::function<void(Case&)> tweak) {
    return [tweak](Case& c) { c.io = DataType_t::DOUBLE, c.fp64 = true, tweak(c); };
  };
  return {
      make_case("plain", tiny(), fp64([](Case&) {})),
      make_case("single_query", tiny(1, 5), fp64([](Case&) {})),
      make_case("causal_top_left", tiny(5, 3), fp64([](Case& c) { c.p.right_bound = 0; })),
      make_case("causal_bottom_right_masked_rows", tiny(5, 3),
                fp64([](Case& c) { c.p.right_bound = 0, c.p.bottom_right = true; })),
      make_case("band", tiny(4, 5), fp64([](Case& c) { c.p.left_bound = 2, c.p.right_bound = 1; })),
      make_case("padding", tiny(), fp64([](Case& c) {
                  c.p.seq_len_q = {3, 2}, c.p.seq_len_kv = {4, 0};
                })),
      make_case("gqa_k2_v1_bshd", tiny(),
                fp64([](Case& c) { c.p.h_q = 4, c.p.h_k = 2, c.p.h_v = 1, c.layout = Layout::BSHD; })),
      make_case("bias_per_head", tiny(), fp64([](Case& c) {
                  c.p.bias_dim = {1, 2, 3, 5};
                })),
      make_case("bias_per_batch_causal", tiny(), fp64([](Case& c) {
                  c.p.bias_dim = {2, 1, 3, 5}, c.p.right_bound = 0;
                })),
      make_case("alibi_3_heads", tiny(), fp64([](Case& c) { c.p.alibi = true, c.p.h_q = c.p.h_k = c.p.h_v = 3; })),
      make_case("sink", tiny(), fp64([](Case& c) { c.p.sink = true; })),
      make_case("sink_masked_rows", tiny(5, 3),
                fp64([](Case& c) { c.p.sink = true, c.p.right_bound = 0, c.p.bottom_right = true; })),
      make_case("scale_tensor_log2", tiny(),
                fp64([](Case& c) { c.scale_as = ScaleAs::TENSOR, c.p.stats_use_log2 = true; })),
      make_case("everything", tiny(4, 5), fp64([](Case& c) {
                  c.p.h_q = 4, c.p.h_k = 2, c.p.h_v = 1, c.p.bias_dim = {2, 1, 4, 5}, c.p.alibi = true;
                  c.p.seq_len_q = {4, 3}, c.p.seq_len_kv = {5, 2}, c.p.left_bound = 3, c.p.right_bound = 1;
                  c.p.bottom_right = true, c.p.sink = true, c.scale_as = ScaleAs::PASS_BY_VALUE;
                })),
  };
}

INSTANTIATE_TEST_SUITE_P(SmallShapes, SdpaBackwardFp64, ::testing::ValuesIn(finite_difference_cases()),
                         [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace frost::test::sdpa_backward
