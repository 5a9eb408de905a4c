// The one place that orders engine families against each other.
//   A          : Hopper engines, then the cuDNN delegate, then the CPU reference.
//   B          : the cuDNN delegate first, then Hopper engines, then the reference.
//   FALLBACK   : only the generic engine (the CPU reference).
//   OPENSOURCE : as A without the cuDNN delegate.
// Several modes concatenate their orders, dropping repeats. Within the cuDNN delegate's place the
// backend's own heuristics rank its engines: its answers for each requested mode (A and B map to the
// backend's modes A and B), concatenated in mode order without repeats (src/engines/cudnn).
#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "plan/engine.h"

namespace frost::detail {
namespace {

std::vector<std::string> env_list(const char* var) {
  std::vector<std::string> r;
  const char* v = std::getenv(var);
  if (!v) return r;
  std::stringstream s(v);
  std::string item;
  while (std::getline(s, item, ','))
    if (!item.empty()) r.push_back(item);
  return r;
}

std::vector<EngineClass> class_order(HeurMode_t m) {
  switch (m) {
    case HeurMode_t::A: return {EngineClass::SM90, EngineClass::CUDNN, EngineClass::REFERENCE};
    case HeurMode_t::B: return {EngineClass::CUDNN, EngineClass::SM90, EngineClass::REFERENCE};
    case HeurMode_t::FALLBACK: return {EngineClass::REFERENCE};
    case HeurMode_t::OPENSOURCE: return {EngineClass::SM90, EngineClass::REFERENCE};
  }
  return {};
}

}  // namespace

std::vector<const EngineFamily*> rank_families(const std::vector<HeurMode_t>& modes) {
  const auto allow = env_list("FROST_ENGINES");
  const auto deny = env_list("FROST_DISABLE_ENGINES");
  auto enabled = [&](const EngineFamily& f) {
    const std::string n(f.name());
    if (!allow.empty() && std::find(allow.begin(), allow.end(), n) == allow.end()) return false;
    return std::find(deny.begin(), deny.end(), n) == deny.end();
  };
  std::vector<const EngineFamily*> order;
  for (HeurMode_t m : modes)
    for (EngineClass c : class_order(m))
      for (const auto& f : registered_engines())
        if (f->engine_class() == c && enabled(*f) && std::find(order.begin(), order.end(), f.get()) == order.end())
          order.push_back(f.get());
  return order;
}

}  // namespace frost::detail
