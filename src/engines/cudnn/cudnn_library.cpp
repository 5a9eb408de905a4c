#include "engines/cudnn/cudnn_library.h"

#include <dlfcn.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace frost::detail {
namespace {

constexpr const char* kLibName = "libcudnn.so.9";

bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string parent(const std::string& p) {
  const auto k = p.find_last_of('/');
  return k == std::string::npos || k == 0 ? std::string("/") : p.substr(0, k);
}

std::vector<std::string> glob_dirs(const std::string& pattern) {
  std::vector<std::string> r;
  glob_t g{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) r.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  std::sort(r.rbegin(), r.rend());  // newest python3.N first
  return r;
}

std::vector<std::string> split(const char* list) {
  std::vector<std::string> r;
  if (!list) return r;
  std::stringstream s(list);
  std::string item;
  while (std::getline(s, item, ':'))
    if (!item.empty()) r.push_back(item);
  return r;
}

// The site-packages folders of an installation prefix (a venv, a conda env, /usr/local, ...).
void add_prefix_sites(const std::string& prefix, std::vector<std::string>& sites) {
  for (const char* lib : {"/lib/python3*/site-packages", "/lib64/python3*/site-packages", "/lib/python3*/dist-packages",
                          "/local/lib/python3*/dist-packages", "/lib/python3/dist-packages"})
    for (auto& d : glob_dirs(prefix + lib)) sites.push_back(d);
}

// A site-packages folder above the file frost was loaded from (frost installed as a wheel).
void add_own_site(std::vector<std::string>& sites) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&add_own_site), &info) == 0 || !info.dli_fname) return;
  for (std::string p = parent(info.dli_fname); p != "/"; p = parent(p)) {
    const std::string leaf = p.substr(p.find_last_of('/') + 1);
    if (leaf == "site-packages" || leaf == "dist-packages") {
      sites.push_back(p);
      return;
    }
  }
}

std::vector<std::string> python_sites() {
  std::vector<std::string> sites;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* v = std::getenv(var)) add_prefix_sites(v, sites);
  for (const auto& p : split(std::getenv("PYTHONPATH"))) sites.push_back(p);
  for (const auto& dir : split(std::getenv("PATH")))
    if (is_file(dir + "/python3")) add_prefix_sites(parent(dir), sites);
  add_own_site(sites);
  if (const char* home = std::getenv("HOME")) add_prefix_sites(std::string(home) + "/.local", sites);
  for (const char* prefix : {"/usr/local", "/usr", "/opt/conda"}) add_prefix_sites(prefix, sites);
  std::vector<std::string> unique;
  for (auto& s : sites)
    if (std::find(unique.begin(), unique.end(), s) == unique.end()) unique.push_back(s);
  return unique;
}

template <class F>
bool resolve(void* dl, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(dl, name));
  if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
  return fn != nullptr;
}

// Opens one file; on failure appends "path: why" to `tried`.
std::unique_ptr<CudnnLibrary> try_open(const std::string& path, std::vector<std::string>& tried) {
  void* dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    const char* e = dlerror();
    tried.push_back(path + ": " + (e ? e : "dlopen failed"));
    return nullptr;
  }
  auto lib = std::make_unique<CudnnLibrary>();
  lib->dl = dl;
  std::string missing;
  resolve(dl, "cudnnGetVersion", lib->get_version, missing);
  resolve(dl, "cudnnGetErrorString", lib->get_error_string, missing);
  resolve(dl, "cudnnGetLastErrorString", lib->get_last_error_string, missing);
  resolve(dl, "cudnnCreate", lib->create, missing);
  resolve(dl, "cudnnSetStream", lib->set_stream, missing);
  resolve(dl, "cudnnBackendCreateDescriptor", lib->create_descriptor, missing);
  resolve(dl, "cudnnBackendDestroyDescriptor", lib->destroy_descriptor, missing);
  resolve(dl, "cudnnBackendFinalize", lib->finalize, missing);
  resolve(dl, "cudnnBackendSetAttribute", lib->set_attribute, missing);
  resolve(dl, "cudnnBackendGetAttribute", lib->get_attribute, missing);
  resolve(dl, "cudnnBackendExecute", lib->execute, missing);
  if (!missing.empty()) {
    tried.push_back(path + ": lacks " + missing);
    dlclose(dl);
    return nullptr;
  }
  lib->version = static_cast<int64_t>(lib->get_version());
  if (lib->version < 90000 || lib->version >= 100000) {
    tried.push_back(path + ": version " + std::to_string(lib->version) +
                    "; the cudnn engine speaks the cuDNN 9 backend");
    dlclose(dl);
    return nullptr;
  }
  Dl_info info{};
  lib->path = dladdr(reinterpret_cast<void*>(lib->get_version), &info) && info.dli_fname ? info.dli_fname : path;
  return lib;
}

}  // namespace

std::string CudnnLibrary::describe(cudnn_abi::Status s) const {
  std::string r = std::string(get_error_string(s)) + " (" + std::to_string(s) + ")";
  char last[1024] = {0};
  get_last_error_string(last, sizeof last);
  if (last[0]) r += ": " + std::string(last);
  return r;
}

std::vector<std::string> cudnn_candidate_paths() {
  if (const char* p = std::getenv("FROST_CUDNN_PATH")) {
    const std::string s(p);
    return {is_dir(s) ? s + "/" + kLibName : s};
  }
  std::vector<std::string> r;
  for (const auto& site : python_sites()) r.push_back(site + "/nvidia/cudnn/lib/" + kLibName);
  return r;
}

std::unique_ptr<CudnnLibrary> open_cudnn(std::string& why) {
  std::vector<std::string> tried;
  const bool pinned = std::getenv("FROST_CUDNN_PATH") != nullptr;
  for (const auto& path : cudnn_candidate_paths()) {
    if (!pinned && !is_file(path)) continue;
    if (auto lib = try_open(path, tried)) return lib;
  }
  if (!pinned)
    for (const char* name : {kLibName, "libcudnn.so"})
      if (auto lib = try_open(name, tried)) return lib;
  why = pinned ? "FROST_CUDNN_PATH names no usable libcudnn (" : "libcudnn (cuDNN 9) was not found (";
  for (size_t i = 0; i < tried.size(); ++i) why += (i ? "; " : "") + tried[i];
  why += pinned ? ")" : "); install nvidia-cudnn-cu13 or nvidia-cudnn-cu12, or set FROST_CUDNN_PATH";
  return nullptr;
}

const CudnnLibrary* cudnn_library(std::string* why) {
  struct Loaded {
    std::unique_ptr<CudnnLibrary> lib;
    std::string why;
  };
  static const Loaded* const loaded = [] {
    auto* l = new Loaded();  // never freed: the library stays loaded, as libraries loaded at start do
    l->lib = open_cudnn(l->why);
    return l;
  }();
  if (!loaded->lib && why) *why = loaded->why;
  return loaded->lib.get();
}

}  // namespace frost::detail
