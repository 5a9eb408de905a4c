// Engine families and plans. A family registers itself from its own folder; the heuristics
// (heuristics.cpp) are the one place that ranks families against each other.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "frost/graph.h"
#include "graph/graph_state.h"

namespace frost::detail {

// What an engine may look at to decide support: the validated graph, the handle's device and the
// heuristic modes the caller asked for (empty outside create_execution_plans).
struct GraphFacts {
  const GraphState& graph;
  Device device;
  std::vector<HeurMode_t> modes = {};
};

// Coarse classes of engines; the heuristics order these per mode.
enum class EngineClass { REFERENCE, SM90, CUDNN };

// One plan a family proposes: an engine id (the family's own, or for the cuDNN delegate the backend
// engine's global index), its knobs, and notes where they differ from the family's.
struct EngineChoice {
  int64_t engine_id = 0;
  graph::KnobMap knobs;
  std::optional<std::vector<NumericalNote_t>> numeric_notes;
  std::optional<std::vector<BehaviorNote_t>> behavior_notes;
};

class EngineFamily {
 public:
  virtual ~EngineFamily() = default;
  virtual std::string_view name() const = 0;
  // Family id: frost families own [10000, 20000) in blocks of 100; cudnn keeps its own ids.
  virtual int64_t engine_id() const = 0;
  virtual EngineClass engine_class() const = 0;
  // The knobs this family understands and their ranges.
  virtual std::vector<Knob> knob_space(const GraphFacts&) const { return {}; }
  // Empty when the family can run the graph; else a reason that names the attribute.
  virtual std::string support(const GraphFacts&) const = 0;
  // Ranked knob sets, best first. A pure function of the facts.
  virtual std::vector<graph::KnobMap> recommend(const GraphFacts&) const { return {{}}; }
  virtual error_t build(const GraphFacts&, const graph::KnobMap&, std::unique_ptr<Plan>& out) const = 0;
  virtual std::vector<NumericalNote_t> numeric_notes() const { return {}; }
  // True when asking the family for support and engines is costly (the cuDNN delegate queries the
  // backend's heuristics). Ranked below another family's candidate, it is then consulted only when its
  // plans are needed: listed by index, reached by build_plans, or built.
  virtual bool expands_lazily() const { return false; }
  virtual std::vector<BehaviorNote_t> behavior_notes() const { return {}; }

  // Families that hold many engines under one name (the cuDNN delegate) override these four; the
  // defaults give every other family its single id.
  virtual bool owns_engine_id(int64_t id) const { return id == engine_id(); }
  virtual std::vector<EngineChoice> recommend_engines(const GraphFacts& f) const {
    std::vector<EngineChoice> r;
    for (auto& k : recommend(f)) r.push_back({engine_id(), std::move(k), std::nullopt, std::nullopt});
    return r;
  }
  virtual std::vector<Knob> knob_space_of(const GraphFacts& f, int64_t /*id*/) const { return knob_space(f); }
  virtual error_t build_engine(const GraphFacts& f, int64_t /*id*/, const graph::KnobMap& knobs,
                               std::unique_ptr<Plan>& out) const {
    return build(f, knobs, out);
  }
};

void register_engine(std::unique_ptr<EngineFamily> family);
// Removes and returns a family registered earlier (tests that add a family for their own duration).
std::unique_ptr<EngineFamily> unregister_engine(const EngineFamily* family);
const std::vector<std::unique_ptr<EngineFamily>>& registered_engines();
const EngineFamily* find_engine(int64_t engine_id);

struct EngineRegistrar {
  explicit EngineRegistrar(std::unique_ptr<EngineFamily> f) { register_engine(std::move(f)); }
};

// Families enabled by FROST_ENGINES (allow-list) and FROST_DISABLE_ENGINES, in the order the
// heuristics rank them for these modes.
std::vector<const EngineFamily*> rank_families(const std::vector<HeurMode_t>& modes);

// "name[TILE_M=128, STAGES=2]"; an engine id other than the family's is named first:
// "cudnn[engine=3, TILE_SIZE=1]".
std::string plan_name(const EngineFamily& f, int64_t engine_id, const graph::KnobMap& knobs);

}  // namespace frost::detail
