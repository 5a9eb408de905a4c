// `frost run GRAPH.json` and `frost plans GRAPH.json`.
#include <chrono>
#include <cstdio>

#include "cli_common.h"
#include "runtime/device.h"

namespace frost::cli {
namespace {

int fail(const std::string& what, const error_t& e) {
  std::fprintf(stderr, "frost: %s: %s: %s\n", what.c_str(), to_string(e.get_code()), e.get_message().c_str());
  return 1;
}

bool load_graph(const std::string& path, graph::Graph& g, int& rc) {
  bool ok = false;
  const std::string text = read_file(path, ok);
  if (!ok) {
    std::fprintf(stderr, "frost: cannot read '%s'\n", path.c_str());
    rc = 2;
    return false;
  }
  error_t e = g.deserialize(text);
  if (e.is_good()) e = g.validate();
  if (e.is_bad()) {
    rc = fail("'" + path + "'", e);
    return false;
  }
  return true;
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  std::string path;
  uint64_t seed = 1;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--seed" && i + 1 < args.size()) {
      try {
        seed = std::stoull(args[++i]);
      } catch (...) {
        std::fprintf(stderr, "frost run: --seed takes a non-negative integer\n");
        return 2;
      }
    } else if (path.empty()) {
      path = args[i];
    } else {
      std::fprintf(stderr, "frost run: unexpected argument '%s'\n", args[i].c_str());
      return 2;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: frost run GRAPH.json [--seed N]\n");
    return 2;
  }
  graph::Graph g;
  int rc = 0;
  if (!load_graph(path, g, rc)) return rc;
  Handle h;
  if (auto e = build_on_best_device(g, h); e.is_bad()) return fail("build", e);
  std::string plan;
  g.get_plan_name(plan);
  int64_t ws = 0;
  g.get_workspace_size(ws);
  Buffers bufs(h);
  if (auto e = bufs.allocate(g, seed); e.is_bad()) return fail("allocate", e);
  if (auto e = bufs.allocate_workspace(ws); e.is_bad()) return fail("allocate", e);
  const auto t0 = std::chrono::steady_clock::now();
  if (auto e = g.execute(h, bufs.variant_pack(), bufs.workspace()); e.is_bad()) return fail("execute", e);
  if (auto e = detail::device_synchronize(h); e.is_bad()) return fail("execute", e);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (auto e = bufs.download_outputs(); e.is_bad()) return fail("download", e);
  std::vector<OutputError> errs;
  if (auto e = check_against_reference(g, bufs, errs); e.is_bad()) return fail("reference", e);
  std::printf("graph %s  key %lld\nplan  %s on %s  (%.3f ms, seed %llu)\n", path.c_str(), static_cast<long long>(g.key()),
              plan.c_str(), h.device().to_string().c_str(), ms, static_cast<unsigned long long>(seed));
  bool all_ok = true;
  for (const auto& e : errs) {
    std::printf("  output %-24s %-9s max_abs %.3e  rel_l2 %.3e  (tolerance %.1e)  %s\n", e.name.c_str(),
                std::string(to_string(e.dtype)).c_str(), e.max_abs, e.rel_l2, tolerance_for(e.dtype),
                e.ok ? "ok" : (e.has_nan ? "NaN MISMATCH" : "MISMATCH"));
    all_ok = all_ok && e.ok;
  }
  return all_ok ? 0 : 1;
}

int cmd_plans(const std::vector<std::string>& args) {
  if (args.size() != 1) {
    std::fprintf(stderr, "usage: frost plans GRAPH.json\n");
    return 2;
  }
  graph::Graph g;
  int rc = 0;
  if (!load_graph(args[0], g, rc)) return rc;
  Handle h = best_handle();
  if (auto e = g.build_operation_graph(h); e.is_bad()) return fail("build_operation_graph", e);
  error_t e = g.create_execution_plans({HeurMode_t::A, HeurMode_t::B});
  std::printf("graph %s on %s\n", args[0].c_str(), h.device().to_string().c_str());
  for (int64_t i = 0; i < g.get_execution_plan_count(); ++i) {
    std::string name;
    int64_t id = 0;
    graph::KnobMap knobs;
    g.get_plan_name_at_index(i, name);
    g.get_engine_and_knobs_at_index(i, id, knobs);
    std::printf("  %2lld. %-48s engine %lld\n", static_cast<long long>(i), name.c_str(), static_cast<long long>(id));
  }
  for (const auto& d : g.get_decline_reasons()) std::printf("  declined: %s\n", d.c_str());
  if (e.is_bad()) return fail("create_execution_plans", e);
  return 0;
}

}  // namespace frost::cli
