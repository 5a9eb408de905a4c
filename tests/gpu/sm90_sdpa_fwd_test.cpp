// The sm90_sdpa_fwd engine against the fp64 reference (sm90_sdpa_fwd_harness.h): odd lengths, masks (causal,
// sliding window, padding), sinks, a device scale, packed (THD) layouts, d_qk != d_v, scheduling policies,
// declines, tensors over 2^31 elements and CUDA-graph replay.
#include "sm90_sdpa_fwd_harness.h"

namespace frost::test {
namespace {

using namespace sdpa_fwd;

TEST(Sm90SdpaFwd, OddShapesLayoutsAndMasks) {
  REQUIRE_SM90();
  const Case cases[] = {
      {1, 2, 2, 1, 1, 128, false, false, true},      {1, 2, 2, 17, 17, 128, true, false, true},
      {2, 4, 2, 111, 1000, 128, false, false, false}, {1, 4, 1, 1000, 111, 128, true, true, true},
      {1, 2, 2, 111, 17, 128, true, false, true},     // top-left causal with s_q > s_kv
      {1, 2, 2, 111, 17, 128, true, true, true},      // bottom-right: the first rows see no key
      {1, 8, 2, 1000, 1000, 64, true, false, false},  {1, 2, 2, 111, 1000, 64, false, false, true},
      {1, 2, 1, 1000, 1000, 256, true, false, true},  {1, 2, 2, 17, 111, 256, false, false, false},
      {1, 1, 1, 4097, 4097, 128, true, false, true},
  };
  for (const auto& c : cases) run_case(c);
  Case fp16{1, 4, 2, 111, 1000, 128, true, true, true};
  fp16.dt = DataType_t::HALF;
  run_case(fp16);
  Case log2{1, 2, 2, 17, 111, 128, false, false, true, true};
  run_case(log2);
}

TEST(Sm90SdpaFwd, SlidingWindowAndBands) {
  REQUIRE_SM90();
  Case w{1, 4, 2, 1000, 1000, 128, true, false, true};
  w.left = 200;  // causal sliding window: blocks far left of the diagonal are skipped
  run_case(w);
  Case br{2, 2, 1, 300, 1111, 128, true, true, false};
  br.left = 77;  // bottom-right causal window, s_q < s_kv
  run_case(br);
  Case band{1, 2, 2, 777, 513, 64, false, false, true};
  band.left = 1, band.right = 130;  // both bounds, no causal; left 1 keeps only keys >= the diagonal
  run_case(band);
  Case right{1, 2, 2, 333, 333, 256, false, true, true};
  right.right = 5;  // right bound only
  run_case(right);
  Case empty_rows{1, 2, 2, 300, 100, 128, false, false, true};
  empty_rows.left = 3, empty_rows.right = 0;  // rows past key 102 see no key at all
  run_case(empty_rows);
}

TEST(Sm90SdpaFwd, PaddingMaskSinkAndDeviceScale) {
  REQUIRE_SM90();
  Case pad{3, 4, 2, 300, 517, 128, false, false, true};
  pad.len_q = {300, 0, 129}, pad.len_kv = {1, 517, 200};  // an empty batch, a one-key batch
  run_case(pad);
  Case pad_causal{3, 2, 2, 257, 255, 64, true, true, false};
  pad_causal.len_q = {17, 257, 200}, pad_causal.len_kv = {255, 3, 0};  // bottom-right on each batch's lengths
  run_case(pad_causal);
  Case sink{2, 4, 4, 150, 333, 128, true, false, true};
  sink.sink = true;
  sink.len_q = {150, 99}, sink.len_kv = {333, 0};  // sink rows with no key: O = 0, Stats = sink
  run_case(sink);
  Case scale{1, 2, 1, 129, 300, 256, false, false, true};
  scale.scale_tensor = true, scale.sink = true;
  run_case(scale);
}

TEST(Sm90SdpaFwd, RaggedAndCumulativeLengths) {
  REQUIRE_SM90();
  Case ragged{3, 4, 2, 300, 260, 128, true, true, true};
  ragged.packing = Packing::RAGGED;
  ragged.len_q = {129, 1, 300}, ragged.len_kv = {260, 77, 5};
  run_case(ragged);
  Case cu{4, 2, 1, 200, 190, 64, false, false, true};
  cu.packing = Packing::CU, cu.max_total = true, cu.sink = true;
  cu.len_q = {200, 0, 63, 1}, cu.len_kv = {1, 190, 17, 64};
  run_case(cu);
  Case window{2, 2, 2, 400, 400, 128, true, false, true};
  window.packing = Packing::RAGGED, window.left = 100;
  window.len_q = {390, 257}, window.len_kv = {400, 257};
  run_case(window);
}

TEST(Sm90SdpaFwd, HeadDim192WithValueDim128) {
  REQUIRE_SM90();
  Case a{1, 4, 2, 333, 500, 192, true, false, true};
  a.dv = 128;
  run_case(a);
  Case b{2, 2, 2, 129, 17, 192, false, false, false};
  b.dv = 128, b.dt = DataType_t::HALF;
  run_case(b);
  Case c{2, 2, 1, 200, 300, 192, true, true, true};
  c.dv = 128, c.packing = Packing::CU, c.left = 64;
  c.len_q = {200, 31}, c.len_kv = {300, 113};
  run_case(c);
}

TEST(Sm90SdpaFwd, SchedulingPoliciesGiveTheSameBits) {
  REQUIRE_SM90();
  const Case c{2, 4, 4, 700, 700, 128, true, false, true};
  for (int64_t policy : {1, 2}) {
    const graph::KnobMap knobs{{KnobType_t::TILE_M, 128},
                               {KnobType_t::TILE_N, 128},
                               {KnobType_t::STAGES, 2},
                               {KnobType_t::SCHED_POLICY, policy},
                               {KnobType_t::PACK_GQA, 0}};
    run_case(c, &knobs);
  }
}

TEST(Sm90SdpaFwd, DeclinesWhatItCannotServe) {
  REQUIRE_SM90();
  Built x;
  build_graph(x, {1, 2, 2, 17, 17, 96, false, false, true});  // d = 96
  Handle h(Device::cuda(0));
  ASSERT_TRUE(x.g.validate().is_good());
  ASSERT_TRUE(x.g.build_operation_graph(h).is_good());
  auto e = x.g.create_execution_plans({HeurMode_t::OPENSOURCE});
  EXPECT_EQ(e.get_code(), error_code_t::GRAPH_NOT_SUPPORTED);
  EXPECT_NE(e.get_message().find("d_qk=96"), std::string::npos) << e.get_message();
  // Features the kernel does not implement are declined by name, never ignored.
  auto declines = [&](const char* what, auto&& set) {
    Built y;
    build_graph(y, {1, 2, 2, 17, 17, 128, false, false, true});
    auto& sdpa = dynamic_cast<detail::AttrNode<graph::SDPA_attributes>&>(*y.g.state().nodes[0]);
    set(y, sdpa.attr);
    ASSERT_TRUE(y.g.validate().is_good()) << what;
    ASSERT_TRUE(y.g.build_operation_graph(h).is_good());
    auto r = y.g.create_execution_plans({HeurMode_t::OPENSOURCE});
    EXPECT_EQ(r.get_code(), error_code_t::GRAPH_NOT_SUPPORTED) << what;
    EXPECT_NE(r.get_message().find(std::string("sm90_sdpa_fwd: ") + what), std::string::npos) << r.get_message();
  };
  declines("dropout", [](Built& y, graph::SDPA_attributes& a) {
    a.set_dropout(0.1f, y.g.tensor(int64_t{7}), y.g.tensor(int64_t{0}));
  });
  declines("bias", [](Built& y, graph::SDPA_attributes& a) {
    a.set_bias(input(y.g, "bias", {1, 1, 17, 17}, DataType_t::FLOAT, {289, 289, 17, 1}));
  });
  declines("alibi_mask", [](Built&, graph::SDPA_attributes& a) { a.set_alibi_mask(true); });
  declines("attn_scale", [](Built&, graph::SDPA_attributes& a) { a.set_attn_scale(-0.5f); });
}

// Q and O of 2^31 + 2^29 elements: every offset past 2^31 must be computed in 64 bits. Q repeats a
// pattern of 997 tokens (copied on the device), so the rows checked at the end are known on the host.
TEST(Sm90SdpaFwd, TensorsOverTwoToThe31Elements) {
  REQUIRE_SM90();
  constexpr int64_t kH = 2, kD = 128, kSq = (int64_t{1} << 23) + (int64_t{1} << 21) + 3, kSkv = 77, kPattern = 997;
  size_t free_bytes = 0, total = 0;
  CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
  const int64_t elems = kSq * kH * kD;
  if (static_cast<double>(free_bytes) < 2.2 * static_cast<double>(elems) * 2) GTEST_SKIP() << "needs ~11 GB of GPU memory";
  graph::Graph g;
  g.set_io_data_type(DataType_t::BFLOAT16).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  auto q = input(g, "q", {1, kH, kSq, kD}, DataType_t::BFLOAT16, {kSq * kH * kD, kD, kH * kD, 1});
  auto k = input(g, "k", {1, 1, kSkv, kD}, DataType_t::BFLOAT16, {kSkv * kD, kSkv * kD, kD, 1});
  auto v = input(g, "v", {1, 1, kSkv, kD}, DataType_t::BFLOAT16, {kSkv * kD, kSkv * kD, kD, 1});
  graph::SDPA_attributes a;
  a.set_generate_stats(true).set_causal_mask(true).set_attn_scale(1.0f / std::sqrt(float(kD)));
  auto [o, st] = g.sdpa(q, k, v, a);
  o->set_output(true).set_stride({kSq * kH * kD, kD, kH * kD, 1});
  st->set_output(true).set_data_type(DataType_t::FLOAT);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(g.build(h, {HeurMode_t::A}).is_good());
  std::string plan;
  g.get_plan_name(plan);
  ASSERT_EQ(plan.rfind("sm90_sdpa_fwd", 0), 0u) << plan;
  graph::Graph scratch;  // declares the pattern's host buffer only
  HostTensor pattern(
      input(scratch, "pattern", {1, kH, kPattern, kD}, DataType_t::BFLOAT16, {kPattern * kH * kD, kD, kH * kD, 1}));
  DeviceTensor kt(k), vt(v);
  std::mt19937_64 rng(31);
  pattern.fill_random(rng, -2, 2);
  kt.host.fill_random(rng, -2, 2);
  vt.host.fill_random(rng, -2, 2);
  kt.upload();
  vt.upload();
  void *qd = nullptr, *od = nullptr, *sd = nullptr;
  const size_t bytes = static_cast<size_t>(elems) * 2, row_bytes = kH * kD * 2;
  CUDA_OK(cudaMalloc(&qd, bytes));
  CUDA_OK(cudaMalloc(&od, bytes));
  CUDA_OK(cudaMalloc(&sd, static_cast<size_t>(kH * kSq) * 4));
  CUDA_OK(cudaMemcpy(qd, pattern.data(), kPattern * row_bytes, cudaMemcpyHostToDevice));
  for (int64_t filled = kPattern; filled < kSq; filled *= 2) {
    const int64_t n = std::min(filled, kSq - filled);
    CUDA_OK(cudaMemcpy(static_cast<char*>(qd) + filled * row_bytes, qd, n * row_bytes, cudaMemcpyDeviceToDevice));
  }
  CUDA_OK(cudaMemset(od, 0xff, bytes));  // NaN in bf16
  std::unordered_map<int64_t, void*> pack{{q->get_uid(), qd}, {k->get_uid(), kt.dev}, {v->get_uid(), vt.dev},
                                          {o->get_uid(), od}, {st->get_uid(), sd}};
  DeviceWorkspace ws(g);  // the first plan's (the hand-out's counter under this causal mask)
  ASSERT_TRUE(ws.ok);
  ASSERT_TRUE(g.execute(h, pack, ws.ptr).is_good());
  CUDA_OK(cudaDeviceSynchronize());
  // The last 2048 tokens (all past element 2^31) against fp64 on the pattern's rows.
  constexpr int64_t kCheck = 2048;
  std::vector<uint16_t> got(static_cast<size_t>(kCheck * kH * kD));
  std::vector<float> got_lse(static_cast<size_t>(kCheck));
  const int64_t t0 = kSq - kCheck;
  CUDA_OK(cudaMemcpy(got.data(), static_cast<char*>(od) + t0 * row_bytes, got.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(got_lse.data(), static_cast<float*>(sd) + kSq + t0, kCheck * 4, cudaMemcpyDeviceToHost));  // head 1
  double num = 0, den = 0, lse_err = 0;
  const double scale = 1.0 / std::sqrt(double(kD));
  for (int64_t t = t0; t < kSq; ++t)
    for (int64_t hh = 0; hh < kH; ++hh) {
      const int64_t pt = t % kPattern;
      std::vector<double> s(kSkv);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < kSkv; ++j) {
        double acc = 0;
        for (int64_t e = 0; e < kD; ++e) acc += pattern.get((hh * kPattern + pt) * kD + e) * kt.host.get(j * kD + e);
        s[j] = acc * scale;
        mx = std::max(mx, s[j]);
      }
      for (int64_t j = 0; j < kSkv; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int64_t e = 0; e < kD; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < kSkv; ++j) acc += s[j] * vt.host.get(j * kD + e);
        const double want = acc / sum;
        const uint32_t bits = uint32_t(got[static_cast<size_t>(((t - t0) * kH + hh) * kD + e)]) << 16;
        float gv;
        std::memcpy(&gv, &bits, 4);
        num += (gv - want) * (gv - want);
        den += want * want;
      }
      if (hh == 1) lse_err = std::max(lse_err, std::fabs(got_lse[static_cast<size_t>(t - t0)] - (mx + std::log(sum))));
    }
  EXPECT_LE(std::sqrt(num / den), 1e-2);
  EXPECT_LE(lse_err, 1e-3);
  cudaFree(qd);
  cudaFree(od);
  cudaFree(sd);
}

TEST(Sm90SdpaFwd, CudaGraphCaptureAndReplayWithNewInputs) {
  REQUIRE_SM90();
  const Case c{1, 4, 4, 256, 256, 128, true, false, true};
  Built x;
  build_graph(x, c);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(x.g.build(h, {HeurMode_t::A}).is_good());
  replay_and_check(x, h, 2, [](int round) { return 100 + static_cast<uint64_t>(round); });
}

}  // namespace
}  // namespace frost::test
