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

const std::vector<std::unique_ptr<EngineFamily>>& registered_engines() { return registry(); }

const EngineFamily* find_engine(int64_t id) {
  for (const auto& f : registry())
    if (f->engine_id() == id) return f.get();
  return nullptr;
}

std::string plan_name(const EngineFamily& f, const graph::KnobMap& knobs) {
  std::vector<std::pair<KnobType_t, int64_t>> sorted(knobs.begin(), knobs.end());
  std::sort(sorted.begin(), sorted.end());
  std::ostringstream o;
  o << f.name();
  if (!sorted.empty()) {
    o << '[';
    for (size_t i = 0; i < sorted.size(); ++i) o << (i ? ", " : "") << to_string(sorted[i].first) << '=' << sorted[i].second;
    o << ']';
  }
  return o.str();
}

}  // namespace frost::detail
