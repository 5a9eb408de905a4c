// The cudnn engine's attention forward and backward on the GPU against the CPU reference: masks,
// GQA, layouts, padding, bias, ragged (THD) and paged inputs.
#include <cmath>

#include "cudnn_gpu_util.h"

namespace frost::test {
namespace {

constexpr DataType_t BF16 = DataType_t::BFLOAT16, F16 = DataType_t::HALF, F32 = DataType_t::FLOAT;
constexpr DataType_t I32 = DataType_t::INT32;

struct Spec {
  int64_t b = 2, h = 4, hk = 4, sq = 128, skv = 128, d = 64;
  DataType_t dt = BF16;
  bool bshd = false;
  std::optional<int64_t> left, right;
  DiagonalAlignment_t align = DiagonalAlignment_t::TOP_LEFT;
  std::vector<int32_t> seq_q, seq_kv;  // padding mask when set
  bool bias = false, ragged = false, dropout = false;
  int64_t page = 0;  // paged K/V with this page size when > 0
};

std::vector<int64_t> strides(const Spec& s, int64_t h, int64_t len) {
  return s.bshd ? std::vector<int64_t>{len * h * s.d, s.d, h * s.d, 1}
                : std::vector<int64_t>{h * len * s.d, len * s.d, s.d, 1};
}

std::function<void(HostTensor&)> values(std::vector<int32_t> v) {
  return [v](HostTensor& t) {
    for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
  };
}

std::vector<int32_t> cumulative(const std::vector<int32_t>& lens, int64_t row) {
  std::vector<int32_t> r{0};
  for (int32_t l : lens) r.push_back(r.back() + static_cast<int32_t>(l * row));
  return r;
}

template <class Attrs>
void set_masks(Attrs& a, const Spec& s) {
  a.set_attn_scale(1.0f / std::sqrt(static_cast<float>(s.d))).set_diagonal_alignment(s.align);
  if (s.left) a.set_diagonal_band_left_bound(*s.left);
  if (s.right) a.set_diagonal_band_right_bound(*s.right);
}

struct Declared {
  TensorPtr q, k, v, seq_q, seq_kv, bias, pt_k, pt_v, rag_q, rag_kv, mask;
};

// Q, K, V and the optional inputs in graph g; fills for the ones with particular values.
Declared declare(graph::Graph& g, const Spec& s,
                 std::map<const graph::Tensor_attributes*, std::function<void(HostTensor&)>>& fills) {
  Declared x;
  const bool padded = !s.seq_q.empty();
  if (s.ragged) {
    x.rag_q = input(g, "ragged_q", {s.b + 1, 1, 1, 1}, I32, {1, 1, 1, 1});
    x.rag_kv = input(g, "ragged_kv", {s.b + 1, 1, 1, 1}, I32, {1, 1, 1, 1});
    fills[x.rag_q.get()] = values(cumulative(s.seq_q, s.h * s.d));
    fills[x.rag_kv.get()] = values(cumulative(s.seq_kv, s.hk * s.d));
  }
  auto qa = graph::Tensor_attributes()
                .set_name("q")
                .set_dim({s.b, s.h, s.sq, s.d})
                .set_stride(strides(s, s.h, s.sq))
                .set_data_type(s.dt);
  if (s.ragged) qa.set_ragged_offset(x.rag_q);
  x.q = g.tensor(qa);
  if (s.page > 0) {
    const int64_t pages = s.skv / s.page, pool = s.b * pages + 3;
    x.k = input(g, "k_pool", {pool, s.hk, s.page, s.d}, s.dt);
    x.v = input(g, "v_pool", {pool, s.hk, s.page, s.d}, s.dt);
    x.pt_k = input(g, "page_table_k", {s.b, 1, pages, 1}, I32);
    x.pt_v = input(g, "page_table_v", {s.b, 1, pages, 1}, I32);
    // Batch b's page p sits at pool slot (p * b_count + b + 3) % pool: scattered, every slot distinct.
    std::vector<int32_t> table;
    for (int64_t b = 0; b < s.b; ++b)
      for (int64_t p = 0; p < pages; ++p) table.push_back(static_cast<int32_t>((p * s.b + b + 3) % pool));
    fills[x.pt_k.get()] = values(table);
    std::reverse(table.begin(), table.end());
    fills[x.pt_v.get()] = values(table);
  } else {
    for (auto* t : {&x.k, &x.v}) {
      auto a = graph::Tensor_attributes()
                   .set_name(t == &x.k ? "k" : "v")
                   .set_dim({s.b, s.hk, s.skv, s.d})
                   .set_stride(strides(s, s.hk, s.skv))
                   .set_data_type(s.dt);
      if (s.ragged) a.set_ragged_offset(x.rag_kv);
      *t = g.tensor(a);
    }
  }
  if (padded) {
    x.seq_q = input(g, "seq_len_q", {s.b, 1, 1, 1}, I32);
    x.seq_kv = input(g, "seq_len_kv", {s.b, 1, 1, 1}, I32);
    fills[x.seq_q.get()] = values(s.seq_q);
    fills[x.seq_kv.get()] = values(s.seq_kv);
  }
  if (s.bias) x.bias = input(g, "bias", {1, s.h, s.sq, s.skv}, s.dt);
  if (s.dropout) x.mask = input(g, "dropout_mask", {s.b, s.h, s.sq, s.skv}, DataType_t::BOOLEAN);
  return x;
}

graph::SDPA_attributes forward_attrs(graph::Graph& g, const Spec& s, const Declared& x) {
  graph::SDPA_attributes a;
  set_masks(a, s);
  a.set_generate_stats(true);
  if (x.seq_q) a.set_padding_mask(true).set_seq_len_q(x.seq_q).set_seq_len_kv(x.seq_kv);
  if (x.bias) a.set_bias(x.bias);
  if (x.pt_k) a.set_paged_attention_k_table(x.pt_k).set_paged_attention_v_table(x.pt_v);
  if (x.mask) a.set_dropout(x.mask, g.tensor(1.25f));
  return a;
}

void declare_outputs(const Spec& s, const Declared& x, const TensorPtr& o, const TensorPtr& st) {
  o->set_output(true).set_data_type(s.dt).set_stride(strides(s, s.h, s.sq));
  if (x.rag_q) o->set_ragged_offset(x.rag_q);
  st->set_output(true).set_data_type(F32);
}

// `decline`: the text of an expected decline (what the engine refuses to lower).
void forward(const std::string& name, const Spec& s, const std::string& decline = "") {
  CudnnCase c{"sdpa fwd " + name};
  c.acceptable_decline = decline;
  c.g.set_io_data_type(s.dt).set_intermediate_data_type(F32).set_compute_data_type(F32);
  const Declared x = declare(c.g, s, c.fills);
  auto [o, st] = c.g.sdpa(x.q, x.k, x.v, forward_attrs(c.g, s, x));
  declare_outputs(s, x, o, st);
  check_case(c);
}

// The backward reads O and Stats as the forward leaves them: the reference forward computes them first.
void backward(const std::string& name, const Spec& s, const std::string& decline = "") {
  CudnnCase c{"sdpa bwd " + name};
  c.acceptable_decline = decline;
  c.g.set_io_data_type(s.dt).set_intermediate_data_type(F32).set_compute_data_type(F32);
  const Declared x = declare(c.g, s, c.fills);
  auto oa = graph::Tensor_attributes()
                .set_name("o")
                .set_dim({s.b, s.h, s.sq, s.d})
                .set_stride(strides(s, s.h, s.sq))
                .set_data_type(s.dt);
  if (x.rag_q) oa.set_ragged_offset(x.rag_q);
  auto doa = oa;
  doa.set_name("dO");
  auto o = c.g.tensor(oa), dO = c.g.tensor(doa);
  auto stats = input(c.g, "stats", {s.b, s.h, s.sq, 1}, F32);
  graph::SDPA_backward_attributes a;
  set_masks(a, s);
  if (x.seq_q) a.set_padding_mask(true).set_seq_len_q(x.seq_q).set_seq_len_kv(x.seq_kv);
  TensorPtr dbias;
  if (x.bias) {
    a.set_bias(x.bias);
    dbias = input(c.g, "dbias", {1, s.h, s.sq, s.skv}, F32);
    a.set_dbias(dbias);
  }
  auto [dq, dk, dv] = c.g.sdpa_backward(x.q, x.k, x.v, o, dO, stats, a);
  dq->set_output(true).set_data_type(s.dt);
  dk->set_output(true).set_data_type(s.dt);
  dv->set_output(true).set_data_type(s.dt);
  if (s.ragged) {  // the gradients packed like their operands
    dq->set_ragged_offset(x.rag_q);
    dk->set_ragged_offset(x.rag_kv);
    dv->set_ragged_offset(x.rag_kv);
  }
  if (dbias) dbias->set_output(true);
  ASSERT_TRUE(c.g.validate().is_good());

  // Forward on the host over the same inputs.
  graph::Graph f;
  f.set_io_data_type(s.dt).set_intermediate_data_type(F32).set_compute_data_type(F32);
  std::map<const graph::Tensor_attributes*, std::function<void(HostTensor&)>> ffills;
  const Declared fx = declare(f, s, ffills);
  auto [fo, fst] = f.sdpa(fx.q, fx.k, fx.v, forward_attrs(f, s, fx));
  declare_outputs(s, fx, fo, fst);
  ASSERT_TRUE(f.validate().is_good());
  std::mt19937_64 rng(11);
  std::vector<std::pair<TensorPtr, TensorPtr>> shared{{fx.q, x.q}, {fx.k, x.k}, {fx.v, x.v}};
  if (fx.bias) shared.push_back({fx.bias, x.bias});
  std::vector<std::unique_ptr<HostTensor>> hosts;
  std::unordered_map<int64_t, void*> pack;
  for (const auto& [ft, bt] : shared) {
    hosts.push_back(std::make_unique<HostTensor>(ft));
    hosts.back()->fill_random(rng, -1, 1);
    pack[ft->get_uid()] = hosts.back()->data();
    c.preset[bt.get()] = hosts.back()->bytes;
  }
  for (const auto& t : f.state().bound_tensors)
    if (auto it = ffills.find(t.get()); it != ffills.end()) {
      hosts.push_back(std::make_unique<HostTensor>(t));
      it->second(*hosts.back());
      pack[t->get_uid()] = hosts.back()->data();
    }
  HostTensor ho(fo), hst(fst);
  pack[fo->get_uid()] = ho.data();
  pack[fst->get_uid()] = hst.data();
  ASSERT_TRUE(detail::reference_execute(f.state(), pack, detail::Precision::F32).is_good());
  c.preset[o.get()] = ho.bytes;
  c.preset[stats.get()] = hst.bytes;
  check_case(c);
}

TEST(CudnnGpuSdpa, Forward) {
  REQUIRE_CUDA_DEVICE();
  forward("b2 h4 s128 d64 bhsd", {});
  forward("b2 h4 s200 d128 bshd causal fp16", {.sq = 200, .skv = 200, .d = 128, .dt = F16, .bshd = true, .right = 0});
  forward("gqa 8/2 s64x192 causal bottom-right",
          {.h = 8, .hk = 2, .sq = 64, .skv = 192, .right = 0, .align = DiagonalAlignment_t::BOTTOM_RIGHT});
  forward("padding seq_len_q {100,37} kv {128,60}", {.seq_q = {100, 37}, .seq_kv = {128, 60}});
  forward("bias [1,h,s,s]", {.bias = true});
  forward("sliding window 32 causal", {.left = 32, .right = 0});
  forward("ragged THD lengths {50,128,7}",
          {.b = 3, .bshd = true, .seq_q = {50, 128, 7}, .seq_kv = {64, 128, 9}, .ragged = true});
  forward("paged K/V page 16, s_kv 128", {.sq = 64, .seq_q = {64, 30}, .seq_kv = {128, 77}, .page = 16});
  forward("dropout mask (boolean) and scale", {.dropout = true}, "dropout (mask, scale)");
}

TEST(CudnnGpuSdpa, Backward) {
  REQUIRE_CUDA_DEVICE();
  backward("b2 h4 s128 d64 bhsd", {});
  backward("gqa 8/2 s96 d128 bshd causal", {.h = 8, .hk = 2, .sq = 96, .skv = 96, .d = 128, .bshd = true, .right = 0});
  backward("padding seq_len_q {128,50} kv {100,128}", {.seq_q = {128, 50}, .seq_kv = {100, 128}});
  // cuDNN 9.19 offered no engine for this dBias (FLOAT) graph on the H200.
  backward("bias with dbias", {.bias = true}, "offer no engine");
  backward("fp16 s64x192 causal bottom-right",
           {.sq = 64, .skv = 192, .dt = F16, .right = 0, .align = DiagonalAlignment_t::BOTTOM_RIGHT});
}

// Ragged (THD) backward: Q, K, V, O, dO and the gradients packed token-major through ragged offsets,
// each batch after the previous one's tokens; rows past a batch's length are poisoned on both sides.
TEST(CudnnGpuSdpa, RaggedBackward) {
  REQUIRE_CUDA_DEVICE();
  backward("ragged THD lengths q {50,128,7} kv {64,128,9}",
           {.b = 3, .bshd = true, .seq_q = {50, 128, 7}, .seq_kv = {64, 128, 9}, .ragged = true});
  backward("ragged THD gqa 8/2 d128 causal lengths {96,33}",
           {.h = 8, .hk = 2, .sq = 96, .skv = 96, .d = 128, .bshd = true, .right = 0, .seq_q = {96, 33},
            .seq_kv = {96, 33}, .ragged = true});
}

}  // namespace
}  // namespace frost::test
