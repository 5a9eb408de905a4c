#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa_naive.h"
#include "test_util.h"

namespace frost::test {
namespace {

using graph::SDPA_attributes;
constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Layout { BHSD, BSHD };
enum class ScaleAs { ATTRIBUTE, TENSOR, PASS_BY_VALUE, OMITTED };

struct Case {
  std::string label;
  SdpaProblem p;
  DataType_t io = DataType_t::FLOAT;
  Layout layout = Layout::BHSD;
  ScaleAs scale_as = ScaleAs::ATTRIBUTE;
  bool fp64 = false;
  bool generate_stats = true;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// A problem with odd extents, s_q != s_kv and d_qk != d_v; cases change what they test.
SdpaProblem base(int64_t s_q = 17, int64_t s_kv = 111) {
  SdpaProblem p;
  p.b = 2, p.h_q = 4, p.h_k = 4, p.h_v = 4, p.s_q = s_q, p.s_kv = s_kv, p.d_qk = 24, p.d_v = 16;
  p.attn_scale = 0.3;
  return p;
}

std::vector<int64_t> strides_for(Layout l, const std::vector<int64_t>& d) {
  if (l == Layout::BSHD) return {d[2] * d[1] * d[3], d[3], d[1] * d[3], 1};
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

// The graph of one case, its buffers (inputs filled, outputs poisoned) and the naive answer.
struct Setup {
  graph::Graph g;
  TensorPtr q, k, v, o, stats;
  std::vector<std::unique_ptr<HostTensor>> inputs;
  std::unique_ptr<HostTensor> o_buf, stats_buf;
  SdpaNaiveResult want;

  HostTensor& add_input(const TensorPtr& t) { return *inputs.emplace_back(std::make_unique<HostTensor>(t)); }
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> all;
    for (auto& b : inputs) all.push_back(b.get());
    all.push_back(o_buf.get());
    if (stats_buf) all.push_back(stats_buf.get());
    return all;
  }
};

std::unique_ptr<Setup> make_setup(const Case& c, uint64_t seed) {
  const SdpaProblem& p = c.p;
  auto s = std::make_unique<Setup>();
  graph::Graph& g = s->g;
  g.set_io_data_type(c.io).set_compute_data_type(c.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT);
  auto qkv = [&](const char* name, std::vector<int64_t> d) {
    return input(g, name, d, c.io, strides_for(c.layout, d));
  };
  s->q = qkv("q", {p.b, p.h_q, p.s_q, p.d_qk});
  s->k = qkv("k", {p.b, p.h_k, p.s_kv, p.d_qk});
  s->v = qkv("v", {p.b, p.h_v, p.s_kv, p.d_v});
  SDPA_attributes a;
  a.set_name("attn").set_generate_stats(c.generate_stats).set_stats_use_log2(p.stats_use_log2).set_alibi_mask(p.alibi);
  a.set_diagonal_alignment(p.bottom_right ? DiagonalAlignment_t::BOTTOM_RIGHT : DiagonalAlignment_t::TOP_LEFT);
  if (p.left_bound) a.set_diagonal_band_left_bound(*p.left_bound);
  if (p.right_bound) a.set_diagonal_band_right_bound(*p.right_bound);
  TensorPtr scale, bias, len_q, len_kv, sink;
  switch (c.scale_as) {
    case ScaleAs::ATTRIBUTE:
      a.set_attn_scale(static_cast<float>(p.attn_scale));
      break;
    case ScaleAs::TENSOR:
      a.set_attn_scale(scale = input(g, "scale", {1, 1, 1, 1}));
      break;
    case ScaleAs::PASS_BY_VALUE:
      a.set_attn_scale(g.tensor(static_cast<float>(p.attn_scale)));
      break;
    case ScaleAs::OMITTED:
      break;
  }
  if (!p.bias_dim.empty()) a.set_bias(bias = input(g, "bias", p.bias_dim, c.io));
  if (!p.seq_len_q.empty()) {
    a.set_padding_mask(true);
    a.set_seq_len_q(len_q = input(g, "len_q", {p.b, 1, 1, 1}, DataType_t::INT32));
    a.set_seq_len_kv(len_kv = input(g, "len_kv", {p.b, 1, 1, 1}, DataType_t::INT32));
  }
  if (p.sink) a.set_sink_token(sink = input(g, "sink", {1, p.h_q, 1, 1}));
  auto [o, stats] = g.sdpa(s->q, s->k, s->v, a);
  s->o = o, s->stats = stats;
  o->set_output(true);
  if (stats) stats->set_output(true);
  if (auto e = g.validate(); e.is_bad()) {
    ADD_FAILURE() << c.label << ": " << e.get_message();
    return nullptr;
  }

  std::mt19937_64 rng(seed);
  auto& qb = s->add_input(s->q);
  auto& kb = s->add_input(s->k);
  auto& vb = s->add_input(s->v);
  for (HostTensor* t : {&qb, &kb, &vb}) t->fill_random(rng);
  SdpaProblem naive_p = p;
  if (c.scale_as == ScaleAs::OMITTED) naive_p.attn_scale = 1.0;
  // The naive formula runs on the values the buffers hold (rounded to bf16/fp16, scale to FLOAT).
  naive_p.attn_scale = static_cast<float>(naive_p.attn_scale);
  if (scale) s->add_input(scale).set(0, p.attn_scale);
  std::vector<double> bias_v, sink_v;
  if (bias) {
    auto& bb = s->add_input(bias);
    bb.fill_random(rng, -2, 2);
    bias_v = bb.values();
  }
  if (len_q) {
    auto& lq = s->add_input(len_q);
    auto& lkv = s->add_input(len_kv);
    for (int64_t n = 0; n < p.b; ++n) lq.set(n, static_cast<double>(p.seq_len_q[static_cast<size_t>(n)]));
    for (int64_t n = 0; n < p.b; ++n) lkv.set(n, static_cast<double>(p.seq_len_kv[static_cast<size_t>(n)]));
  }
  if (sink) {
    auto& sb = s->add_input(sink);
    sb.fill_random(rng, -1, 3);
    sink_v = sb.values();
  }
  s->o_buf = std::make_unique<HostTensor>(o);
  s->o_buf->poison();
  if (stats) {
    s->stats_buf = std::make_unique<HostTensor>(stats);
    s->stats_buf->poison();
  }
  s->want = sdpa_naive(naive_p, qb.values(), kb.values(), vb.values(), bias_v, sink_v);
  return s;
}

// O's tolerance fits its storage type: half an ulp of values within [-1, 1] plus FP32 accumulation.
double o_tolerance(const Case& c) {
  if (c.fp64) return 1e-12;
  if (c.io == DataType_t::BFLOAT16) return 5e-3;
  if (c.io == DataType_t::HALF) return 5e-4;
  return 1e-5;
}

// Stats are FP32 whatever the inputs: relative FP32 rounding of the largest log-sum-exp (ALiBi and
// bias push it to tens), plus FP32 accumulation outside the fp64 mode.
double stats_tolerance(const Case& c, const std::vector<double>& want) {
  double largest = 0;
  for (double x : want)
    if (std::isfinite(x)) largest = std::max(largest, std::fabs(x));
  return (c.fp64 ? 1.2e-7 : 1e-6) * (1 + largest);
}

class SdpaCases : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaCases, MatchesNaive) {
  const Case& c = GetParam();
  auto s = make_setup(c, std::hash<std::string>{}(c.label));
  ASSERT_TRUE(s);
  auto e = build_and_run(s->g, s->buffers());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_CLOSE(s->o_buf->values(), s->want.o, o_tolerance(c));
  if (c.generate_stats) {
    EXPECT_CLOSE(s->stats_buf->values(), s->want.stats, stats_tolerance(c, s->want.stats));
  } else {
    EXPECT_EQ(s->stats, nullptr);
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cs;
  auto add = [&](std::string label, SdpaProblem p, auto&& tweak) {
    Case c;
    c.label = std::move(label);
    c.p = std::move(p);
    tweak(c);
    cs.push_back(std::move(c));
  };
  auto none = [](Case&) {};
  auto causal = [](bool bottom_right) {
    return [bottom_right](Case& c) { c.p.right_bound = 0, c.p.bottom_right = bottom_right; };
  };
  add("plain_17x111", base(), none);
  add("plain_111x17", base(111, 17), none);
  add("single_query_and_key", base(1, 1), none);
  add("decode_1x111", base(1, 111), none);
  add("equal_head_dims", base(), [](Case& c) { c.p.d_v = 24; });
  add("causal_top_left_111x17", base(111, 17), causal(false));
  add("causal_top_left_17x111", base(), causal(false));
  add("causal_bottom_right_17x111", base(), causal(true));
  add("causal_bottom_right_111x17_masked_rows", base(111, 17), causal(true));
  add("sliding_window_top_left", base(111, 111), [](Case& c) { c.p.left_bound = 8, c.p.right_bound = 0; });
  add("sliding_window_bottom_right", base(17, 111),
      [](Case& c) { c.p.left_bound = 8, c.p.right_bound = 0, c.p.bottom_right = true; });
  add("band_both_bounds", base(111, 17), [](Case& c) { c.p.left_bound = 5, c.p.right_bound = 3; });
  add("band_left_only", base(17, 111), [](Case& c) { c.p.left_bound = 20, c.p.bottom_right = true; });
  add("band_right_only", base(17, 111), [](Case& c) { c.p.right_bound = 40; });
  add("padding", base(), [](Case& c) { c.p.seq_len_q = {17, 5}, c.p.seq_len_kv = {111, 30}; });
  add("padding_empty_kv", base(), [](Case& c) { c.p.seq_len_q = {0, 17}, c.p.seq_len_kv = {0, 1}; });
  add("padding_causal_bottom_right", base(), [](Case& c) {
    c.p.seq_len_q = {9, 17}, c.p.seq_len_kv = {50, 12}, c.p.right_bound = 0, c.p.bottom_right = true;
  });
  add("padding_window_top_left", base(111, 111), [](Case& c) {
    c.p.seq_len_q = {100, 31}, c.p.seq_len_kv = {64, 111}, c.p.left_bound = 16, c.p.right_bound = 0;
  });
  add("gqa_4_2_bshd", base(), [](Case& c) { c.p.h_k = 2, c.p.h_v = 2, c.layout = Layout::BSHD; });
  add("mqa_bshd_causal", base(),
      [](Case& c) { c.p.h_k = 1, c.p.h_v = 1, c.layout = Layout::BSHD, c.p.right_bound = 0, c.p.bottom_right = true; });
  add("gqa_k2_v1", base(), [](Case& c) { c.p.h_k = 2, c.p.h_v = 1; });
  add("bias_per_head", base(), [](Case& c) { c.p.bias_dim = {1, 4, 17, 111}; });
  add("bias_per_batch_causal", base(111, 17), [](Case& c) { c.p.bias_dim = {2, 1, 111, 17}, c.p.right_bound = 0; });
  add("bias_full_bshd", base(), [](Case& c) { c.p.bias_dim = {2, 4, 17, 111}, c.layout = Layout::BSHD; });
  add("alibi_4_heads_causal", base(), [](Case& c) { c.p.alibi = true, c.p.right_bound = 0, c.p.bottom_right = true; });
  add("alibi_3_heads", base(111, 17), [](Case& c) { c.p.alibi = true, c.p.h_q = 3, c.p.h_k = 3, c.p.h_v = 3; });
  add("sink", base(), [](Case& c) { c.p.sink = true; });
  add("sink_masked_rows", base(111, 17),
      [](Case& c) { c.p.sink = true, c.p.right_bound = 0, c.p.bottom_right = true; });
  add("scale_tensor", base(), [](Case& c) { c.scale_as = ScaleAs::TENSOR; });
  add("scale_pass_by_value", base(), [](Case& c) { c.scale_as = ScaleAs::PASS_BY_VALUE; });
  add("scale_omitted", base(), [](Case& c) { c.scale_as = ScaleAs::OMITTED; });
  add("stats_log2", base(), [](Case& c) { c.p.stats_use_log2 = true, c.p.sink = true; });
  add("no_stats", base(), [](Case& c) { c.generate_stats = false; });
  add("bf16_bshd_causal", base(),
      [](Case& c) { c.io = DataType_t::BFLOAT16, c.layout = Layout::BSHD, c.p.right_bound = 0; });
  add("bf16_gqa_bias", base(111, 17), [](Case& c) {
    c.io = DataType_t::BFLOAT16, c.p.h_k = 2, c.p.h_v = 2, c.p.bias_dim = {1, 4, 111, 17};
  });
  add("fp16_padding_sink", base(), [](Case& c) {
    c.io = DataType_t::HALF, c.p.seq_len_q = {17, 3}, c.p.seq_len_kv = {70, 111}, c.p.sink = true;
  });
  add("fp64_mode", base(), [](Case& c) { c.io = DataType_t::DOUBLE, c.fp64 = true, c.p.alibi = true; });
  add("fp64_mode_everything", base(111, 17), [](Case& c) {
    c.io = DataType_t::DOUBLE, c.fp64 = true, c.p.h_k = 2, c.p.h_v = 1, c.p.bias_dim = {2, 1, 111, 17};
    c.p.seq_len_q = {100, 111}, c.p.seq_len_kv = {17, 9}, c.p.left_bound = 6, c.p.right_bound = 2;
    c.p.bottom_right = true, c.p.sink = true, c.p.stats_use_log2 = true, c.scale_as = ScaleAs::TENSOR;
  });
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Sweep, SdpaCases, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.label; });

TEST(Sdpa, AlibiSlopesFollowThePaper) {
  const std::vector<double> eight = {1. / 2, 1. / 4, 1. / 8, 1. / 16, 1. / 32, 1. / 64, 1. / 128, 1. / 256};
  const std::vector<double> six = {1. / 4, 1. / 16, 1. / 64, 1. / 256, 1. / 2, 1. / 8};
  const std::vector<double> three = {1. / 16, 1. / 256, 1. / 4};
  for (const auto& want : {eight, six, three}) {
    const auto heads = static_cast<int64_t>(want.size());
    EXPECT_CLOSE(detail::alibi_slopes(heads), want, 1e-15);
    EXPECT_CLOSE(naive_alibi_slopes(heads), want, 1e-15);
  }
}

// Rows with nothing to attend: O is exactly 0 and Stats -inf (or the sink logit), never NaN.
TEST(Sdpa, MaskedAndPaddingRowsAreExact) {
  for (bool with_sink : {false, true}) {
    Case c;
    c.label = with_sink ? "masked_with_sink" : "masked";
    c.p = base(111, 17);
    c.p.right_bound = 0, c.p.bottom_right = true, c.p.sink = with_sink;
    c.p.seq_len_q = {111, 60}, c.p.seq_len_kv = {17, 17};
    auto s = make_setup(c, 7);
    ASSERT_TRUE(s);
    ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
    const HostTensor& sink = *s->inputs.back();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t i = 0; i < 111; ++i) {
          const int64_t row = (b * 4 + h) * 111 + i;
          const int64_t rows = c.p.seq_len_q[static_cast<size_t>(b)];
          const bool padding = i >= rows, no_keys = i + 17 - rows < 0;
          const double stats = s->stats_buf->get(row);
          ASSERT_FALSE(std::isnan(stats)) << "row " << row;
          if (!padding && !no_keys) continue;
          for (int64_t d = 0; d < 16; ++d) ASSERT_EQ(s->o_buf->get(row * 16 + d), 0.0) << "row " << row;
          if (padding || !with_sink)
            ASSERT_EQ(stats, -kInf) << "row " << row;
          else
            ASSERT_EQ(stats, sink.get(h)) << "row " << row;
        }
    EXPECT_CLOSE(s->o_buf->values(), s->want.o, o_tolerance(c));
    EXPECT_CLOSE(s->stats_buf->values(), s->want.stats, stats_tolerance(c, s->want.stats));
  }
}

TEST(Sdpa, OutputsFollowQLayoutAndTypes) {
  Case c;
  c.label = "layout";
  c.p = base();
  c.layout = Layout::BSHD;
  auto s = make_setup(c, 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->o->get_dim(), (std::vector<int64_t>{2, 4, 17, 16}));
  EXPECT_EQ(s->o->get_stride(), (std::vector<int64_t>{17 * 4 * 16, 16, 4 * 16, 1}));
  EXPECT_EQ(s->stats->get_dim(), (std::vector<int64_t>{2, 4, 17, 1}));
  EXPECT_EQ(s->stats->get_data_type(), DataType_t::FLOAT);

  // With no io type declared, O takes Q's type; Stats stays FLOAT.
  graph::Graph g;
  auto q = input(g, "q", {1, 2, 3, 8}, DataType_t::BFLOAT16);
  auto k = input(g, "k", {1, 2, 5, 8}, DataType_t::BFLOAT16);
  auto v = input(g, "v", {1, 2, 5, 8}, DataType_t::BFLOAT16);
  auto [o, stats] = g.sdpa(q, k, v, SDPA_attributes().set_generate_stats(true));
  o->set_output(true);
  stats->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  EXPECT_EQ(o->get_data_type(), DataType_t::BFLOAT16);
  EXPECT_EQ(stats->get_data_type(), DataType_t::FLOAT);
}

TEST(Sdpa, JsonRoundTripIsBitwiseIdentical) {
  Case c;
  c.label = "json";
  c.p = base(111, 17);
  c.p.h_k = 2, c.p.h_v = 1, c.p.bias_dim = {1, 4, 111, 17}, c.p.seq_len_q = {100, 111}, c.p.seq_len_kv = {17, 9};
  c.p.left_bound = 6, c.p.right_bound = 2, c.p.bottom_right = true, c.p.sink = true, c.p.alibi = true;
  c.p.stats_use_log2 = true;
  c.layout = Layout::BSHD;
  for (ScaleAs scale_as : {ScaleAs::ATTRIBUTE, ScaleAs::TENSOR, ScaleAs::PASS_BY_VALUE}) {
    c.scale_as = scale_as;
    auto s = make_setup(c, 11);
    ASSERT_TRUE(s);
    ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
    const std::vector<uint8_t> o_first = s->o_buf->bytes, stats_first = s->stats_buf->bytes;
    EXPECT_CLOSE(s->o_buf->values(), s->want.o, o_tolerance(c));
    std::string text;
    ASSERT_TRUE(s->g.serialize(text).is_good());
    graph::Graph replay;
    auto e = replay.deserialize(text);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    s->o_buf->poison();
    s->stats_buf->poison();
    e = build_and_run(replay, s->buffers());
    ASSERT_TRUE(e.is_good()) << e.get_message();
    EXPECT_EQ(s->o_buf->bytes, o_first);
    EXPECT_EQ(s->stats_buf->bytes, stats_first);
    std::string again;
    ASSERT_TRUE(replay.serialize(again).is_good());
    EXPECT_EQ(again, text);
  }
}

// A document whose attributes disagree with its ports is rejected, naming what is wrong.
TEST(Sdpa, JsonRejectsInconsistentAttributes) {
  Case c;
  c.label = "json_bad";
  c.p = base(1, 17);
  auto s = make_setup(c, 2);
  ASSERT_TRUE(s);
  std::string text;
  ASSERT_TRUE(s->g.serialize(text).is_good());
  const nlohmann::json good = nlohmann::json::parse(text);
  ASSERT_EQ(good["nodes"][0]["tag"], "SDPA");

  nlohmann::json no_stats = good;
  no_stats["nodes"][0]["generate_stats"] = false;
  graph::Graph replay;
  ASSERT_TRUE(replay.deserialize(no_stats.dump()).is_good());
  auto e = replay.validate();
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("'STATS'"), std::string::npos) << e.get_message();

  nlohmann::json bad_enum = good;
  bad_enum["nodes"][0]["implementation"] = "FASTEST";
  e = replay.deserialize(bad_enum.dump());
  EXPECT_EQ(e.get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT);
  EXPECT_NE(e.get_message().find("FASTEST"), std::string::npos) << e.get_message();
}

// The comparison catches a wrong answer: the causal result is far from the unmasked formula.
TEST(Sdpa, CheckerDetectsAWrongMask) {
  Case c;
  c.label = "checker";
  c.p = base();
  c.p.right_bound = 0;
  auto s = make_setup(c, 5);
  ASSERT_TRUE(s);
  ASSERT_TRUE(build_and_run(s->g, s->buffers()).is_good());
  SdpaProblem unmasked = c.p;
  unmasked.right_bound.reset();
  unmasked.attn_scale = static_cast<float>(unmasked.attn_scale);
  const auto wrong = sdpa_naive(unmasked, s->inputs[0]->values(), s->inputs[1]->values(), s->inputs[2]->values());
  EXPECT_GT(compare(s->o_buf->values(), wrong.o).max_abs, 0.05);
  EXPECT_LE(compare(s->o_buf->values(), s->want.o).max_abs, o_tolerance(c));
}

TEST(Sdpa, SequenceLengthOutOfRangeFailsAndLeavesOutputsUntouched) {
  Case c;
  c.label = "bad_len";
  c.p = base();
  c.p.seq_len_q = {17, 17}, c.p.seq_len_kv = {111, 111};
  auto s = make_setup(c, 3);
  ASSERT_TRUE(s);
  HostTensor& len_q = *s->inputs[3];
  ASSERT_EQ(len_q.t->get_name(), "len_q");
  len_q.set(1, 18);
  const std::vector<uint8_t> poisoned = s->o_buf->bytes;
  auto e = build_and_run(s->g, s->buffers());
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("SEQ_LEN_Q"), std::string::npos) << e.get_message();
  EXPECT_NE(e.get_message().find("18 at batch 1"), std::string::npos) << e.get_message();
  EXPECT_EQ(s->o_buf->bytes, poisoned);
}

struct ErrorInputs {
  std::vector<int64_t> q{2, 4, 17, 24}, k{2, 2, 111, 24}, v{2, 2, 111, 16};
  DataType_t q_type = DataType_t::FLOAT;
  bool null_q = false;
};
struct ErrorCase {
  const char* label;
  std::function<void(graph::Graph&, ErrorInputs&, SDPA_attributes&)> before;
  std::function<void(graph::Graph&, TensorPtr&, TensorPtr&, TensorPtr&)> after;  // q, o, stats
  error_code_t code;
  std::vector<std::string> mentions;  // besides the node name
};

TEST(Sdpa, ErrorsNameNodeAttributeAndValue) {
  using E = error_code_t;
  using Tweak = std::function<void(graph::Graph&, ErrorInputs&, SDPA_attributes&)>;
  auto lens = [](std::vector<int64_t> q_dim, DataType_t q_type, std::vector<int64_t> kv_dim, DataType_t kv_type) {
    return Tweak([=](graph::Graph& g, ErrorInputs&, SDPA_attributes& a) {
      a.set_padding_mask(true)
          .set_seq_len_q(input(g, "lq", q_dim, q_type))
          .set_seq_len_kv(input(g, "lkv", kv_dim, kv_type));
    });
  };
  const DataType_t i32 = DataType_t::INT32, f16 = DataType_t::HALF;
  // One row per error path: what is wrong, the code, and what the message must name.
  // clang-format off
  const std::vector<ErrorCase> cases = {
      {"rank", [](auto&, auto& in, auto&) { in.q = {2, 4, 17}; }, nullptr, E::INVALID_VALUE, {"Q.dim", "[2, 4, 17]"}},
      {"batch", [](auto&, auto& in, auto&) { in.k = {3, 2, 111, 24}; }, nullptr, E::INVALID_VALUE,
       {"K.dim", "[3, 2, 111, 24]", "batch"}},
      {"k_heads", [](auto&, auto& in, auto&) { in.k = {2, 3, 111, 24}; }, nullptr, E::INVALID_VALUE,
       {"K.dim", "heads"}},
      {"v_heads", [](auto&, auto& in, auto&) { in.v = {2, 3, 111, 16}; }, nullptr, E::INVALID_VALUE,
       {"V.dim", "heads"}},
      {"d_qk", [](auto&, auto& in, auto&) { in.k = {2, 2, 111, 32}; }, nullptr, E::INVALID_VALUE,
       {"K.dim", "head dim"}},
      {"s_kv", [](auto&, auto& in, auto&) { in.v = {2, 2, 100, 16}; }, nullptr, E::INVALID_VALUE,
       {"V.dim", "[2, 2, 100, 16]"}},
      {"int_q", [](auto&, auto& in, auto&) { in.q_type = DataType_t::INT32; }, nullptr, E::INVALID_VALUE,
       {"Q.data_type", "INT32"}},
      {"fp8_q", [](auto&, auto& in, auto&) { in.q_type = DataType_t::FP8_E4M3; }, nullptr, E::INVALID_VALUE,
       {"Q.data_type", "FP8_E4M3"}},
      {"null_q", [](auto&, auto& in, auto&) { in.null_q = true; }, nullptr, E::ATTRIBUTE_NOT_SET, {"Q"}},
      {"bias_keys", [](auto& g, auto&, auto& a) { a.set_bias(input(g, "bias", {2, 4, 17, 110})); }, nullptr,
       E::INVALID_VALUE, {"BIAS", "[2, 4, 17, 110]"}},
      {"bias_heads", [](auto& g, auto&, auto& a) { a.set_bias(input(g, "bias", {1, 2, 17, 111})); }, nullptr,
       E::INVALID_VALUE, {"BIAS", "[1, 2, 17, 111]"}},
      {"padding_no_lengths", [](auto&, auto&, auto& a) { a.set_padding_mask(true); }, nullptr, E::ATTRIBUTE_NOT_SET,
       {"SEQ_LEN_Q", "padding_mask"}},
      {"padding_no_kv_length",
       [](auto& g, auto&, auto& a) { a.set_padding_mask(true).set_seq_len_q(input(g, "lq", {2, 1, 1, 1}, i32)); },
       nullptr, E::ATTRIBUTE_NOT_SET, {"SEQ_LEN_KV"}},
      {"lengths_without_padding", [](auto& g, auto&, auto& a) { a.set_seq_len_q(input(g, "lq", {2, 1, 1, 1}, i32)); },
       nullptr, E::INVALID_VALUE, {"SEQ_LEN_Q", "padding_mask"}},
      {"length_shape", lens({2, 1, 1}, i32, {2, 1, 1, 1}, i32), nullptr, E::INVALID_VALUE, {"SEQ_LEN_Q", "[2, 1, 1]"}},
      {"length_type", lens({2, 1, 1, 1}, i32, {2, 1, 1, 1}, DataType_t::INT64), nullptr, E::INVALID_VALUE,
       {"SEQ_LEN_KV", "INT64"}},
      {"scale_shape", [](auto& g, auto&, auto& a) { a.set_attn_scale(input(g, "scale", {1, 2, 1, 1})); }, nullptr,
       E::INVALID_VALUE, {"ATTN_SCALE", "[1, 2, 1, 1]"}},
      {"scale_type", [](auto& g, auto&, auto& a) { a.set_attn_scale(input(g, "scale", {1, 1, 1, 1}, f16)); }, nullptr,
       E::INVALID_VALUE, {"ATTN_SCALE", "HALF"}},
      {"scale_twice", [](auto& g, auto&, auto& a) { a.set_attn_scale(0.5f).set_attn_scale(g.tensor(0.25f)); }, nullptr,
       E::INVALID_VALUE, {"attn_scale", "= 0.5:"}},
      {"sink_shape", [](auto& g, auto&, auto& a) { a.set_sink_token(input(g, "sink", {1, 2, 1, 1})); }, nullptr,
       E::INVALID_VALUE, {"SINK_TOKEN", "[1, 2, 1, 1]"}},
      {"sink_type", [](auto& g, auto&, auto& a) { a.set_sink_token(input(g, "sink", {1, 4, 1, 1}, f16)); }, nullptr,
       E::INVALID_VALUE, {"SINK_TOKEN", "HALF"}},
      {"left_bound", [](auto&, auto&, auto& a) { a.set_diagonal_band_left_bound(-1); }, nullptr, E::INVALID_VALUE,
       {"diagonal_band_left_bound", "-1"}},
      {"right_bound", [](auto&, auto&, auto& a) { a.set_diagonal_band_right_bound(-3); }, nullptr, E::INVALID_VALUE,
       {"diagonal_band_right_bound", "-3"}},
      {"ragged", nullptr,
       [](auto& g, auto& q, auto&, auto&) { q->set_ragged_offset(input(g, "ro", {3, 1, 1, 1}, i32)); },
       E::INVALID_VALUE, {"Q.ragged_offset"}},
      {"o_dims", nullptr, [](auto&, auto&, auto& o, auto&) { o->set_dim({2, 4, 17, 24}); }, E::SHAPE_DEDUCTION_FAILED,
       {"O.dim", "[2, 4, 17, 24]", "[2, 4, 17, 16]"}},
      {"o_type", nullptr, [](auto&, auto&, auto& o, auto&) { o->set_data_type(DataType_t::INT8); }, E::INVALID_VALUE,
       {"O.data_type", "INT8"}},
      {"stats_dims", nullptr, [](auto&, auto&, auto&, auto& st) { st->set_dim({2, 4, 17, 2}); },
       E::SHAPE_DEDUCTION_FAILED, {"STATS.dim", "[2, 4, 17, 2]"}},
      {"stats_type", nullptr, [](auto&, auto&, auto&, auto& st) { st->set_data_type(f16); }, E::INVALID_VALUE,
       {"STATS.data_type", "HALF"}},
  };
  // clang-format on
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.label);
    graph::Graph g;
    g.set_io_data_type(DataType_t::FLOAT);
    ErrorInputs in;
    SDPA_attributes a;
    a.set_name("attn").set_generate_stats(true);
    if (c.before) c.before(g, in, a);
    TensorPtr q = in.null_q ? nullptr : input(g, "q", in.q, in.q_type);
    auto [o, stats] = g.sdpa(q, input(g, "k", in.k), input(g, "v", in.v), a);
    o->set_output(true);
    stats->set_output(true);
    if (c.after) c.after(g, q, o, stats);
    const error_t e = g.validate();
    EXPECT_EQ(e.get_code(), c.code) << e.get_message();
    EXPECT_NE(e.get_message().find("'attn'"), std::string::npos) << e.get_message();
    for (const auto& m : c.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
}

}  // namespace
}  // namespace frost::test
