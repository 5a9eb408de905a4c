// sdpa_backward on the forward's training features (ragged and packed layouts, cumulative lengths,
// packed Stats, dropout, block masks): against the naive backward on the logical values, against
// central differences of the forward reference in fp64, rows outside the lengths left alone,
// empty rows at exactly zero, run-to-run and JSON replays bitwise identical.
#include "ops/sdpa_backward_varlen.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <set>

namespace frost::test::varlen {
namespace {

// Whether query row i of (b, h) sees any key: lengths, band and block mask as the forward applies them.
bool sees_a_key(const SdpaProblem& p, const std::vector<int64_t>& lq, const std::vector<int64_t>& lkv, int64_t b,
                int64_t i) {
  const int64_t rows = lq[static_cast<size_t>(b)], keys = lkv[static_cast<size_t>(b)];
  const int64_t diag = p.bottom_right ? i + keys - rows : i;
  for (int64_t j = 0; j < keys; ++j) {
    if (p.right_bound && j > diag + *p.right_bound) continue;
    if (!p.block_mask_dim.empty() &&
        p.block_mask[static_cast<size_t>((b * p.block_mask_dim[2] + i / p.tile_q) * p.block_mask_dim[3] +
                                         j / p.tile_kv)] == 0)
      continue;
    return true;
  }
  return false;
}

// A packed gradient is written exactly on the rows below the lengths (the rest keeps its NaN
// sentinel); a dense one everywhere, with zeros on the padding rows.
void expect_rows_written(const Stored& t, const std::vector<int64_t>& lens, const char* what) {
  std::set<int64_t> rows;
  for (int64_t b = 0; b < t.dim[0]; ++b)
    for (int64_t h = 0; h < t.dim[1]; ++h)
      for (int64_t s = 0; s < lens[static_cast<size_t>(b)]; ++s)
        for (int64_t d = 0; d < t.dim[3]; ++d) rows.insert(t.offset(b, h, s, d));
  int64_t wrong = 0;
  for (int64_t n = 0; n < t.elements(); ++n) {
    const double x = t.get(n);
    if (t.place == Place::DENSE)
      wrong += std::isnan(x) || (rows.count(n) == 0 && x != 0.0);
    else
      wrong += std::isnan(x) == (rows.count(n) > 0);
  }
  EXPECT_EQ(wrong, 0) << what << ": elements written outside the rows, or rows left unwritten";
}

double largest(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// Storage rounding of 16-bit gradients, FP32 Stats (which bound even the fp64 mode), FP32 sums.
double tolerance(const Case& c) {
  if (c.fp64) return 1e-6;
  if (c.io == DataType_t::BFLOAT16) return 8e-3;
  if (c.io == DataType_t::HALF) return 5e-4;
  return 2e-6;
}

// The loss sum(dO * O) over the rows that exist, through the forward graph on the stored operands.
double loss(Trial& r) {
  EXPECT_TRUE(execute(r.fwd, r.fwd_pack).is_good());
  const std::vector<int64_t> lq = r.lens_q();
  const std::vector<double> o = logical(*r.o, lq), d_o = logical(*r.d_o, lq);
  double sum = 0;
  for (size_t n = 0; n < o.size(); ++n) sum += o[n] * d_o[n];
  return sum;
}

// Central differences (step 2^-12, exact in DOUBLE) of the loss for each logical element of `t`
// below the lengths; 0 elsewhere, like the gradients' logical view.
std::vector<double> central_differences(Trial& r, Stored& t, const std::vector<int64_t>& lens) {
  constexpr double kStep = 1.0 / 4096;
  std::vector<double> grad;
  for (int64_t b = 0; b < t.dim[0]; ++b)
    for (int64_t h = 0; h < t.dim[1]; ++h)
      for (int64_t s = 0; s < t.dim[2]; ++s)
        for (int64_t d = 0; d < t.dim[3]; ++d) {
          if (s >= lens[static_cast<size_t>(b)]) {
            grad.push_back(0.0);
            continue;
          }
          const int64_t n = t.offset(b, h, s, d);
          const double x0 = t.get(n);
          t.set(n, x0 + kStep);
          const double up = loss(r);
          t.set(n, x0 - kStep);
          const double down = loss(r);
          t.set(n, x0);
          grad.push_back((up - down) / (2 * kStep));
        }
  return grad;
}

class SdpaBackwardVarlen : public ::testing::TestWithParam<Case> {};

TEST_P(SdpaBackwardVarlen, MatchesNaiveAndFiniteDifferences) {
  const Case& c = GetParam();
  Ran ran = run_case(c);
  ASSERT_TRUE(ran.ok);
  Trial& r = *ran.r;
  const SdpaProblem& p = r.pr.p;
  const std::vector<int64_t> lq = r.lens_q(), lkv = r.lens_kv();
  const SdpaGradients want =
      sdpa_backward_naive(p, logical(*r.q, lq), logical(*r.k, lkv), logical(*r.v, lkv), logical(*r.d_o, lq));
  const std::vector<double> dq = logical(*r.dq, lq), dk = logical(*r.dk, lkv), dv = logical(*r.dv, lkv);
  const double tol = tolerance(c);
  EXPECT_CLOSE(dq, want.dq, tol * (1 + largest(want.dq)));
  EXPECT_CLOSE(dk, want.dk, tol * (1 + largest(want.dk)));
  EXPECT_CLOSE(dv, want.dv, tol * (1 + largest(want.dv)));
  expect_rows_written(*r.dq, lq, "dQ");
  expect_rows_written(*r.dk, lkv, "dK");
  expect_rows_written(*r.dv, lkv, "dV");

  // Rows that see no key get exactly zero (Stats is -inf there), never NaN.
  int64_t dead = 0;
  for (int64_t b = 0; b < p.b; ++b)
    for (int64_t i = 0; i < lq[static_cast<size_t>(b)]; ++i) {
      if (sees_a_key(p, lq, lkv, b, i)) continue;
      ++dead;
      for (int64_t h = 0; h < p.h_q; ++h)
        for (int64_t d = 0; d < p.d_qk; ++d) ASSERT_EQ(r.dq->get(r.dq->offset(b, h, i, d)), 0.0) << b << " " << i;
    }
  if (c.causal_bottom_right || c.block_mask) {
    EXPECT_GT(dead, 0) << "the case should have rows that see no key";
  }

  if (c.finite_differences) {
    SCOPED_TRACE("central differences");
    const std::vector<double> fd_q = central_differences(r, *r.q, lq);
    const std::vector<double> fd_k = central_differences(r, *r.k, lkv);
    const std::vector<double> fd_v = central_differences(r, *r.v, lkv);
    EXPECT_CLOSE(dq, fd_q, tol * (1 + largest(fd_q)));
    EXPECT_CLOSE(dk, fd_k, tol * (1 + largest(fd_k)));
    EXPECT_CLOSE(dv, fd_v, tol * (1 + largest(fd_v)));
    loss(r);  // O and Stats back to the unperturbed operands
  }

  // Deterministic: a second run, and a run of the graph read back from its JSON, give the same bytes.
  const std::vector<std::vector<uint8_t>> first{r.dq->bytes, r.dk->bytes, r.dv->bytes};
  auto again = [&](graph::Graph& g) {
    for (Stored* t : {r.dq.get(), r.dk.get(), r.dv.get()}) t->fill(NAN);
    const error_t e = execute(g, r.bwd_pack);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    EXPECT_EQ(r.dq->bytes, first[0]);
    EXPECT_EQ(r.dk->bytes, first[1]);
    EXPECT_EQ(r.dv->bytes, first[2]);
  };
  again(r.bwd);
  std::string text;
  ASSERT_TRUE(r.bwd.serialize(text).is_good());
  graph::Graph replay;
  error_t e = replay.deserialize(text);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  Handle h = cpu_handle();
  e = replay.build(h, {HeurMode_t::A});
  ASSERT_TRUE(e.is_good()) << e.get_message();
  again(replay);
  std::string text_again;
  ASSERT_TRUE(replay.serialize(text_again).is_good());
  EXPECT_EQ(text_again, text);
}

std::vector<Case> cases() {
  using D = Case::Drop;
  const Place C = Place::CU, H = Place::HEAD_MAJOR, N = Place::DENSE;  // RAGGED is the default
  const DataType_t f64 = DataType_t::DOUBLE;
  std::vector<Case> cs;
  auto add = [&](std::string label, auto tweak) {
    Case c;
    c.label = std::move(label);
    tweak(c);
    if (c.fp64) c.io = f64;
    cs.push_back(c);
  };
  add("thd_fp32", [](Case&) {});
  add("thd_bf16", [](Case& c) { c.io = DataType_t::BFLOAT16; });
  add("thd_fp64", [](Case& c) { c.fp64 = c.finite_differences = true; });
  add("thd_causal_bottom_right_fp64", [](Case& c) { c.fp64 = c.finite_differences = c.causal_bottom_right = true; });
  add("cu_q_seq_kv_fp64", [&](Case& c) {
    c.fp64 = c.finite_differences = c.cu_q = true;
    c.q = c.o = c.d_o = c.stats = c.dq = C;
  });
  add("seq_q_cu_kv_fp16", [&](Case& c) {
    c.io = DataType_t::HALF, c.cu_kv = true;
    c.kv = c.dkv = C;
  });
  add("cu_both_ragged_offsets_head_major_stats_fp64", [&](Case& c) {
    c.fp64 = c.finite_differences = c.cu_q = c.cu_kv = true;
    c.stats = H, c.dq = C, c.dkv = C;
  });
  add("padded_stats_and_o_fp64", [&](Case& c) {
    c.fp64 = c.finite_differences = true;
    c.o = c.d_o = c.stats = c.dq = N;
  });
  add("dense_padded_everything", [&](Case& c) { c.q = c.kv = c.o = c.d_o = c.stats = c.dq = c.dkv = N; });
  add("dropout_philox_dense_fp64", [&](Case& c) {
    c.fp64 = c.finite_differences = true, c.padding = false, c.drop = D::PHILOX;
    c.q = c.kv = c.o = c.d_o = c.stats = c.dq = c.dkv = N;
  });
  add("dropout_philox_thd_fp64", [](Case& c) { c.fp64 = c.finite_differences = true, c.drop = D::PHILOX; });
  add("dropout_philox_thd_bf16", [](Case& c) { c.io = DataType_t::BFLOAT16, c.drop = D::PHILOX; });
  add("dropout_mask_fp64", [&](Case& c) {
    c.fp64 = c.finite_differences = true, c.drop = D::MASK;
    c.q = c.kv = c.o = c.d_o = c.stats = c.dq = c.dkv = N;
  });
  add("block_mask_dense_fp64", [&](Case& c) {
    c.fp64 = c.finite_differences = true, c.padding = false, c.block_mask = true;
    c.q = c.kv = c.o = c.d_o = c.stats = c.dq = c.dkv = N;
  });
  add("block_mask_fp32", [](Case& c) { c.block_mask = true; });
  add("everything_thd_fp64", [&](Case& c) {
    c.fp64 = c.finite_differences = c.block_mask = c.causal_bottom_right = c.cu_q = true, c.drop = D::PHILOX;
    c.stats = H, c.dq = C;
  });
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Features, SdpaBackwardVarlen, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.label; });

// The checks can fail: gradients of the same graph without its dropout are far from these.
TEST(SdpaBackwardVarlenChecks, NaiveWithoutTheMaskDisagrees) {
  Case c;
  c.label = "checker", c.drop = Case::Drop::PHILOX;
  Ran ran = run_case(c);
  ASSERT_TRUE(ran.ok);
  Trial& r = *ran.r;
  SdpaProblem unmasked = r.pr.p;
  unmasked.drop_factor.clear();
  const std::vector<int64_t> lq = r.lens_q(), lkv = r.lens_kv();
  const SdpaGradients wrong =
      sdpa_backward_naive(unmasked, logical(*r.q, lq), logical(*r.k, lkv), logical(*r.v, lkv), logical(*r.d_o, lq));
  EXPECT_GT(compare(logical(*r.dv, lkv), wrong.dv).max_abs, 0.05);
}

// Bad values found at execution fail with the port and value named, leaving every gradient as it was.
TEST(SdpaBackwardVarlenChecks, BadValuesAtExecutionLeaveGradientsUntouched) {
  struct Bad {
    const char* label;
    std::function<void(Case&)> tweak;
    std::function<void(Trial&)> spoil;
    std::vector<std::string> mentions;
  };
  const std::vector<Bad> bad = {
      {"scale_inv",
       [](Case& c) { c.drop = Case::Drop::MASK; },
       [](Trial& r) { r.bwd_scalars.scale_inv = 0.5f; },
       {"DROPOUT_SCALE_INV", "1 / DROPOUT_SCALE"}},
      {"rows_past_max_total",
       [](Case&) {},
       [](Trial& r) { r.q->offsets[1] += 40 * r.p_unit(); },
       {"Q rows", "max_total_seq_len"}},
      {"decreasing_cu",
       [](Case& c) { c.cu_q = true; },
       [](Trial& r) { r.bwd_scalars.len_q[2] = 0; },
       {"CU_SEQ_LEN_Q", "1, 0 at batch 1"}},
      {"negative_offset", [](Case&) {}, [](Trial& r) { r.dk->offsets[0] = -4; }, {"DK row start", "-4 at batch 0"}},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.label);
    Case c;
    c.label = b.label;
    b.tweak(c);
    Ran ran = run_case(c);
    ASSERT_TRUE(ran.ok);
    Trial& r = *ran.r;
    b.spoil(r);
    for (Stored* t : {r.dq.get(), r.dk.get(), r.dv.get()}) t->fill(NAN);
    const std::vector<std::vector<uint8_t>> before{r.dq->bytes, r.dk->bytes, r.dv->bytes};
    const error_t e = execute(r.bwd, r.bwd_pack);
    EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
    EXPECT_NE(e.get_message().find("'attn'"), std::string::npos) << e.get_message();
    for (const std::string& m : b.mentions) EXPECT_NE(e.get_message().find(m), std::string::npos) << e.get_message();
    EXPECT_EQ(r.dq->bytes, before[0]);
    EXPECT_EQ(r.dk->bytes, before[1]);
    EXPECT_EQ(r.dv->bytes, before[2]);
  }
}

// The serialized node names every training port and attribute.
TEST(SdpaBackwardVarlenChecks, JsonNamesTheTrainingPortsAndAttributes) {
  Case c;
  c.label = "json", c.cu_q = true, c.block_mask = true, c.drop = Case::Drop::PHILOX, c.q = c.o = Place::CU;
  Ran ran = run_case(c);
  ASSERT_TRUE(ran.ok);
  std::string text;
  ASSERT_TRUE(ran.r->bwd.serialize(text).is_good());
  const nlohmann::json node = nlohmann::json::parse(text)["nodes"][0];
  ASSERT_EQ(node["tag"], "SDPA_BACKWARD");
  for (const char* key : {"max_total_seq_len_q", "max_total_seq_len_kv", "dropout_probability", "block_mask_tile_q",
                          "block_mask_tile_kv"})
    EXPECT_TRUE(node.contains(key)) << key;
  for (const char* port : {"CU_SEQ_LEN_Q", "SEQ_LEN_KV", "BLOCK_MASK", "DROPOUT_SEED", "DROPOUT_OFFSET"})
    EXPECT_TRUE(node["inputs"].contains(port)) << port;
  EXPECT_EQ(node["block_mask_tile_q"], 4);
  EXPECT_FLOAT_EQ(node["dropout_probability"].get<float>(), 0.3f);
}

// Paged K/V caches are an inference feature: the backward's attributes have no page-table setters.
template <class A>
concept HasPagedSetters = requires(A a, TensorPtr t) {
  a.set_paged_attention_k_table(t);
  a.set_paged_attention_v_table(t);
};
static_assert(HasPagedSetters<SDPA_attributes>, "the forward takes page tables");
static_assert(!HasPagedSetters<SDPA_backward_attributes>, "the backward has no page tables");
template <class A>
concept HasPagedLength = requires(A a) {
  a.set_paged_attention_max_seq_len_kv(int64_t{1});
};
static_assert(!HasPagedLength<SDPA_backward_attributes>, "the backward has no paged length");

}  // namespace
}  // namespace frost::test::varlen
