// A cudnn plan's execute() captured in a CUDA graph and replayed: the graph keeps the buffer pointers
// it was captured with, so new contents written into the same buffers must give new, correct results.
#include <cmath>

#include "cudnn_gpu_util.h"

namespace frost::test {
namespace {

constexpr DataType_t BF16 = DataType_t::BFLOAT16, F32 = DataType_t::FLOAT;

// Runs c once on the cudnn engine, captures one execute() on a fresh stream, then twice writes new
// input values into the same device buffers, poisons the outputs, replays the graph and checks.
void check_graph_replay(CudnnCase& c) {
  SCOPED_TRACE(c.name);
  CudnnRun r;
  std::string message;
  bool declined = false;
  ASSERT_TRUE(run_cudnn(c, r, message, declined)) << message;
  check_outputs(c, r);

  const auto outs = graph_outputs(c.g);
  auto is_out = [&](const DeviceTensor& b) { return std::count(outs.begin(), outs.end(), b.host.t) > 0; };
  std::mt19937_64 rng(977);
  std::vector<uint8_t> before;  // the first output as the previous run wrote it
  auto refill = [&](int) {
    before.clear();
    for (auto& b : r.buffers) {
      if (is_out(*b)) {
        if (before.empty()) before = b->host.bytes;
        b->host.poison();
      } else if (c.fills.find(b->host.t.get()) == c.fills.end()) {
        b->host.fill_random(rng, -1, 1);
      }
      b->upload();
    }
  };
  auto check = [&](int) {
    for (auto& b : r.buffers)
      if (is_out(*b)) b->download();
    for (auto& b : r.buffers)
      if (is_out(*b)) {
        EXPECT_NE(b->host.bytes, before) << "the replay left " << b->host.t->get_name() << " as the last run wrote it";
        break;
      }
    check_outputs(c, r);
  };
  Handle h(Device::cuda(0));
  EXPECT_NO_FATAL_FAILURE(capture_and_replay(
      h, [&] { return c.g.execute_plan_at_index(h, r.pack, r.workspace, r.index); }, 2, refill, check));
}

TEST(CudnnGpuGraphCapture, MatmulPlanReplaysWithNewInputs) {
  REQUIRE_CUDA_DEVICE();
  CudnnCase c{"captured matmul bf16 [1,192,128]x[1,128,160]"};
  c.g.set_io_data_type(BF16).set_intermediate_data_type(F32).set_compute_data_type(F32);
  auto y = c.g.matmul(input(c.g, "a", {1, 192, 128}, BF16), input(c.g, "b", {1, 128, 160}, BF16),
                      graph::Matmul_attributes());
  y->set_output(true).set_data_type(BF16);
  check_graph_replay(c);
}

TEST(CudnnGpuGraphCapture, SdpaForwardPlanReplaysWithNewInputs) {
  REQUIRE_CUDA_DEVICE();
  CudnnCase c{"captured sdpa fwd bf16 b2 h4 s128 d64 causal"};
  c.g.set_io_data_type(BF16).set_intermediate_data_type(F32).set_compute_data_type(F32);
  auto q = input(c.g, "q", {2, 4, 128, 64}, BF16), k = input(c.g, "k", {2, 4, 128, 64}, BF16);
  auto v = input(c.g, "v", {2, 4, 128, 64}, BF16);
  graph::SDPA_attributes a;
  a.set_attn_scale(0.125f).set_generate_stats(true).set_diagonal_band_right_bound(0);
  auto [o, stats] = c.g.sdpa(q, k, v, a);
  o->set_output(true).set_data_type(BF16);
  stats->set_output(true).set_data_type(F32);
  check_graph_replay(c);
}

}  // namespace
}  // namespace frost::test
