// Times the sm90_gemm engine through frost's C++ graph API on the cases of the fused SwiGLU MLP and the
// grouped MoE GEMM: CUDA events around each execute(), L2 flushed (256 MB memset) before every timed
// launch, median of the runs. Inputs: a random block of 2^20 values tiled over each tensor. Each case
// checks a few output rows against a double-precision host evaluation of the same inputs ("ok").
//
// Usage: swiglu_moe_bench [--quick] [--json FILE]
//   mlp  T8192 H4096 F14336: SWIGLU_MLP with the interleaved W_GATE_UP and with separate W_GATE / W_UP
//        (packed into the workspace at each execute), and the gate/up graph (matmul, swish, mul) alone;
//   moe  G8 T16384 n14336 k4096, experts of 2048 rows: moe_grouped_matmul NONE in BF16 (W N-major and
//        K-major, raster swizzle 1/2/4/8) and FP8 e4m3 with two descale MULs (W K-major).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/dtype_convert.h"
#include "frost/frost.h"

namespace {

using frost::DataType_t;
using frost::graph::Graph;
using frost::graph::TensorPtr;

#define CHECK_CUDA(x)                                               \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) {                                        \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                 \
    }                                                               \
  } while (0)

void ok(const frost::error_t& e, const char* what) {
  if (e.is_bad()) {
    std::fprintf(stderr, "%s: %s\n", what, e.get_message().c_str());
    std::exit(1);
  }
}

// Inputs get their uid here (the variant pack is keyed by uid before validate() would assign one).
TensorPtr tensor(Graph& g, const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> strides,
                 DataType_t dt) {
  static int64_t next_uid = 1;
  frost::graph::Tensor_attributes a;
  a.set_name(name).set_dim(std::move(dims)).set_stride(std::move(strides)).set_data_type(dt).set_uid(next_uid++);
  return g.tensor(a);
}

// A device buffer of `elems` elements of `dt` holding random values in [-scale, scale]; the host keeps
// the first 2^20 (the rest repeat them).
struct Buf {
  void* dev = nullptr;
  std::vector<double> block;  // the stored (rounded) values of the first block
  int64_t elems = 0;
  double at(int64_t i) const { return block[static_cast<size_t>(i) % block.size()]; }  // element i
};

Buf make_buf(int64_t elems, DataType_t dt, double scale, std::mt19937_64& rng, bool fill = true) {
  Buf b;
  b.elems = elems;
  const int64_t esize = dt == DataType_t::FP8_E4M3 ? 1 : (dt == DataType_t::FLOAT || dt == DataType_t::INT32 ? 4 : 2);
  CHECK_CUDA(cudaMalloc(&b.dev, static_cast<size_t>(elems * esize)));
  if (!fill) return b;
  const int64_t block_elems = std::min<int64_t>(elems, int64_t{1} << 20);
  std::vector<uint8_t> raw(static_cast<size_t>(block_elems * esize), 0);
  std::uniform_real_distribution<double> u(-scale, scale);
  b.block.resize(static_cast<size_t>(block_elems));
  for (int64_t i = 0; i < block_elems; ++i) {
    frost::detail::write_element(raw.data(), dt, i, u(rng));
    b.block[static_cast<size_t>(i)] = frost::detail::read_element(raw.data(), dt, i);
  }
  const size_t bytes = raw.size();
  CHECK_CUDA(cudaMemcpy(b.dev, raw.data(), bytes, cudaMemcpyHostToDevice));
  for (size_t at = bytes; at < static_cast<size_t>(elems * esize); at += bytes)
    CHECK_CUDA(cudaMemcpy(static_cast<char*>(b.dev) + at, b.dev, std::min(bytes, elems * esize - at),
                          cudaMemcpyDeviceToDevice));
  return b;
}

struct Record {
  std::string suite, name, impl, plan;
  double ms = -1, flops = 0;
  bool ok = false;
  double rel_err = 0;
};

// Builds (heuristic plan, or engine 10200 with `knobs`), runs once, checks, then times.
Record time_graph(Graph& g, std::unordered_map<int64_t, void*>& pack, const std::function<double()>& check, void* flush,
                  size_t flush_bytes, int runs, const frost::graph::KnobMap* knobs) {
  frost::Handle h(frost::Device::cuda(0));
  Record r;
  ok(g.validate(), "validate");
  ok(g.build_operation_graph(h), "build_operation_graph");
  if (knobs) {
    ok(g.create_execution_plan(10200, *knobs), "create_execution_plan");
    ok(g.check_support(h), "check_support");
    ok(g.build_plans(h), "build_plans");
  } else {
    ok(g.create_execution_plans({frost::HeurMode_t::A}), "create_execution_plans");
    ok(g.check_support(h), "check_support");
    ok(g.build_plans(h), "build_plans");
  }
  g.get_plan_name(r.plan);
  int64_t ws = 0;
  ok(g.get_workspace_size(ws), "workspace");
  void* workspace = nullptr;
  if (ws > 0) CHECK_CUDA(cudaMalloc(&workspace, static_cast<size_t>(ws)));
  ok(g.execute(h, pack, workspace), "execute");
  CHECK_CUDA(cudaDeviceSynchronize());
  r.rel_err = check();
  r.ok = r.rel_err < 2e-2;
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < runs + 2; ++i) {
    CHECK_CUDA(cudaMemsetAsync(flush, i, flush_bytes));
    CHECK_CUDA(cudaEventRecord(a));
    ok(g.execute(h, pack, workspace), "execute");
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  r.ms = t[t.size() / 2];
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(workspace);
  return r;
}

// Relative L2 error of the sampled rows against their double evaluation.
struct RowCheck {
  double num = 0, den = 0;
  void add(double got, double want) { num += (got - want) * (got - want), den += want * want; }
  double rel() const { return den > 0 ? std::sqrt(num / den) : 1.0; }
};

std::vector<double> download_row(void* dev, DataType_t dt, int64_t row, int64_t cols) {
  std::vector<uint8_t> host(static_cast<size_t>(cols * 2));
  CHECK_CUDA(cudaMemcpy(host.data(), static_cast<char*>(dev) + row * cols * 2, host.size(), cudaMemcpyDeviceToHost));
  std::vector<double> v(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(c)] = frost::detail::read_element(host.data(), dt, c);
  return v;
}

void run_mlp(std::vector<Record>& out, void* flush, size_t flush_bytes, int runs, bool quick) {
  const int64_t t = quick ? 2048 : 8192, h = 4096, f = 14336;
  const DataType_t bf = DataType_t::BFLOAT16;
  std::mt19937_64 rng(7);
  Buf x = make_buf(t * h, bf, 1.0, rng), wgu = make_buf(h * 2 * f, bf, 0.02, rng), wd = make_buf(f * h, bf, 0.02, rng);
  Buf y = make_buf(t * h, bf, 0, rng, false), mid = make_buf(t * f, bf, 0, rng, false);
  // Separate gate and up weights (own values) for the packed form and the gate/up graph.
  Buf wg = make_buf(h * f, bf, 0.02, rng), wu = make_buf(h * f, bf, 0.02, rng);
  const double flops_mlp = 2.0 * t * h * f * 3, flops_gate_up = 2.0 * t * h * f * 2;
  auto gate_of = [&](bool separate, int64_t k, int64_t j) {
    return separate ? wg.at(k * f + j) : wgu.at(k * 2 * f + (j / 8) * 16 + j % 8);
  };
  auto up_of = [&](bool separate, int64_t k, int64_t j) {
    return separate ? wu.at(k * f + j) : wgu.at(k * 2 * f + (j / 8) * 16 + 8 + j % 8);
  };
  // mid row in double, rounded to bf16 as the op defines.
  auto mid_row = [&](bool separate, int64_t row) {
    std::vector<double> g(static_cast<size_t>(f), 0.0), u(static_cast<size_t>(f), 0.0), m(static_cast<size_t>(f));
    for (int64_t k = 0; k < h; ++k) {
      const double xv = x.at(row * h + k);
      for (int64_t j = 0; j < f; ++j) {
        g[static_cast<size_t>(j)] += xv * gate_of(separate, k, j);
        u[static_cast<size_t>(j)] += xv * up_of(separate, k, j);
      }
    }
    for (int64_t j = 0; j < f; ++j) {
      const double gv = g[static_cast<size_t>(j)];
      m[static_cast<size_t>(j)] = frost::detail::round_to(bf, gv / (1 + std::exp(-gv)) * u[static_cast<size_t>(j)]);
    }
    return m;
  };
  const int64_t rows[] = {t - 1};
  for (int form = 0; form < 3; ++form) {
    const bool separate = form == 1, gate_up_only = form == 2;
    Graph g;
    g.set_io_data_type(bf).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
    auto X = tensor(g, "x", {t, h}, {h, 1}, bf);
    std::unordered_map<int64_t, void*> pack;
    TensorPtr Y;
    void* out_dev = y.dev;
    int64_t out_cols = h;
    if (gate_up_only) {
      auto WG = tensor(g, "w_gate", {h, f}, {f, 1}, bf), WU = tensor(g, "w_up", {h, f}, {f, 1}, bf);
      auto G = g.matmul(X, WG, frost::graph::Matmul_attributes());
      auto U = g.matmul(X, WU, frost::graph::Matmul_attributes());
      auto S = g.pointwise(G, frost::graph::Pointwise_attributes().set_mode(frost::PointwiseMode_t::SWISH_FWD));
      Y = g.pointwise(S, U, frost::graph::Pointwise_attributes().set_mode(frost::PointwiseMode_t::MUL));
      pack = {{X->get_uid(), x.dev}, {WG->get_uid(), wg.dev}, {WU->get_uid(), wu.dev}};
      out_dev = mid.dev, out_cols = f;
    } else {
      auto WD = tensor(g, "w_down", {f, h}, {h, 1}, bf);
      if (separate) {
        auto WG = tensor(g, "w_gate", {h, f}, {f, 1}, bf), WU = tensor(g, "w_up", {h, f}, {f, 1}, bf);
        Y = g.swiglu_mlp(X, WG, WU, WD, frost::graph::Swiglu_mlp_attributes());
        pack = {{X->get_uid(), x.dev}, {WG->get_uid(), wg.dev}, {WU->get_uid(), wu.dev}, {WD->get_uid(), wd.dev}};
      } else {
        auto WGU = tensor(g, "w_gate_up", {h, 2 * f}, {2 * f, 1}, bf);
        Y = g.swiglu_mlp(X, WGU, WD, frost::graph::Swiglu_mlp_attributes());
        pack = {{X->get_uid(), x.dev}, {WGU->get_uid(), wgu.dev}, {WD->get_uid(), wd.dev}};
      }
    }
    Y->set_output(true).set_data_type(bf).set_uid(1000);
    pack[Y->get_uid()] = out_dev;
    auto check = [&]() {
      RowCheck rc;
      for (int64_t row : rows) {
        const auto got = download_row(out_dev, bf, row, out_cols);
        const auto m = mid_row(separate || gate_up_only, row);
        for (int64_t c = 0; c < out_cols; ++c) {
          double want = 0;
          if (gate_up_only)
            want = m[static_cast<size_t>(c)];
          else
            for (int64_t j = 0; j < f; ++j) want += m[static_cast<size_t>(j)] * wd.at(j * h + c);
          rc.add(got[static_cast<size_t>(c)], want);
        }
      }
      return rc.rel();
    };
    Record r = time_graph(g, pack, check, flush, flush_bytes, runs, nullptr);
    r.suite = "swiglu_mlp";
    r.name = gate_up_only ? "gate_up T" + std::to_string(t) + " H4096 F14336 (matmul+swish+mul graph)"
                          : "mlp T" + std::to_string(t) + " H4096 F14336 " +
                                (separate ? "separate W_GATE/W_UP (packed at execute)" : "interleaved W_GATE_UP");
    r.impl = "frost";
    r.flops = gate_up_only ? flops_gate_up : flops_mlp;
    out.push_back(r);
    std::printf("%-70s %9.4f ms %7.1f TFLOP/s rel_err %.2e %s  [%s]\n", r.name.c_str(), r.ms, r.flops / r.ms / 1e9,
                r.rel_err, r.ok ? "ok" : "MISMATCH", r.plan.c_str());
    std::fflush(stdout);
  }
  for (Buf* b : {&x, &wgu, &wd, &y, &mid, &wg, &wu}) cudaFree(b->dev);
}

void run_moe(std::vector<Record>& out, void* flush, size_t flush_bytes, int runs, bool quick) {
  const int64_t experts = 8, rows = quick ? 4096 : 16384, n = 14336, k = 4096, per = rows / experts;
  std::mt19937_64 rng(11);
  const double flops = 2.0 * rows * n * k;
  std::vector<int32_t> offsets(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) offsets[static_cast<size_t>(e)] = static_cast<int32_t>(e * per);
  Buf off = make_buf(experts, DataType_t::INT32, 0, rng, false);
  CHECK_CUDA(cudaMemcpy(off.dev, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  const DataType_t bf = DataType_t::BFLOAT16, e4 = DataType_t::FP8_E4M3;
  Buf y = make_buf(rows * n, bf, 0, rng, false);
  const float descales[2] = {0.5f, 0.25f};
  Buf ds = make_buf(2, DataType_t::FLOAT, 0, rng, false);
  CHECK_CUDA(cudaMemcpy(ds.dev, descales, sizeof(descales), cudaMemcpyHostToDevice));
  struct Variant {
    DataType_t dt;
    bool k_major;
    int swizzle;  // 0: the heuristic's plan
  };
  const std::vector<Variant> variants = {{bf, false, 0}, {bf, false, 2}, {bf, false, 4}, {bf, false, 8},
                                         {bf, true, 0},  {e4, true, 0},  {e4, true, 4}};
  for (const Variant& v : variants) {
    const bool fp8 = v.dt == e4;
    Buf tok = make_buf(rows * k, v.dt, 1.0, rng), w = make_buf(experts * k * n, v.dt, fp8 ? 0.5 : 0.02, rng);
    Graph g;
    g.set_io_data_type(bf).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
    auto T = tensor(g, "token", {1, rows, k}, {rows * k, k, 1}, v.dt);
    auto W = v.k_major ? tensor(g, "weight", {experts, k, n}, {k * n, 1, k}, v.dt)
                       : tensor(g, "weight", {experts, k, n}, {k * n, n, 1}, v.dt);
    auto OFF = tensor(g, "offsets", {experts, 1, 1}, {1, 1, 1}, DataType_t::INT32);
    auto Y = g.moe_grouped_matmul(T, W, OFF, nullptr, nullptr, frost::graph::Moe_grouped_matmul_attributes());
    std::unordered_map<int64_t, void*> pack = {
        {T->get_uid(), tok.dev}, {W->get_uid(), w.dev}, {OFF->get_uid(), off.dev}};
    if (fp8) {
      Y->set_data_type(DataType_t::FLOAT);
      for (int d = 0; d < 2; ++d) {
        auto S = tensor(g, d ? "descale_weight" : "descale_token", {1, 1, 1}, {1, 1, 1}, DataType_t::FLOAT);
        pack[S->get_uid()] = static_cast<float*>(ds.dev) + d;
        Y = g.pointwise(Y, S, frost::graph::Pointwise_attributes().set_mode(frost::PointwiseMode_t::MUL));
      }
    }
    Y->set_output(true).set_data_type(bf).set_uid(1000);
    pack[Y->get_uid()] = y.dev;
    auto check = [&]() {
      RowCheck rc;
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t row = e * per + (e * 37) % per;
        const auto got = download_row(y.dev, bf, row, n);
        for (int64_t c = 0; c < n; c += 7) {
          double want = 0;
          for (int64_t kk = 0; kk < k; ++kk)
            want += tok.at(row * k + kk) * w.at(v.k_major ? e * k * n + c * k + kk : e * k * n + kk * n + c);
          if (fp8) want *= 0.5 * 0.25;
          rc.add(got[static_cast<size_t>(c)], want);
        }
      }
      return rc.rel();
    };
    frost::graph::KnobMap knobs;
    if (v.swizzle) knobs[frost::KnobType_t::SWIZZLE] = v.swizzle;
    Record r = time_graph(g, pack, check, flush, flush_bytes, runs, v.swizzle ? &knobs : nullptr);
    r.suite = "moe_grouped_matmul";
    r.name = std::string(fp8 ? "e4m3" : "bf16") + " G8 T" + std::to_string(rows) + " n14336 k4096 W " +
             (v.k_major ? "K-major" : "N-major") + (fp8 ? " (2 descales)" : "") +
             (v.swizzle ? " swizzle " + std::to_string(v.swizzle) : "");
    r.impl = "frost";
    r.flops = flops;
    out.push_back(r);
    std::printf("%-70s %9.4f ms %7.1f TFLOP/s rel_err %.2e %s  [%s]\n", r.name.c_str(), r.ms, r.flops / r.ms / 1e9,
                r.rel_err, r.ok ? "ok" : "MISMATCH", r.plan.c_str());
    std::fflush(stdout);
    cudaFree(tok.dev);
    cudaFree(w.dev);
  }
  for (Buf* b : {&off, &y, &ds}) cudaFree(b->dev);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string json_path, only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
  }
  const size_t flush_bytes = size_t{256} << 20;
  void* flush;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  std::vector<Record> records;
  const int runs = quick ? 5 : 15;
  if (only.empty() || only == "mlp") run_mlp(records, flush, flush_bytes, runs, quick);
  if (only.empty() || only == "moe") run_moe(records, flush, flush_bytes, runs, quick);
  cudaFree(flush);
  if (!json_path.empty()) {
    std::ofstream o(json_path);
    o << "[\n";
    for (size_t i = 0; i < records.size(); ++i) {
      const Record& r = records[i];
      o << "  {\"suite\": \"" << r.suite << "\", \"case\": \"" << r.name << "\", \"impl\": \"" << r.impl
        << "\", \"plan\": \"" << r.plan << "\", \"ms\": " << r.ms << ", \"value\": " << r.flops / r.ms / 1e9
        << ", \"unit\": \"TFLOP/s\", \"ok\": " << (r.ok ? "true" : "false") << ", \"rel_err\": " << r.rel_err << "}"
        << (i + 1 < records.size() ? ",\n" : "\n");
    }
    o << "]\n";
  }
  return 0;
}
