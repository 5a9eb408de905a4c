// sdpa forward on variable-length layouts: ragged (THD) offsets, cumulative lengths, packed Stats,
// and paged K/V caches, against the naive formula on the logical [b, h, s, d] values.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "ops/sdpa/sdpa_node.h"
#include "ops/sdpa_json_replay.h"
#include "ops/sdpa_naive.h"
#include "test_util.h"

namespace frost::test {
namespace {

using graph::SDPA_attributes;
constexpr double kInf = std::numeric_limits<double>::infinity();
const DataType_t kI32 = DataType_t::INT32, kI64 = DataType_t::INT64;

// Where a [b, h, s, d] tensor's elements live. DENSE: BHSD packed. RAGGED: tokens of each batch
// packed token-major (THD) behind a gap, found through a ragged offset tensor. CU: packed tight and
// found through the cumulative lengths. HEAD_MAJOR (Stats only): [h, tokens] behind ragged offsets.
enum class Place { DENSE, RAGGED, CU, HEAD_MAJOR };

// Buffers of one tensor and how to find element (b, h, s, d).
struct Placed {
  TensorPtr t;
  std::unique_ptr<HostTensor> buf, offsets_buf;
  Place place = Place::DENSE;
  std::vector<int64_t> dim, start_token;
  int64_t total_tokens = 0;

  int64_t offset(int64_t b, int64_t h, int64_t s, int64_t d) const {
    const int64_t H = dim[1], S = dim[2], D = dim[3];
    if (place == Place::DENSE) return ((b * H + h) * S + s) * D + d;
    if (place == Place::HEAD_MAJOR) return h * total_tokens + start_token[static_cast<size_t>(b)] + s;
    return (start_token[static_cast<size_t>(b)] + s) * H * D + h * D + d;
  }
  std::vector<int64_t> strides() const {
    const int64_t H = dim[1], S = dim[2], D = dim[3];
    if (place == Place::RAGGED || place == Place::CU) return {S * H * D, D, H * D, 1};
    if (place == Place::HEAD_MAJOR) return {S, total_tokens, 1, 1};
    return {H * S * D, S * D, D, 1};
  }
  int64_t elements() const {
    return place == Place::DENSE ? dim[0] * dim[1] * dim[2] * dim[3] : total_tokens * dim[1] * dim[3];
  }
  double get(int64_t n) const { return detail::read_element(buf->bytes.data(), t->get_data_type(), n); }
  void set(int64_t n, double v) { detail::write_element(buf->bytes.data(), t->get_data_type(), n, v); }
};

// Declares a tensor placed as asked; batch b's rows start after the previous batch's plus `gap` tokens.
std::unique_ptr<Placed> place(graph::Graph& g, const std::string& name, std::vector<int64_t> dim, DataType_t dt,
                              Place where, const std::vector<int64_t>& lens, int64_t gap, bool output = false) {
  auto p = std::make_unique<Placed>();
  p->place = where;
  p->dim = dim;
  if (where == Place::CU) gap = 0;
  for (int64_t len : lens) {
    p->start_token.push_back(p->total_tokens);
    p->total_tokens += len + gap;
  }
  if (!output) {
    graph::Tensor_attributes a;
    a.set_name(name).set_dim(dim).set_stride(p->strides()).set_data_type(dt);
    p->t = g.tensor(a);
  }
  return p;
}

// Gives a placed tensor (declared by sdpa() when an output) its ragged offsets and buffer.
void bind_placed(graph::Graph& g, Placed& p, const TensorPtr& declared) {
  if (declared) p.t = declared;
  if (p.place == Place::RAGGED || p.place == Place::HEAD_MAJOR) {
    const int64_t b = p.dim[0];
    const int64_t unit = p.place == Place::HEAD_MAJOR ? 1 : p.dim[1] * p.dim[3];
    auto ro = input(g, p.t->get_name() + "_offsets", {b + 1, 1, 1, 1}, kI64, {1, 1, 1, 1});
    p.t->set_ragged_offset(ro);
    p.offsets_buf = std::make_unique<HostTensor>(ro);
    for (int64_t n = 0; n < b; ++n)
      p.offsets_buf->set(n, static_cast<double>(p.start_token[static_cast<size_t>(n)] * unit));
    p.offsets_buf->set(b, static_cast<double>(p.total_tokens * unit));
  }
}

void allocate(Placed& p) {
  p.buf = std::make_unique<HostTensor>(p.t);
  const int64_t bits = element_bits(p.t->get_data_type());
  p.buf->bytes.assign(static_cast<size_t>((p.elements() * bits + 7) / 8 + 8), 0);
}

// The logical [b, h, s, d] values below each batch's length (0 beyond it).
std::vector<double> logical(const Placed& p, const std::vector<int64_t>& lens) {
  std::vector<double> v(static_cast<size_t>(p.dim[0] * p.dim[1] * p.dim[2] * p.dim[3]), 0.0);
  size_t n = 0;
  for (int64_t b = 0; b < p.dim[0]; ++b)
    for (int64_t h = 0; h < p.dim[1]; ++h)
      for (int64_t s = 0; s < p.dim[2]; ++s)
        for (int64_t d = 0; d < p.dim[3]; ++d, ++n)
          if (p.place == Place::DENSE || s < lens[static_cast<size_t>(b)]) v[n] = p.get(p.offset(b, h, s, d));
  return v;
}

// In a packed output every element outside the rows below the lengths keeps its sentinel.
void expect_only_rows_written(const Placed& p, const std::vector<int64_t>& lens) {
  if (p.place == Place::DENSE) return;
  std::set<int64_t> rows;
  for (int64_t b = 0; b < p.dim[0]; ++b)
    for (int64_t h = 0; h < p.dim[1]; ++h)
      for (int64_t s = 0; s < lens[static_cast<size_t>(b)]; ++s)
        for (int64_t d = 0; d < p.dim[3]; ++d) rows.insert(p.offset(b, h, s, d));
  int64_t wrong = 0;
  for (int64_t n = 0; n < p.elements(); ++n) wrong += std::isnan(p.get(n)) == (rows.count(n) > 0);
  EXPECT_EQ(wrong, 0) << p.t->get_name() << ": elements written outside the rows, or rows left unwritten";
}

struct RaggedCase {
  std::string label;
  DataType_t io = DataType_t::FLOAT;
  bool fp64 = false;
  Place q = Place::RAGGED, kv = Place::RAGGED, o = Place::RAGGED, stats = Place::RAGGED;
  bool cu_q = false, cu_kv = false;  // lengths as cumulative counts instead of seq_len
  bool bottom_right_causal = false;
};
void PrintTo(const RaggedCase& c, std::ostream* os) { *os << c.label; }

class SdpaRagged : public ::testing::TestWithParam<RaggedCase> {};

TEST_P(SdpaRagged, MatchesNaiveAndWritesOnlyRows) {
  const RaggedCase& c = GetParam();
  SdpaProblem p;
  p.b = 3, p.h_q = 4, p.h_k = 2, p.h_v = 2, p.s_q = 17, p.s_kv = 23, p.d_qk = 24, p.d_v = 16, p.attn_scale = 0.25;
  p.seq_len_q = {17, 1, 9}, p.seq_len_kv = {5, 23, 0};
  if (c.bottom_right_causal) p.bottom_right = true, p.right_bound = 0;
  graph::Graph g;
  g.set_io_data_type(c.io).set_compute_data_type(c.fp64 ? DataType_t::DOUBLE : DataType_t::FLOAT);
  auto q = place(g, "q", {p.b, p.h_q, p.s_q, p.d_qk}, c.io, c.q, p.seq_len_q, 2);
  auto k = place(g, "k", {p.b, p.h_k, p.s_kv, p.d_qk}, c.io, c.kv, p.seq_len_kv, 3);
  auto v = place(g, "v", {p.b, p.h_v, p.s_kv, p.d_v}, c.io, c.kv, p.seq_len_kv, 1);
  auto o = place(g, "o", {p.b, p.h_q, p.s_q, p.d_v}, c.io, c.o, p.seq_len_q, 2, true);
  auto st = place(g, "stats", {p.b, p.h_q, p.s_q, 1}, DataType_t::FLOAT, c.stats, p.seq_len_q, 1, true);
  for (Placed* t : {q.get(), k.get(), v.get()}) bind_placed(g, *t, nullptr);
  SDPA_attributes a;
  a.set_name("attn").set_generate_stats(true).set_attn_scale(0.25f).set_padding_mask(true);
  if (c.bottom_right_causal) a.set_causal_mask_bottom_right(true);
  a.set_max_total_seq_len_q(std::max({q->total_tokens, o->total_tokens, st->total_tokens}));
  a.set_max_total_seq_len_kv(std::max(k->total_tokens, v->total_tokens));
  std::vector<std::unique_ptr<HostTensor>> lengths;
  auto lengths_of = [&](const std::vector<int64_t>& lens, bool cu, const char* name) {
    const int64_t n = static_cast<int64_t>(lens.size());
    auto t = cu ? input(g, name, {n + 1}, kI32, {1}) : input(g, name, {n, 1, 1, 1}, kI32, {1, 1, 1, 1});
    auto& buf = *lengths.emplace_back(std::make_unique<HostTensor>(t));
    int64_t total = 0;
    if (cu) buf.set(0, 0);
    for (int64_t b = 0; b < n; ++b) {
      total += lens[b];
      buf.set(cu ? b + 1 : b, static_cast<double>(cu ? total : lens[b]));
    }
    return t;
  };
  if (c.cu_q)
    a.set_cu_seq_len_q(lengths_of(p.seq_len_q, true, "cu_q"));
  else
    a.set_seq_len_q(lengths_of(p.seq_len_q, false, "len_q"));
  if (c.cu_kv)
    a.set_cu_seq_len_kv(lengths_of(p.seq_len_kv, true, "cu_kv"));
  else
    a.set_seq_len_kv(lengths_of(p.seq_len_kv, false, "len_kv"));
  auto [o_t, stats_t] = g.sdpa(q->t, k->t, v->t, a);
  for (auto [placed, declared] : {std::pair{o.get(), o_t}, std::pair{st.get(), stats_t}}) {
    declared->set_output(true).set_dim(placed->dim).set_stride(placed->strides());
    bind_placed(g, *placed, declared);
  }
  ASSERT_TRUE(g.validate().is_good()) << g.validate().get_message();

  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (Placed* t : {q.get(), k.get(), v.get()}) {
    allocate(*t);
    for (int64_t n = 0; n < t->elements(); ++n) t->set(n, u(rng));
  }
  for (Placed* t : {o.get(), st.get()}) {
    allocate(*t);
    for (int64_t n = 0; n < t->elements(); ++n) t->set(n, NAN);
  }
  std::vector<HostTensor*> buffers;
  for (Placed* t : {q.get(), k.get(), v.get(), o.get(), st.get()}) {
    buffers.push_back(t->buf.get());
    if (t->offsets_buf) buffers.push_back(t->offsets_buf.get());
  }
  for (auto& l : lengths) buffers.push_back(l.get());
  const error_t e = build_and_run(g, buffers);
  ASSERT_TRUE(e.is_good()) << e.get_message();

  const SdpaNaiveResult want =
      sdpa_naive(p, logical(*q, p.seq_len_q), logical(*k, p.seq_len_kv), logical(*v, p.seq_len_kv));
  const double o_tol = c.io == DataType_t::BFLOAT16 ? 1.6e-2 : c.io == DataType_t::HALF ? 2e-3 : 2e-6;
  EXPECT_CLOSE(logical(*o, p.seq_len_q), want.o, o_tol);
  std::vector<double> stats_want = want.stats;
  if (c.stats != Place::DENSE)  // packed Stats has no padding rows; compare the rows only
    for (int64_t b = 0; b < p.b; ++b)
      for (int64_t h = 0; h < p.h_q; ++h)
        for (int64_t s = p.seq_len_q[static_cast<size_t>(b)]; s < p.s_q; ++s)
          stats_want[static_cast<size_t>((b * p.h_q + h) * p.s_q + s)] = 0;
  EXPECT_CLOSE(logical(*st, p.seq_len_q), stats_want, 2e-5);
  expect_only_rows_written(*o, p.seq_len_q);
  expect_only_rows_written(*st, p.seq_len_q);
  // Ragged offsets, cumulative lengths and max_total_seq_len survive serialization.
  expect_json_replay_identical(g, buffers, {o->buf.get(), st->buf.get()});
}

std::vector<RaggedCase> ragged_cases() {
  std::vector<RaggedCase> cs;
  auto add = [&](RaggedCase c) { cs.push_back(c); };
  add({"thd_fp32"});
  add({"thd_bf16", DataType_t::BFLOAT16});
  add({"thd_fp16_causal_br", DataType_t::HALF, false, Place::RAGGED, Place::RAGGED, Place::RAGGED, Place::RAGGED, false,
       false, true});
  add({"thd_fp64", DataType_t::FLOAT, true});
  add({"stats_head_major", DataType_t::FLOAT, false, Place::RAGGED, Place::RAGGED, Place::RAGGED, Place::HEAD_MAJOR});
  add({"stats_padded_o_dense", DataType_t::FLOAT, false, Place::RAGGED, Place::RAGGED, Place::DENSE, Place::DENSE});
  add({"cu_q_seq_kv", DataType_t::FLOAT, false, Place::CU, Place::RAGGED, Place::CU, Place::CU, true, false});
  add({"seq_q_cu_kv", DataType_t::BFLOAT16, false, Place::RAGGED, Place::CU, Place::RAGGED, Place::RAGGED, false,
       true});
  add({"cu_both_ragged_offsets", DataType_t::FLOAT, false, Place::RAGGED, Place::RAGGED, Place::RAGGED,
       Place::HEAD_MAJOR, true, true});
  add({"dense_q_ragged_kv", DataType_t::FLOAT, false, Place::DENSE, Place::RAGGED, Place::DENSE, Place::DENSE});
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Layouts, SdpaRagged, ::testing::ValuesIn(ragged_cases()),
                         [](const auto& info) { return info.param.label; });

// A paged cache: K and V are pools of pages, each batch's keys scattered over pages named by its
// table; page size 5 does not divide the lengths, and table entries past a length are invalid ids
// that must never be read.
struct PagedSetup {
  SdpaProblem p;
  graph::Graph g;
  std::vector<std::unique_ptr<HostTensor>> bufs;
  std::unique_ptr<HostTensor> o, stats;
  std::vector<double> q_logical, k_logical, v_logical;
  HostTensor* k_table = nullptr;

  PagedSetup(DataType_t io, std::optional<int64_t> max_seq_len_kv) {
    const int64_t page_size = 5, pages_per_seq = 5, num_pages = 17, h_k = 2;
    p.b = 3, p.h_q = 4, p.h_k = h_k, p.h_v = h_k, p.s_q = 3, p.d_qk = 16, p.d_v = 8, p.attn_scale = 0.4;
    p.s_kv = max_seq_len_kv.value_or(page_size * pages_per_seq);
    p.seq_len_q = {3, 1, 2}, p.seq_len_kv = {23, 7, 11};
    p.bottom_right = true, p.right_bound = 0;
    g.set_io_data_type(io).set_compute_data_type(DataType_t::FLOAT);
    auto q = input(g, "q", {p.b, p.h_q, p.s_q, p.d_qk}, io, {p.s_q * p.h_q * p.d_qk, p.d_qk, p.h_q * p.d_qk, 1});
    auto k = input(g, "k_pool", {num_pages, h_k, page_size, p.d_qk}, io);
    auto v = input(g, "v_pool", {num_pages, h_k, page_size, p.d_v}, io);
    auto kt = input(g, "k_table", {p.b, 1, pages_per_seq, 1}, kI32);
    auto vt = input(g, "v_table", {p.b, 1, pages_per_seq, 1}, kI32);
    auto lq = input(g, "len_q", {p.b, 1, 1, 1}, kI32), lkv = input(g, "len_kv", {p.b, 1, 1, 1}, kI32);
    SDPA_attributes a;
    a.set_name("attn").set_generate_stats(true).set_attn_scale(0.4f).set_causal_mask_bottom_right(true);
    a.set_padding_mask(true).set_seq_len_q(lq).set_seq_len_kv(lkv);
    a.set_paged_attention_k_table(kt).set_paged_attention_v_table(vt);
    if (max_seq_len_kv) a.set_paged_attention_max_seq_len_kv(*max_seq_len_kv);
    auto [o_t, stats_t] = g.sdpa(q, k, v, a);
    o_t->set_output(true);
    stats_t->set_output(true);
    EXPECT_TRUE(g.validate().is_good()) << g.validate().get_message();

    std::mt19937_64 rng(9);
    auto add = [&](const TensorPtr& t) -> HostTensor& { return *bufs.emplace_back(std::make_unique<HostTensor>(t)); };
    HostTensor &qb = add(q), &kb = add(k), &vb = add(v), &ktb = add(kt), &vtb = add(vt), &lqb = add(lq),
               &lkvb = add(lkv);
    for (HostTensor* t : {&qb, &kb, &vb}) t->fill_random(rng);
    for (int64_t b = 0; b < p.b; ++b) {
      lqb.set(b, static_cast<double>(p.seq_len_q[static_cast<size_t>(b)]));
      lkvb.set(b, static_cast<double>(p.seq_len_kv[static_cast<size_t>(b)]));
    }
    // Each table draws its own random pages; entries past the keys are out-of-range sentinels.
    for (HostTensor* table : {&ktb, &vtb}) {
      std::vector<int> pages(num_pages);
      std::iota(pages.begin(), pages.end(), 0);
      std::shuffle(pages.begin(), pages.end(), rng);
      for (int64_t b = 0; b < p.b; ++b)
        for (int64_t n = 0; n < pages_per_seq; ++n) {
          const bool used = n * page_size < p.seq_len_kv[static_cast<size_t>(b)];
          table->set(b * pages_per_seq + n, used ? pages[static_cast<size_t>(b * pages_per_seq + n) % num_pages] : -7);
        }
    }
    k_table = &ktb;
    q_logical = qb.values();
    auto gather = [&](const HostTensor& pool, const HostTensor& table, int64_t d_head) {
      std::vector<double> out(static_cast<size_t>(p.b * h_k * p.s_kv * d_head), 0.0);
      const std::vector<double> pv = pool.values(), tv = table.values();
      for (int64_t b = 0; b < p.b; ++b)
        for (int64_t h = 0; h < h_k; ++h)
          for (int64_t j = 0; j < p.seq_len_kv[static_cast<size_t>(b)]; ++j) {
            const auto page = static_cast<int64_t>(tv[static_cast<size_t>(b * pages_per_seq + j / page_size)]);
            for (int64_t d = 0; d < d_head; ++d)
              out[static_cast<size_t>(((b * h_k + h) * p.s_kv + j) * d_head + d)] =
                  pv[static_cast<size_t>(((page * h_k + h) * page_size + j % page_size) * d_head + d)];
          }
      return out;
    };
    k_logical = gather(kb, ktb, p.d_qk);
    v_logical = gather(vb, vtb, p.d_v);
    o = std::make_unique<HostTensor>(o_t);
    stats = std::make_unique<HostTensor>(stats_t);
    o->poison();
    stats->poison();
  }
  std::vector<HostTensor*> buffers() {
    std::vector<HostTensor*> all{o.get(), stats.get()};
    for (auto& b : bufs) all.push_back(b.get());
    return all;
  }
};

TEST(SdpaPaged, MatchesNaiveWithPagesThatDoNotDivideTheLength) {
  for (DataType_t io : {DataType_t::FLOAT, DataType_t::BFLOAT16})
    for (std::optional<int64_t> max_len : {std::optional<int64_t>(23), std::optional<int64_t>()}) {
      SCOPED_TRACE(std::string(to_string(io)) + (max_len ? " max 23" : " max unset"));
      PagedSetup s(io, max_len);
      const error_t e = build_and_run(s.g, s.buffers());
      ASSERT_TRUE(e.is_good()) << e.get_message();
      const SdpaNaiveResult want = sdpa_naive(s.p, s.q_logical, s.k_logical, s.v_logical);
      EXPECT_CLOSE(s.o->values(), want.o, io == DataType_t::FLOAT ? 2e-6 : 1.6e-2);
      EXPECT_CLOSE(s.stats->values(), want.stats, 2e-5);
      expect_json_replay_identical(s.g, s.buffers(), {s.o.get(), s.stats.get()});
    }
}

TEST(SdpaPaged, PageIdOutOfRangeFailsAndLeavesOutputsUntouched) {
  PagedSetup s(DataType_t::FLOAT, 23);
  s.k_table->set(5 + 1, 17);  // batch 1, page 1 holds keys 5 and 6 of its 7
  const error_t e = build_and_run(s.g, s.buffers());
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  for (const auto& m : {"'attn'", "PAGE_TABLE_K", "17 at batch 1, page 1"})
    EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  for (double x : s.o->values()) ASSERT_TRUE(std::isnan(x));
}

TEST(SdpaRaggedChecks, ReadsPastMaxTotalSeqLenFail) {
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT);
  auto q = place(g, "q", {2, 1, 4, 8}, DataType_t::FLOAT, Place::CU, {4, 3}, 0);
  auto lq = input(g, "cu_q", {3, 1, 1, 1}, kI32, {1, 1, 1, 1});
  auto k = input(g, "k", {2, 1, 5, 8}), v = input(g, "v", {2, 1, 5, 8});
  auto lkv = input(g, "len_kv", {2, 1, 1, 1}, kI32);
  SDPA_attributes a;
  a.set_name("attn").set_padding_mask(true).set_cu_seq_len_q(lq).set_seq_len_kv(lkv).set_max_total_seq_len_q(6);
  auto [o, stats] = g.sdpa(q->t, k, v, a);
  o->set_output(true);
  ASSERT_TRUE(g.validate().is_good());
  allocate(*q);
  HostTensor kb(k), vb(v), lqb(lq), lkvb(lkv), ob(o);
  for (int64_t n = 0; n < 3; ++n) lqb.set(n, n == 0 ? 0.0 : n == 1 ? 4.0 : 7.0);
  for (int64_t n = 0; n < 2; ++n) lkvb.set(n, 5);
  ob.poison();
  const error_t e = build_and_run(g, {q->buf.get(), &kb, &vb, &lqb, &lkvb, &ob});
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  for (const auto& m : {"'attn'", "Q rows", "max_total_seq_len = 6"})
    EXPECT_NE(e.get_message().find(m), std::string::npos) << m << " in " << e.get_message();
  for (double x : ob.values()) ASSERT_TRUE(std::isnan(x));
}

}  // namespace
}  // namespace frost::test
