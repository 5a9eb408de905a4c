// `frost bench GRAPH.json`: the same serialized graph on each engine family in turn (cudnn and frost's
// own engines side by side), optionally checked once against the fp64 reference, then timed with CUDA
// events: the median over batches of back-to-back executions after a warm-up.
// `frost bench overhead GRAPH.json` measures the graph API's own host time (cmd_bench_overhead.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#ifdef FROST_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "plan/engine.h"
#include "runtime/device.h"

namespace frost::cli {
namespace {

struct Options {
  std::string path, json_out, engines, case_name, suite = "graph";
  int warmup = 5, iters = 20, reps = 5;
  bool check = true;
  double flops = 0;  // work of one execution, for TFLOP/s; 0 leaves it out
};

struct Record {
  std::string impl, plan, declined;
  double ms = -1;
  bool checked = false, ok = false;
  std::vector<OutputError> errors;
};

#ifdef FROST_WITH_CUDA
error_t cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return {};
  return {error_code_t::CUDA_API_FAILED, std::string(what) + ": " + cudaGetErrorString(e)};
}
#endif

// Milliseconds per execution: the median over `reps` batches of `iters` back-to-back executions (CUDA
// events around each batch on the GPU, so the host's per-call time hides behind the queued work),
// after `warmup` executions.
error_t time_plan(const graph::Graph& g, const Handle& h, Buffers& bufs, const Options& o, double& ms) {
  const auto pack = bufs.variant_pack();
  for (int i = 0; i < o.warmup; ++i) FROST_CHECK(g.execute(h, pack, bufs.workspace()));
  FROST_CHECK(detail::device_synchronize(h));
  std::vector<double> t;
#ifdef FROST_WITH_CUDA
  if (h.device().is_cuda()) {
    cudaEvent_t a = nullptr, b = nullptr;
    FROST_CHECK(cuda_ok(cudaEventCreate(&a), "cudaEventCreate"));
    FROST_CHECK(cuda_ok(cudaEventCreate(&b), "cudaEventCreate"));
    auto stream = static_cast<cudaStream_t>(h.stream());
    error_t e;
    for (int r = 0; r < o.reps && e.is_good(); ++r) {
      cudaEventRecord(a, stream);
      for (int i = 0; i < o.iters && e.is_good(); ++i) e = g.execute(h, pack, bufs.workspace());
      cudaEventRecord(b, stream);
      if (e.is_good()) e = cuda_ok(cudaEventSynchronize(b), "cudaEventSynchronize");
      float elapsed = 0;
      if (e.is_good()) e = cuda_ok(cudaEventElapsedTime(&elapsed, a, b), "cudaEventElapsedTime");
      t.push_back(static_cast<double>(elapsed) / o.iters);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    FROST_CHECK(e);
  }
#endif
  if (t.empty())
    for (int r = 0; r < o.reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.iters; ++i) FROST_CHECK(g.execute(h, pack, bufs.workspace()));
      FROST_CHECK(detail::device_synchronize(h));
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / o.iters);
    }
  std::sort(t.begin(), t.end());
  ms = t[t.size() / 2];
  return {};
}

Record bench_one(const std::string& text, const std::string& engine, const Handle& h, const Options& o) {
  Record r;
  r.impl = engine;
  graph::Graph g;
  error_t e = g.deserialize(text);
  if (e.is_good()) e = g.validate();
  if (e.is_good()) e = g.build_operation_graph(h);
  std::vector<std::string> others;
  for (const auto& f : detail::registered_engines())
    if (f->name() != engine) others.emplace_back(f->name());
  g.deselect_engines(others);
  if (e.is_good()) e = g.create_execution_plans({HeurMode_t::A, HeurMode_t::B});
  if (e.is_good()) e = g.build_plans(h);
  if (e.is_bad()) {
    // The other families are deselected on purpose: keep the line that names this one, if any.
    r.declined = e.get_message();
    const std::string own = "\n  " + engine + ": ";
    if (const size_t at = r.declined.find(own); at != std::string::npos)
      r.declined = r.declined.substr(at + 3, r.declined.find('\n', at + 1) - (at + 3));
    return r;
  }
  g.get_plan_name(r.plan);
  int64_t ws = 0;
  g.get_workspace_size(ws);
  Buffers bufs(h);
  // Without a check the values only need to be finite: a repeated random block fills large tensors fast.
  e = bufs.allocate(g, 1, !o.check);
  if (e.is_good()) e = bufs.allocate_workspace(ws);
  if (e.is_good()) e = g.execute(h, bufs.variant_pack(), bufs.workspace());
  if (e.is_good()) e = detail::device_synchronize(h);
  if (e.is_good() && o.check) {
    e = bufs.download_outputs();
    if (e.is_good()) e = check_against_reference(g, bufs, r.errors);
    r.checked = e.is_good();
  }
  if (e.is_good()) e = time_plan(g, h, bufs, o, r.ms);
  if (e.is_bad()) {
    r.declined = e.get_message();
    r.ms = -1;
    return r;
  }
  r.ok = std::all_of(r.errors.begin(), r.errors.end(), [](const OutputError& x) { return x.ok; });
  return r;
}

bool parse(const std::vector<std::string>& args, Options& o) {
  auto number = [&](size_t& i, auto& out) {
    if (i + 1 >= args.size()) return false;
    std::istringstream s(args[++i]);
    s >> out;
    return !s.fail() && s.eof();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool ok = true;
    if (a == "--engines" && i + 1 < args.size()) {
      o.engines = args[++i];
    } else if (a == "--json" && i + 1 < args.size()) {
      o.json_out = args[++i];
    } else if (a == "--case" && i + 1 < args.size()) {
      o.case_name = args[++i];
    } else if (a == "--suite" && i + 1 < args.size()) {
      o.suite = args[++i];
    } else if (a == "--no-check") {
      o.check = false;
    } else if (a == "--iters") {
      ok = number(i, o.iters) && o.iters >= 1;
    } else if (a == "--warmup") {
      ok = number(i, o.warmup) && o.warmup >= 0;
    } else if (a == "--reps") {
      ok = number(i, o.reps) && o.reps >= 1;
    } else if (a == "--flops") {
      ok = number(i, o.flops) && o.flops >= 0;
    } else if (o.path.empty() && a.rfind("--", 0) != 0) {
      o.path = a;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "frost bench: bad or unexpected argument '%s'\n", a.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int cmd_bench_overhead(const std::vector<std::string>& args);

int cmd_bench(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "overhead") return cmd_bench_overhead({args.begin() + 1, args.end()});
  Options o;
  if (!parse(args, o)) return 2;
  if (o.path.empty()) {
    std::fprintf(stderr,
                 "usage: frost bench GRAPH.json [--engines cudnn,sm90_sdpa_fwd,...] [--no-check] [--warmup N]\n"
                 "                  [--iters N] [--reps N] [--flops F] [--case NAME] [--suite NAME] [--json FILE]\n"
                 "       frost bench overhead GRAPH.json [--json FILE]\n");
    return 2;
  }
  bool ok = false;
  const std::string text = read_file(o.path, ok);
  if (!ok) {
    std::fprintf(stderr, "frost: cannot read '%s'\n", o.path.c_str());
    return 2;
  }
  std::vector<std::string> engines;
  std::stringstream s(o.engines);
  for (std::string e; std::getline(s, e, ',');)
    if (!e.empty()) engines.push_back(e);
  const Handle h = best_handle();
  if (engines.empty())
    for (const auto& f : detail::registered_engines())
      if (f->engine_class() != detail::EngineClass::REFERENCE || !h.device().is_cuda()) engines.emplace_back(f->name());
  const std::string case_name = o.case_name.empty() ? o.path : o.case_name;
  nlohmann::json records = nlohmann::json::array();
  std::printf("graph %s on %s (%s)\n", o.path.c_str(), h.device().to_string().c_str(),
              o.check ? "checked against the fp64 reference" : "not checked");
  for (const auto& engine : engines) {
    const Record r = bench_one(text, engine, h, o);
    nlohmann::json j{{"case", case_name}, {"impl", engine}, {"engine", engine}, {"plan", r.plan}};
    j["ok"] = r.checked ? nlohmann::json(r.ok) : nlohmann::json(nullptr);
    if (r.checked) {
      nlohmann::json errs = nlohmann::json::array();
      for (const auto& x : r.errors) errs.push_back({{"output", x.name}, {"rel_l2", x.rel_l2}, {"ok", x.ok}});
      j["errors"] = errs;
    }
    if (r.ms >= 0) {
      j["ms"] = r.ms;
      if (o.flops > 0) {
        j["value"] = o.flops / (r.ms * 1e9);
        j["unit"] = "TFLOP/s";
      }
      std::printf("  %-16s %-48s %9.4f ms", engine.c_str(), r.plan.c_str(), r.ms);
      if (o.flops > 0) std::printf("  %7.1f TFLOP/s", o.flops / (r.ms * 1e9));
      std::printf("  %s\n", r.checked ? (r.ok ? "ok" : "MISMATCH") : "unchecked");
    } else {
      j["ms"] = nullptr;
      j["value"] = nullptr;
      j["declined"] = r.declined;
      std::printf("  %-16s declined: %s\n", engine.c_str(), r.declined.c_str());
    }
    records.push_back(j);
  }
  if (!o.json_out.empty()) {
    nlohmann::json doc{{"suite", o.suite}, {"device", h.device().to_string()}, {"records", records}};
    std::ofstream out(o.json_out);
    out << doc.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "frost bench: cannot write '%s'\n", o.json_out.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace frost::cli
