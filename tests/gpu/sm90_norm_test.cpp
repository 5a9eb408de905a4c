// The sm90_norm engine against the FP64 CPU reference: RMSNorm and LayerNorm, forward (INFERENCE and
// TRAINING) and backward, BF16/FP16/FP32, odd row lengths, outputs poisoned with NaN, a workspace full of
// garbage, bitwise determinism, misaligned buffers (element-wise path) and CUDA-graph capture.
// Tolerance (DESIGN.md): a 16-bit output is within one ulp of the FP64 result (twice the half ulp that
// rounding the FP64 result itself costs); an FP32 output within a floor for FP32 accumulation.
#include <cmath>

#include "gpu_util.h"
#include "graph/node.h"

namespace frost::test {
namespace {

using DT = DataType_t;

struct Case {
  bool backward = false, centered = false;
  DT dt = DT::BFLOAT16;
  std::vector<int64_t> dims;  // X's dims; the first axis indexes rows unless stats_dims says otherwise
  std::vector<int64_t> stats_dims = {};
  DT weight_dt = DT::NOT_SET;  // NOT_SET: X's type
  DT out_dt = DT::NOT_SET;     // Y / DX type; NOT_SET: X's type
  bool scale = true, bias = true, training = true;
  int misalign = 0;  // elements by which every device buffer is shifted (0: 256-byte aligned)
};

std::string name_of(const Case& c) {
  std::string s = std::string(c.centered ? "layernorm" : "rmsnorm") + (c.backward ? "_backward" : "") + " " +
                  std::string(to_string(c.dt)) + " " + detail::dims_string(c.dims);
  if (!c.stats_dims.empty()) s += " stats " + detail::dims_string(c.stats_dims);
  if (c.weight_dt != DT::NOT_SET) s += " weights " + std::string(to_string(c.weight_dt));
  if (c.out_dt != DT::NOT_SET) s += " out " + std::string(to_string(c.out_dt));
  if (!c.scale) s += " no-scale";
  if (!c.bias) s += " no-bias";
  if (!c.training) s += " inference";
  if (c.misalign) s += " misaligned";
  return s;
}

struct Built {
  graph::Graph g;
  std::vector<TensorPtr> inputs, outputs;
};

std::vector<int64_t> stats_dims_of(const Case& c) {
  if (!c.stats_dims.empty()) return c.stats_dims;
  std::vector<int64_t> d(c.dims.size(), 1);
  d[0] = c.dims[0];
  return d;
}

std::vector<int64_t> weight_dims_of(const Case& c) {
  const auto s = stats_dims_of(c);
  std::vector<int64_t> d(c.dims.size(), 1);
  for (size_t i = 0; i < d.size(); ++i)
    if (s[i] == 1) d[i] = c.dims[i];
  return d;
}

void build_graph(Built& b, const Case& c) {
  auto& g = b.g;
  g.set_io_data_type(c.dt).set_intermediate_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
  const DT wdt = c.weight_dt == DT::NOT_SET ? c.dt : c.weight_dt;
  const DT odt = c.out_dt == DT::NOT_SET ? c.dt : c.out_dt;
  const auto wd = weight_dims_of(c), sd = stats_dims_of(c);
  if (!c.backward) {
    auto x = input(g, "x", c.dims, c.dt);
    auto scale = c.scale ? input(g, "scale", wd, wdt) : nullptr;
    auto bias = c.bias ? input(g, "bias", wd, wdt) : nullptr;
    const auto phase = c.training ? NormFwdPhase_t::TRAINING : NormFwdPhase_t::INFERENCE;
    b.inputs = {x};
    if (scale) b.inputs.push_back(scale);
    if (bias) b.inputs.push_back(bias);
    if (c.centered) {
      auto [y, mean, inv] = g.layernorm(
          x, scale, bias, graph::Layernorm_attributes().set_forward_phase(phase).set_epsilon(g.tensor(1e-5f)));
      b.outputs = {y};
      if (c.training) b.outputs.insert(b.outputs.end(), {mean, inv});
    } else {
      graph::Rmsnorm_attributes a;
      a.set_forward_phase(phase).set_epsilon(g.tensor(1e-5f));
      if (bias) a.set_bias(bias);
      auto [y, inv] = g.rmsnorm(x, scale, a);
      b.outputs = {y};
      if (c.training) b.outputs.push_back(inv);
    }
    b.outputs[0]->set_data_type(odt);
    for (size_t i = 1; i < b.outputs.size(); ++i) b.outputs[i]->set_dim(sd);
  } else {
    auto dy = input(g, "dy", c.dims, c.dt), x = input(g, "x", c.dims, c.dt), scale = input(g, "scale", wd, wdt);
    auto inv = input(g, "inv", sd, DT::FLOAT);
    b.inputs = {dy, x, scale};
    std::array<TensorPtr, 3> grads;
    if (c.centered) {
      auto mean = input(g, "mean", sd, DT::FLOAT);
      b.inputs.insert(b.inputs.end(), {mean, inv});
      grads = g.layernorm_backward(dy, x, scale,
                                   graph::Layernorm_backward_attributes().set_saved_mean_and_inv_variance(mean, inv));
    } else {
      b.inputs.push_back(inv);
      grads = g.rmsnorm_backward(dy, x, scale, inv, graph::Rmsnorm_backward_attributes().has_dbias_output(c.bias));
    }
    b.outputs = {grads[0], grads[1]};
    if (grads[2]) b.outputs.push_back(grads[2]);
    b.outputs[0]->set_data_type(odt);
    for (size_t i = 1; i < b.outputs.size(); ++i) b.outputs[i]->set_data_type(DT::FLOAT);
  }
  for (auto& t : b.outputs) t->set_output(true);
}

// A device buffer for one declared tensor, shifted by `misalign` elements.
struct Buffer {
  HostTensor host;
  void* base = nullptr;
  void* dev = nullptr;
  Buffer(const TensorPtr& t, int misalign) : host(t) {
    const size_t shift = static_cast<size_t>(misalign) * static_cast<size_t>(element_bits(t->get_data_type()) / 8);
    if (cudaMalloc(&base, host.bytes.size() + shift) == cudaSuccess) dev = static_cast<char*>(base) + shift;
  }
  ~Buffer() { cudaFree(base); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void upload() { cudaMemcpy(dev, host.bytes.data(), host.bytes.size(), cudaMemcpyHostToDevice); }
  void download() { cudaMemcpy(host.bytes.data(), dev, host.bytes.size(), cudaMemcpyDeviceToHost); }
};

// Saved statistics for a backward case: the FP64 statistics of x (mean 0 for RMSNorm), as FP32.
void fill_stats(const Case& c, const HostTensor& x, HostTensor* mean, HostTensor& inv) {
  const int64_t groups = inv.volume(), n = x.volume() / groups;
  const auto xs = x.values();
  // x's row-major element e belongs to group e / n when the normalized axes are trailing.
  for (int64_t gi = 0; gi < groups; ++gi) {
    double m = 0, v = 0;
    if (c.centered)
      for (int64_t e = 0; e < n; ++e) m += xs[static_cast<size_t>(gi * n + e)] / static_cast<double>(n);
    for (int64_t e = 0; e < n; ++e) v += std::pow(xs[static_cast<size_t>(gi * n + e)] - m, 2) / static_cast<double>(n);
    if (mean) mean->set(gi, m);
    inv.set(gi, 1.0 / std::sqrt(v + 1e-5));
  }
}

struct Run {
  std::vector<std::vector<uint8_t>> bytes;  // every output, for the determinism check
};

void check_case(const Case& c) {
  SCOPED_TRACE(name_of(c));
  Built b;
  build_graph(b, c);
  Handle h(Device::cuda(0));
  ASSERT_NO_FATAL_FAILURE(build_on(b.g, h, "sm90_norm"));
  std::vector<std::unique_ptr<Buffer>> in, out;
  std::mt19937_64 rng(static_cast<uint64_t>(b.g.key()));
  std::unordered_map<int64_t, void*> pack, host_pack;
  for (const auto& t : b.inputs) {
    in.push_back(std::make_unique<Buffer>(t, c.misalign));
    const std::string& n = t->get_name();
    if (n == "scale")
      in.back()->host.fill_random(rng, 0.5, 1.5);
    else if (n == "x")
      in.back()->host.fill_random(rng, c.centered ? 1.0 : -2.0, c.centered ? 5.0 : 2.0);
    else
      in.back()->host.fill_random(rng, -1.0, 1.0);
  }
  if (c.backward) {
    auto find = [&](const char* n) -> HostTensor* {
      for (auto& x : in)
        if (x->host.t->get_name() == n) return &x->host;
      return nullptr;
    };
    fill_stats(c, *find("x"), find("mean"), *find("inv"));
  }
  for (auto& x : in) {
    x->upload();
    pack[x->host.t->get_uid()] = x->dev;
    host_pack[x->host.t->get_uid()] = x->host.data();
  }
  for (const auto& t : b.outputs) {
    out.push_back(std::make_unique<Buffer>(t, c.misalign));
    out.back()->host.poison();
    out.back()->upload();
    pack[t->get_uid()] = out.back()->dev;
  }
  int64_t ws_bytes = 0;
  ASSERT_TRUE(b.g.get_workspace_size(ws_bytes).is_good());
  void* ws = nullptr;
  if (ws_bytes > 0) {
    CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(ws_bytes)));
    CUDA_OK(cudaMemset(ws, 0xff, static_cast<size_t>(ws_bytes)));  // NaN everywhere: nothing may read it unwritten
  }
  Run first;
  for (int round = 0; round < 2; ++round) {
    const error_t e = b.g.execute(h, pack, ws);
    ASSERT_TRUE(e.is_good()) << e.get_message();
    CUDA_OK(cudaDeviceSynchronize());
    Run r;
    for (auto& o : out) {
      o->download();
      r.bytes.push_back(o->host.bytes);
    }
    if (round == 0)
      first = r;
    else
      EXPECT_EQ(r.bytes, first.bytes) << "a second run gave other bits";
  }
  cudaFree(ws);
  // FP64 reference on the same inputs.
  std::vector<std::unique_ptr<HostTensor>> want;
  for (const auto& t : b.outputs) {
    want.push_back(std::make_unique<HostTensor>(t));
    host_pack[t->get_uid()] = want.back()->data();
  }
  ASSERT_TRUE(detail::reference_execute(b.g.state(), host_pack, detail::Precision::F64).is_good());
  for (size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(b.outputs[i]->get_name());
    const auto got = out[i]->host.values();
    for (double v : got) ASSERT_FALSE(std::isnan(v)) << "an output element was not written (or is NaN)";
    const auto want_v = want[i]->values();  // the FP64 result rounded to the output's type
    const DT odt = b.outputs[i]->get_data_type();
    const auto err = compare(got, want_v);
    double scale = 0;
    for (double v : want_v) scale = std::max(scale, std::fabs(v));
    if (odt == DT::FLOAT) {
      // FP32 accumulation over a row (or over the rows, for dscale and dbias). Outputs that cancel to
      // nearly zero (one-column RMSNorm gradients) have no meaningful relative error: an absolute floor.
      EXPECT_LE(err.max_abs, 2e-5 * std::max(1.0, scale)) << "rel l2 " << err.rel_l2;
      EXPECT_TRUE(err.rel_l2 <= 1e-5 || err.max_abs <= 1e-6) << "rel l2 " << err.rel_l2 << " max abs " << err.max_abs;
    } else {
      // Rounding the FP64 result gives half an ulp; an FP32 computation may land on the other side of a
      // rounding boundary: one ulp of the largest value at most, on few elements.
      const int mantissa = odt == DT::HALF ? 10 : 7;
      EXPECT_LE(err.max_abs, std::ldexp(scale, -mantissa) + 1e-6) << "rel l2 " << err.rel_l2;
      EXPECT_LE(err.rel_l2, std::ldexp(1.0, -mantissa - 1)) << "max abs " << err.max_abs;
    }
  }
}

Case fwd(bool centered, DT dt, std::vector<int64_t> dims) {
  Case c;
  c.centered = centered;
  c.dt = dt;
  c.dims = std::move(dims);
  return c;
}

Case bwd(bool centered, DT dt, std::vector<int64_t> dims) {
  Case c = fwd(centered, dt, std::move(dims));
  c.backward = true;
  return c;
}

TEST(Sm90Norm, OddRowLengthsEveryTypeForwardAndBackward) {
  REQUIRE_SM90();
  for (DT dt : {DT::BFLOAT16, DT::HALF, DT::FLOAT})
    for (int64_t cols : {1, 17, 111, 1000, 4097})
      for (int64_t rows : {1, 333})
        for (bool centered : {false, true})
          for (bool backward : {false, true}) check_case((backward ? bwd : fwd)(centered, dt, {rows, cols}));
}

TEST(Sm90Norm, VectorizedAndStreamedRows) {
  REQUIRE_SM90();
  for (bool centered : {false, true})
    for (bool backward : {false, true}) {
      auto make = backward ? bwd : fwd;
      check_case(make(centered, DT::BFLOAT16, {64, 4096}));
      check_case(make(centered, DT::BFLOAT16, {7, 8192}));
      check_case(make(centered, DT::HALF, {5, 40000}));  // past the register capacity: streamed
      check_case(make(centered, DT::FLOAT, {3, 20004}));
      Case m = make(centered, DT::BFLOAT16, {33, 4096});
      m.misalign = 1;  // aligned shape, shifted buffers: the element-wise path
      check_case(m);
    }
}

TEST(Sm90Norm, OptionalOperandsMixedTypesAndPhases) {
  REQUIRE_SM90();
  for (bool centered : {false, true}) {
    Case c = fwd(centered, DT::BFLOAT16, {333, 1000});
    c.training = false;
    check_case(c);
    c.scale = false;
    check_case(c);
    c.bias = false;
    check_case(c);
    c = fwd(centered, DT::BFLOAT16, {333, 1000});
    c.weight_dt = DT::FLOAT;
    check_case(c);
    c.out_dt = DT::FLOAT;
    check_case(c);
    c = fwd(centered, DT::FLOAT, {111, 1000});
    c.out_dt = DT::BFLOAT16;
    check_case(c);
    c = bwd(centered, DT::HALF, {333, 1000});
    c.weight_dt = DT::FLOAT;
    c.out_dt = DT::FLOAT;
    check_case(c);
  }
  Case nb = bwd(false, DT::BFLOAT16, {333, 111});
  nb.bias = false;  // RMSNorm backward without dbias
  check_case(nb);
}

TEST(Sm90Norm, HigherRankTensorsAndChosenStatisticsAxes) {
  REQUIRE_SM90();
  for (bool centered : {false, true})
    for (bool backward : {false, true}) {
      auto make = backward ? bwd : fwd;
      check_case(make(centered, DT::BFLOAT16, {2, 3, 5, 7}));
      Case c = make(centered, DT::HALF, {4, 3, 16, 8});
      c.stats_dims = {4, 3, 1, 1};  // rows over the first two axes
      check_case(c);
    }
}

// Plans declined by name, never served wrong.
void expect_decline(graph::Graph& g, const std::string& needle) {
  Handle h(Device::cuda(0));
  ASSERT_TRUE(g.validate().is_good());
  ASSERT_TRUE(g.build_operation_graph(h).is_good());
  g.create_execution_plans({HeurMode_t::OPENSOURCE});
  bool found = false;
  for (const auto& r : g.get_decline_reasons())
    found = found || (r.rfind("sm90_norm", 0) == 0 && r.find(needle) != std::string::npos);
  std::string all;
  for (const auto& r : g.get_decline_reasons()) all += r + "\n";
  EXPECT_TRUE(found) << "expected a decline naming '" << needle << "', got:\n" << all;
}

TEST(Sm90Norm, DeclinesWhatItCannotServe) {
  REQUIRE_SM90();
  {
    graph::Graph g;  // normalized axis not contiguous: X [8, 64] with column stride 2
    g.set_io_data_type(DT::BFLOAT16).set_compute_data_type(DT::FLOAT);
    auto x = input(g, "x", {8, 64}, DT::BFLOAT16, {1, 8});
    auto [y, inv] = g.rmsnorm(
        x, nullptr,
        graph::Rmsnorm_attributes().set_forward_phase(NormFwdPhase_t::INFERENCE).set_epsilon(g.tensor(1e-5f)));
    y->set_output(true).set_stride({64, 1});
    expect_decline(g, "X stride 8 on normalized axis 1");
  }
  {
    graph::Graph g;
    g.set_io_data_type(DT::DOUBLE).set_compute_data_type(DT::DOUBLE);
    auto x = input(g, "x", {8, 64}, DT::DOUBLE);
    auto [y, m, inv] = g.layernorm(
        x, nullptr, nullptr,
        graph::Layernorm_attributes().set_forward_phase(NormFwdPhase_t::INFERENCE).set_epsilon(g.tensor(1e-5f)));
    y->set_output(true);
    expect_decline(g, "DOUBLE");
  }
  {
    graph::Graph g;  // statistics over the first axis: normalized axis 0 is not trailing
    g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
    auto x = input(g, "x", {8, 64}, DT::FLOAT);
    auto [y, inv] =
        g.rmsnorm(x, nullptr,
                  graph::Rmsnorm_attributes().set_forward_phase(NormFwdPhase_t::TRAINING).set_epsilon(g.tensor(1e-5f)));
    y->set_output(true);
    inv->set_output(true).set_dim({1, 64});
    expect_decline(g, "not X's trailing axes");
  }
  {
    graph::Graph g;  // per-element scale varies across rows
    g.set_io_data_type(DT::FLOAT).set_compute_data_type(DT::FLOAT);
    auto x = input(g, "x", {8, 64}, DT::FLOAT);
    auto s = input(g, "scale", {8, 64}, DT::FLOAT);
    auto [y, inv] = g.rmsnorm(
        x, s, graph::Rmsnorm_attributes().set_forward_phase(NormFwdPhase_t::INFERENCE).set_epsilon(g.tensor(1e-5f)));
    y->set_output(true);
    expect_decline(g, "SCALE dims [8, 64] vary along row axis 0");
  }
}

TEST(Sm90Norm, CudaGraphCaptureAndReplayWithNewInputs) {
  REQUIRE_SM90();
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "backward" : "forward");
    const Case c = backward ? bwd(true, DT::BFLOAT16, {333, 1000}) : fwd(true, DT::BFLOAT16, {333, 1000});
    Built b;
    build_graph(b, c);
    Handle h(Device::cuda(0));
    ASSERT_TRUE(b.g.build(h, {HeurMode_t::A}).is_good());
    std::vector<std::unique_ptr<Buffer>> in, out;
    std::unordered_map<int64_t, void*> pack;
    for (const auto& t : b.inputs) in.push_back(std::make_unique<Buffer>(t, 0)), pack[t->get_uid()] = in.back()->dev;
    for (const auto& t : b.outputs) out.push_back(std::make_unique<Buffer>(t, 0)), pack[t->get_uid()] = out.back()->dev;
    int64_t ws_bytes = 0;
    b.g.get_workspace_size(ws_bytes);
    void* ws = nullptr;
    if (ws_bytes) {
      CUDA_OK(cudaMalloc(&ws, static_cast<size_t>(ws_bytes)));
    }
    auto refill = [&](int round) {
      std::mt19937_64 rng(300 + static_cast<uint64_t>(round));
      for (auto& x : in) x->host.fill_random(rng, x->host.t->get_name() == "inv" ? 0.5 : -1.0, 2.0);
      for (auto& x : in) x->upload();
      for (auto& o : out) {
        o->host.poison();
        o->upload();
      }
    };
    auto check = [&](int round) {
      std::unordered_map<int64_t, void*> hp;
      for (auto& x : in) hp[x->host.t->get_uid()] = x->host.data();
      std::vector<std::unique_ptr<HostTensor>> want;
      for (const auto& t : b.outputs)
        want.push_back(std::make_unique<HostTensor>(t)), hp[t->get_uid()] = want.back()->data();
      ASSERT_TRUE(detail::reference_execute(b.g.state(), hp, detail::Precision::F64).is_good());
      for (size_t i = 0; i < out.size(); ++i) {
        out[i]->download();
        const auto err = compare(out[i]->host.values(), want[i]->values());
        EXPECT_FALSE(err.has_nan) << b.outputs[i]->get_name();
        EXPECT_LE(err.rel_l2, 1e-2) << b.outputs[i]->get_name() << " round " << round;
      }
    };
    EXPECT_NO_FATAL_FAILURE(capture_and_replay(h, [&] { return b.g.execute(h, pack, ws); }, 2, refill, check));
    cudaFree(ws);
  }
}

}  // namespace
}  // namespace frost::test
