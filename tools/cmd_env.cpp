// `frost env`: what this frost is and what it can reach on this machine.
#include <cstdio>

#include "frost/frost.h"
#include "engines/cudnn/cudnn_library.h"
#include "plan/engine.h"
#include "runtime/device.h"

namespace frost::cli {
namespace {

std::string cuda_version(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// Where the cudnn engine found libcudnn (its search order, docs/engines.md), or why it found none.
std::string find_cudnn() {
  std::string why;
  if (const auto* lib = detail::cudnn_library(&why)) return lib->path + " (version " + std::to_string(lib->version) + ")";
  return "not found: " + why;
}

}  // namespace

int cmd_env(const std::vector<std::string>&) {
  std::printf("frost          %s (cuDNN graph-API level %lld, %s)\n", version_string(),
              static_cast<long long>(backend_version()), backend_version_string());
  std::printf("compiler       %s\n", __VERSION__);
#ifdef FROST_WITH_CUDA
  std::printf("cuda build     yes (sm_90a engines)\n");
#else
  std::printf("cuda build     no (CPU reference only)\n");
#endif
  std::printf("cuda driver    %s\n", cuda_version(detail::cuda_driver_version()).c_str());
  std::printf("cuda runtime   %s\n", cuda_version(detail::cuda_runtime_version()).c_str());
  std::printf("cudnn          %s\n", find_cudnn().c_str());
  const int n = cuda_device_count();
  std::printf("gpus           %d\n", n);
  for (int i = 0; i < n; ++i) {
    detail::DeviceFacts f;
    if (detail::query_device(i, f))
      std::printf("  cuda:%d  %s  sm_%d%d  %d SMs  L2 %lld MB\n", i, f.name.c_str(), f.sm_major, f.sm_minor, f.sm_count,
                  static_cast<long long>(f.l2_bytes >> 20));
  }
  std::printf("engines       ");
  for (const auto& e : detail::registered_engines())
    std::printf(" %s(%lld)", std::string(e->name()).c_str(), static_cast<long long>(e->engine_id()));
  std::printf("\n");
  return 0;
}

}  // namespace frost::cli
