// The sm90_sdpa_bwd engine on packed (THD) operands and gradients, against the fp64 reference of the same
// problem stored densely (sm90_sdpa_bwd_harness.h); the gaps between packed sequences must stay untouched.
#include "sm90_sdpa_bwd_harness.h"

namespace frost::test {
namespace {

using namespace sdpa_bwd;

// ---------------------------------------------------------------- THD (packed) layouts
// A packed tensor's storage: batch b's tokens start at token start[b], token-major ([token][h][d]), with `gap`
// unused tokens after each batch; head-major Stats are [h][token]. Offsets are INT64 element offsets [b + 1].
struct PackedBuf {
  std::vector<int64_t> dim;  // logical [b, h, s, d]
  DataType_t dt = DataType_t::FLOAT;
  bool head_major = false;  // Stats only
  std::vector<int64_t> start, offsets;
  int64_t tokens = 0;
  std::vector<uint8_t> bytes;
  void* dev = nullptr;

  int64_t at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    if (head_major) return h * tokens + start[static_cast<size_t>(b)] + s;
    return (start[static_cast<size_t>(b)] + s) * dim[1] * dim[3] + h * dim[3] + d;
  }
  std::vector<int64_t> strides() const {
    if (head_major) return {dim[2], tokens, 1, 1};
    return {dim[2] * dim[1] * dim[3], dim[3], dim[1] * dim[3], 1};
  }
  int64_t elements() const { return tokens * dim[1] * dim[3]; }
};

PackedBuf packed(std::vector<int64_t> dim, DataType_t dt, const std::vector<int64_t>& lens, int64_t gap,
                 bool head_major = false) {
  PackedBuf t;
  t.dim = std::move(dim), t.dt = dt, t.head_major = head_major;
  for (int64_t len : lens) t.start.push_back(t.tokens), t.tokens += len + gap;
  const int64_t unit = head_major ? 1 : t.dim[1] * t.dim[3];
  for (int64_t st : t.start) t.offsets.push_back(st * unit);
  t.offsets.push_back(t.tokens * unit);
  t.bytes.assign(static_cast<size_t>(t.elements() * element_bits(dt) / 8 + 16), 0);
  return t;
}

// Dense logical values [b, h, s, d] into the packed buffer (rows s < len[b]); `fill` everywhere else.
void pack(PackedBuf& t, const std::vector<double>& dense, const std::vector<int64_t>& lens, double fill) {
  for (int64_t n = 0; n < t.elements(); ++n) detail::write_element(t.bytes.data(), t.dt, n, fill);
  const int64_t H = t.dim[1], S = t.dim[2], D = t.dim[3];
  for (int64_t b = 0; b < t.dim[0]; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < lens[static_cast<size_t>(b)]; ++i)
        for (int64_t e = 0; e < D; ++e)
          detail::write_element(t.bytes.data(), t.dt, t.at(b, h, i, e),
                                dense[static_cast<size_t>(((b * H + h) * S + i) * D + e)]);
}

// The packed buffer as dense logical values (rows past a batch's length read 0), and whether every element outside
// the batches' rows still holds `fill` (NaN: untouched).
std::vector<double> unpack(const PackedBuf& t, const std::vector<int64_t>& lens, bool& outside_untouched) {
  const int64_t H = t.dim[1], S = t.dim[2], D = t.dim[3];
  std::vector<double> v(static_cast<size_t>(t.dim[0] * H * S * D), 0.0);
  std::vector<bool> inside(static_cast<size_t>(t.elements()), false);
  for (int64_t b = 0; b < t.dim[0]; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < lens[static_cast<size_t>(b)]; ++i)
        for (int64_t e = 0; e < D; ++e) {
          const int64_t n = t.at(b, h, i, e);
          inside[static_cast<size_t>(n)] = true;
          v[static_cast<size_t>(((b * H + h) * S + i) * D + e)] = detail::read_element(t.bytes.data(), t.dt, n);
        }
  outside_untouched = true;
  for (int64_t n = 0; n < t.elements(); ++n)
    if (!inside[static_cast<size_t>(n)] && !std::isnan(detail::read_element(t.bytes.data(), t.dt, n)))
      outside_untouched = false;
  return v;
}

struct ThdCase {
  GpuCase dense;       // the same problem with dense BHSD operands and a padding mask: reference and yardstick
  bool cu_kv = false;  // K, V, dK, dV packed tight and found through cu_seq_len_kv (no ragged offsets)
  bool head_major_stats = false;
};

// The backward on packed Q, K, V, O, dO, Stats and gradients (ragged offsets, gaps between batches, or
// cu_seq_len_kv), against the fp64 reference and the straightforward yardstick of the same problem stored densely.
// The gradients start poisoned; their rows outside the sequences must stay so.
void run_thd(const ThdCase& tc) {
  const Case& c = tc.dense.c;
  const SdpaProblem& p = c.p;
  SCOPED_TRACE(c.label);
  const Data d = random_data(c, std::hash<std::string>{}(c.label));
  const SdpaNaiveResult fwd = sdpa_naive(naive_problem(c, d), d.q, d.k, d.v, d.bias, d.sink);
  auto s = make_backward(c, d, fwd.o, fwd.stats);
  ASSERT_TRUE(s);
  std::unordered_map<int64_t, void*> hp;
  for (auto& b : s->buffers) hp[b->t->get_uid()] = b->data();
  ASSERT_TRUE(detail::reference_execute(s->g.state(), hp, detail::Precision::F64).is_good());
  const SdpaGradients want = read_gradients(*s);
  const SdpaGradients base = straightforward(c, *s);

  const std::vector<int64_t>& lq = p.seq_len_q;
  const std::vector<int64_t>& lkv = p.seq_len_kv;
  const int64_t gap_kv = tc.cu_kv ? 0 : 3;
  PackedBuf q = packed({p.b, p.h_q, p.s_q, p.d_qk}, c.io, lq, 2), o = packed({p.b, p.h_q, p.s_q, p.d_v}, c.io, lq, 1);
  PackedBuf d_o = packed({p.b, p.h_q, p.s_q, p.d_v}, c.io, lq, 5),
            dq = packed({p.b, p.h_q, p.s_q, p.d_qk}, c.io, lq, 3);
  PackedBuf st = packed({p.b, p.h_q, p.s_q, 1}, DataType_t::FLOAT, lq, 1, tc.head_major_stats);
  PackedBuf k = packed({p.b, p.h_k, p.s_kv, p.d_qk}, c.io, lkv, gap_kv);
  PackedBuf v = packed({p.b, p.h_v, p.s_kv, p.d_v}, c.io, lkv, gap_kv);
  PackedBuf dk = packed({p.b, p.h_k, p.s_kv, p.d_qk}, c.io, lkv, gap_kv);
  PackedBuf dv = packed({p.b, p.h_v, p.s_kv, p.d_v}, c.io, lkv, gap_kv);
  // Tokens outside the sequences hold finite values in the inputs (docs/ops/sdpa_backward.md), NaN in the outputs.
  pack(q, s->buffer(s->q).values(), lq, 0.5), pack(k, s->buffer(s->k).values(), lkv, 0.25);
  pack(v, s->buffer(s->v).values(), lkv, -0.5), pack(o, s->buffer(s->o).values(), lq, 0.125);
  pack(d_o, s->buffer(s->d_o).values(), lq, 0.75), pack(st, s->buffer(s->stats).values(), lq, 1.0);
  for (PackedBuf* t : {&dq, &dk, &dv})
    for (int64_t n = 0; n < t->elements(); ++n) detail::write_element(t->bytes.data(), t->dt, n, NAN);
  // max_total_seq_len bounds every packed tensor of a side; the kernels read Q, dO, K and V through views of that
  // many tokens, so those buffers hold that many (finite) tokens.
  const int64_t total_q = std::max({q.tokens, o.tokens, d_o.tokens, st.tokens, dq.tokens});
  const int64_t total_kv = std::max({k.tokens, v.tokens, dk.tokens, dv.tokens});
  for (auto [t, total] : {std::pair{&q, total_q}, {&d_o, total_q}, {&k, total_kv}, {&v, total_kv}}) {
    const size_t used = t->bytes.size();
    t->bytes.resize(static_cast<size_t>(total * t->dim[1] * t->dim[3] * element_bits(t->dt) / 8 + 16));
    for (size_t n = used; n < t->bytes.size(); ++n) t->bytes[n] = 0;
  }
  std::vector<int32_t> len_q(lq.begin(), lq.end()), len_kv(lkv.begin(), lkv.end()), cu_kv{0};
  for (int64_t len : lkv) cu_kv.push_back(cu_kv.back() + static_cast<int32_t>(len));

  graph::Graph g;
  with_types(g, c);
  auto declare = [&](const std::string& name, PackedBuf& t, bool ragged, TensorPtr as_output = nullptr) {
    TensorPtr x = as_output ? as_output : input(g, name, t.dim, t.dt, t.strides());
    if (as_output) x->set_dim(t.dim).set_stride(t.strides()).set_data_type(t.dt).set_output(true);
    if (ragged) x->set_ragged_offset(input(g, name + "_offsets", {p.b + 1, 1, 1, 1}, DataType_t::INT64, {1, 1, 1, 1}));
    return x;
  };
  const bool kv_ragged = !tc.cu_kv;
  TensorPtr tq = declare("q", q, true), tk = declare("k", k, kv_ragged), tv = declare("v", v, kv_ragged);
  TensorPtr to = declare("o", o, true), tdo = declare("dO", d_o, true), tst = declare("stats", st, true);
  SDPA_backward_attributes a;
  a.set_name("attn").set_attn_scale(static_cast<float>(d.scale)).set_padding_mask(true);
  a.set_diagonal_alignment(p.bottom_right ? DiagonalAlignment_t::BOTTOM_RIGHT : DiagonalAlignment_t::TOP_LEFT);
  if (p.right_bound) a.set_diagonal_band_right_bound(*p.right_bound);
  if (p.left_bound) a.set_diagonal_band_left_bound(*p.left_bound);
  TensorPtr t_len_q = input(g, "len_q", {p.b, 1, 1, 1}, DataType_t::INT32), t_len_kv, t_cu_kv;
  a.set_seq_len_q(t_len_q);
  if (tc.cu_kv)
    a.set_cu_seq_len_kv(t_cu_kv = input(g, "cu_kv", {p.b + 1}, DataType_t::INT32, {1}));
  else
    a.set_seq_len_kv(t_len_kv = input(g, "len_kv", {p.b, 1, 1, 1}, DataType_t::INT32));
  a.set_max_total_seq_len_q(total_q).set_max_total_seq_len_kv(total_kv);
  auto [gdq, gdk, gdv] = g.sdpa_backward(tq, tk, tv, to, tdo, tst, a);
  declare("dq", dq, true, gdq), declare("dk", dk, kv_ragged, gdk), declare("dv", dv, kv_ragged, gdv);
  ASSERT_TRUE(g.validate().is_good());

  // Device copies of every buffer, bound by uid.
  std::vector<std::pair<void*, std::vector<uint8_t>*>> owned;
  std::unordered_map<int64_t, void*> pack_map;
  std::deque<std::vector<uint8_t>> index_bytes;  // stable addresses
  auto bind = [&](const TensorPtr& t, std::vector<uint8_t>& host) {
    void* dev = nullptr;
    ASSERT_EQ(cudaMalloc(&dev, host.size()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
    owned.push_back({dev, &host});
    pack_map[t->get_uid()] = dev;
  };
  auto bytes_of = [&](const void* src, size_t n) -> std::vector<uint8_t>& {
    auto& v = index_bytes.emplace_back(n);
    std::memcpy(v.data(), src, n);
    return v;
  };
  for (auto [t, buf] :
       {std::pair{tq, &q}, {tk, &k}, {tv, &v}, {to, &o}, {tdo, &d_o}, {tst, &st}, {gdq, &dq}, {gdk, &dk}, {gdv, &dv}}) {
    ASSERT_NO_FATAL_FAILURE(bind(t, buf->bytes));
    if (const TensorPtr ro = t->get_ragged_offset()) {
      ASSERT_NO_FATAL_FAILURE(bind(ro, bytes_of(buf->offsets.data(), buf->offsets.size() * sizeof(int64_t))));
    }
  }
  ASSERT_NO_FATAL_FAILURE(bind(t_len_q, bytes_of(len_q.data(), len_q.size() * 4)));
  if (t_len_kv) {
    ASSERT_NO_FATAL_FAILURE(bind(t_len_kv, bytes_of(len_kv.data(), len_kv.size() * 4)));
  }
  if (t_cu_kv) {
    ASSERT_NO_FATAL_FAILURE(bind(t_cu_kv, bytes_of(cu_kv.data(), cu_kv.size() * 4)));
  }

  Handle h(Device::cuda(0));
  ASSERT_NO_FATAL_FAILURE(build_on(g, h, "sm90_sdpa_bwd"));
  int64_t ws_bytes = 0;
  ASSERT_TRUE(g.get_workspace_size(ws_bytes).is_good());
  void* ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(std::max<int64_t>(ws_bytes, 1))));
  const error_t e = g.execute(h, pack_map, ws);
  CUDA_OK(cudaDeviceSynchronize());
  for (PackedBuf* t : {&dq, &dk, &dv})
    for (auto& [dev, host] : owned)
      if (host == &t->bytes) {
        CUDA_OK(cudaMemcpy(host->data(), dev, host->size(), cudaMemcpyDeviceToHost));
      }
  for (auto& [dev, host] : owned) cudaFree(dev);
  cudaFree(ws);
  ASSERT_TRUE(e.is_good()) << e.get_message();

  for (auto [what, t, w, b, lens] : {std::tuple{"dQ", &dq, &want.dq, &base.dq, &lq},
                                     {"dK", &dk, &want.dk, &base.dk, &lkv},
                                     {"dV", &dv, &want.dv, &base.dv, &lkv}}) {
    bool untouched = false;
    const std::vector<double> got = unpack(*t, *lens, untouched);
    const Checked r = check(what, got, *w, *b);
    EXPECT_TRUE(r.ok) << r.report;
    EXPECT_TRUE(untouched) << what << ": an element outside the sequences was written";
  }
}

TEST(Sm90SdpaBwdThd, PackedOperandsAndGradients) {
  REQUIRE_SM90();
  auto lens = [](std::vector<int64_t> q, std::vector<int64_t> kv) {
    return [q, kv](GpuCase& g) { g.c.p.seq_len_q = q, g.c.p.seq_len_kv = kv; };
  };
  auto thd = [](GpuCase g, bool cu_kv, bool head_major) { return ThdCase{std::move(g), cu_kv, head_major}; };
  const ThdCase cases[] = {
      thd(make("thd d128 gqa 4/2 b3 causal-br", problem(3, 4, 2, 200, 300, 128),
               [&](GpuCase& g) {
                 lens({200, 17, 1}, {150, 300, 64})(g), g.c.p.right_bound = 0, g.c.p.bottom_right = true;
               }),
          false, false),
      thd(make("thd d64 fp16 b2 cu_seq_len_kv head-major stats", problem(2, 2, 2, 111, 1000, 64),
               [&](GpuCase& g) {
                 lens({111, 40}, {1000, 77})(g), g.c.io = DataType_t::HALF;
               }),
          true, true),
      thd(make("thd d256 b2 causal", problem(2, 2, 1, 130, 129, 256),
               [&](GpuCase& g) {
                 lens({130, 65}, {129, 70})(g), g.c.p.right_bound = 0;
               }),
          false, false),
      thd(make("thd d192/128 b2", problem(2, 4, 2, 100, 140, 192, 128), lens({100, 3}, {17, 140})), false, true),
  };
  for (const auto& c : cases) run_thd(c);
}

}  // namespace
}  // namespace frost::test
