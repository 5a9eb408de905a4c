// The cudnn engine on the GPU: pointwise, matmul, reduction, normalization and convolution graphs
// against the CPU reference, and plans replayed from (engine id, knobs).
#include "cudnn_gpu_util.h"

namespace frost::test {
namespace {

using M = PointwiseMode_t;
using PA = graph::Pointwise_attributes;
constexpr DataType_t BF16 = DataType_t::BFLOAT16, F16 = DataType_t::HALF, F32 = DataType_t::FLOAT;

void context(graph::Graph& g, DataType_t io) {
  g.set_io_data_type(io).set_intermediate_data_type(F32).set_compute_data_type(F32);
}

TEST(CudnnGpu, LibraryIsFound) {
  REQUIRE_CUDA_DEVICE();
  std::string why;
  const auto* lib = detail::cudnn_library(&why);
  ASSERT_NE(lib, nullptr) << why;
  std::printf("[cudnn] library %s version %lld\n", lib->path.c_str(), static_cast<long long>(lib->version));
}

TEST(CudnnGpu, Pointwise) {
  REQUIRE_CUDA_DEVICE();
  {
    CudnnCase c{"add broadcast bf16 [2,3,17,33]+[1,3,1,33]"};
    context(c.g, BF16);
    auto a = input(c.g, "a", {2, 3, 17, 33}, BF16), b = input(c.g, "b", {1, 3, 1, 33}, BF16);
    c.g.pointwise(a, b, PA().set_mode(M::ADD))->set_output(true).set_data_type(BF16);
    c.acceptable_decline = "offer no engine";  // cuDNN 9.19 on the H200: no engine for this broadcast
    check_case(c);
  }
  {
    CudnnCase c{"relu(a*b+c) fp32 [100,37]"};
    context(c.g, F32);
    auto a = input(c.g, "a", {100, 37}), b = input(c.g, "b", {100, 37}), d = input(c.g, "c", {1, 37});
    auto y = c.g.pointwise(c.g.pointwise(a, b, PA().set_mode(M::MUL)), d, PA().set_mode(M::ADD));
    c.g.pointwise(y, PA().set_mode(M::RELU_FWD))->set_output(true);
    check_case(c);
  }
  for (M mode : {M::GELU_BWD, M::TANH_BWD, M::SIGMOID_BWD}) {
    CudnnCase c{std::string(to_string(mode)) + " fp32 [8,1000]"};
    context(c.g, F32);
    auto dy = input(c.g, "dy", {8, 1000}), x = input(c.g, "x", {8, 1000});
    c.g.pointwise(dy, x, PA().set_mode(mode))->set_output(true);
    check_case(c);
  }
  for (M mode : {M::SIGMOID_FWD, M::TANH_FWD, M::EXP, M::GELU_APPROX_TANH_FWD, M::SWISH_FWD}) {
    CudnnCase c{std::string(to_string(mode)) + " fp16 [17,256]"};
    context(c.g, F16);
    c.g.pointwise(input(c.g, "x", {17, 256}, F16), PA().set_mode(mode))->set_output(true).set_data_type(F16);
    check_case(c);
  }
  {
    CudnnCase c{"select(a > b, a, b) fp32 [64,65]"};
    context(c.g, F32);
    auto a = input(c.g, "a", {64, 65}), b = input(c.g, "b", {64, 65});
    auto gt = c.g.pointwise(a, b, PA().set_mode(M::CMP_GT));
    gt->set_data_type(DataType_t::BOOLEAN);
    c.g.pointwise(a, b, gt, PA().set_mode(M::BINARY_SELECT))->set_output(true);
    c.acceptable_decline = "offer no engine";  // cuDNN 9.19 on the H200: no engine for compare + select alone
    check_case(c);
  }
}

TEST(CudnnGpu, Matmul) {
  REQUIRE_CUDA_DEVICE();
  auto mm = [](std::string name, std::vector<int64_t> ad, std::vector<int64_t> bd, DataType_t dt, bool epilogue,
               std::vector<int64_t> bs = {}) {
    CudnnCase c{std::move(name)};
    context(c.g, dt);
    auto a = input(c.g, "a", ad, dt), b = input(c.g, "b", bd, dt, bs);
    auto y = c.g.matmul(a, b, graph::Matmul_attributes());
    if (epilogue) {
      std::vector<int64_t> bias_dims(ad.size(), 1);
      bias_dims.back() = bd.back();
      y = c.g.pointwise(y, input(c.g, "bias", bias_dims, dt), PA().set_mode(M::ADD));
      y = c.g.pointwise(y, PA().set_mode(M::GELU_FWD));
    }
    y->set_output(true).set_data_type(dt);
    return c;
  };
  auto c1 = mm("matmul bf16 [2,111,64]x[2,64,96]", {2, 111, 64}, {2, 64, 96}, BF16, false);
  check_case(c1);
  auto c2 = mm("matmul fp16 rank 2 [257,128]x[128,64]", {257, 128}, {128, 64}, F16, false);
  check_case(c2);
  auto c3 = mm("matmul+bias+gelu bf16 [1,200,128]x[1,128,256]", {1, 200, 128}, {1, 128, 256}, BF16, true);
  check_case(c3);
  auto c4 = mm("matmul bf16 B broadcast, col-major [3,17,64]x[1,64,32]", {3, 17, 64}, {1, 64, 32}, BF16, false,
               {64 * 32, 1, 64});
  check_case(c4);
  auto c5 = mm("matmul fp32 [64,96]x[96,80]", {64, 96}, {96, 80}, F32, false);
  c5.acceptable_decline = "TF32";
  check_case(c5);
}

// cuDNN 9.19 on the H200 served the sums and offered no engine for the max over a middle axis.
TEST(CudnnGpu, Reduction) {
  REQUIRE_CUDA_DEVICE();
  auto red = [](std::string name, std::vector<int64_t> xd, std::vector<int64_t> yd, ReductionMode_t mode) {
    CudnnCase c{std::move(name)};
    context(c.g, F32);
    auto y = c.g.reduction(input(c.g, "x", xd), graph::Reduction_attributes().set_mode(mode));
    y->set_dim(yd).set_output(true).set_data_type(F32);
    return c;
  };
  auto c1 = red("sum fp32 [4,17,1000] -> [4,17,1]", {4, 17, 1000}, {4, 17, 1}, ReductionMode_t::ADD);
  check_case(c1);
  auto c2 = red("max fp32 [8,300,16] -> [8,1,16]", {8, 300, 16}, {8, 1, 16}, ReductionMode_t::MAX);
  c2.acceptable_decline = "offer no engine";
  check_case(c2);
  CudnnCase c3{"sum of squares fp32 [64,512] -> [64,1]"};
  context(c3.g, F32);
  auto x = input(c3.g, "x", {64, 512});
  auto sq = c3.g.pointwise(x, x, PA().set_mode(M::MUL));
  auto y = c3.g.reduction(sq, graph::Reduction_attributes().set_mode(ReductionMode_t::ADD));
  y->set_dim({64, 1}).set_output(true).set_data_type(F32);
  check_case(c3);
}

TEST(CudnnGpu, Normalization) {
  REQUIRE_CUDA_DEVICE();
  for (auto [dt, phase] : {std::pair{F32, NormFwdPhase_t::TRAINING}, {BF16, NormFwdPhase_t::INFERENCE}}) {
    CudnnCase c{"layernorm " + std::string(to_string(dt)) + " " + std::string(to_string(phase)) + " [64,768]"};
    context(c.g, dt);
    auto x = input(c.g, "x", {64, 768}, dt);
    auto [y, mean, inv] =
        c.g.layernorm(x, input(c.g, "scale", {1, 768}, F32), input(c.g, "bias", {1, 768}, F32),
                      graph::Layernorm_attributes().set_forward_phase(phase).set_epsilon(c.g.tensor(1e-5f)));
    y->set_output(true).set_data_type(dt);
    if (mean) mean->set_output(true).set_data_type(F32);
    if (inv) inv->set_output(true).set_data_type(F32);
    check_case(c);
  }
  {
    CudnnCase c{"rmsnorm fp32 training [33,1024]"};
    context(c.g, F32);
    auto [y, inv] = c.g.rmsnorm(
        input(c.g, "x", {33, 1024}), input(c.g, "scale", {1, 1024}),
        graph::Rmsnorm_attributes().set_forward_phase(NormFwdPhase_t::TRAINING).set_epsilon(c.g.tensor(1e-6f)));
    y->set_output(true);
    inv->set_output(true).set_data_type(F32);
    check_case(c);
  }
  // Backward: saved statistics as a forward would leave them (positive inverse deviations).
  auto stats_fill = [](double lo, double hi) {
    return [lo, hi](HostTensor& t) {
      std::mt19937_64 rng(7);
      t.fill_random(rng, lo, hi);
    };
  };
  {
    CudnnCase c{"layernorm backward fp32 [64,512]"};
    context(c.g, F32);
    auto mean = input(c.g, "mean", {64, 1}), inv = input(c.g, "inv", {64, 1});
    auto [dx, ds, db] =
        c.g.layernorm_backward(input(c.g, "dy", {64, 512}), input(c.g, "x", {64, 512}), input(c.g, "scale", {1, 512}),
                               graph::Layernorm_backward_attributes().set_saved_mean_and_inv_variance(mean, inv));
    dx->set_output(true);
    ds->set_output(true);
    db->set_output(true);
    c.fills[mean.get()] = stats_fill(-0.1, 0.1);
    c.fills[inv.get()] = stats_fill(0.5, 1.5);
    check_case(c);
  }
  {
    CudnnCase c{"rmsnorm backward fp32 with dbias [48,256]"};
    context(c.g, F32);
    auto inv = input(c.g, "inv", {48, 1});
    auto [dx, ds, db] =
        c.g.rmsnorm_backward(input(c.g, "dy", {48, 256}), input(c.g, "x", {48, 256}), input(c.g, "scale", {1, 256}),
                             inv, graph::Rmsnorm_backward_attributes().has_dbias_output(true));
    dx->set_output(true);
    ds->set_output(true);
    db->set_output(true);
    c.fills[inv.get()] = stats_fill(0.5, 1.5);
    check_case(c);
  }
}

std::vector<int64_t> nhwc(int64_t c, int64_t h, int64_t w) { return {c * h * w, 1, w * c, c}; }

TEST(CudnnGpu, Convolution) {
  REQUIRE_CUDA_DEVICE();
  {
    CudnnCase c{"conv fprop fp16 NHWC [2,32,17,17]*[64,32,3,3] pad 1"};
    context(c.g, F16);
    auto y = c.g.conv_fprop(input(c.g, "x", {2, 32, 17, 17}, F16, nhwc(32, 17, 17)),
                            input(c.g, "w", {64, 32, 3, 3}, F16, nhwc(32, 3, 3)),
                            graph::Conv_fprop_attributes().set_padding({1, 1}));
    y->set_output(true).set_data_type(F16).set_stride(nhwc(64, 17, 17));
    check_case(c);
  }
  {
    CudnnCase c{"conv fprop bf16 NCHW stride 2 dilation 2 [1,16,33,33]"};
    context(c.g, BF16);
    auto y = c.g.conv_fprop(input(c.g, "x", {1, 16, 33, 33}, BF16), input(c.g, "w", {32, 16, 3, 3}, BF16),
                            graph::Conv_fprop_attributes().set_stride({2, 2}).set_dilation({2, 2}).set_padding({2, 2}));
    y->set_output(true).set_data_type(BF16);
    check_case(c);
  }
  {
    CudnnCase c{"conv dgrad fp16 NHWC dy [2,64,17,17] w [64,32,3,3]"};
    context(c.g, F16);
    auto dx = c.g.conv_dgrad(input(c.g, "dy", {2, 64, 17, 17}, F16, nhwc(64, 17, 17)),
                             input(c.g, "w", {64, 32, 3, 3}, F16, nhwc(32, 3, 3)),
                             graph::Conv_dgrad_attributes().set_padding({1, 1}));
    dx->set_dim({2, 32, 17, 17}).set_stride(nhwc(32, 17, 17)).set_output(true).set_data_type(F16);
    check_case(c);
  }
  {
    CudnnCase c{"conv wgrad fp16 NHWC dy [2,64,17,17] x [2,32,17,17]"};
    context(c.g, F16);
    auto dw = c.g.conv_wgrad(input(c.g, "dy", {2, 64, 17, 17}, F16, nhwc(64, 17, 17)),
                             input(c.g, "x", {2, 32, 17, 17}, F16, nhwc(32, 17, 17)),
                             graph::Conv_wgrad_attributes().set_padding({1, 1}));
    dw->set_dim({64, 32, 3, 3}).set_stride(nhwc(32, 3, 3)).set_output(true).set_data_type(F16);
    check_case(c);
  }
  {
    CudnnCase c{"conv fprop 1-D fp16 [2,16,65]*[8,16,5] stride 2"};
    context(c.g, F16);
    auto y = c.g.conv_fprop(input(c.g, "x", {2, 16, 65}, F16, {16 * 65, 1, 16}),
                            input(c.g, "w", {8, 16, 5}, F16, {16 * 5, 1, 16}),
                            graph::Conv_fprop_attributes().set_stride({2}));
    y->set_output(true).set_data_type(F16).set_stride({31 * 8, 1, 8});
    check_case(c);
  }
}

// A plan replays from (engine id, knobs): the same engine, the same bits.
TEST(CudnnGpu, PlanReplaysFromEngineIdAndKnobs) {
  REQUIRE_CUDA_DEVICE();
  auto make = [](CudnnCase& c) {
    context(c.g, BF16);
    auto y = c.g.matmul(input(c.g, "a", {1, 256, 128}, BF16), input(c.g, "b", {1, 128, 192}, BF16),
                        graph::Matmul_attributes());
    y->set_output(true).set_data_type(BF16);
  };
  CudnnCase first{"replay"};
  make(first);
  CudnnRun r1;
  std::string message;
  bool declined = false;
  ASSERT_TRUE(run_cudnn(first, r1, message, declined)) << message;
  int64_t id = 0;
  graph::KnobMap knobs;
  ASSERT_TRUE(first.g.get_engine_and_knobs_at_index(r1.index, id, knobs).is_good());
  std::printf("[cudnn] replay of %s (%zu knobs)\n", r1.plan.c_str(), knobs.size());
  ASSERT_GE(id, 0);
  ASSERT_LT(id, 10000);

  CudnnCase second{"replay"};
  make(second);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(second.g.validate().is_good());
  ASSERT_TRUE(second.g.build_operation_graph(h).is_good());
  auto e = second.g.create_execution_plan(id, knobs);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  ASSERT_TRUE(second.g.build_plans(h).is_good());
  std::string name;
  ASSERT_TRUE(second.g.get_plan_name(name).is_good());
  EXPECT_EQ(name, r1.plan);
  // Same inputs, fresh output.
  const auto out = graph_outputs(first.g)[0];
  DeviceTensor o2(out);
  o2.host.poison();
  o2.upload();
  auto pack = r1.pack;
  pack[out->get_uid()] = o2.dev;
  int64_t ws = 0;
  ASSERT_TRUE(second.g.get_workspace_size(ws).is_good());
  void* workspace = nullptr;
  if (ws > 0) CUDA_OK(cudaMalloc(&workspace, static_cast<size_t>(ws)));
  ASSERT_TRUE(second.g.execute(h, pack, workspace).is_good());
  CUDA_OK(cudaDeviceSynchronize());
  o2.download();
  for (const auto& b : r1.buffers)
    if (b->host.t == out) EXPECT_EQ(b->host.bytes, o2.host.bytes) << "replayed plan gives other bits";
  cudaFree(workspace);

  // The serialized plan names the backend engine and rebuilds it.
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(second.g.serialize(bytes).is_good());
  graph::Graph third;
  auto d = third.deserialize(h, bytes);
  ASSERT_TRUE(d.is_good()) << d.get_message();
  ASSERT_TRUE(third.get_plan_name(name).is_good());
  EXPECT_EQ(name, r1.plan);
}

}  // namespace
}  // namespace frost::test
