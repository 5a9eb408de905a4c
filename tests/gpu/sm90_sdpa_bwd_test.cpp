// The sm90_sdpa_bwd engine against the fp64 reference backward (sm90_sdpa_bwd_harness.h): odd shapes, layouts and
// masks, head dims 256 and 192/128 under both warp specializations, determinism (also of the split-d kernels),
// declines, CUDA-graph replay.
#include "sm90_sdpa_bwd_harness.h"

namespace frost::test {
namespace {

using namespace sdpa_bwd;

TEST(Sm90SdpaBwd, OddShapesLayoutsAndMasks) {
  REQUIRE_SM90();
  auto causal = [](bool br) { return [br](GpuCase& g) { g.c.p.right_bound = 0, g.c.p.bottom_right = br; }; };
  const GpuCase cases[] = {
      make("s1 d128", problem(1, 2, 2, 1, 1, 128)),
      make("s17 causal d128", problem(1, 2, 2, 17, 17, 128), causal(false)),
      make("s111x1000 d128 bhsd", problem(2, 2, 2, 111, 1000, 128), [](GpuCase& g) { g.c.layout = Layout::BHSD; }),
      make("s1000x111 causal-br d128 (first rows see no key)", problem(1, 2, 2, 1000, 111, 128), causal(true)),
      make("s111x17 causal-tl d128", problem(1, 2, 2, 111, 17, 128), causal(false)),
      make("gqa 8/2 s257x300 causal d128", problem(2, 8, 2, 257, 300, 128), causal(false)),
      make("mqa 4/1 s300 d64", problem(1, 4, 1, 300, 300, 64)),
      make("s111x1000 d64 fp16", problem(1, 2, 2, 111, 1000, 64), [](GpuCase& g) { g.c.io = DataType_t::HALF; }),
      make("s1000 causal d128 fp16", problem(1, 2, 2, 1000, 1000, 128),
           [](GpuCase& g) { g.c.io = DataType_t::HALF, g.c.p.right_bound = 0; }),
      make("sliding window 64 s300 d128", problem(1, 2, 2, 300, 300, 128),
           [](GpuCase& g) { g.c.p.left_bound = 64, g.c.p.right_bound = 0; }),
      make("band 40/10 br s200x333 d64", problem(1, 2, 1, 200, 333, 64),
           [](GpuCase& g) { g.c.p.left_bound = 40, g.c.p.right_bound = 10, g.c.p.bottom_right = true; }),
      make("padding b3 d128 causal-br", problem(3, 2, 2, 200, 260, 128),
           [](GpuCase& g) {
             g.c.p.seq_len_q = {200, 17, 0}, g.c.p.seq_len_kv = {260, 100, 5}, g.c.p.right_bound = 0,
             g.c.p.bottom_right = true;
           }),
      make("sink + dsink s150 d128, log2 stats", problem(2, 4, 2, 150, 190, 128),
           [](GpuCase& g) { g.c.p.sink = true, g.c.p.stats_use_log2 = true; }),
      make("scale pass-by-value s100 d64", problem(1, 2, 2, 100, 100, 64),
           [](GpuCase& g) { g.c.scale_as = ScaleAs::PASS_BY_VALUE, g.c.p.attn_scale = 0.3; }),
      make("deterministic gqa 4/2 s400 d128", problem(1, 4, 2, 400, 400, 128),
           [](GpuCase& g) { g.deterministic = true; }),
      make("deterministic causal s700 d64", problem(1, 2, 2, 700, 700, 64),
           [](GpuCase& g) { g.deterministic = true, g.c.p.right_bound = 0; }),
      make("deterministic window+padding d128", problem(2, 2, 1, 300, 333, 128),
           [](GpuCase& g) {
             g.deterministic = true, g.c.p.left_bound = 50, g.c.p.seq_len_q = {300, 123}, g.c.p.seq_len_kv = {333, 77};
           }),
      // d64 deterministic without a right bound: heads grouped with key blocks outer (sm90_bwd_launch.cuh).
      make("deterministic gqa 4/2 s400x300 d64 fp16", problem(2, 4, 2, 400, 300, 64),
           [](GpuCase& g) { g.deterministic = true, g.c.io = DataType_t::HALF; }),
      make("deterministic window+padding d64", problem(2, 2, 1, 300, 333, 64),
           [](GpuCase& g) {
             g.deterministic = true, g.c.p.left_bound = 50, g.c.p.seq_len_q = {300, 123}, g.c.p.seq_len_kv = {333, 77};
           }),
  };
  for (const auto& c : cases) run_case(c);
}

// d_qk = d_v = 256 and d_qk 192 with d_v 128: the split-d kernels (64 keys per CTA, dQ added from registers).
TEST(Sm90SdpaBwd, LargeHeadDims) {
  REQUIRE_SM90();
  auto causal = [](bool br) { return [br](GpuCase& g) { g.c.p.right_bound = 0, g.c.p.bottom_right = br; }; };
  auto fp16 = [](GpuCase& g) { g.c.io = DataType_t::HALF; };
  const GpuCase cases[] = {
      make("d256 s1", problem(1, 2, 2, 1, 1, 256)),
      make("d256 s17 causal", problem(1, 2, 2, 17, 17, 256), causal(false)),
      make("d256 s111x1000 bhsd", problem(1, 2, 2, 111, 1000, 256), [](GpuCase& g) { g.c.layout = Layout::BHSD; }),
      make("d256 s1000x111 causal-br (first rows see no key)", problem(1, 2, 2, 1000, 111, 256), causal(true)),
      make("d256 gqa 8/2 s257x300 causal", problem(1, 8, 2, 257, 300, 256), causal(false)),
      make("d256 fp16 s300x200", problem(1, 2, 1, 300, 200, 256), fp16),
      make("d256 padding b3 causal-br", problem(3, 2, 2, 150, 170, 256),
           [](GpuCase& g) {
             g.c.p.seq_len_q = {150, 17, 0}, g.c.p.seq_len_kv = {170, 65, 5}, g.c.p.right_bound = 0,
             g.c.p.bottom_right = true;
           }),
      make("d256 window 40 + sink, log2 stats", problem(1, 4, 2, 200, 200, 256),
           [](GpuCase& g) {
             g.c.p.left_bound = 40, g.c.p.right_bound = 0, g.c.p.sink = true, g.c.p.stats_use_log2 = true;
           }),
      make("d192/128 s1", problem(1, 2, 2, 1, 1, 192, 128)),
      make("d192/128 s17 causal", problem(1, 2, 2, 17, 17, 192, 128), causal(false)),
      make("d192/128 s111x1000", problem(1, 2, 2, 111, 1000, 192, 128)),
      make("d192/128 s1000x111 causal-br bhsd", problem(1, 2, 2, 1000, 111, 192, 128),
           [causal](GpuCase& g) { causal(true)(g), g.c.layout = Layout::BHSD; }),
      make("d192/128 gqa 8/2 s300 causal fp16", problem(1, 8, 2, 300, 300, 192, 128),
           [causal, fp16](GpuCase& g) { causal(false)(g), fp16(g); }),
      make("d192/128 padding b2", problem(2, 2, 1, 200, 260, 192, 128),
           [](GpuCase& g) {
             g.c.p.seq_len_q = {200, 1}, g.c.p.seq_len_kv = {33, 260};
           }),
      // The deterministic mode (ordered dQ adds of the WARP_SPEC_CFG 1 kernel; the harness reruns for bitwise
      // equality): GQA without a mask, causal, a window with a right bound over padding.
      make("d256 deterministic gqa 4/2 s400", problem(1, 4, 2, 400, 400, 256),
           [](GpuCase& g) { g.deterministic = true; }),
      make("d256 deterministic causal s333 fp16", problem(1, 2, 2, 333, 333, 256),
           [causal, fp16](GpuCase& g) { causal(false)(g), fp16(g), g.deterministic = true; }),
      make("d192/128 deterministic window+padding", problem(2, 2, 1, 300, 333, 192, 128),
           [](GpuCase& g) {
             g.deterministic = true, g.c.p.left_bound = 50, g.c.p.right_bound = 0, g.c.p.seq_len_q = {300, 123},
             g.c.p.seq_len_kv = {333, 77};
           }),
  };
  for (const auto& c : cases) run_case(c);
}

// d256 under each WARP_SPEC_CFG (1: the warpgroups split the queries of S^T and dP^T; 2: one computes S^T, the
// other dP^T, P^T crossing through smem).
TEST(Sm90SdpaBwd, LargeHeadDimWarpSpecs) {
  REQUIRE_SM90();
  const GpuCase cases[] = {
      make("d256 s17x1000", problem(1, 2, 2, 17, 1000, 256)),
      make("d256 gqa 4/2 s300 causal fp16", problem(1, 4, 2, 300, 300, 256),
           [](GpuCase& g) { g.c.io = DataType_t::HALF, g.c.p.right_bound = 0; }),
      make("d256 padding b2 causal-br", problem(2, 2, 1, 129, 200, 256),
           [](GpuCase& g) {
             g.c.p.seq_len_q = {129, 1}, g.c.p.seq_len_kv = {64, 200}, g.c.p.right_bound = 0, g.c.p.bottom_right = true;
           }),
  };
  for (int64_t ws : {1, 2}) {
    SCOPED_TRACE("WARP_SPEC_CFG " + std::to_string(ws));
    const graph::KnobMap knobs{{KnobType_t::TILE_M, 64}, {KnobType_t::TILE_N, 64}, {KnobType_t::WARP_SPEC_CFG, ws}};
    for (const auto& c : cases) run_case(c, &knobs);
  }
}

// d64 runs 128-row query blocks by default (the cases above); TILE_M 64 selects the 64-row kernel.
TEST(Sm90SdpaBwd, HeadDim64QueryBlocks64) {
  REQUIRE_SM90();
  const GpuCase cases[] = {
      make("d64 gqa 8/2 s257x300 causal", problem(2, 8, 2, 257, 300, 64),
           [](GpuCase& g) { g.c.p.right_bound = 0; }),
      make("d64 s111x1000 fp16 bhsd", problem(1, 2, 2, 111, 1000, 64),
           [](GpuCase& g) { g.c.io = DataType_t::HALF, g.c.layout = Layout::BHSD; }),
      make("d64 deterministic window+padding", problem(2, 2, 1, 300, 333, 64),
           [](GpuCase& g) {
             g.deterministic = true, g.c.p.left_bound = 50, g.c.p.seq_len_q = {300, 123}, g.c.p.seq_len_kv = {333, 77};
           }),
  };
  const graph::KnobMap knobs{{KnobType_t::TILE_M, 64}, {KnobType_t::TILE_N, 128}, {KnobType_t::WARP_SPEC_CFG, 0}};
  for (const auto& c : cases) run_case(c, &knobs);
}

TEST(Sm90SdpaBwd, CheckerCatchesOneWrongElement) {
  const std::vector<double> want{0.5, -0.25, 0.125, 1.0}, base{0.5, -0.25, 0.125, 1.0};
  EXPECT_TRUE(check("exact", want, want, base).ok);
  EXPECT_FALSE(check("one element off", {0.5, -0.25, 0.625, 1.0}, want, base).ok);
  EXPECT_FALSE(check("unwritten", {0.5, NAN, 0.125, 1.0}, want, base).ok);
}

TEST(Sm90SdpaBwd, DeclinesWhatItCannotServe) {
  REQUIRE_SM90();
  auto declined = [](const GpuCase& gc, const std::string& expect) {
    const Data d = random_data(gc.c, 1);
    const SdpaNaiveResult fwd = sdpa_naive(naive_problem(gc.c, d), d.q, d.k, d.v, d.bias, d.sink);
    auto s = make_backward(gc.c, d, fwd.o, fwd.stats);
    ASSERT_TRUE(s);
    set_deterministic(*s, gc.deterministic);
    Handle h(Device::cuda(0));
    ASSERT_TRUE(s->g.build_operation_graph(h).is_good());
    auto e = s->g.create_execution_plans({HeurMode_t::OPENSOURCE});
    EXPECT_EQ(e.get_code(), error_code_t::GRAPH_NOT_SUPPORTED) << e.get_message();
    EXPECT_NE(e.get_message().find(expect), std::string::npos) << e.get_message();
  };
  declined(make("d96", problem(1, 2, 2, 17, 17, 96)), "d_qk=96");
  declined(make("bias", problem(1, 2, 2, 17, 17, 64),
                [](GpuCase& g) {
                  g.c.p.bias_dim = {1, 2, 17, 17};
                }),
           "sm90_sdpa_bwd: bias");
  declined(make("alibi", problem(1, 2, 2, 17, 17, 64), [](GpuCase& g) { g.c.p.alibi = true; }),
           "sm90_sdpa_bwd: alibi_mask");
  declined(make("d128/64", problem(1, 2, 2, 17, 17, 128, 64)), "d_qk=128 d_v=64");

  // The ordered dQ adds of the split-d kernels exist for WARP_SPEC_CFG 1 only: asking for 2 is a typed decline.
  const GpuCase gc =
      make("deterministic d256 ws2", problem(1, 2, 2, 17, 17, 256), [](GpuCase& g) { g.deterministic = true; });
  const Data d = random_data(gc.c, 1);
  const SdpaNaiveResult fwd = sdpa_naive(naive_problem(gc.c, d), d.q, d.k, d.v);
  auto s = make_backward(gc.c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  set_deterministic(*s, true);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(s->g.build_operation_graph(h).is_good());
  const graph::KnobMap ws2{{KnobType_t::TILE_M, 64}, {KnobType_t::TILE_N, 64}, {KnobType_t::WARP_SPEC_CFG, 2}};
  auto e = s->g.create_execution_plan(10300, ws2);  // the engine's support check runs when the plan is built
  if (e.is_good()) e = s->g.build_plans(h);
  EXPECT_FALSE(e.is_good());
  EXPECT_NE(e.get_message().find("deterministic_algorithm with WARP_SPEC_CFG 2"), std::string::npos) << e.get_message();
}

TEST(Sm90SdpaBwd, CudaGraphCaptureAndReplayWithNewInputs) {
  REQUIRE_SM90();
  const GpuCase gc = make("graph gqa 4/2 s256 causal d128", problem(1, 4, 2, 256, 256, 128),
                          [](GpuCase& g) { g.c.p.right_bound = 0; });
  const Case& c = gc.c;
  Data d = random_data(c, 5);
  SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  set_deterministic(*s, false);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(s->g.build(h, {HeurMode_t::A}).is_good());
  int64_t ws_bytes = 0;
  ASSERT_TRUE(s->g.get_workspace_size(ws_bytes).is_good());
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(ws_bytes)));
  Mirror m(*s);
  const auto pack = m.pack();
  auto refill = [&](int round) {
    d = random_data(c, 100 + static_cast<uint64_t>(round));
    fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v);
    s->set(s->q, d.q), s->set(s->k, d.k), s->set(s->v, d.v), s->set(s->o, fwd.o), s->set(s->d_o, d.d_o);
    s->set(s->stats, fwd.stats);
    for (const TensorPtr& t : {s->dq, s->dk, s->dv}) s->buffer(t).poison();
    m.upload();
  };
  auto check_round = [&](int round) {
    const std::vector<double> got_dq = values_of(s->dq, m.download(s->dq));
    const std::vector<double> got_dk = values_of(s->dk, m.download(s->dk));
    const std::vector<double> got_dv = values_of(s->dv, m.download(s->dv));
    std::unordered_map<int64_t, void*> hp;
    for (auto& b : s->buffers) hp[b->t->get_uid()] = b->data();
    ASSERT_TRUE(detail::reference_execute(s->g.state(), hp, detail::Precision::F64).is_good());
    const SdpaGradients want = read_gradients(*s), base = straightforward(c, *s);
    EXPECT_TRUE(check("dQ", got_dq, want.dq, base.dq).ok) << "round " << round;
    EXPECT_TRUE(check("dK", got_dk, want.dk, base.dk).ok) << "round " << round;
    EXPECT_TRUE(check("dV", got_dv, want.dv, base.dv).ok) << "round " << round;
  };
  EXPECT_NO_FATAL_FAILURE(capture_and_replay(h, [&] { return s->g.execute(h, pack, ws); }, 2, refill, check_round));
  cudaFree(ws);
}

}  // namespace
}  // namespace frost::test
