// The `frost` command: demo, run, plans, bench, env.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "frost/frost.h"

namespace frost::cli {
int cmd_demo(const std::vector<std::string>& args);
int cmd_run(const std::vector<std::string>& args);
int cmd_plans(const std::vector<std::string>& args);
int cmd_env(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
}  // namespace frost::cli

namespace {
void usage() {
  std::fprintf(stderr,
               "usage: frost <command> [options]\n"
               "  demo [--save FILE]        build a transformer block through the graph API, run it on the best\n"
               "                            engine and check it against the fp64 reference\n"
               "  run GRAPH.json [--seed N] run a serialized graph on random inputs with the best plan and\n"
               "                            compare with the fp64 reference\n"
               "  plans GRAPH.json          list the ranked plans and every engine's decline reason\n"
               "  bench GRAPH.json [--engines a,b] [--iters N] [--json FILE]\n"
               "                            the graph on each engine family in turn (cudnn beside frost's\n"
               "                            own), checked against the fp64 reference, median time\n"
               "  bench overhead GRAPH.json [--json FILE]\n"
               "                            host time of build (validate..build_plans) and of one execute()\n"
               "  env                       frost version, compiler, CUDA driver/runtime, cuDNN, GPUs\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "demo") return frost::cli::cmd_demo(args);
  if (cmd == "run") return frost::cli::cmd_run(args);
  if (cmd == "plans") return frost::cli::cmd_plans(args);
  if (cmd == "env") return frost::cli::cmd_env(args);
  if (cmd == "bench") return frost::cli::cmd_bench(args);
  if (cmd == "--version") {
    std::printf("frost %s\n", frost::version_string());
    return 0;
  }
  std::fprintf(stderr, "frost: unknown command '%s'\n", cmd.c_str());
  usage();
  return 2;
}
