// sdpa forward with dropout (Philox or an explicit mask) and block masks, against the naive formula.
#include <cmath>
#include <limits>

#include "ops/common/philox.h"
#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa_json_replay.h"
#include "ops/sdpa_naive.h"
#include "test_util.h"

namespace frost::test {
namespace {

using graph::SDPA_attributes;

// The documented dropout counter: element (b, h, i, j) is word ((b * h_q + h) * s_q + i) * s_kv + j of
// the Philox stream keyed by seed at position offset; kept when its uniform is >= p.
std::vector<double> philox_factors(const SdpaProblem& p, float prob, uint64_t seed, uint64_t offset) {
  std::vector<double> f;
  for (int64_t b = 0; b < p.b; ++b)
    for (int64_t h = 0; h < p.h_q; ++h)
      for (int64_t i = 0; i < p.s_q; ++i)
        for (int64_t j = 0; j < p.s_kv; ++j) {
          const uint64_t n = static_cast<uint64_t>(((b * p.h_q + h) * p.s_q + i) * p.s_kv + j);
          const bool keep = detail::philox_uniform(seed, offset, n) >= static_cast<double>(prob);
          f.push_back(keep ? 1.0 / (1.0 - static_cast<double>(static_cast<float>(prob))) : 0.0);
        }
  return f;
}

// A dense BSHD problem with optional dropout and block mask; buffers filled, outputs poisoned.
struct MaskSetup {
  SdpaProblem p;
  graph::Graph g;
  std::vector<std::unique_ptr<HostTensor>> bufs;
  std::unique_ptr<HostTensor> o, stats;
  HostTensor *q = nullptr, *k = nullptr, *v = nullptr, *offset = nullptr;

  HostTensor& add(const TensorPtr& t) { return *bufs.emplace_back(std::make_unique<HostTensor>(t)); }
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> all{o.get(), stats.get()};
    for (auto& b : bufs) all.push_back(b.get());
    return all;
  }
};

enum class Drop { NONE, PHILOX, MASK };

struct MaskOptions {
  DataType_t io = DataType_t::FLOAT;
  bool fp64 = false;
  Drop drop = Drop::NONE;
  float prob = 0.3f;
  uint64_t seed = 0x1234567890abcdefull, offset = 7;
  bool block_mask = false;
  bool identity_v = false;  // V = I so that O exposes each probability
  int64_t s_q = 17, s_kv = 33;
};

std::unique_ptr<MaskSetup> make(const MaskOptions& m) {
  auto s = std::make_unique<MaskSetup>();
  SdpaProblem& p = s->p;
  p.b = 2, p.h_q = 2, p.h_k = 1, p.h_v = 1, p.s_q = m.s_q, p.s_kv = m.s_kv, p.d_qk = 8;
  p.d_v = m.identity_v ? m.s_kv : 12, p.attn_scale = 0.5, p.tile_q = 4, p.tile_kv = 8;
  graph::Graph& g = s->g;
  g.set_io_data_type(m.io).set_compute_data_type(m.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT);
  auto bshd = [&](const char* name, int64_t h, int64_t seq, int64_t d) {
    return input(g, name, {p.b, h, seq, d}, m.io, {seq * h * d, d, h * d, 1});
  };
  auto q = bshd("q", p.h_q, p.s_q, p.d_qk), k = bshd("k", p.h_k, p.s_kv, p.d_qk), v = bshd("v", p.h_v, p.s_kv, p.d_v);
  SDPA_attributes a;
  a.set_name("attn").set_generate_stats(true).set_attn_scale(0.5f);
  TensorPtr seed_t, offset_t, mask_t, scale_t, block_t;
  const int64_t tiles_q = (p.s_q + 3) / 4, tiles_kv = (p.s_kv + 7) / 8;
  if (m.drop == Drop::PHILOX) {
    seed_t = input(g, "seed", {1, 1, 1, 1}, DataType_t::INT64);
    offset_t = input(g, "offset", {1, 1, 1, 1}, DataType_t::INT64);
    a.set_dropout(m.prob, seed_t, offset_t);
  }
  if (m.drop == Drop::MASK) {
    mask_t = input(g, "drop_mask", {1, p.h_q, p.s_q, p.s_kv}, DataType_t::UINT8);
    a.set_dropout(mask_t, scale_t = input(g, "drop_scale", {1, 1, 1, 1}));
  }
  if (m.block_mask) {
    a.set_block_mask(block_t = input(g, "blocks", {p.b, 1, tiles_q, tiles_kv}, DataType_t::UINT8));
    a.set_block_mask_tile_size(4, 8);
  }
  auto [o, stats] = g.sdpa(q, k, v, a);
  o->set_output(true);
  stats->set_output(true);
  if (auto e = g.validate(); e.is_bad()) {
    ADD_FAILURE() << e.get_message();
    return nullptr;
  }
  std::mt19937_64 rng(3);
  s->q = &s->add(q), s->k = &s->add(k), s->v = &s->add(v);
  s->q->fill_random(rng, -2, 2);
  s->k->fill_random(rng, -2, 2);
  s->v->fill_random(rng);
  if (m.identity_v)
    for (int64_t n = 0; n < s->v->volume(); ++n) s->v->set(n, (n / p.s_kv) % p.s_kv == n % p.s_kv ? 1.0 : 0.0);
  if (seed_t) {
    // INT64 halves written directly: values past 2^53 must reach the generator exactly.
    HostTensor& sb = s->add(seed_t);
    for (int w = 0; w < 2; ++w)
      detail::write_element(sb.data(), DataType_t::INT32, w,
                            static_cast<int32_t>(static_cast<uint32_t>(m.seed >> (32 * w))));
    s->offset = &s->add(offset_t);
    s->offset->set(0, static_cast<double>(m.offset));
    p.drop_factor = philox_factors(p, m.prob, m.seed, m.offset);
  }
  if (mask_t) {
    HostTensor& mb = s->add(mask_t);
    std::bernoulli_distribution keep(0.6);
    const double scale = 1.25;
    s->add(scale_t).set(0, scale);
    std::vector<double> kept(static_cast<size_t>(mb.volume()));
    for (int64_t n = 0; n < mb.volume(); ++n) mb.set(n, kept[static_cast<size_t>(n)] = keep(rng) ? 1 : 0);
    for (int64_t b = 0; b < p.b; ++b)
      for (double x : kept) p.drop_factor.push_back(x * scale);
  }
  if (block_t) {
    HostTensor& bb = s->add(block_t);
    std::bernoulli_distribution on(0.5);
    for (int64_t n = 0; n < bb.volume(); ++n) bb.set(n, on(rng) ? 1 : 0);
    bb.set(0, 0);  // the first query tile of batch 0 sees its first key tile masked
    bb.set(1, 1);  // and its second visible
    p.block_mask_dim = {p.b, 1, tiles_q, tiles_kv};
    p.block_mask = bb.values();
  }
  s->o = std::make_unique<HostTensor>(o);
  s->stats = std::make_unique<HostTensor>(stats);
  s->o->poison();
  s->stats->poison();
  return s;
}

void expect_matches_naive(MaskSetup& s, DataType_t io) {
  const error_t e = build_and_run(s.g, s.buffers());
  ASSERT_TRUE(e.is_good()) << e.get_message();
  const SdpaNaiveResult want = sdpa_naive(s.p, s.q->values(), s.k->values(), s.v->values());
  EXPECT_CLOSE(s.o->values(), want.o, io == DataType_t::FLOAT ? 4e-6 : io == DataType_t::HALF ? 4e-3 : 3e-2);
  EXPECT_CLOSE(s.stats->values(), want.stats, 2e-5);
  expect_json_replay_identical(s.g, s.buffers(), {s.o.get(), s.stats.get()});
}

TEST(SdpaDropout, PhiloxMatchesNaive) {
  for (DataType_t io : {DataType_t::FLOAT, DataType_t::HALF, DataType_t::BFLOAT16})
    for (bool fp64 : {false, true}) {
      if (fp64 && io != DataType_t::FLOAT) continue;
      SCOPED_TRACE(std::string(to_string(io)) + (fp64 ? " fp64" : ""));
      MaskOptions m;
      m.io = io, m.fp64 = fp64, m.drop = Drop::PHILOX;
      auto s = make(m);
      ASSERT_TRUE(s);
      expect_matches_naive(*s, io);
    }
}

TEST(SdpaDropout, ExplicitMaskMatchesNaive) {
  MaskOptions m;
  m.drop = Drop::MASK;
  auto s = make(m);
  ASSERT_TRUE(s);
  expect_matches_naive(*s, m.io);
}

TEST(SdpaBlockMask, MatchesNaiveAlsoWithDropout) {
  for (Drop drop : {Drop::NONE, Drop::PHILOX}) {
    MaskOptions m;
    m.block_mask = true, m.drop = drop;
    auto s = make(m);
    ASSERT_TRUE(s);
    expect_matches_naive(*s, m.io);
  }
}

// With V = I, O[i, j] = P[i, j] * keep / (1 - p): the mask itself is visible in O.
std::vector<double> dropout_output(float prob, uint64_t offset) {
  MaskOptions m;
  m.drop = prob > 0 ? Drop::PHILOX : Drop::NONE, m.prob = prob, m.offset = offset, m.identity_v = true;
  m.s_q = 64, m.s_kv = 64;
  auto s = make(m);
  EXPECT_TRUE(s && build_and_run(s->g, s->buffers()).is_good());
  return s ? s->o->values() : std::vector<double>();
}

TEST(SdpaDropout, KeptFractionScaleAndReproducibility) {
  const float prob = 0.3f;
  const std::vector<double> plain = dropout_output(0.0f, 0), first = dropout_output(prob, 7),
                            again = dropout_output(prob, 7), other = dropout_output(prob, 8);
  ASSERT_EQ(plain.size(), first.size());
  int64_t kept = 0, differ = 0;
  for (size_t n = 0; n < plain.size(); ++n) {
    ASSERT_GT(plain[n], 0.0);
    if (first[n] != 0) {
      ++kept;
      EXPECT_NEAR(first[n], plain[n] / (1.0 - prob), 1e-6 * first[n]);
    }
    differ += (first[n] == 0) != (other[n] == 0);
  }
  const double fraction = static_cast<double>(kept) / static_cast<double>(plain.size());  // 16384 draws
  EXPECT_NEAR(fraction, 1.0 - prob, 0.02);
  EXPECT_EQ(first, again) << "the same seed and offset must give the same mask";
  EXPECT_GT(differ, static_cast<int64_t>(plain.size()) / 5) << "another offset must give another mask";
}

}  // namespace
}  // namespace frost::test
