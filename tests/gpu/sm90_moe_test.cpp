// moe_grouped_matmul on the sm90_gemm engine against the reference, in every mode: random expert
// boundaries (an empty expert, rows before the first expert), gathers that repeat tokens, a
// one-to-one scatter, INT32 and INT64 routing, sentinel-poisoned outputs, and a CUDA-graph replay
// with new routing values; BF16, and FP8 e4m3 with per-tensor descale MULs to a BF16 output.
#include <algorithm>
#include <numeric>

#include "gpu_util.h"
#include "graph/shape_util.h"

namespace frost::test {
namespace {

using Mode = graph::MoeGroupedMatmulMode_t;
constexpr int64_t kSm90GemmEngineId = 10200;

struct MoeCase {
  Mode mode = Mode::NONE;
  int64_t experts = 4, rows = 300, k = 256, n = 136, top_k = 2;
  DataType_t index_type = DataType_t::INT32;
  bool weight_k_major = false;  // WEIGHT [E, K, N] with K contiguous
  bool fp8 = false;             // FP8_E4M3 TOKEN and WEIGHT (K-major), then `descales` MULs by FLOAT scalars
  int descales = 2;
  graph::KnobMap knobs;  // empty: the heuristics' first plan
  // When set: expert e routes expert_rows[e] consecutive rows, after `rows - sum` rows routed to none (random
  // boundaries otherwise).
  std::vector<int64_t> expert_rows;
};

std::string name_of(const MoeCase& c) {
  const char* mode = c.mode == Mode::NONE ? "NONE" : c.mode == Mode::GATHER ? "GATHER" : "SCATTER";
  return std::string(mode) + " E" + std::to_string(c.experts) + (c.expert_rows.empty() ? "" : " fixed") + " R" +
         std::to_string(c.rows) + " k" + std::to_string(c.k) + " n" + std::to_string(c.n) + " " +
         std::string(to_string(c.index_type)) + (c.weight_k_major ? " W K-major" : "") +
         (c.fp8 ? " e4m3 x" + std::to_string(c.descales) + " descales" : "") + (c.knobs.empty() ? "" : " knobs");
}

struct MoeGraph {
  graph::Graph g;
  TensorPtr token, weight, offsets, index, ks, out;
  std::vector<TensorPtr> descales;
};

TensorPtr dense(graph::Graph& g, const std::string& name, std::vector<int64_t> dims, DataType_t dt,
                std::vector<int64_t> strides = {}) {
  if (strides.empty()) strides = detail::packed_strides(dims);
  return input(g, name, std::move(dims), dt, std::move(strides));
}

void build(MoeGraph& x, const MoeCase& c) {
  x.g.set_io_data_type(DataType_t::BFLOAT16).set_compute_data_type(DataType_t::FLOAT);
  const int64_t token_rows = c.mode == Mode::GATHER ? c.rows / c.top_k : c.rows;
  const DataType_t in = c.fp8 ? DataType_t::FP8_E4M3 : DataType_t::BFLOAT16;
  x.token = dense(x.g, "token", {1, token_rows, c.k}, in);
  x.weight = c.weight_k_major ? dense(x.g, "weight", {c.experts, c.k, c.n}, in, {c.k * c.n, 1, c.k})
                              : dense(x.g, "weight", {c.experts, c.k, c.n}, in);
  x.offsets = dense(x.g, "offsets", {c.experts, 1, 1}, c.index_type);
  if (c.mode != Mode::NONE) x.index = dense(x.g, "index", {1, c.rows, 1}, c.index_type);
  if (c.mode == Mode::SCATTER) x.ks = dense(x.g, "ks", {1, c.rows, 1}, c.index_type);
  x.out = x.g.moe_grouped_matmul(x.token, x.weight, x.offsets, x.index, x.ks,
                                 graph::Moe_grouped_matmul_attributes().set_mode(c.mode).set_top_k(
                                     static_cast<int32_t>(c.top_k)));
  if (c.fp8)
    for (int d = 0; d < c.descales; ++d) {
      x.out->set_data_type(DataType_t::FLOAT);
      x.descales.push_back(dense(x.g, d == 0 ? "descale_token" : "descale_weight", {1, 1, 1}, DataType_t::FLOAT));
      x.out = x.g.pointwise(x.out, x.descales.back(), graph::Pointwise_attributes().set_mode(PointwiseMode_t::MUL));
    }
  x.out->set_output(true).set_data_type(DataType_t::BFLOAT16);
}

// Valid routing values: sorted boundaries with an empty expert and rows before the first one,
// gather sources that repeat, a one-to-one scatter onto (token, choice) slots.
void fill_routing(const MoeCase& c, std::mt19937_64& rng, HostTensor& offsets, HostTensor* index, HostTensor* ks) {
  std::uniform_int_distribution<int64_t> cut(1, c.rows);
  std::vector<int64_t> o;
  if (c.expert_rows.empty()) {
    for (int64_t e = 0; e < c.experts; ++e) o.push_back(cut(rng));
    std::sort(o.begin(), o.end());
    if (c.experts > 2) o[1] = o[2];
  } else {
    int64_t first = c.rows - std::accumulate(c.expert_rows.begin(), c.expert_rows.end(), int64_t{0});
    for (int64_t n : c.expert_rows) o.push_back(first), first += n;
  }
  for (int64_t e = 0; e < c.experts; ++e) offsets.set(e, static_cast<double>(o[static_cast<size_t>(e)]));
  if (c.mode == Mode::GATHER) {
    std::uniform_int_distribution<int64_t> src(0, c.rows / c.top_k - 1);
    for (int64_t r = 0; r < c.rows; ++r) index->set(r, static_cast<double>(src(rng)));
  } else if (c.mode == Mode::SCATTER) {
    std::vector<int64_t> slots(static_cast<size_t>(c.rows));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    for (int64_t r = 0; r < c.rows; ++r) {
      index->set(r, static_cast<double>(slots[static_cast<size_t>(r)] / c.top_k));
      ks->set(r, static_cast<double>(slots[static_cast<size_t>(r)] % c.top_k));
    }
  }
}

struct Buffers {
  std::vector<std::unique_ptr<DeviceTensor>> owned;
  std::unordered_map<int64_t, void*> pack, host_pack;
  DeviceTensor* add(const TensorPtr& t) {
    if (!t) return nullptr;
    owned.push_back(std::make_unique<DeviceTensor>(t));
    pack[t->get_uid()] = owned.back()->dev;
    host_pack[t->get_uid()] = owned.back()->host.data();
    return owned.back().get();
  }
};

void run_case(const MoeCase& c, bool replay_in_cuda_graph = false) {
  SCOPED_TRACE(name_of(c));
  MoeGraph x;
  build(x, c);
  Handle h(Device::cuda(0));
  if (c.knobs.empty())
    ASSERT_NO_FATAL_FAILURE(build_on(x.g, h, "sm90_gemm"));
  else
    ASSERT_NO_FATAL_FAILURE(build_with_knobs(x.g, h, kSm90GemmEngineId, c.knobs));
  DeviceWorkspace ws(x.g);
  ASSERT_TRUE(ws.ok);
  void* const workspace = ws.ptr;

  std::mt19937_64 rng(static_cast<uint64_t>(c.rows * 31 + c.k * 7 + static_cast<int>(c.mode)));
  Buffers b;
  DeviceTensor* token = b.add(x.token);
  DeviceTensor* weight = b.add(x.weight);
  DeviceTensor* offsets = b.add(x.offsets);
  DeviceTensor* index = b.add(x.index);
  DeviceTensor* ks = b.add(x.ks);
  std::vector<DeviceTensor*> descales;
  for (const auto& d : x.descales) descales.push_back(b.add(d));
  auto fill = [&] {
    token->host.fill_random(rng);
    weight->host.fill_random(rng);
    for (DeviceTensor* d : descales) d->host.fill_random(rng, 0.25, 2.0);
    fill_routing(c, rng, offsets->host, index ? &index->host : nullptr, ks ? &ks->host : nullptr);
    for (auto& t : b.owned) t->upload();
  };
  fill();
  DeviceTensor out(x.out);
  out.host.poison();
  out.upload();
  b.pack[x.out->get_uid()] = out.dev;

  if (!replay_in_cuda_graph) {
    ASSERT_TRUE(x.g.execute(h, b.pack, workspace).is_good());
    CUDA_OK(cudaDeviceSynchronize());
    expect_within_reference_error(x.g, x.out, b.host_pack, out);
  } else {
    auto refill = [&](int) {
      fill();  // new tokens, weights and routing: the replay must read them on the device
      out.host.poison();
      out.upload();
    };
    EXPECT_NO_FATAL_FAILURE(capture_and_replay(
        h, [&] { return x.g.execute(h, b.pack, workspace); }, 2, refill,
        [&](int) { expect_within_reference_error(x.g, x.out, b.host_pack, out); }));
  }
}

TEST(Sm90Moe, EveryModeAgainstTheReference) {
  REQUIRE_SM90();
  for (Mode mode : {Mode::NONE, Mode::GATHER, Mode::SCATTER}) {
    MoeCase c;
    c.mode = mode;
    run_case(c);
    c.index_type = DataType_t::INT64, c.weight_k_major = true, c.rows = 1000, c.experts = 8, c.k = 512, c.n = 264;
    run_case(c);
  }
  MoeCase one_row;
  one_row.rows = 2, one_row.experts = 1, one_row.k = 64, one_row.n = 64;
  run_case(one_row);
}

// The ping-pong 128x128 grouped kernel (TILE_N=128), ranked first for up to 16 BF16 experts.
TEST(Sm90Moe, PingPongTilesInEveryMode) {
  REQUIRE_SM90();
  for (Mode mode : {Mode::NONE, Mode::GATHER, Mode::SCATTER}) {
    MoeCase c;
    c.mode = mode, c.rows = 1000, c.experts = 8, c.k = 512, c.n = 264;
    c.knobs = {{KnobType_t::TILE_N, 128}};
    run_case(c);
    c.weight_k_major = true, c.index_type = DataType_t::INT64, c.experts = 3, c.n = 136;
    run_case(c);
  }
}

// The cooperative 128x256 kernel splits a 128-row tile between two warpgroups (rows 0-63 and 64-127), and an
// expert's ragged last tile may end in either half: last tiles with 1-64, 65-127 and exactly 128 valid rows,
// single-tile and multi-tile experts, an empty one; one k-tile per tile and several, and several tiles per CTA.
TEST(Sm90Moe, CooperativeTilesWhoseExpertEndsInEitherHalf) {
  REQUIRE_SM90();
  const std::vector<int64_t> pattern = {1, 64, 65, 127, 128, 129, 192, 193, 255, 256, 0, 17, 300, 2, 40, 100};
  auto repeated = [&](int times) {
    std::vector<int64_t> rows;
    for (int t = 0; t < times; ++t) rows.insert(rows.end(), pattern.begin(), pattern.end());
    return rows;
  };
  auto run = [&](std::vector<int64_t> rows, int64_t k, int64_t n, bool weight_k_major, Mode mode = Mode::NONE) {
    MoeCase c;
    c.mode = mode, c.k = k, c.n = n, c.weight_k_major = weight_k_major, c.top_k = 1;
    c.experts = static_cast<int64_t>(rows.size());
    c.rows = 5 + std::accumulate(rows.begin(), rows.end(), int64_t{0});
    c.expert_rows = std::move(rows);
    c.knobs = {{KnobType_t::TILE_N, 256}};
    run_case(c);
  };
  run(pattern, 512, 264, false);
  run(pattern, 520, 136, true);
  run(pattern, 64, 256, false, Mode::SCATTER);
  run(repeated(4), 64, 2560, true);   // 880 tiles: 6-7 per CTA on 132 SMs, one k-tile each
  run(repeated(4), 192, 512, false);  // three k-tiles each
}

TEST(Sm90Moe, HeuristicsRankPingPongTilesForUpTo16Experts) {
  REQUIRE_SM90();
  for (int64_t experts : {4, 16, 17, 64}) {
    MoeCase c;
    c.experts = experts, c.rows = 4096;
    MoeGraph x;
    build(x, c);
    Handle h(Device::cuda(0));
    ASSERT_TRUE(x.g.build(h, {HeurMode_t::A}).is_good());
    std::string plan;
    x.g.get_plan_name(plan);
    EXPECT_EQ(plan.find("TILE_N=128") != std::string::npos, experts <= 16) << experts << " experts: " << plan;
  }
}

TEST(Sm90Moe, CudaGraphReplayReadsNewRouting) {
  REQUIRE_SM90();
  MoeCase c;
  c.mode = Mode::SCATTER;
  run_case(c, true);
  c.fp8 = true, c.weight_k_major = true, c.k = 512;
  run_case(c, true);  // new descales too
}

TEST(Sm90Moe, Fp8EveryModeWithDescalesAgainstTheReference) {
  REQUIRE_SM90();
  for (Mode mode : {Mode::NONE, Mode::GATHER, Mode::SCATTER}) {
    MoeCase c;
    c.mode = mode, c.fp8 = true, c.weight_k_major = true, c.k = 512, c.n = 264;
    run_case(c);
    c.index_type = DataType_t::INT64, c.rows = 1000, c.experts = 8, c.k = 1024, c.n = 136, c.descales = 1;
    run_case(c);
  }
  MoeCase bare;  // no descale MUL: the FP8 node writes BF16 directly
  bare.fp8 = true, bare.weight_k_major = true, bare.descales = 0, bare.rows = 17, bare.k = 128, bare.n = 64;
  run_case(bare);
}

TEST(Sm90Moe, DeclinesOtherTypesWithTheAttributeNamed) {
  REQUIRE_SM90();
  graph::Graph g;
  g.set_io_data_type(DataType_t::HALF).set_compute_data_type(DataType_t::FLOAT);
  auto token = dense(g, "token", {1, 64, 64}, DataType_t::HALF);
  auto weight = dense(g, "weight", {2, 64, 64}, DataType_t::HALF);
  auto offsets = dense(g, "offsets", {2, 1, 1}, DataType_t::INT32);
  auto out = g.moe_grouped_matmul(token, weight, offsets, nullptr, nullptr, graph::Moe_grouped_matmul_attributes());
  out->set_output(true);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(g.validate().is_good());
  ASSERT_TRUE(g.build_operation_graph(h).is_good());
  g.create_execution_plans({HeurMode_t::A});
  std::string reasons;
  for (const auto& r : g.get_decline_reasons()) reasons += r + "\n";
  EXPECT_NE(reasons.find("sm90_gemm:"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("TOKEN is HALF"), std::string::npos) << reasons;
}

TEST(Sm90Moe, Fp8DeclinesAnNMajorWeightWithTheAttributeNamed) {
  REQUIRE_SM90();
  MoeCase c;
  c.fp8 = true;  // WEIGHT [E, K, N] N-contiguous: FP8 tensor cores read K-major tiles only
  MoeGraph x;
  build(x, c);
  Handle h(Device::cuda(0));
  ASSERT_TRUE(x.g.validate().is_good());
  ASSERT_TRUE(x.g.build_operation_graph(h).is_good());
  x.g.create_execution_plans({HeurMode_t::A});
  std::string reasons;
  for (const auto& r : x.g.get_decline_reasons()) reasons += r + "\n";
  EXPECT_NE(reasons.find("WEIGHT must be K-major"), std::string::npos) << reasons;
}

}  // namespace
}  // namespace frost::test
