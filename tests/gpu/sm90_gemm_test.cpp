// The sm90_gemm engine against the fp64 reference: its error stays within 2x the error of the
// reference's own fp32-accumulate-then-round evaluation (the straightforward implementation).
#include "gpu_util.h"

namespace frost::test {
namespace {

using M = PointwiseMode_t;

struct GemmCase {
  int64_t batch, m, n, k;
  DataType_t in = DataType_t::BFLOAT16, out = DataType_t::BFLOAT16;
  bool b_col_major = false, broadcast_b = false, bias = false, residual = false;
  M act = M::NOT_SET;
};

std::string name_of(const GemmCase& c) {
  return "b" + std::to_string(c.batch) + " m" + std::to_string(c.m) + " n" + std::to_string(c.n) + " k" + std::to_string(c.k) +
         " " + std::string(to_string(c.in)) + "->" + std::string(to_string(c.out)) + (c.b_col_major ? " Bcol" : "") +
         (c.broadcast_b ? " Bbcast" : "") + (c.bias ? " +bias" : "") + (c.residual ? " +res" : "") +
         (c.act != M::NOT_SET ? " " + std::string(to_string(c.act)) : "");
}

struct GemmGraph {
  graph::Graph g;
  std::vector<TensorPtr> inputs;
  TensorPtr out;
};

void build(GemmGraph& x, const GemmCase& c) {
  x.g.set_io_data_type(c.out).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  auto a = input(x.g, "a", {c.batch, c.m, c.k}, c.in);
  const int64_t bb = c.broadcast_b ? 1 : c.batch;
  auto b = c.b_col_major ? input(x.g, "b", {bb, c.k, c.n}, c.in, {c.k * c.n, 1, c.k}) : input(x.g, "b", {bb, c.k, c.n}, c.in);
  x.inputs = {a, b};
  TensorPtr y = x.g.matmul(a, b, graph::Matmul_attributes().set_name("mm"));
  if (c.bias) {
    auto bias = input(x.g, "bias", {1, 1, c.n}, c.out);
    x.inputs.push_back(bias);
    y = x.g.pointwise(y, bias, graph::Pointwise_attributes().set_mode(M::ADD));
  }
  if (c.residual) {
    auto r = input(x.g, "residual", {c.batch, c.m, c.n}, c.out);
    x.inputs.push_back(r);
    y = x.g.pointwise(y, r, graph::Pointwise_attributes().set_mode(M::ADD));
  }
  if (c.act != M::NOT_SET) y = x.g.pointwise(y, graph::Pointwise_attributes().set_mode(c.act));
  y->set_output(true).set_data_type(c.out);
  x.out = y;
}

constexpr int64_t kSm90GemmEngineId = 10200;

// knobs empty: the first plan of the heuristics (must be sm90_gemm's); else sm90_gemm's plan with those knobs.
// replay_in_cuda_graph: execute is captured once and replayed on fresh inputs (capture_and_replay).
void run_case(const GemmCase& c, const graph::KnobMap& knobs = {}, bool replay_in_cuda_graph = false) {
  SCOPED_TRACE(name_of(c));
  GemmGraph x;
  build(x, c);
  Handle h(Device::cuda(0));
  if (knobs.empty()) {
    ASSERT_NO_FATAL_FAILURE(build_on(x.g, h, "sm90_gemm"));
  } else {
    ASSERT_NO_FATAL_FAILURE(build_with_knobs(x.g, h, kSm90GemmEngineId, knobs));
  }
  DeviceWorkspace ws(x.g);
  ASSERT_TRUE(ws.ok);
  void* const workspace = ws.ptr;
  std::vector<std::unique_ptr<DeviceTensor>> ins;
  std::mt19937_64 rng(c.m * 7 + c.n * 13 + c.k);
  std::unordered_map<int64_t, void*> pack, host_pack;
  for (auto& t : x.inputs) {
    ins.push_back(std::make_unique<DeviceTensor>(t));
    pack[t->get_uid()] = ins.back()->dev;
    host_pack[t->get_uid()] = ins.back()->host.data();
  }
  DeviceTensor out(x.out);
  pack[x.out->get_uid()] = out.dev;
  auto refill = [&](int) {
    for (auto& in : ins) {
      in->host.fill_random(rng, -1, 1);
      in->upload();
    }
    out.host.poison();
    out.upload();
  };
  if (!replay_in_cuda_graph) {
    refill(0);
    ASSERT_TRUE(x.g.execute(h, pack, workspace).is_good());
    CUDA_OK(cudaDeviceSynchronize());
    expect_within_reference_error(x.g, x.out, host_pack, out);
  } else {
    EXPECT_NO_FATAL_FAILURE(capture_and_replay(
        h, [&] { return x.g.execute(h, pack, workspace); }, 2, refill,
        [&](int) { expect_within_reference_error(x.g, x.out, host_pack, out); }));
  }
}

TEST(Sm90Gemm, DenseShapesLayoutsAndEpilogues) {
  REQUIRE_SM90();
  const GemmCase cases[] = {
      {1, 1, 256, 64},
      {1, 17, 136, 72},
      {1, 111, 1024, 512, DataType_t::BFLOAT16, DataType_t::BFLOAT16, true},
      {3, 1000, 264, 8},
      {4, 333, 512, 1000, DataType_t::BFLOAT16, DataType_t::BFLOAT16, false, true},
      {1, 2048, 2048, 2048},
      {1, 257, 512, 384, DataType_t::HALF, DataType_t::HALF},
      {1, 513, 1024, 512, DataType_t::BFLOAT16, DataType_t::FLOAT},
  };
  for (const auto& c : cases) run_case(c);
  for (M act : {M::RELU_FWD, M::GELU_FWD, M::GELU_APPROX_TANH_FWD, M::SWISH_FWD, M::SIGMOID_FWD}) {
    GemmCase c{2, 129, 512, 256};
    c.bias = true;
    c.act = act;
    run_case(c);
  }
  GemmCase res{1, 255, 256, 1024};
  res.residual = true;
  run_case(res);
  GemmCase fp8{1, 1024, 1024, 1024, DataType_t::FP8_E4M3, DataType_t::BFLOAT16, true};
  run_case(fp8);
}

// The cooperative 128x256 kernel with stream-K tails (STREAM_K=1): 25 tiles split by k over all CTAs and
// 2 x 17 tiles of 128x256 with a k tail, partial tiles reduced through the workspace, whose flags the
// captured execute must reset on every replay.
TEST(Sm90Gemm, StreamKTailsInACudaGraph) {
  REQUIRE_SM90();
  const graph::KnobMap sk{{KnobType_t::TILE_N, 256}, {KnobType_t::STREAM_K, 1}};
  run_case({1, 520, 1280, 4000}, sk, true);
  GemmCase col{1, 300, 4352, 1000};
  col.b_col_major = true;
  run_case(col, sk, true);
  run_case({3, 200, 520, 2000}, sk);
}

TEST(Sm90Gemm, DeclinesWithTheAttributeNamed) {
  REQUIRE_SM90();
  GemmGraph x;
  build(x, {1, 64, 111, 64});  // a row of 111 bf16 is not a whole number of 16-byte units
  Handle h(Device::cuda(0));
  ASSERT_TRUE(x.g.validate().is_good());
  ASSERT_TRUE(x.g.build_operation_graph(h).is_good());
  // Another engine (cudnn) may serve the graph; sm90_gemm's own decline must still name the attribute.
  x.g.create_execution_plans({HeurMode_t::A});
  std::string reasons;
  for (const auto& r : x.g.get_decline_reasons()) reasons += r + "\n";
  EXPECT_NE(reasons.find("sm90_gemm:"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("111"), std::string::npos) << reasons;
}

}  // namespace
}  // namespace frost::test
