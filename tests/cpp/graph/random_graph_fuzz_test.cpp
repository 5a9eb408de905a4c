// Seeded random graphs (pointwise chains, matmuls, norms, attention) built through the public API,
// run by the planned engine, compared with the fp64 evaluation of the same graph, and round-tripped
// through JSON. Hundreds of graphs, small shapes, deterministic seeds.
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace frost::test {
namespace {

using M = PointwiseMode_t;

struct RandomGraph {
  graph::Graph g;
  std::vector<TensorPtr> inputs;
  TensorPtr out;
  std::string recipe;
};

DataType_t random_io_type(std::mt19937_64& rng) {
  const DataType_t types[] = {DataType_t::FLOAT, DataType_t::HALF, DataType_t::BFLOAT16};
  return types[rng() % 3];
}

int64_t extent(std::mt19937_64& rng) {
  const int64_t choices[] = {1, 2, 3, 5, 8, 17};
  return choices[rng() % 6];
}

TensorPtr new_input(RandomGraph& r, std::vector<int64_t> dims) {
  auto t = input(r.g, "in" + std::to_string(r.inputs.size()), std::move(dims));
  r.inputs.push_back(t);
  return t;
}

// Applies one random shape-preserving (or matmul) step to x, whose dims are d (output dims are only
// inferred at validate(), so the test tracks them itself).
TensorPtr random_step(RandomGraph& r, std::mt19937_64& rng, TensorPtr x, std::vector<int64_t>& d) {
  switch (rng() % 5) {
    case 0: {  // unary activation
      const M modes[] = {M::TANH_FWD, M::SIGMOID_FWD, M::GELU_FWD, M::SWISH_FWD, M::RELU_FWD, M::ABS, M::NEG,
                         M::ELU_FWD, M::GELU_APPROX_TANH_FWD, M::SOFTPLUS_FWD};
      const M m = modes[rng() % 10];
      r.recipe += std::string(to_string(m)) + " ";
      return r.g.pointwise(x, graph::Pointwise_attributes().set_mode(m));
    }
    case 1: {  // binary with a broadcast operand
      std::vector<int64_t> bd = d;
      for (auto& e : bd)
        if (rng() % 2) e = 1;
      const M modes[] = {M::ADD, M::MUL, M::SUB, M::MAX, M::MIN};
      const M m = modes[rng() % 5];
      r.recipe += std::string(to_string(m)) + "(bcast) ";
      return r.g.pointwise(x, new_input(r, bd), graph::Pointwise_attributes().set_mode(m));
    }
    case 2: {  // matmul with a fresh weight [.., K, N]
      std::vector<int64_t> wd = d;
      wd[wd.size() - 2] = d.back();
      wd.back() = extent(rng);
      for (size_t i = 0; i + 2 < wd.size(); ++i)
        if (rng() % 2) wd[i] = 1;
      r.recipe += "MATMUL ";
      auto y = r.g.matmul(x, new_input(r, wd), graph::Matmul_attributes());
      d.back() = wd.back();
      return y;
    }
    case 3: {  // rmsnorm over all but the first axis
      std::vector<int64_t> sd = d;
      sd[0] = 1;
      r.recipe += "RMSNORM ";
      auto [y, inv] = r.g.rmsnorm(x, new_input(r, sd), graph::Rmsnorm_attributes()
                                                           .set_forward_phase(NormFwdPhase_t::INFERENCE)
                                                           .set_epsilon(r.g.tensor(1e-5f)));
      return y;
    }
    default: {  // scale by a pass-by-value scalar
      r.recipe += "SCALE ";
      return r.g.pointwise(x, r.g.tensor(0.5f), graph::Pointwise_attributes().set_mode(M::MUL));
    }
  }
}

RandomGraph make_random_graph(uint64_t seed) {
  std::mt19937_64 rng(seed);
  RandomGraph r;
  r.g.set_io_data_type(random_io_type(rng)).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  if (rng() % 4 == 0) {  // attention
    const int64_t b = 1 + rng() % 2, hk = 1 + rng() % 2, hq = hk * (1 + rng() % 2), sq = extent(rng), skv = extent(rng),
                  dd = 8;
    auto q = new_input(r, {b, hq, sq, dd});
    auto k = new_input(r, {b, hk, skv, dd});
    auto v = new_input(r, {b, hk, skv, dd});
    graph::SDPA_attributes a;
    a.set_attn_scale(0.35f);
    if (rng() % 2) a.set_causal_mask(true);
    if (rng() % 3 == 0) a.set_causal_mask_bottom_right(true);
    r.recipe = "SDPA ";
    r.out = r.g.sdpa(q, k, v, a)[0];
    std::vector<int64_t> od = {b, hq, sq, dd};
    if (rng() % 2) r.out = random_step(r, rng, r.out, od);
  } else {
    const size_t rank = 2 + rng() % 2;
    std::vector<int64_t> d(rank);
    for (auto& e : d) e = extent(rng);
    r.out = new_input(r, d);
    const int steps = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < steps; ++i) r.out = random_step(r, rng, r.out, d);
  }
  r.out->set_output(true);
  return r;
}

TEST(RandomGraphFuzz, PlannedEngineMatchesFp64AndJsonRoundTrips) {
  constexpr uint64_t kGraphs = 300;
  int attention = 0;
  for (uint64_t seed = 0; seed < kGraphs; ++seed) {
    RandomGraph r = make_random_graph(seed);
    attention += r.recipe.rfind("SDPA", 0) == 0;
    auto e = r.g.validate();
    ASSERT_TRUE(e.is_good()) << "seed " << seed << " " << r.recipe << ": " << e.get_message();
    std::mt19937_64 rng(seed + 1000);
    std::vector<HostTensor> bufs;
    for (auto& t : r.inputs) {
      bufs.emplace_back(t);
      bufs.back().fill_random(rng);
    }
    HostTensor out(r.out), ref(r.out);
    out.poison();
    std::vector<HostTensor*> ptrs;
    for (auto& b : bufs) ptrs.push_back(&b);
    ptrs.push_back(&out);
    e = build_and_run(r.g, ptrs);
    ASSERT_TRUE(e.is_good()) << "seed " << seed << " " << r.recipe << ": " << e.get_message();
    std::unordered_map<int64_t, void*> pack;
    for (auto& b : bufs) pack[b.t->get_uid()] = b.data();
    pack[r.out->get_uid()] = ref.data();
    ASSERT_TRUE(detail::reference_execute(r.g.state(), pack, detail::Precision::F64).is_good());
    const auto s = compare(out.values(), ref.values());
    const double tol = r.out->get_data_type() == DataType_t::FLOAT ? 1e-4 : 2e-2;
    EXPECT_FALSE(s.has_nan) << "seed " << seed << " " << r.recipe;
    EXPECT_LE(s.rel_l2, tol) << "seed " << seed << " " << r.recipe;
    // JSON round trip keeps the key and the bits.
    std::string text;
    ASSERT_TRUE(r.g.serialize(text).is_good());
    graph::Graph back;
    ASSERT_TRUE(back.deserialize(text).is_good()) << "seed " << seed;
    ASSERT_TRUE(back.validate().is_good()) << "seed " << seed;
    EXPECT_EQ(back.key(), r.g.key()) << "seed " << seed;
  }
  EXPECT_GT(attention, 30);  // the mix really covers attention
}

}  // namespace
}  // namespace frost::test
