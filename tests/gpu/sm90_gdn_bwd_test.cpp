// The sm90_linear_attention engine's GDN backward against the FP64 CPU reference: odd lengths around the
// 64-token chunk, several packed sequences with cu_seqlens (INT32 and INT64, an empty one), GVA, l2norm on and
// off, initial state and its gradient on and off, the final state's gradient on and off, state pools with
// state_indices, BF16 and FP16 with FLOAT or 16-bit gates, outputs and workspace poisoned with NaN, bitwise
// determinism, bad offsets and pool indices that must leave every output untouched, DQ and DK only 8-byte aligned,
// declines by name, and CUDA-graph capture with new inputs on every replay.
// Tolerance: relative L2 error within twice that of the reference run in FP32 against FP64, with a floor for the
// 16-bit rounding of the outputs and of the intermediates the kernels round as FLA's do (the states, U', dU', dP,
// dT and dA products in the input type): 1.5e-2 for BF16, 2.5e-3 for FP16; max abs error within 3x that floor
// times the largest reference value. On the H200 (commit 5643f92) the worst relative L2 errors over these cases
// were 8.8e-3 (BF16, dg under strong decay; 3-4e-3 elsewhere) and 6.3e-4 (FP16).
#include "sm90_linear_attention_bwd_harness.h"

namespace frost::test {
namespace {

using namespace linear_attention_bwd;

TEST(Sm90GdnBackward, CheckerFailsOnWrongValues) {
  std::vector<double> want(1000), got;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double& x : want) x = u(rng);
  got = want;
  const ErrorStats none{};
  EXPECT_TRUE(within(floor_of(false, DT::BFLOAT16), compare(got, want), none, 1.0));
  for (size_t i = 0; i < got.size(); i += 10) got[i] = -got[i];  // a tenth of the signs wrong
  EXPECT_FALSE(within(floor_of(false, DT::BFLOAT16), compare(got, want), none, 1.0));
  got = want;
  got[500] += 0.5;  // one element far off
  EXPECT_FALSE(within(floor_of(false, DT::BFLOAT16), compare(got, want), none, 1.0));
  got = want;
  got[3] = NAN;
  EXPECT_FALSE(within(floor_of(false, DT::BFLOAT16), compare(got, want), none, 1.0));
}

TEST(Sm90GdnBackward, OddLengthsAroundTheChunk) {
  REQUIRE_SM90();
  for (int64_t t : {1, 17, 63, 64, 65, 200, 1000}) {
    Case c;
    c.b = 2, c.t = t;
    c.l2norm = t % 2 == 0;  // without it (and without GVA) the gradient kernel writes DQ and DK itself
    check_case(c);
  }
}

// More (chunk, value head) items than SMs: each persistent CTA of the gradient kernel runs several, every one
// loaded while the one before works (a partial last chunk among them), with and without the direct dQ / dK stores.
TEST(Sm90GdnBackward, SeveralItemsPerGradientCta) {
  REQUIRE_SM90();
  Case c;
  c.t = 2100, c.h = c.hv = 8;  // 33 chunks x 8 heads
  check_case(c);
  c.l2norm = false;
  check_case(c);
  c.h = 4;  // GVA
  check_case(c);
}

// DQ and DK 8-byte aligned only: the gradient kernel writes them 4 bytes at a time instead of staging 16-byte rows.
TEST(Sm90GdnBackward, GradientsOnlyEightByteAligned) {
  REQUIRE_SM90();
  Case c;
  c.t = 300, c.h = c.hv = 4;
  c.l2norm = false;
  c.dqk_shift = 8;
  check_case(c);
}

// More sequences x value heads than half the SMs: the wgmma reverse pass takes all 128 value columns per CTA (two
// warpgroups of dS) and the gradient kernel runs after it; with l2norm, without (direct dQ / dK) and with GVA.
TEST(Sm90GdnBackward, ManySequencesTakeTheWideReversePass) {
  REQUIRE_SM90();
  Case c;
  c.b = 9, c.t = 130, c.h = c.hv = 8;  // 72 sequences x value heads
  check_case(c);
  c.l2norm = false;
  check_case(c);
  c.h = 4;  // GVA
  check_case(c);
  c.b = 20, c.t = 70, c.h = c.hv = 8;  // 160 CTAs of the wide pass: more than one wave
  check_case(c);
}

TEST(Sm90GdnBackward, TypesNormsStatesAndGva) {
  REQUIRE_SM90();
  Case c;
  c.t = 333, c.dt = DT::HALF;
  check_case(c);
  c.gate_dt = DT::HALF;
  check_case(c);
  c = Case{};
  c.t = 333, c.gate_dt = DT::BFLOAT16;
  check_case(c);
  c = Case{};
  c.t = 200, c.l2norm = false, c.scale = 0.05f;
  check_case(c);
  c.init = false;
  check_case(c);
  c.d_final = false;
  check_case(c);
  c = Case{};
  c.b = 3, c.t = 150, c.h = 2, c.hv = 8;  // GVA: four value heads per q/k head
  check_case(c);
  c.dt = DT::HALF;
  check_case(c);
  c = Case{};
  c.t = 700, c.h = 1, c.hv = 1, c.g_lo = -3.0;  // strong decay: exp(G) spans many decades in a chunk
  check_case(c);
}

TEST(Sm90GdnBackward, PackedSequencesAndStatePools) {
  REQUIRE_SM90();
  Case c;
  c.t = 1 + 100 + 64 + 129 + 3;
  c.cu = {0, 1, 101, 101, 165, 294, 297};
  check_case(c);
  c.cu_dt = DT::INT64, c.hv = 4, c.dt = DT::HALF;
  check_case(c);
  c = Case{};
  c.t = 300;
  c.cu = {0, 70, 71, 300};
  c.indices = {5, 0, 3}, c.pool = 7;
  check_case(c);
  c.d_final = false;
  check_case(c);
}

// The recording run on each state pass (KERNEL_CFG, TILE_COLS; without knobs GDN records on the wgmma pass with
// halves of 64 columns at these sizes, beside the chunk kernel), the halves also one launch after the other
// (KERNEL_OVERLAP 0), and with the reverse pass on wgmma (KERNEL_CFG 2): odd lengths, FP16 with GVA, packed
// sequences with a pool, strong decay.
TEST(Sm90GdnBackward, RecordingOnEveryStatePass) {
  REQUIRE_SM90();
  struct Pass {
    int cfg, cols, overlap;
  };
  for (const Pass pass :
       {Pass{0, 32, -1}, {0, 64, -1}, {1, 64, -1}, {1, 64, 0}, {1, 128, -1}, {2, 64, -1}, {2, 128, 0}}) {
    Case c;
    const auto with_pass = [&] { c.kernel_cfg = pass.cfg, c.tile_cols = pass.cols, c.overlap = pass.overlap; };
    with_pass();
    c.b = 2, c.t = 1000;
    check_case(c);
    c.t = 65, c.l2norm = false;
    check_case(c);
    c = Case{};
    with_pass();
    c.b = 3, c.t = 150, c.h = 2, c.hv = 8, c.dt = DT::HALF;
    check_case(c);
    c = Case{};
    with_pass();
    c.t = 300, c.cu = {0, 70, 71, 300}, c.indices = {5, 0, 3}, c.pool = 7;
    check_case(c);
    c = Case{};
    with_pass();
    c.t = 700, c.h = 1, c.hv = 1, c.g_lo = -3.0;
    check_case(c);
  }
}

// Bad offsets or pool indices are found on the device: the launch reports nothing, and nothing is written.
TEST(Sm90GdnBackward, BadOffsetsLeaveOutputsUntouched) {
  REQUIRE_SM90();
  check_bad_offsets(false);
}

TEST(Sm90GdnBackward, DeclinesWhatItCannotServe) {
  REQUIRE_SM90();
  auto bwd_graph = [](graph::Graph& g, DT dt, int64_t kd, int64_t vd, bool kda) {
    g.set_io_data_type(dt).set_compute_data_type(DT::FLOAT);
    auto q = input(g, "q", {1, 8, 1, kd}, dt), k = input(g, "k", {1, 8, 1, kd}, dt);
    auto v = input(g, "v", {1, 8, 1, vd}, dt), d_o = input(g, "do", {1, 8, 1, vd}, dt);
    const auto grads = kda ? g.kda_backward(q, k, v, input(g, "g", {1, 8, 1, kd}), input(g, "beta", {1, 8, 1}), d_o,
                                            graph::Kda_backward_attributes())
                           : g.gdn_backward(q, k, v, input(g, "g", {1, 8, 1}), input(g, "beta", {1, 8, 1}), d_o,
                                            graph::Gdn_backward_attributes());
    for (auto& t : grads)
      if (t) t->set_output(true);
  };
  {
    graph::Graph g;
    bwd_graph(g, DT::BFLOAT16, 64, 128, false);
    expect_decline(g, "key head dim K 64");
  }
  {
    graph::Graph g;
    bwd_graph(g, DT::BFLOAT16, 128, 64, false);
    expect_decline(g, "value head dim V 64");
  }
  {
    graph::Graph g;
    bwd_graph(g, DT::FLOAT, 128, 128, false);
    expect_decline(g, "Q data type FLOAT");
  }
  {
    graph::Graph g;
    bwd_graph(g, DT::BFLOAT16, 64, 128, true);
    expect_decline(g, "key head dim K 64");
  }
}

TEST(Sm90GdnBackward, CudaGraphCaptureAndReplayWithNewInputs) {
  REQUIRE_SM90();
  check_graph_replay(false);
}

}  // namespace
}  // namespace frost::test
