// Opening libcudnn at run time. frost links nothing of cuDNN: the cudnn engine finds the library at
// first use and declines every graph, naming what it tried, when there is none.
//
// Search order:
//   1. FROST_CUDNN_PATH: a file (the library itself) or a folder holding libcudnn.so.9. When set,
//      nothing else is tried, so it can also point elsewhere to switch the engine off.
//   2. The lib folder of the nvidia-cudnn Python package (site-packages/nvidia/cudnn/lib), found
//      without starting Python: site-packages folders under $VIRTUAL_ENV, $CONDA_PREFIX, each
//      $PYTHONPATH entry, the prefix of every python3 on $PATH, the folder frost itself was loaded
//      from (a wheel's site-packages), ~/.local and the system's dist-packages.
//   3. The dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache): libcudnn.so.9, libcudnn.so.
// The library's sub-libraries (libcudnn_graph, _engines_*, _heuristic, ...) load from its own folder:
// their RUNPATH is $ORIGIN.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engines/cudnn/cudnn_backend_abi.h"

namespace frost::detail {

struct CudnnLibrary {
  std::string path;     // what was opened
  int64_t version = 0;  // cudnnGetVersion(): 91901 for 9.19.1
  void* dl = nullptr;   // the dlopen handle; the library stays loaded for the life of the process

  cudnn_abi::GetVersionFn get_version = nullptr;
  cudnn_abi::GetErrorStringFn get_error_string = nullptr;
  cudnn_abi::GetLastErrorStringFn get_last_error_string = nullptr;
  cudnn_abi::CreateFn create = nullptr;
  cudnn_abi::SetStreamFn set_stream = nullptr;
  cudnn_abi::BackendCreateDescriptorFn create_descriptor = nullptr;
  cudnn_abi::BackendDestroyDescriptorFn destroy_descriptor = nullptr;
  cudnn_abi::BackendFinalizeFn finalize = nullptr;
  cudnn_abi::BackendSetAttributeFn set_attribute = nullptr;
  cudnn_abi::BackendGetAttributeFn get_attribute = nullptr;
  cudnn_abi::BackendExecuteFn execute = nullptr;

  // "CUDNN_STATUS_BAD_PARAM (2000): <the backend's last error message>"
  std::string describe(cudnn_abi::Status s) const;
};

// Every path step 1 or 2 of the search would try, in order, whether or not the file exists.
std::vector<std::string> cudnn_candidate_paths();

// Searches and opens now (no caching); on failure returns null and says what was tried and why it failed.
std::unique_ptr<CudnnLibrary> open_cudnn(std::string& why);

// The library of this process, opened at the first call; null with the reason when there is none.
const CudnnLibrary* cudnn_library(std::string* why = nullptr);

}  // namespace frost::detail
