// sdpa_backward's rules beyond the sweeps: masked rows, determinism, JSON, inferred outputs and every
// validation error path.
#include <limits>
#include <nlohmann/json.hpp>

#include "ops/sdpa_backward_harness.h"

namespace frost::test::sdpa_backward {
namespace {

using E = error_code_t;

TEST(SdpaBackwardApi, GradientsFollowOperandLayoutsAndTypes) {
  graph::Graph g;
  // BSHD Q and dO, BHSD K and V: each gradient takes its operand's stride order.
  auto q = input(g, "q", {2, 4, 3, 8}, DataType_t::BFLOAT16, {96, 8, 32, 1});
  auto k = input(g, "k", {2, 2, 5, 8}, DataType_t::BFLOAT16);
  auto v = input(g, "v", {2, 1, 5, 6}, DataType_t::HALF);
  auto o = input(g, "o", {2, 4, 3, 6}, DataType_t::BFLOAT16);
  auto d_o = input(g, "dO", {2, 4, 3, 6}, DataType_t::BFLOAT16);
  auto stats = input(g, "stats", {2, 4, 3, 1});
  auto bias = input(g, "bias", {1, 4, 3, 5}, DataType_t::HALF, {60, 1, 20, 4});
  auto dbias = g.tensor(graph::Tensor_attributes().set_name("dbias"));
  auto sink = input(g, "sink", {1, 4, 1, 1});
  auto dsink = g.tensor(graph::Tensor_attributes().set_name("dsink"));
  auto [dq, dk, dv] = g.sdpa_backward(
      q, k, v, o, d_o, stats,
      SDPA_backward_attributes().set_bias(bias).set_dbias(dbias).set_sink_token(sink).set_dsink_token(dsink));
  for (const auto& t : {dq, dk, dv}) t->set_output(true);
  auto e = g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  EXPECT_EQ(dq->get_dim(), q->get_dim());
  EXPECT_EQ(dq->get_stride(), q->get_stride());
  EXPECT_EQ(dk->get_dim(), k->get_dim());
  EXPECT_EQ(dk->get_stride(), k->get_stride());
  EXPECT_EQ(dv->get_dim(), v->get_dim());
  // With no io type declared, each gradient takes its operand's type.
  EXPECT_EQ(dq->get_data_type(), DataType_t::BFLOAT16);
  EXPECT_EQ(dv->get_data_type(), DataType_t::HALF);
  EXPECT_EQ(dbias->get_dim(), bias->get_dim());
  EXPECT_EQ(dbias->get_stride(), bias->get_stride());
  EXPECT_EQ(dbias->get_data_type(), DataType_t::HALF);
  EXPECT_EQ(dsink->get_dim(), (std::vector<int64_t>{1, 4, 1, 1}));
  EXPECT_EQ(dsink->get_data_type(), DataType_t::FLOAT);
}

TEST(SdpaBackwardApi, ShorthandsSetTheBand) {
  SDPA_backward_attributes a;
  a.set_causal_mask_bottom_right(true);
  EXPECT_EQ(a.diagonal_alignment, DiagonalAlignment_t::BOTTOM_RIGHT);
  EXPECT_EQ(a.right_bound, 0);
  EXPECT_FALSE(a.left_bound);
  a.set_sliding_window_length(7);
  EXPECT_EQ(a.left_bound, 7);
  a.set_causal_mask(false);
  EXPECT_FALSE(a.right_bound);
  a.set_causal_mask(true);
  EXPECT_EQ(a.diagonal_alignment, DiagonalAlignment_t::TOP_LEFT);
}

struct Operands {
  std::vector<int64_t> q{2, 4, 17, 24}, k{2, 2, 11, 24}, v{2, 2, 11, 16}, o{2, 4, 17, 16}, d_o{2, 4, 17, 16};
  std::vector<int64_t> stats{2, 4, 17, 1};
  DataType_t q_type = DataType_t::FLOAT, stats_type = DataType_t::FLOAT;
  bool null_o = false;
};
using Before = std::function<void(graph::Graph&, Operands&, SDPA_backward_attributes&)>;
using After = std::function<void(graph::Graph&, TensorPtr& q, TensorPtr& dq, TensorPtr& dk)>;
struct ErrorCase {
  const char* label;
  Before before;
  After after;
  error_code_t code;
  std::vector<std::string> mentions;  // besides the node name
};

TEST(SdpaBackwardApi, ErrorsNameNodeAttributeAndValue) {
  const DataType_t i32 = DataType_t::INT32, f16 = DataType_t::HALF;
  const DataType_t i64 = DataType_t::INT64, u8 = DataType_t::UINT8;
  auto bias = [](graph::Graph& g) { return input(g, "bias", {2, 1, 17, 11}); };
  auto sink = [](graph::Graph& g) { return input(g, "sink", {1, 4, 1, 1}); };
  auto named = [](graph::Graph& g, const char* name) { return g.tensor(graph::Tensor_attributes().set_name(name)); };
  // One row per error path: what is wrong, the code, and what the message must name.
  // clang-format off
  const std::vector<ErrorCase> cases = {
      {"rank", [](auto&, auto& in, auto&) { in.q = {2, 4, 17}; }, nullptr, E::INVALID_VALUE, {"Q.dim", "[2, 4, 17]"}},
      {"batch", [](auto&, auto& in, auto&) { in.k = {3, 2, 11, 24}; }, nullptr, E::INVALID_VALUE, {"K.dim", "batch"}},
      {"k_heads", [](auto&, auto& in, auto&) { in.k = {2, 3, 11, 24}; }, nullptr, E::INVALID_VALUE, {"K.dim", "heads"}},
      {"d_qk", [](auto&, auto& in, auto&) { in.k = {2, 2, 11, 32}; }, nullptr, E::INVALID_VALUE, {"K.dim", "head dim"}},
      {"s_kv", [](auto&, auto& in, auto&) { in.v = {2, 2, 10, 16}; }, nullptr, E::INVALID_VALUE,
       {"V.dim", "[2, 2, 10, 16]"}},
      {"int_q", [](auto&, auto& in, auto&) { in.q_type = i32; }, nullptr, E::INVALID_VALUE, {"Q.data_type", "INT32"}},
      {"null_o", [](auto&, auto& in, auto&) { in.null_o = true; }, nullptr, E::ATTRIBUTE_NOT_SET, {"O"}},
      {"o_dims", [](auto&, auto& in, auto&) { in.o = {2, 4, 17, 24}; }, nullptr, E::INVALID_VALUE,
       {"O.dim", "[2, 4, 17, 24]", "[2, 4, 17, 16]"}},
      {"do_dims", [](auto&, auto& in, auto&) { in.d_o = {2, 4, 16, 16}; }, nullptr, E::INVALID_VALUE,
       {"DO.dim", "[2, 4, 16, 16]"}},
      {"stats_dims", [](auto&, auto& in, auto&) { in.stats = {2, 4, 17, 2}; }, nullptr, E::INVALID_VALUE,
       {"STATS", "[2, 4, 17, 2]", "[2, 4, 17, 1]"}},
      {"stats_type", [](auto&, auto& in, auto&) { in.stats_type = f16; }, nullptr, E::INVALID_VALUE, {"STATS", "HALF"}},
      {"bias_dims", [](auto& g, auto&, auto& a) { a.set_bias(input(g, "bias", {1, 2, 17, 11})); }, nullptr,
       E::INVALID_VALUE, {"BIAS", "[1, 2, 17, 11]"}},
      {"dbias_without_bias", [=](auto& g, auto&, auto& a) { a.set_dbias(named(g, "dbias")); }, nullptr,
       E::INVALID_VALUE, {"DBIAS", "BIAS input"}},
      {"dbias_dims", [=](auto& g, auto&, auto& a) { a.set_bias(bias(g)).set_dbias(input(g, "dbias", {2, 4, 17, 11})); },
       nullptr, E::SHAPE_DEDUCTION_FAILED, {"DBIAS.dim", "[2, 4, 17, 11]", "[2, 1, 17, 11]"}},
      {"dbias_type",
       [=](auto& g, auto&, auto& a) { a.set_bias(bias(g)).set_dbias(input(g, "dbias", {2, 1, 17, 11}, i32)); },
       nullptr, E::INVALID_VALUE, {"DBIAS.data_type", "INT32"}},
      {"dsink_without_sink", [=](auto& g, auto&, auto& a) { a.set_dsink_token(named(g, "dsink")); }, nullptr,
       E::INVALID_VALUE, {"DSINK_TOKEN", "SINK_TOKEN input"}},
      {"dsink_type",
       [=](auto& g, auto&, auto& a) { a.set_sink_token(sink(g)).set_dsink_token(input(g, "ds", {1, 4, 1, 1}, f16)); },
       nullptr, E::INVALID_VALUE, {"DSINK_TOKEN.data_type", "HALF"}},
      {"dsink_dims",
       [=](auto& g, auto&, auto& a) { a.set_sink_token(sink(g)).set_dsink_token(input(g, "ds", {1, 2, 1, 1})); },
       nullptr, E::SHAPE_DEDUCTION_FAILED, {"DSINK_TOKEN.dim", "[1, 2, 1, 1]"}},
      {"sink_shape", [](auto& g, auto&, auto& a) { a.set_sink_token(input(g, "sink", {1, 2, 1, 1})); }, nullptr,
       E::INVALID_VALUE, {"SINK_TOKEN", "[1, 2, 1, 1]"}},
      {"padding_no_lengths", [](auto&, auto&, auto& a) { a.set_padding_mask(true); }, nullptr, E::ATTRIBUTE_NOT_SET,
       {"SEQ_LEN_Q", "padding_mask"}},
      {"lengths_without_padding", [=](auto& g, auto&, auto& a) { a.set_seq_len_kv(input(g, "l", {2, 1, 1, 1}, i32)); },
       nullptr, E::INVALID_VALUE, {"SEQ_LEN_KV", "padding_mask"}},
      {"length_type",
       [](auto& g, auto&, auto& a) {
         a.set_padding_mask(true).set_seq_len_q(input(g, "lq", {2, 1, 1, 1}, i32));
         a.set_seq_len_kv(input(g, "lkv", {2, 1, 1, 1}, DataType_t::INT64));
       },
       nullptr, E::INVALID_VALUE, {"SEQ_LEN_KV", "INT64"}},
      {"scale_shape", [](auto& g, auto&, auto& a) { a.set_attn_scale(input(g, "scale", {1, 2, 1, 1})); }, nullptr,
       E::INVALID_VALUE, {"ATTN_SCALE", "[1, 2, 1, 1]"}},
      {"scale_twice", [](auto& g, auto&, auto& a) { a.set_attn_scale(0.5f).set_attn_scale(g.tensor(0.25f)); }, nullptr,
       E::INVALID_VALUE, {"attn_scale", "= 0.5:"}},
      {"left_bound", [](auto&, auto&, auto& a) { a.set_diagonal_band_left_bound(-1); }, nullptr, E::INVALID_VALUE,
       {"diagonal_band_left_bound", "-1"}},
      {"right_bound", [](auto&, auto&, auto& a) { a.set_diagonal_band_right_bound(-3); }, nullptr, E::INVALID_VALUE,
       {"diagonal_band_right_bound", "-3"}},
      {"ragged", nullptr,
       [](auto& g, auto& q, auto&, auto&) { q->set_ragged_offset(input(g, "ro", {3, 1, 1, 1}, i32)); },
       E::INVALID_VALUE, {"Q.ragged_offset"}},
      {"cu_and_seq_len",
       [](auto& g, auto&, auto& a) {
         a.set_padding_mask(true).set_seq_len_q(input(g, "lq", {2, 1, 1, 1}, i32));
         a.set_cu_seq_len_q(input(g, "cq", {3}, i32)).set_seq_len_kv(input(g, "lkv", {2, 1, 1, 1}, i32));
       },
       nullptr, E::INVALID_VALUE, {"CU_SEQ_LEN_Q", "not both"}},
      {"cu_without_padding", [](auto& g, auto&, auto& a) { a.set_cu_seq_len_kv(input(g, "ckv", {3}, i32)); }, nullptr,
       E::INVALID_VALUE, {"CU_SEQ_LEN_KV", "padding_mask"}},
      {"cu_dims",
       [](auto& g, auto&, auto& a) {
         a.set_padding_mask(true).set_cu_seq_len_q(input(g, "cq", {2}, i32));
         a.set_seq_len_kv(input(g, "lkv", {2, 1, 1, 1}, i32));
       },
       nullptr, E::INVALID_VALUE, {"CU_SEQ_LEN_Q", "[2]", "[3, 1, 1, 1]"}},
      {"dq_ragged_offset_dims",
       [](auto& g, auto&, auto& a) {
         a.set_padding_mask(true).set_seq_len_q(input(g, "lq", {2, 1, 1, 1}, i32));
         a.set_seq_len_kv(input(g, "lkv", {2, 1, 1, 1}, i32));
       },
       [](auto& g, auto&, auto& dq, auto&) { dq->set_ragged_offset(input(g, "ro", {2, 1, 1, 1}, i32)); },
       E::INVALID_VALUE, {"DQ.ragged_offset", "[2, 1, 1, 1]", "[3, 1, 1, 1]"}},
      {"max_total", [](auto&, auto&, auto& a) { a.set_max_total_seq_len_kv(0); }, nullptr, E::INVALID_VALUE,
       {"max_total_seq_len_kv", "0"}},
      {"block_mask_dims", [](auto& g, auto&, auto& a) { a.set_block_mask(input(g, "bm", {2, 1, 1, 2}, u8)); },
       nullptr, E::INVALID_VALUE, {"BLOCK_MASK", "[2, 1, 1, 2]", "[2 or 1, 4 or 1, 1, 1]"}},
      {"block_mask_type", [](auto& g, auto&, auto& a) { a.set_block_mask(input(g, "bm", {1, 1, 1, 1})); }, nullptr,
       E::INVALID_VALUE, {"BLOCK_MASK", "UINT8 or BOOLEAN"}},
      {"block_mask_tiles", [](auto&, auto&, auto& a) { a.set_block_mask_tile_size(0, 64); }, nullptr,
       E::INVALID_VALUE, {"block_mask_tile_size", "0x64"}},
      {"dropout_probability",
       [](auto& g, auto&, auto& a) { a.set_dropout(1.0f, input(g, "s", {1}, i64), input(g, "o", {1}, i64)); }, nullptr,
       E::INVALID_VALUE, {"dropout_probability", "= 1:"}},
      {"dropout_seed_missing", [](auto& g, auto&, auto& a) { a.set_dropout(0.1f, nullptr, input(g, "o", {1}, i64)); },
       nullptr, E::ATTRIBUTE_NOT_SET, {"DROPOUT_SEED"}},
      {"dropout_seed_type",
       [](auto& g, auto&, auto& a) { a.set_dropout(0.1f, input(g, "s", {1}), input(g, "o", {1}, i64)); }, nullptr,
       E::INVALID_VALUE, {"DROPOUT_SEED", "FLOAT"}},
      {"dropout_both",
       [](auto& g, auto&, auto& a) {
         a.set_dropout(0.1f, input(g, "s", {1}, i64), input(g, "o", {1}, i64));
         a.set_dropout(input(g, "m", {1, 4, 17, 11}, u8), input(g, "sc", {1}));
       },
       nullptr, E::INVALID_VALUE, {"DROPOUT_MASK", "not both"}},
      {"dropout_mask_dims",
       [](auto& g, auto&, auto& a) { a.set_dropout(input(g, "m", {1, 4, 17, 10}, u8), input(g, "sc", {1})); },
       nullptr, E::INVALID_VALUE, {"DROPOUT_MASK", "[1, 4, 17, 10]", "[2 or 1, 4 or 1, 17, 11]"}},
      {"dropout_mask_without_scale",
       [](auto& g, auto&, auto& a) { a.set_dropout(input(g, "m", {1, 4, 17, 11}, u8), nullptr); }, nullptr,
       E::ATTRIBUTE_NOT_SET, {"DROPOUT_SCALE"}},
      {"dropout_scale_inv_type",
       [](auto& g, auto&, auto& a) {
         a.set_dropout(input(g, "m", {1, 4, 17, 11}, u8), input(g, "sc", {1}), input(g, "si", {1}, i32));
       },
       nullptr, E::INVALID_VALUE, {"DROPOUT_SCALE_INV", "INT32"}},
      {"dq_dims", nullptr, [](auto&, auto&, auto& dq, auto&) { dq->set_dim({2, 4, 17, 16}); },
       E::SHAPE_DEDUCTION_FAILED, {"DQ.dim", "[2, 4, 17, 16]", "[2, 4, 17, 24]"}},
      {"dk_type", nullptr, [](auto&, auto&, auto&, auto& dk) { dk->set_data_type(DataType_t::INT8); }, E::INVALID_VALUE,
       {"DK.data_type", "INT8"}},
  };
  // clang-format on
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.label);
    graph::Graph g;
    g.set_io_data_type(DataType_t::FLOAT);
    Operands in;
    SDPA_backward_attributes a;
    a.set_name("attn_bwd");
    if (c.before) c.before(g, in, a);
    TensorPtr q = input(g, "q", in.q, in.q_type);
    TensorPtr o = in.null_o ? nullptr : input(g, "o", in.o);
    auto [dq, dk, dv] = g.sdpa_backward(q, input(g, "k", in.k), input(g, "v", in.v), o, input(g, "dO", in.d_o),
                                        input(g, "stats", in.stats, in.stats_type), a);
    for (const auto& t : {dq, dk, dv}) t->set_output(true);
    if (c.after) c.after(g, q, dq, dk);
    const error_t e = g.validate();
    EXPECT_EQ(e.get_code(), c.code) << e.get_message();
    EXPECT_NE(e.get_message().find("attn_bwd"), std::string::npos) << e.get_message();
    for (const auto& m : c.mentions)
      EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  }
}

// Padding rows, rows with no visible key and keys that no row sees get exactly zero gradient, never
// NaN (Stats is -inf on those rows), with and without a sink.
TEST(SdpaBackward, MaskedRowsAndKeysGetExactZeros) {
  for (bool with_sink : {false, true}) {
    SCOPED_TRACE(with_sink ? "sink" : "no sink");
    Case c = make_case("masked", base(33, 17), [&](Case& k) {
      k.p.right_bound = 0, k.p.bottom_right = true, k.p.sink = with_sink;
      k.p.seq_len_q = {33, 20}, k.p.seq_len_kv = {17, 12}, k.p.bias_dim = {2, 4, 33, 17};
    });
    Ran r = run_case(c, 9);
    ASSERT_TRUE(r.s);
    const SdpaGradients got = read_gradients(*r.s);
    const SdpaProblem& p = c.p;
    for (int64_t b = 0; b < p.b; ++b)
      for (int64_t h = 0; h < p.h_q; ++h)
        for (int64_t i = 0; i < p.s_q; ++i) {
          const int64_t rows = p.seq_len_q[static_cast<size_t>(b)], keys = p.seq_len_kv[static_cast<size_t>(b)];
          const int64_t row = (b * p.h_q + h) * p.s_q + i;
          const bool dead = i >= rows || i + keys - rows < 0;
          for (int64_t d = 0; d < p.d_qk; ++d) {
            const double x = got.dq[static_cast<size_t>(row * p.d_qk + d)];
            ASSERT_TRUE(!std::isnan(x) && (!dead || x == 0.0)) << "row " << row << ": " << x;
          }
          for (int64_t j = 0; j < p.s_kv; ++j) {
            const bool masked = dead || j >= keys || j > i + keys - rows;
            const double x = got.dbias[static_cast<size_t>(row * p.s_kv + j)];
            ASSERT_TRUE(!masked || x == 0.0) << "row " << row << " key " << j << ": " << x;
          }
        }
    for (int64_t n = 0; n < static_cast<int64_t>(got.dk.size()); ++n) {
      const int64_t b = n / (p.h_k * p.s_kv * p.d_qk), j = n / p.d_qk % p.s_kv;
      ASSERT_TRUE(j < p.seq_len_kv[static_cast<size_t>(b)] || got.dk[static_cast<size_t>(n)] == 0.0) << n;
    }
    for (int64_t n = 0; n < static_cast<int64_t>(got.dv.size()); ++n) {
      const int64_t b = n / (p.h_v * p.s_kv * p.d_v), j = n / p.d_v % p.s_kv;
      ASSERT_TRUE(j < p.seq_len_kv[static_cast<size_t>(b)] || got.dv[static_cast<size_t>(n)] == 0.0) << n;
    }
    expect_gradients_close(got,
                           sdpa_backward_naive(naive_problem(c, r.d), r.d.q, r.d.k, r.d.v, r.d.d_o, r.d.bias, r.d.sink),
                           tolerance(c));
  }
}

// The backward trusts the saved Stats: a row they mark empty (-inf) gets no gradient, never NaN.
TEST(SdpaBackward, RowsWhoseStatsAreMinusInfinityGetNoGradient) {
  Ran r = run_case(make_case("empty_by_stats", base(), [](Case&) {}), 2);
  ASSERT_TRUE(r.s);
  r.s->buffer(r.s->stats).set(0, -std::numeric_limits<double>::infinity());
  ASSERT_TRUE(build_and_run(r.s->g, r.s->all()).is_good());
  const SdpaGradients got = read_gradients(*r.s);
  for (size_t d = 0; d < 12; ++d) EXPECT_EQ(got.dq[d], 0.0) << d;
  for (const auto* grad : {&got.dq, &got.dk, &got.dv})
    for (double x : *grad) ASSERT_FALSE(std::isnan(x));
}

// The reductions over GQA groups, broadcast bias dims and rows run in one fixed order.
TEST(SdpaBackward, RunsAreBitwiseReproducible) {
  Case c = make_case("repeat", base(), [](Case& k) {
    k.p.h_k = 1, k.p.h_v = 2, k.p.bias_dim = {1, 1, 17, 33}, k.p.sink = true, k.io = DataType_t::BFLOAT16;
  });
  Ran r = run_case(c, 4);
  ASSERT_TRUE(r.s);
  std::vector<std::vector<uint8_t>> first;
  for (const TensorPtr& t : {r.s->dq, r.s->dk, r.s->dv, r.s->dbias, r.s->dsink}) {
    first.push_back(r.s->buffer(t).bytes);
    r.s->buffer(t).poison();
  }
  ASSERT_TRUE(build_and_run(r.s->g, r.s->all()).is_good());
  size_t n = 0;
  for (const TensorPtr& t : {r.s->dq, r.s->dk, r.s->dv, r.s->dbias, r.s->dsink})
    EXPECT_EQ(r.s->buffer(t).bytes, first[n++]);
}

TEST(SdpaBackward, JsonRoundTripIsBitwiseIdentical) {
  for (ScaleAs scale_as : {ScaleAs::ATTRIBUTE, ScaleAs::TENSOR, ScaleAs::PASS_BY_VALUE}) {
    Case c = make_case("json", base(33, 17), [&](Case& k) {
      k.p.h_k = 2, k.p.h_v = 1, k.p.bias_dim = {1, 4, 33, 17}, k.p.seq_len_q = {30, 33}, k.p.seq_len_kv = {17, 9};
      k.p.left_bound = 6, k.p.right_bound = 2, k.p.bottom_right = true, k.p.sink = true, k.p.alibi = true;
      k.p.stats_use_log2 = true, k.layout = Layout::BSHD, k.scale_as = scale_as;
    });
    Ran r = run_case(c, 11);
    ASSERT_TRUE(r.s);
    const std::vector<TensorPtr> outs{r.s->dq, r.s->dk, r.s->dv, r.s->dbias, r.s->dsink};
    std::vector<std::vector<uint8_t>> first;
    for (const TensorPtr& t : outs) first.push_back(r.s->buffer(t).bytes);
    std::string text;
    ASSERT_TRUE(r.s->g.serialize(text).is_good());
    const nlohmann::json doc = nlohmann::json::parse(text);
    ASSERT_EQ(doc["nodes"][0]["tag"], "SDPA_BACKWARD");
    EXPECT_EQ(doc["nodes"][0]["deterministic_algorithm"], true);
    graph::Graph replay;
    auto e = replay.deserialize(text);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    for (const TensorPtr& t : outs) r.s->buffer(t).poison();
    e = build_and_run(replay, r.s->all());
    ASSERT_TRUE(e.is_good()) << e.get_message();
    for (size_t n = 0; n < outs.size(); ++n) EXPECT_EQ(r.s->buffer(outs[n]).bytes, first[n]) << n;
    std::string again;
    ASSERT_TRUE(replay.serialize(again).is_good());
    EXPECT_EQ(again, text);

    nlohmann::json bad = doc;
    bad["nodes"][0]["implementation"] = "FASTEST";
    e = graph::Graph().deserialize(bad.dump());
    EXPECT_EQ(e.get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT);
    EXPECT_NE(e.get_message().find("FASTEST"), std::string::npos) << e.get_message();
  }
}

TEST(SdpaBackward, SequenceLengthOutOfRangeFailsAndLeavesOutputsUntouched) {
  Case c = make_case("bad_len", base(), [](Case& k) { k.p.seq_len_q = {17, 17}, k.p.seq_len_kv = {33, 33}; });
  const Data d = random_data(c, 3);
  const SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  s->buffer(s->len_kv).set(0, 34);
  const std::vector<uint8_t> poisoned = s->buffer(s->dk).bytes;
  auto e = build_and_run(s->g, s->all());
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("SEQ_LEN_KV"), std::string::npos) << e.get_message();
  EXPECT_NE(e.get_message().find("34 at batch 0"), std::string::npos) << e.get_message();
  EXPECT_EQ(s->buffer(s->dk).bytes, poisoned);
}

// A training graph: forward and backward in one graph, O and Stats passed as virtual tensors.
TEST(SdpaBackward, ChainsAfterTheForwardInOneGraph) {
  Case c = make_case("chained", base(), [](Case& k) {
    k.p.right_bound = 0, k.p.bottom_right = true, k.p.bias_dim = {1, 4, 17, 33}, k.p.sink = true;
  });
  const Data d = random_data(c, 21);
  Bound s;
  with_types(s.g, c);
  graph::SDPA_attributes fwd;
  declare_inputs(s, c, d, fwd);
  auto [o, stats] = s.g.sdpa(s.q, s.k, s.v, fwd.set_generate_stats(true));
  const TensorPtr d_o = input(s.g, "dO", {2, 4, 17, 8});
  SDPA_backward_attributes bwd;
  bwd.set_name("attn_bwd").set_attn_scale(static_cast<float>(d.scale)).set_causal_mask_bottom_right(true);
  const TensorPtr dbias = s.g.tensor(graph::Tensor_attributes().set_name("dbias"));
  const TensorPtr dsink = s.g.tensor(graph::Tensor_attributes().set_name("dsink"));
  bwd.set_bias(s.bias).set_dbias(dbias).set_sink_token(s.sink).set_dsink_token(dsink);
  auto [dq, dk, dv] = s.g.sdpa_backward(s.q, s.k, s.v, o, d_o, stats, bwd);
  for (const TensorPtr& t : {dq, dk, dv}) t->set_output(true);
  auto e = s.g.validate();
  ASSERT_TRUE(e.is_good()) << e.get_message();
  bind_inputs(s, c.p, d);
  s.set(d_o, d.d_o);
  for (const TensorPtr& t : {dq, dk, dv, dbias, dsink}) s.buffer(t).poison();
  e = build_and_run(s.g, s.all());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  SdpaGradients got{s.buffer(dq).values(), s.buffer(dk).values(), s.buffer(dv).values(), s.buffer(dbias).values(),
                    s.buffer(dsink).values()};
  expect_gradients_close(got, sdpa_backward_naive(naive_problem(c, d), d.q, d.k, d.v, d.d_o, d.bias, d.sink),
                         tolerance(c));
}

// The comparison can fail: the causal gradients are far from those of the unmasked formula.
TEST(SdpaBackward, CheckerDetectsAWrongMask) {
  Case c = make_case("checker", base(), [](Case& k) { k.p.right_bound = 0; });
  Ran r = run_case(c, 5);
  ASSERT_TRUE(r.s);
  SdpaProblem unmasked = naive_problem(c, r.d);
  unmasked.right_bound.reset();
  const SdpaGradients wrong = sdpa_backward_naive(unmasked, r.d.q, r.d.k, r.d.v, r.d.d_o);
  EXPECT_GT(compare(read_gradients(*r.s).dq, wrong.dq).max_abs, 0.05);
  EXPECT_GT(compare(read_gradients(*r.s).dk, wrong.dk).max_abs, 0.05);
}

}  // namespace
}  // namespace frost::test::sdpa_backward
