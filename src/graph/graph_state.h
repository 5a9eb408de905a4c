// Everything a Graph holds. Internal: engines, the reference executor and serialization read it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frost/graph.h"
#include "graph/node.h"
#include "plan/plan.h"

namespace frost::detail {

class EngineFamily;

enum class Stage { DECLARED, VALIDATED, OPERATION_GRAPH_BUILT, PLANS_CREATED, PLANS_BUILT };

struct Candidate {
  const EngineFamily* family = nullptr;
  int64_t engine_id = 0;  // the family's id, or a backend engine's for the cuDNN delegate
  graph::KnobMap knobs;
  std::unique_ptr<Plan> plan;  // set by build_plans
  std::string build_error;     // why build failed, if it did
  // Set where the engine's notes differ from its family's.
  std::optional<std::vector<NumericalNote_t>> numeric_notes;
  std::optional<std::vector<BehaviorNote_t>> behavior_notes;
  // A family that expands lazily (EngineFamily::expands_lazily) holds its place in the ranking with
  // one pending entry; its engines are listed in that place when first needed.
  bool pending = false;
};

struct GraphState {
  GraphContext ctx;
  std::vector<TensorPtr> tensors;
  std::vector<std::unique_ptr<Node>> nodes;
  Stage stage = Stage::DECLARED;
  // Tensors execute() must find in the variant pack (non-virtual, not pass-by-value), set by
  // validate() so that execute() checks the pack without walking the nodes.
  std::vector<TensorPtr> bound_tensors;
  // The first error a builder met (a null input, say); validate reports it.
  error_t deferred_error;
  Device device;
  std::vector<Candidate> candidates;
  std::vector<std::string> declines;
  std::vector<HeurMode_t> plan_modes;  // the modes of the last create_execution_plans
  // Candidate filters.
  std::vector<std::string> deselected_engines;
  std::optional<int64_t> max_workspace;
  std::vector<NumericalNote_t> required_numeric_notes, excluded_numeric_notes;
  std::vector<BehaviorNote_t> required_behavior_notes, excluded_behavior_notes;

  void invalidate_plans() {
    candidates.clear();
    declines.clear();
    if (stage > Stage::VALIDATED) stage = Stage::VALIDATED;
  }
  void note_error(error_t e) {
    if (deferred_error.is_good()) deferred_error = std::move(e);
  }
  // The node that writes tensor t, if any.
  const Node* producer_of(const TensorPtr& t) const;
};

// Adds a node built by an op's builder; checks the inputs it names are not null.
void add_node(GraphState& g, std::unique_ptr<Node> node);
// A fresh virtual output tensor named after the node and the port.
TensorPtr make_output(GraphState& g, const std::string& node_name, std::string_view port);

}  // namespace frost::detail
