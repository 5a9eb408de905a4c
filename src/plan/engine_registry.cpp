#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "plan/engine.h"

namespace frost::detail {
namespace {
std::vector<std::unique_ptr<EngineFamily>>& registry() {
  static std::vector<std::unique_ptr<EngineFamily>> r;
  return r;
}
}  // namespace

void register_engine(std::unique_ptr<EngineFamily> f) { registry().push_back(std::move(f)); }

std::unique_ptr<EngineFamily> unregister_engine(const EngineFamily* family) {
  auto& r = registry();
  auto it = std::find_if(r.begin(), r.end(), [&](const auto& f) { return f.get() == family; });
  if (it == r.end()) return nullptr;
  std::unique_ptr<EngineFamily> out = std::move(*it);
  r.erase(it);
  return out;
}

const std::vector<std::unique_ptr<EngineFamily>>& registered_engines() { return registry(); }

const EngineFamily* find_engine(int64_t id) {
  for (const auto& f : registry())
    if (f->owns_engine_id(id)) return f.get();
  return nullptr;
}

std::string plan_name(const EngineFamily& f, int64_t engine_id, const graph::KnobMap& knobs) {
  std::vector<std::pair<KnobType_t, int64_t>> sorted(knobs.begin(), knobs.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> parts;
  if (engine_id != f.engine_id()) parts.push_back("engine=" + std::to_string(engine_id));
  for (const auto& [k, v] : sorted) parts.push_back(std::string(to_string(k)) + '=' + std::to_string(v));
  std::ostringstream o;
  o << f.name();
  if (!parts.empty()) {
    o << '[';
    for (size_t i = 0; i < parts.size(); ++i) o << (i ? ", " : "") << parts[i];
    o << ']';
  }
  return o.str();
}

}  // namespace frost::detail
