// Every lowering's tensor and operation descriptors against a real libcudnn, without a GPU: the
// backend finalizes tensors and operations on the host (operation graphs need a device handle and are
// checked by the GPU tests). Skipped where no libcudnn is found (FROST_CUDNN_PATH or the search).
#include "engines/cudnn/cudnn_lowering.h"

#include "engines/cudnn/cudnn_library.h"
#include "test_util.h"

namespace frost::test {
namespace {

using M = PointwiseMode_t;
constexpr DataType_t BF16 = DataType_t::BFLOAT16;

const detail::CudnnLibrary* library() {
  static std::string why;
  static const auto lib = detail::open_cudnn(why);
  return lib.get();
}

#define REQUIRE_CUDNN() \
  if (!library()) GTEST_SKIP() << "no libcudnn found"

// Lowers a validated graph and finalizes its operation graph (no handle: cuDNN >= 9.8 allows that);
// returns the number of backend operations.
size_t lower(graph::Graph& g) {
  auto v = g.validate();
  EXPECT_TRUE(v.is_good()) << v.get_message();
  detail::Lowered out;
  auto e = detail::lower_graph(*library(), g.state(), nullptr, out);
  EXPECT_TRUE(e.is_good()) << e.get_message();
  return out.ops.size();
}

TEST(CudnnLowering, PointwiseMatmulReductionFinalize) {
  REQUIRE_CUDNN();
  graph::Graph g;
  g.set_io_data_type(BF16).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  auto a = input(g, "a", {64, 32}, BF16);  // rank 2: padded to [1, 64, 32]
  auto b = input(g, "b", {32, 48}, BF16);
  auto bias = input(g, "bias", {1, 48}, BF16);
  auto c = g.matmul(a, b, graph::Matmul_attributes());
  auto y = g.pointwise(c, bias, graph::Pointwise_attributes().set_mode(M::ADD));
  auto z = g.pointwise(y, graph::Pointwise_attributes().set_mode(M::RELU_FWD).set_relu_lower_clip(0.1f));
  auto r = g.reduction(z, graph::Reduction_attributes().set_mode(ReductionMode_t::ADD));
  r->set_dim({64, 1}).set_output(true).set_data_type(DataType_t::FLOAT);
  EXPECT_EQ(lower(g), 4u);
}

TEST(CudnnLowering, BackwardActivationAndSelectFinalize) {
  REQUIRE_CUDNN();
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT)
      .set_intermediate_data_type(DataType_t::FLOAT)
      .set_compute_data_type(DataType_t::FLOAT);
  auto dy = input(g, "dy", {4, 8});
  auto x = input(g, "x", {4, 8});
  auto m = input(g, "m", {4, 8}, DataType_t::BOOLEAN);
  auto dx = g.pointwise(dy, x, graph::Pointwise_attributes().set_mode(M::GELU_BWD));
  auto s = g.pointwise(dx, x, m, graph::Pointwise_attributes().set_mode(M::BINARY_SELECT));
  s->set_output(true);
  EXPECT_EQ(lower(g), 2u);
}

// One normalization per operation graph: the backend refuses several unconnected ones as a pattern.
TEST(CudnnLowering, NormalizationsFinalize) {
  REQUIRE_CUDNN();
  auto make = [](graph::Graph& g) {
    g.set_io_data_type(DataType_t::FLOAT)
        .set_intermediate_data_type(DataType_t::FLOAT)
        .set_compute_data_type(DataType_t::FLOAT);
  };
  const auto train = NormFwdPhase_t::TRAINING;
  {
    graph::Graph g;
    make(g);
    auto [y, mean, inv] =
        g.layernorm(input(g, "x", {16, 64}), input(g, "scale", {1, 64}), input(g, "bias", {1, 64}),
                    graph::Layernorm_attributes().set_forward_phase(train).set_epsilon(g.tensor(1e-5f)));
    y->set_output(true);
    mean->set_output(true);
    inv->set_output(true);
    EXPECT_EQ(lower(g), 1u);
  }
  {
    graph::Graph g;
    make(g);
    auto [y, inv] = g.rmsnorm(input(g, "x", {16, 64}), input(g, "scale", {1, 64}),
                              graph::Rmsnorm_attributes().set_forward_phase(train).set_epsilon(g.tensor(1e-5f)));
    y->set_output(true);
    inv->set_output(true);
    EXPECT_EQ(lower(g), 1u);
  }
  {
    graph::Graph g;
    make(g);
    auto [dx, ds, db] =
        g.rmsnorm_backward(input(g, "dy", {16, 64}), input(g, "x", {16, 64}), input(g, "scale", {1, 64}),
                           input(g, "inv", {16, 1}), graph::Rmsnorm_backward_attributes().has_dbias_output(true));
    dx->set_output(true);
    ds->set_output(true);
    db->set_output(true);
    EXPECT_EQ(lower(g), 1u);
  }
  {
    graph::Graph g;
    make(g);
    auto [dx, ds, db] =
        g.layernorm_backward(input(g, "dy", {16, 64}), input(g, "x", {16, 64}), input(g, "scale", {1, 64}),
                             graph::Layernorm_backward_attributes().set_saved_mean_and_inv_variance(
                                 input(g, "mean", {16, 1}), input(g, "inv", {16, 1})));
    dx->set_output(true);
    ds->set_output(true);
    db->set_output(true);
    EXPECT_EQ(lower(g), 1u);
  }
}

TEST(CudnnLowering, ConvolutionsFinalize) {
  REQUIRE_CUDNN();
  graph::Graph g;
  g.set_io_data_type(DataType_t::HALF).set_compute_data_type(DataType_t::FLOAT);
  const std::vector<int64_t> nhwc{32 * 9 * 9, 1, 9 * 32, 32};
  auto x = input(g, "x", {2, 32, 9, 9}, DataType_t::HALF, nhwc);
  auto w = input(g, "w", {16, 32, 3, 3}, DataType_t::HALF, {32 * 9, 1, 3 * 32, 32});
  auto y = g.conv_fprop(x, w, graph::Conv_fprop_attributes().set_padding({1, 1}));
  y->set_output(true);
  auto x1 = input(g, "x1", {2, 8, 33}, DataType_t::HALF);
  auto w1 = input(g, "w1", {4, 8, 5}, DataType_t::HALF);
  g.conv_fprop(x1, w1, graph::Conv_fprop_attributes().set_stride({2}))->set_output(true);
  EXPECT_EQ(lower(g), 2u);
}

graph::Graph attention(bool backward, bool paged) {
  graph::Graph g;
  g.set_io_data_type(BF16).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  const int64_t b = 2, h = 4, hk = 2, s = 64, d = 64, page = 16;
  auto q = input(g, "q", {b, h, s, d}, BF16);
  auto k = input(g, "k", paged ? std::vector<int64_t>{8, hk, page, d} : std::vector<int64_t>{b, hk, s, d}, BF16);
  auto v = input(g, "v", paged ? std::vector<int64_t>{8, hk, page, d} : std::vector<int64_t>{b, hk, s, d}, BF16);
  auto seq_q = input(g, "seq_q", {b, 1, 1, 1}, DataType_t::INT32);
  auto seq_kv = input(g, "seq_kv", {b, 1, 1, 1}, DataType_t::INT32);
  if (!backward) {
    graph::SDPA_attributes a;
    a.set_attn_scale(0.125f).set_generate_stats(true).set_causal_mask_bottom_right(true).set_padding_mask(true);
    a.set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
    if (paged) {
      a.set_paged_attention_k_table(input(g, "pt_k", {b, 1, 4, 1}, DataType_t::INT32));
      a.set_paged_attention_v_table(input(g, "pt_v", {b, 1, 4, 1}, DataType_t::INT32));
    }
    auto [o, st] = g.sdpa(q, k, v, a);
    o->set_output(true);
    st->set_output(true).set_data_type(DataType_t::FLOAT);
    return g;
  }
  auto o = input(g, "o", {b, h, s, d}, BF16);
  auto dO = input(g, "dO", {b, h, s, d}, BF16);
  auto stats = input(g, "stats", {b, h, s, 1}, DataType_t::FLOAT);
  graph::SDPA_backward_attributes a;
  a.set_attn_scale(0.125f).set_causal_mask(true).set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
  auto [dq, dk, dv] = g.sdpa_backward(q, k, v, o, dO, stats, a);
  dq->set_output(true);
  dk->set_output(true);
  dv->set_output(true);
  return g;
}

TEST(CudnnLowering, AttentionFinalizes) {
  REQUIRE_CUDNN();
  for (bool paged : {false, true}) {
    auto g = attention(false, paged);
    EXPECT_GT(lower(g), 10u) << "paged " << paged;
  }
  auto g = attention(true, false);
  EXPECT_GT(lower(g), 20u);
}

// Pointwise-only graphs take the packed channels-last view: row-major [8, 1000] is [1, 1000, 1, 8].
TEST(CudnnLowering, ElementwiseGraphsAreChannelsLast) {
  REQUIRE_CUDNN();
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT)
      .set_intermediate_data_type(DataType_t::FLOAT)
      .set_compute_data_type(DataType_t::FLOAT);
  auto x = input(g, "x", {8, 1000});
  auto y = g.pointwise(x, graph::Pointwise_attributes().set_mode(M::GEN_INDEX).set_axis(1));
  y->set_output(true).set_data_type(DataType_t::INT32);
  ASSERT_TRUE(g.validate().is_good());
  detail::Lowered out;
  detail::Lowering l(*library(), g.state(), out);
  ASSERT_TRUE(l.run().is_good());
  detail::BTensor bx;
  ASSERT_TRUE(l.tensor(x, bx).is_good());
  EXPECT_EQ(bx.dims, (std::vector<int64_t>{1, 1000, 1, 8}));
  EXPECT_EQ(bx.strides, (std::vector<int64_t>{8000, 1, 8000, 1000}));
  EXPECT_EQ(l.descriptor_axis(x, 1), 1);  // the contiguous axis sits at position 1
  EXPECT_EQ(l.descriptor_axis(x, 0), 3);
}

TEST(CudnnLowering, DeclinesWhatItDoesNotLower) {
  REQUIRE_CUDNN();
  graph::Graph g;
  g.set_io_data_type(BF16).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  auto q = input(g, "q", {1, 2, 16, 64}, BF16);
  auto k = input(g, "k", {1, 2, 16, 64}, BF16);
  auto v = input(g, "v", {1, 2, 16, 64}, BF16);
  auto [o, st] = g.sdpa(q, k, v, graph::SDPA_attributes().set_alibi_mask(true).set_causal_mask(true));
  o->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  detail::Lowered out;
  detail::Lowering l(*library(), g.state(), out);
  auto e = l.run();
  EXPECT_EQ(e.get_code(), error_code_t::GRAPH_NOT_SUPPORTED);
  EXPECT_NE(e.get_message().find("alibi_mask"), std::string::npos) << e.get_message();

  graph::Graph m;
  m.set_io_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  m.matmul(input(m, "a", {4, 8}), input(m, "b", {8, 4}), graph::Matmul_attributes())->set_output(true);
  ASSERT_TRUE(m.validate().is_good());
  detail::Lowered out2;
  e = detail::lower_graph(*library(), m.state(), nullptr, out2);
  EXPECT_EQ(e.get_code(), error_code_t::GRAPH_NOT_SUPPORTED);
  EXPECT_NE(e.get_message().find("TF32"), std::string::npos) << e.get_message();
}

}  // namespace
}  // namespace frost::test
