// `frost demo`: a pre-norm transformer attention block built through the graph API,
//   y = x + Wo * sdpa_causal(split_heads(rmsnorm(x) * Wqkv)),
// run on the best available engine and checked against the fp64 reference.
#include <chrono>
#include <cstdio>
#include <cmath>
#include <fstream>

#include "cli_common.h"
#include "graph/graph_state.h"
#include "runtime/device.h"

namespace frost::cli {
namespace {

using graph::TensorPtr;

struct DemoShape {
  int64_t batch = 2, seq = 128, heads = 4, head_dim = 64;
  int64_t hidden() const { return heads * head_dim; }
};

TensorPtr input(graph::Graph& g, const char* name, std::vector<int64_t> dims) {
  return g.tensor(graph::Tensor_attributes().set_name(name).set_dim(std::move(dims)));
}

// [b, s, h*d] -> [b, h, s, d]
TensorPtr split_heads(graph::Graph& g, const TensorPtr& x, const DemoShape& s, const char* name) {
  auto r = g.reshape(x, graph::Reshape_attributes().set_name(std::string(name) + "_reshape").set_dim({s.batch, s.seq, s.heads, s.head_dim}));
  return g.transpose(r, graph::Transpose_attributes().set_name(std::string(name) + "_heads").set_permutation({0, 2, 1, 3}));
}

void build_block(graph::Graph& g, const DemoShape& s) {
  const int64_t H = s.hidden();
  g.set_name("transformer_block")
      .set_io_data_type(DataType_t::BFLOAT16)
      .set_intermediate_data_type(DataType_t::FLOAT)
      .set_compute_data_type(DataType_t::FLOAT);
  auto x = input(g, "x", {s.batch, s.seq, H});
  auto norm_scale = input(g, "norm_scale", {1, H});
  auto wqkv = input(g, "w_qkv", {1, H, 3 * H});
  auto wo = input(g, "w_o", {1, H, H});

  auto rows = g.reshape(x, graph::Reshape_attributes().set_name("tokens").set_dim({s.batch * s.seq, H}));
  auto [normed, inv_rms] = g.rmsnorm(rows, norm_scale,
                                     graph::Rmsnorm_attributes()
                                         .set_name("rmsnorm")
                                         .set_forward_phase(NormFwdPhase_t::INFERENCE)
                                         .set_epsilon(g.tensor(1e-5f)));
  auto normed3 = g.reshape(normed, graph::Reshape_attributes().set_name("unflatten").set_dim({s.batch, s.seq, H}));
  auto qkv = g.matmul(normed3, wqkv, graph::Matmul_attributes().set_name("qkv_proj"));
  auto part = [&](int64_t i, const char* name) {
    auto sl = g.slice(qkv, graph::Slice_attributes().set_name(std::string(name) + "_slice").set_slices({{0, s.batch}, {0, s.seq}, {i * H, (i + 1) * H}}));
    return split_heads(g, sl, s, name);
  };
  auto q = part(0, "q"), k = part(1, "k"), v = part(2, "v");
  auto [o, stats] = g.sdpa(q, k, v,
                           graph::SDPA_attributes()
                               .set_name("attention")
                               .set_causal_mask(true)
                               .set_attn_scale(1.0f / std::sqrt(static_cast<float>(s.head_dim))));
  auto merged = g.transpose(o, graph::Transpose_attributes().set_name("merge_heads").set_permutation({0, 2, 1, 3}));
  auto flat = g.reshape(merged, graph::Reshape_attributes().set_name("concat_heads").set_dim({s.batch, s.seq, H}));
  auto proj = g.matmul(flat, wo, graph::Matmul_attributes().set_name("out_proj"));
  auto y = g.pointwise(proj, x, graph::Pointwise_attributes().set_name("residual").set_mode(PointwiseMode_t::ADD));
  y->set_output(true).set_name("y");
}

int fail(const char* what, const error_t& e) {
  std::fprintf(stderr, "frost demo: %s: %s: %s\n", what, to_string(e.get_code()), e.get_message().c_str());
  return 1;
}

}  // namespace

int cmd_demo(const std::vector<std::string>& args) {
  std::string save;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--save" && i + 1 < args.size()) {
      save = args[++i];
    } else {
      std::fprintf(stderr, "usage: frost demo [--save FILE]\n");
      return 2;
    }
  }
  DemoShape shape;
  graph::Graph g;
  build_block(g, shape);
  Handle h;
  const auto t_build = std::chrono::steady_clock::now();
  if (auto e = build_on_best_device(g, h); e.is_bad()) return fail("build", e);
  const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_build).count();
  std::printf("frost %s demo: transformer attention block b=%lld s=%lld heads=%lld d=%lld (bf16 io, fp32 compute)\n",
              version_string(), static_cast<long long>(shape.batch), static_cast<long long>(shape.seq),
              static_cast<long long>(shape.heads), static_cast<long long>(shape.head_dim));
  std::printf("device %s, %zu ops, %lld plan(s), built in %.2f ms\n", h.device().to_string().c_str(), g.state().nodes.size(),
              static_cast<long long>(g.get_execution_plan_count()), build_ms);
  for (int64_t i = 0; i < g.get_execution_plan_count(); ++i) {
    std::string name;
    g.get_plan_name_at_index(i, name);
    std::printf("  plan %lld: %s\n", static_cast<long long>(i), name.c_str());
  }
  for (const auto& d : g.get_decline_reasons()) std::printf("  declined: %s\n", d.c_str());
  int64_t ws = 0;
  g.get_workspace_size(ws);
  Buffers bufs(h);
  if (auto e = bufs.allocate(g, 2026); e.is_bad()) return fail("allocate", e);
  if (auto e = bufs.allocate_workspace(ws); e.is_bad()) return fail("allocate", e);
  const auto pack = bufs.variant_pack();
  if (auto e = g.execute(h, pack, bufs.workspace()); e.is_bad()) return fail("execute", e);  // warm-up
  if (auto e = detail::device_synchronize(h); e.is_bad()) return fail("execute", e);
  constexpr int kRuns = 3;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < kRuns; ++r)
    if (auto e = g.execute(h, pack, bufs.workspace()); e.is_bad()) return fail("execute", e);
  if (auto e = detail::device_synchronize(h); e.is_bad()) return fail("execute", e);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kRuns;
  if (auto e = bufs.download_outputs(); e.is_bad()) return fail("download", e);
  std::vector<OutputError> errs;
  if (auto e = check_against_reference(g, bufs, errs); e.is_bad()) return fail("reference", e);
  std::string plan;
  g.get_plan_name(plan);
  std::printf("executed %s: %.3f ms per run (mean of %d)\n", plan.c_str(), ms, kRuns);
  bool ok = true;
  for (const auto& e : errs) {
    std::printf("  %s vs fp64 reference: max_abs %.3e  rel_l2 %.3e  (tolerance %.1e)  %s\n", e.name.c_str(), e.max_abs,
                e.rel_l2, tolerance_for(e.dtype), e.ok ? "ok" : "MISMATCH");
    ok = ok && e.ok;
  }
  if (!save.empty()) {
    std::string text;
    if (auto e = g.serialize(text); e.is_bad()) return fail("serialize", e);
    std::ofstream(save) << text << "\n";
    std::printf("graph saved to %s (replay with: frost run %s)\n", save.c_str(), save.c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace frost::cli
