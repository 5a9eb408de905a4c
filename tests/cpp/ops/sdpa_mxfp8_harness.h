// Shared pieces of the MXFP8 attention tests (sdpa_mxfp8_test.cpp, sdpa_mxfp8_backward_test.cpp): a case, its
// block-scaled operands (random codes and random per-block E8M0 scales, or uniform ones) with their real
// values, the graph's buffers, and tolerant comparisons of stored results.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "graph/shape_util.h"
#include "ops/fp8_attention_naive.h"
#include "test_util.h"

namespace frost::test::mxfp8 {

using DT = DataType_t;
using graph::SDPA_fp8_attributes;
using graph::SDPA_fp8_backward_attributes;

inline int64_t blocks(int64_t n) { return (n + 31) / 32; }

// A graph input with packed strides, so a HostTensor can be sized before validate().
inline TensorPtr packed(graph::Graph& g, const std::string& name, const std::vector<int64_t>& dims, DT dt) {
  return input(g, name, dims, dt, detail::packed_strides(dims));
}

struct Case {
  std::string label;
  SdpaProblem p = base_problem();
  DT qkv = DT::FP8_E4M3, d_o = DT::FP8_E4M3, wide = DT::BFLOAT16, out = DT::BFLOAT16;
  bool fp64 = false;
  int64_t scale_padding = 0;    // extra rows and columns in every scale tensor (never read)
  bool uniform_scales = false;  // every block scale 0.5, so the transposed copies can equal the originals

  static SdpaProblem base_problem() {
    SdpaProblem p;
    p.b = 2, p.h_q = 2, p.h_k = 2, p.h_v = 2, p.s_q = 17, p.s_kv = 40, p.d_qk = 40, p.d_v = 24;
    p.attn_scale = 0.25;
    return p;
  }
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.label; }

// An FP8 operand with its block scales, and its real values.
struct Operand {
  HostTensor* codes = nullptr;
  HostTensor* scales = nullptr;
  std::vector<double> real;
};

struct Setup {
  graph::Graph g;
  std::vector<std::unique_ptr<HostTensor>> in, out;
  HostTensor& add(const TensorPtr& t) { return *in.emplace_back(std::make_unique<HostTensor>(t)); }
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> all;
    for (auto& h : in) all.push_back(h.get());
    for (auto& h : out) all.push_back(h.get());
    return all;
  }
  void mark_outputs(const std::vector<TensorPtr>& ts) {
    for (const auto& t : ts) {
      out.push_back(std::make_unique<HostTensor>(t));
      out.back()->poison();
    }
  }
};

// Declares codes [b, h, s, d] and scales with blocks along d (along_seq false) or s, fills both at random
// (scales 2^-2 .. 2^2) and computes the real values the op must see.
inline Operand block_scaled(Setup& s, const Case& c, std::mt19937_64& rng, const std::string& name,
                            std::vector<int64_t> dims, bool along_seq, const Operand* same_codes = nullptr) {
  Operand x;
  x.codes = &s.add(packed(s.g, name, dims, name.rfind("do", 0) == 0 ? c.d_o : c.qkv));
  std::vector<int64_t> sd = dims;
  sd[along_seq ? 2 : 3] = blocks(dims[along_seq ? 2 : 3]);
  sd[2] += c.scale_padding, sd[3] += c.scale_padding;
  x.scales = &s.add(packed(s.g, "sf_" + name, sd, DT::FP8_E8M0));
  if (same_codes) {
    x.codes->bytes = same_codes->codes->bytes;
  } else {
    x.codes->fill_random(rng, -3.0, 3.0);
  }
  std::uniform_int_distribution<int> e(-2, 2);
  for (int64_t n = 0; n < x.scales->volume(); ++n) x.scales->set(n, c.uniform_scales ? 0.5 : std::ldexp(1.0, e(rng)));
  const std::vector<double> codes = x.codes->values(), scales = x.scales->values();
  x.real.resize(codes.size());
  for (int64_t n = 0; n < static_cast<int64_t>(codes.size()); ++n) {
    const int64_t j = n % dims[3], i = (n / dims[3]) % dims[2], plane = n / (dims[2] * dims[3]);
    const int64_t si = along_seq ? i / 32 : i, sj = along_seq ? j : j / 32;
    x.real[static_cast<size_t>(n)] =
        codes[static_cast<size_t>(n)] * scales[static_cast<size_t>((plane * sd[2] + si) * sd[3] + sj)];
  }
  return x;
}

template <class Attr>
inline void set_mask(const Case& c, Setup& s, Attr& a) {
  const SdpaProblem& p = c.p;
  a.set_attn_scale(static_cast<float>(p.attn_scale));
  a.set_diagonal_alignment(p.bottom_right ? DiagonalAlignment_t::BOTTOM_RIGHT : DiagonalAlignment_t::TOP_LEFT);
  if (p.left_bound) a.set_diagonal_band_left_bound(*p.left_bound);
  if (p.right_bound) a.set_diagonal_band_right_bound(*p.right_bound);
  if (p.seq_len_q.empty()) return;
  HostTensor& lq = s.add(packed(s.g, "seq_q", {p.b, 1, 1, 1}, DT::INT32));
  HostTensor& lkv = s.add(packed(s.g, "seq_kv", {p.b, 1, 1, 1}, DT::INT32));
  for (int64_t b = 0; b < p.b; ++b) {
    lq.set(b, static_cast<double>(p.seq_len_q[static_cast<size_t>(b)]));
    lkv.set(b, static_cast<double>(p.seq_len_kv[static_cast<size_t>(b)]));
  }
  a.set_padding_mask(true).set_seq_len_q(lq.t).set_seq_len_kv(lkv.t);
}

inline SdpaProblem f32_scale(SdpaProblem p) {
  p.attn_scale = static_cast<float>(p.attn_scale);
  return p;
}

inline double amax(const std::vector<double>& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::fabs(e));
  return m;
}

// got is stored in `type`; want exact. fp64: its stored value (one step of slack for FP64 noise at a
// midpoint); FP32: the same plus FP32 noise and a few flipped FP8 roundings of P or dS per element.
inline void expect_stored_close(const HostTensor& got, const std::vector<double>& want, DT type, bool fp64,
                                double slack, const char* what) {
  SCOPED_TRACE(what);
  const std::vector<double> g = got.values();
  ASSERT_EQ(g.size(), want.size());
  const double noise = (fp64 ? 1e-9 : slack) * amax(want) + 1e-9;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_FALSE(std::isnan(g[i])) << "element " << i << " not written";
    const double e = detail::round_to(type, want[i]);
    const double step =
        type == DT::BFLOAT16 ? std::fabs(e) / 128 : (type == DT::HALF ? std::fabs(e) / 1024 : 1e-6 * std::fabs(e));
    ASSERT_LE(std::fabs(g[i] - e), noise + step) << "element " << i << " want " << want[i];
  }
}

inline double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) num += (got[i] - want[i]) * (got[i] - want[i]), den += want[i] * want[i];
  return std::sqrt(num / den);
}

}  // namespace frost::test::mxfp8
