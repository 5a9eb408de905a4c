// `frost bench overhead GRAPH.json`: host time of the graph API itself, without the work it launches.
//   build:   validate through build_plans of a freshly deserialized graph whose kernels exist
//   execute: one execute() call on a built plan, timed in a loop with no synchronization inside
// On a GPU plan the kernels run asynchronously, so the execute figure is the CPU time a caller pays per
// launch; on the host engine the reference does its work inside execute(), so the figure is an upper bound.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "cli_common.h"
#include "runtime/device.h"

namespace frost::cli {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int fail(const std::string& what, const error_t& e) {
  std::fprintf(stderr, "frost bench: %s: %s: %s\n", what.c_str(), to_string(e.get_code()), e.get_message().c_str());
  return 1;
}

// Median microseconds from validate() to build_plans() over `reps` fresh graphs on `h`.
error_t time_build(const std::string& text, const Handle& h, int reps, double& us) {
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    graph::Graph g;
    FROST_CHECK(g.deserialize(text));
    const auto t0 = Clock::now();
    FROST_CHECK(g.validate());
    FROST_CHECK(g.build_operation_graph(h));
    FROST_CHECK(g.create_execution_plans({HeurMode_t::A}));
    FROST_CHECK(g.check_support(h));
    FROST_CHECK(g.build_plans(h, BuildPlanPolicy_t::HEURISTICS_CHOICE));
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  us = median(samples);
  return {};
}

// Median over `batches` of the mean host time of `per_batch` back-to-back execute() calls. The device
// is synchronized between batches (outside the timed region) so the launch queue never fills.
error_t time_execute(const graph::Graph& g, const Handle& h, Buffers& bufs, int batches, int per_batch, double& us) {
  const auto pack = bufs.variant_pack();
  FROST_CHECK(g.execute(h, pack, bufs.workspace()));  // warm-up
  FROST_CHECK(detail::device_synchronize(h));
  std::vector<double> samples;
  for (int b = 0; b < batches; ++b) {
    const auto t0 = Clock::now();
    for (int i = 0; i < per_batch; ++i) FROST_CHECK(g.execute(h, pack, bufs.workspace()));
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / per_batch);
    FROST_CHECK(detail::device_synchronize(h));
  }
  us = median(samples);
  return {};
}

}  // namespace

// args: GRAPH.json [--json FILE] (after `frost bench overhead`).
int cmd_bench_overhead(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fprintf(stderr, "usage: frost bench overhead GRAPH.json [--json FILE]\n");
    return 2;
  }
  const std::string path = args[0];
  std::string json_path;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--json" && i + 1 < args.size()) {
      json_path = args[++i];
    } else {
      std::fprintf(stderr, "frost bench: unexpected argument '%s'\n", args[i].c_str());
      return 2;
    }
  }
  bool ok = false;
  const std::string text = read_file(path, ok);
  if (!ok) {
    std::fprintf(stderr, "frost bench: cannot read '%s'\n", path.c_str());
    return 2;
  }
  graph::Graph g;
  if (auto e = g.deserialize(text); e.is_bad()) return fail("'" + path + "'", e);
  if (auto e = g.validate(); e.is_bad()) return fail("'" + path + "'", e);
  Handle h;
  if (auto e = build_on_best_device(g, h); e.is_bad()) return fail("build", e);
  std::string plan;
  g.get_plan_name(plan);
  int64_t ws = 0;
  g.get_workspace_size(ws);
  Buffers bufs(h);
  if (auto e = bufs.allocate(g, 1); e.is_bad()) return fail("allocate", e);
  if (auto e = bufs.allocate_workspace(ws); e.is_bad()) return fail("allocate", e);

  double build_us = 0, execute_us = 0;
  if (auto e = time_build(text, h, 21, build_us); e.is_bad()) return fail("build", e);
  // The host engine does the work inside execute(): fewer calls keep the run short.
  const int per_batch = h.device().is_cuda() ? 200 : 5;
  if (auto e = time_execute(g, h, bufs, 21, per_batch, execute_us); e.is_bad()) return fail("execute", e);
  std::printf("graph %s\nplan  %s on %s\n  build (validate..build_plans)  %9.1f us  (median of 21)\n"
              "  execute() host time            %9.2f us  (median of 21 batches of %d calls)\n",
              path.c_str(), plan.c_str(), h.device().to_string().c_str(), build_us, execute_us, per_batch);
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\"graph\": \"" << path << "\", \"plan\": \"" << plan << "\", \"device\": \"" << h.device().to_string()
        << "\", \"build_us\": " << build_us << ", \"execute_us\": " << execute_us << "}\n";
    if (!out) {
      std::fprintf(stderr, "frost bench: cannot write '%s'\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace frost::cli
