// `frost bench GRAPH.json`: the same serialized graph on each engine family in turn (cudnn and frost's
// own engines side by side), each checked once against the fp64 reference, then timed.
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

struct Record {
  std::string impl, plan, declined;
  double ms = -1;
  bool ok = false;
};

// Median milliseconds of `iters` executions after `warmup` (CUDA events on the GPU).
error_t time_plan(graph::Graph& g, const Handle& h, Buffers& bufs, int warmup, int iters, double& ms) {
  const auto pack = bufs.variant_pack();
  for (int i = 0; i < warmup; ++i) FROST_CHECK(g.execute(h, pack, bufs.workspace()));
  FROST_CHECK(detail::device_synchronize(h));
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
#ifdef FROST_WITH_CUDA
    if (h.device().is_cuda()) {
      cudaEvent_t a, b;
      cudaEventCreate(&a);
      cudaEventCreate(&b);
      auto stream = static_cast<cudaStream_t>(h.stream());
      cudaEventRecord(a, stream);
      FROST_CHECK(g.execute(h, pack, bufs.workspace()));
      cudaEventRecord(b, stream);
      cudaEventSynchronize(b);
      float e = 0;
      cudaEventElapsedTime(&e, a, b);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      t.push_back(e);
      continue;
    }
#endif
    const auto t0 = std::chrono::steady_clock::now();
    FROST_CHECK(g.execute(h, pack, bufs.workspace()));
    FROST_CHECK(detail::device_synchronize(h));
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  ms = t[t.size() / 2];
  return {};
}

Record bench_one(const std::string& text, const std::string& engine, const Handle& h, int iters) {
  Record r{engine, "", "", -1, false};
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
    r.declined = e.get_message();
    return r;
  }
  g.get_plan_name(r.plan);
  int64_t ws = 0;
  g.get_workspace_size(ws);
  Buffers bufs(h);
  std::vector<OutputError> errs;
  e = bufs.allocate(g, 1);
  if (e.is_good()) e = bufs.allocate_workspace(ws);
  if (e.is_good()) e = g.execute(h, bufs.variant_pack(), bufs.workspace());
  if (e.is_good()) e = detail::device_synchronize(h);
  if (e.is_good()) e = bufs.download_outputs();
  if (e.is_good()) e = check_against_reference(g, bufs, errs);
  if (e.is_good()) e = time_plan(g, h, bufs, 3, iters, r.ms);
  if (e.is_bad()) {
    r.declined = e.get_message();
    r.ms = -1;
    return r;
  }
  r.ok = std::all_of(errs.begin(), errs.end(), [](const OutputError& x) { return x.ok; });
  return r;
}

}  // namespace

int cmd_bench_overhead(const std::vector<std::string>& args);

int cmd_bench(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "overhead") return cmd_bench_overhead({args.begin() + 1, args.end()});
  std::string path, json_out, engines_arg;
  int iters = 20;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--engines" && i + 1 < args.size()) {
      engines_arg = args[++i];
    } else if (args[i] == "--iters" && i + 1 < args.size()) {
      iters = std::max(1, std::atoi(args[++i].c_str()));
    } else if (args[i] == "--json" && i + 1 < args.size()) {
      json_out = args[++i];
    } else if (path.empty()) {
      path = args[i];
    } else {
      std::fprintf(stderr, "frost bench: unexpected argument '%s'\n", args[i].c_str());
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr,
                 "usage: frost bench GRAPH.json [--engines cudnn,sm90_sdpa_fwd,...] [--iters N] [--json FILE]\n"
                 "       frost bench overhead GRAPH.json [--json FILE]\n");
    return 2;
  }
  bool ok = false;
  const std::string text = read_file(path, ok);
  if (!ok) {
    std::fprintf(stderr, "frost: cannot read '%s'\n", path.c_str());
    return 2;
  }
  std::vector<std::string> engines;
  std::stringstream s(engines_arg);
  for (std::string e; std::getline(s, e, ',');)
    if (!e.empty()) engines.push_back(e);
  const Handle h = best_handle();
  if (engines.empty())
    for (const auto& f : detail::registered_engines())
      if (f->engine_class() != detail::EngineClass::REFERENCE || !h.device().is_cuda()) engines.emplace_back(f->name());
  nlohmann::json records = nlohmann::json::array();
  std::printf("graph %s on %s\n", path.c_str(), h.device().to_string().c_str());
  for (const auto& engine : engines) {
    const Record r = bench_one(text, engine, h, iters);
    nlohmann::json j{{"case", path}, {"impl", engine}, {"plan", r.plan}, {"ok", r.ok}};
    if (r.ms >= 0) {
      j["ms"] = r.ms;
      std::printf("  %-16s %-48s %9.4f ms  %s\n", engine.c_str(), r.plan.c_str(), r.ms, r.ok ? "ok" : "MISMATCH");
    } else {
      j["ms"] = nullptr;
      j["declined"] = r.declined;
      std::printf("  %-16s declined: %s\n", engine.c_str(), r.declined.c_str());
    }
    records.push_back(j);
  }
  if (!json_out.empty()) {
    nlohmann::json doc{{"suite", "graph"}, {"device", h.device().to_string()}, {"records", records}};
    std::ofstream(json_out) << doc.dump(1) << "\n";
  }
  return 0;
}

}  // namespace frost::cli
