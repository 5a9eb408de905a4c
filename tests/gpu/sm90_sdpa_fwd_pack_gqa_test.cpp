// PACK_GQA on the sm90_sdpa_fwd engine: packed tiles against the fp64 reference (sm90_sdpa_fwd_harness.h), the
// recommendation for decode, and the declines that name the knob.
#include "sm90_sdpa_fwd_harness.h"

namespace frost::test {
namespace {

using namespace sdpa_fwd;

graph::KnobMap pack_gqa_knobs(int64_t tile_m, int64_t tile_n) {
  return {{KnobType_t::TILE_M, tile_m},
          {KnobType_t::TILE_N, tile_n},
          {KnobType_t::STAGES, 2},
          {KnobType_t::SCHED_POLICY, 1},
          {KnobType_t::PACK_GQA, 1}};
}

// PACK_GQA tiles hold tile_m / group positions of each query head of a group: decode rows, positions past s_q
// inside a tile, causal diagonals that differ per position, groups that give non-power-of-two row counts.
TEST(Sm90SdpaFwd, PackGqaTilesMatchTheReference) {
  REQUIRE_SM90();
  struct Packed {
    Case c;
    int64_t tile_m, tile_n;
  };
  Case fp16{2, 8, 4, 33, 257, 128, true, false, true};
  fp16.dt = DataType_t::HALF;
  Case log2{1, 8, 1, 17, 111, 128, false, false, false, true};
  Case d192{1, 4, 1, 50, 200, 192, true, true, true};
  d192.dv = 128;
  const Packed cases[] = {
      {{1, 8, 1, 1, 1000, 128, false, false, true}, 128, 128},  // decode, MQA
      {{2, 16, 2, 17, 333, 128, true, true, true}, 128, 128},   // bottom-right causal, 16 rows per head
      {{1, 8, 2, 111, 111, 128, true, false, false}, 128, 176}, // top-left causal, BHSD, four m-blocks
      {{1, 4, 1, 1000, 1000, 64, true, false, true}, 192, 128}, // 48 rows per head
      {{2, 6, 2, 5, 700, 64, false, false, true}, 192, 128},    // group of 3
      {{1, 4, 2, 129, 300, 256, false, false, true}, 128, 80},
      {d192, 128, 112},
      {fp16, 128, 128},
      {log2, 128, 128},
  };
  for (const auto& pc : cases) {
    const auto knobs = pack_gqa_knobs(pc.tile_m, pc.tile_n);
    run_case(pc.c, &knobs);
  }
}

TEST(Sm90SdpaFwd, PackGqaIsRecommendedForDecodeAndDeclinedByName) {
  REQUIRE_SM90();
  Handle h(Device::cuda(0));
  {
    Built x;
    const std::string plan = first_plan_name(x, h, {4, 32, 4, 1, 4096, 128, false, false, true});
    EXPECT_NE(plan.find("PACK_GQA=1"), std::string::npos) << plan;
  }
  auto declines = [&](const Case& c, int64_t tile_m, int64_t tile_n, const char* what) {
    expect_decline(h, c, pack_gqa_knobs(tile_m, tile_n), what);
  };
  declines({1, 4, 4, 17, 17, 128, false, false, true}, 128, 128, "PACK_GQA=1 needs grouped query heads");
  declines({1, 6, 2, 17, 17, 128, false, false, true}, 128, 128, "PACK_GQA=1 with h_q/h_kv=3");
  Case window{1, 4, 1, 17, 17, 128, true, false, true};
  window.left = 4;
  declines(window, 128, 128, "PACK_GQA=1 with a left band bound");
  Case padded{2, 4, 1, 17, 17, 128, false, false, true};
  padded.len_q = {17, 3}, padded.len_kv = {5, 17};
  declines(padded, 128, 128, "PACK_GQA=1 with a padding mask");
  Case sink{1, 4, 2, 17, 17, 128, false, false, true};
  sink.sink = true;
  declines(sink, 128, 128, "PACK_GQA=1 with attention sinks");
}

}  // namespace
}  // namespace frost::test
