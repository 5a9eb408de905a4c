// Planning and execution: build_operation_graph -> create_execution_plans -> check_support ->
// build_plans -> execute.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>

#include "plan/engine.h"
#include "runtime/device.h"

namespace frost::graph {

using detail::Candidate;
using detail::GraphFacts;
using detail::Stage;

namespace {

error_t stage_error(const char* call, const char* needs) {
  return {error_code_t::INVALID_VALUE, std::string(call) + ": call " + needs + " first"};
}

bool has_all(const std::vector<NumericalNote_t>& have, const std::vector<NumericalNote_t>& want) {
  return std::all_of(want.begin(), want.end(), [&](auto n) { return std::count(have.begin(), have.end(), n) > 0; });
}
bool has_any(const std::vector<NumericalNote_t>& have, const std::vector<NumericalNote_t>& bad) {
  return std::any_of(bad.begin(), bad.end(), [&](auto n) { return std::count(have.begin(), have.end(), n) > 0; });
}
bool has_all_b(const std::vector<BehaviorNote_t>& have, const std::vector<BehaviorNote_t>& want) {
  return std::all_of(want.begin(), want.end(), [&](auto n) { return std::count(have.begin(), have.end(), n) > 0; });
}
bool has_any_b(const std::vector<BehaviorNote_t>& have, const std::vector<BehaviorNote_t>& bad) {
  return std::any_of(bad.begin(), bad.end(), [&](auto n) { return std::count(have.begin(), have.end(), n) > 0; });
}

std::string join_declines(const std::vector<std::string>& d) {
  std::string s;
  for (const auto& r : d) s += "\n  " + r;
  return s;
}

// Drops families deselected by name; records why.
bool passes_selection(detail::GraphState& g, const detail::EngineFamily& f) {
  const std::string n(f.name());
  if (std::find(g.deselected_engines.begin(), g.deselected_engines.end(), n) != g.deselected_engines.end()) {
    g.declines.push_back(n + ": deselected by deselect_engines");
    return false;
  }
  return true;
}

std::vector<NumericalNote_t> numeric_notes_of(const Candidate& c) {
  return c.numeric_notes ? *c.numeric_notes : c.family->numeric_notes();
}
std::vector<BehaviorNote_t> behavior_notes_of(const Candidate& c) {
  return c.behavior_notes ? *c.behavior_notes : c.family->behavior_notes();
}

// Applies the note filters to one candidate; records why it was dropped.
bool passes_note_filters(detail::GraphState& g, const Candidate& c) {
  const auto numeric = numeric_notes_of(c);
  const auto behavior = behavior_notes_of(c);
  const std::string n = detail::plan_name(*c.family, c.engine_id, c.knobs);
  if (!has_all(numeric, g.required_numeric_notes) || has_any(numeric, g.excluded_numeric_notes)) {
    g.declines.push_back(n + ": filtered out by its numeric notes");
    return false;
  }
  if (!has_all_b(behavior, g.required_behavior_notes) || has_any_b(behavior, g.excluded_behavior_notes)) {
    g.declines.push_back(n + ": filtered out by its behavior notes");
    return false;
  }
  return true;
}

// Asks family f whether it serves the graph and appends its ranked engines that pass the note filters
// to `out`; records why when it declines.
void offer(detail::GraphState& g, const detail::EngineFamily& f, std::vector<Candidate>& out) {
  const GraphFacts facts{g, g.device, g.plan_modes};
  const std::string reason = f.support(facts);
  if (!reason.empty()) {
    g.declines.push_back(std::string(f.name()) + ": " + reason);
    return;
  }
  for (auto& choice : f.recommend_engines(facts)) {
    Candidate c{&f, choice.engine_id, std::move(choice.knobs), nullptr, "", std::move(choice.numeric_notes),
                std::move(choice.behavior_notes)};
    if (passes_note_filters(g, c)) out.push_back(std::move(c));
  }
}

// Replaces the pending entry at index i with its family's engines, in its place (none if it declines).
void expand_at(detail::GraphState& g, size_t i) {
  const detail::EngineFamily& f = *g.candidates[i].family;
  std::vector<Candidate> engines;
  offer(g, f, engines);
  g.candidates.erase(g.candidates.begin() + static_cast<std::ptrdiff_t>(i));
  g.candidates.insert(g.candidates.begin() + static_cast<std::ptrdiff_t>(i), std::make_move_iterator(engines.begin()),
                      std::make_move_iterator(engines.end()));
}

// Every pending entry expanded: what the index-based calls see. The const queries of Graph expand
// through its state pointer too; like the rest of planning, that is not meant for concurrent calls.
void expand_all(detail::GraphState& g) {
  for (size_t i = 0; i < g.candidates.size();)
    if (g.candidates[i].pending)
      expand_at(g, i);  // index i now holds the family's first engine or the next entry
    else
      ++i;
}

const Candidate* selected(const detail::GraphState& g) {
  for (const auto& c : g.candidates)
    if (c.plan) return &c;
  return nullptr;
}

error_t check_index(const detail::GraphState& g, int64_t i) {
  if (i < 0 || i >= static_cast<int64_t>(g.candidates.size()))
    return {error_code_t::INVALID_VALUE, "plan index " + std::to_string(i) + " is out of range [0, " +
                                             std::to_string(g.candidates.size()) + ")"};
  return {};
}

error_t check_pack(const detail::GraphState& g, const detail::VariantPack& pack) {
  for (const TensorPtr& t : g.bound_tensors) {
    auto it = pack.find(t->get_uid());
    if (it == pack.end() || it->second == nullptr)
      return {error_code_t::INVALID_VARIANT_PACK, "tensor '" + t->get_name() + "' (uid " + std::to_string(t->get_uid()) +
                                                      ") has no buffer in the variant pack"};
  }
  return {};
}

}  // namespace

error_t Graph::build_operation_graph(const Handle& handle) {
  if (state_->stage < Stage::VALIDATED) return stage_error("build_operation_graph", "validate()");
  if (handle.device().is_cuda() && handle.device().ordinal >= cuda_device_count())
    return {error_code_t::INVALID_CUDA_DEVICE, "handle names " + handle.device().to_string() + " but " +
                                                   std::to_string(cuda_device_count()) + " CUDA devices are usable"};
  state_->invalidate_plans();
  state_->device = handle.device();
  state_->stage = Stage::OPERATION_GRAPH_BUILT;
  return {};
}

error_t Graph::create_execution_plans(const std::vector<HeurMode_t>& modes) {
  if (state_->stage < Stage::OPERATION_GRAPH_BUILT)
    return stage_error("create_execution_plans", "build_operation_graph()");
  auto& g = *state_;
  g.candidates.clear();
  g.declines.clear();
  g.plan_modes = modes;
  const auto ranked = detail::rank_families(modes);
  for (const auto& f : detail::registered_engines())
    if (std::find(ranked.begin(), ranked.end(), f.get()) == ranked.end())
      g.declines.push_back(std::string(f->name()) + ": not enabled for the requested heuristic modes or by FROST_ENGINES/FROST_DISABLE_ENGINES");
  for (const auto* f : ranked) {
    if (!passes_selection(g, *f)) continue;
    // Below a candidate that may serve, a lazy family waits in its place until its plans are needed;
    // ranked first, its plans are the ones build_plans tries first, so it is asked now.
    if (f->expands_lazily() && !g.candidates.empty()) {
      g.candidates.push_back({f, f->engine_id(), {}, nullptr, "", std::nullopt, std::nullopt, true});
      continue;
    }
    offer(g, *f, g.candidates);
  }
  g.stage = Stage::PLANS_CREATED;
  if (g.candidates.empty())
    return {error_code_t::GRAPH_NOT_SUPPORTED, "no engine supports this graph:" + join_declines(g.declines)};
  return {};
}

error_t Graph::create_execution_plan(int64_t engine_id, const KnobMap& knobs) {
  if (state_->stage < Stage::OPERATION_GRAPH_BUILT)
    return stage_error("create_execution_plan", "build_operation_graph()");
  auto& g = *state_;
  const auto* f = detail::find_engine(engine_id);
  if (!f) return {error_code_t::GRAPH_NOT_SUPPORTED, "no engine has id " + std::to_string(engine_id)};
  const GraphFacts facts{g, g.device};
  std::string reason = f->support(facts);
  if (!reason.empty()) return {error_code_t::GRAPH_NOT_SUPPORTED, std::string(f->name()) + ": " + reason};
  const auto space = f->knob_space_of(facts, engine_id);
  for (const auto& [type, value] : knobs) {
    auto k = std::find_if(space.begin(), space.end(), [&](const Knob& s) { return s.type == type; });
    if (k == space.end())
      return {error_code_t::INVALID_VALUE, std::string(f->name()) + ": knob " + std::string(to_string(type)) + " is not one of its knobs"};
    if (!k->accepts(value))
      return {error_code_t::INVALID_VALUE, std::string(f->name()) + ": knob " + std::string(to_string(type)) + "=" +
                                               std::to_string(value) + " is outside [" + std::to_string(k->minValue) +
                                               ", " + std::to_string(k->maxValue) + "] step " + std::to_string(k->stride)};
  }
  if (g.stage < Stage::PLANS_CREATED) {
    g.candidates.clear();
    g.stage = Stage::PLANS_CREATED;
  }
  g.candidates.push_back({f, engine_id, knobs, nullptr, "", std::nullopt, std::nullopt});
  return {};
}

error_t Graph::check_support(const Handle&) {
  if (state_->stage < Stage::PLANS_CREATED) return stage_error("check_support", "create_execution_plans()");
  if (state_->candidates.empty())
    return {error_code_t::GRAPH_NOT_SUPPORTED, "no engine supports this graph:" + join_declines(state_->declines)};
  return {};
}

namespace {

// Builds the (expanded) candidate at `index`.
error_t build_candidate(detail::GraphState& g, const Handle& handle, int64_t index) {
  if (!(handle.device().kind == g.device.kind && handle.device().ordinal == g.device.ordinal))
    return {error_code_t::HANDLE_ERROR, "plans were created for " + g.device.to_string() + ", handle is on " +
                                            handle.device().to_string()};
  auto& c = g.candidates[static_cast<size_t>(index)];
  if (c.plan) return {};
  const GraphFacts facts{g, g.device};
  std::unique_ptr<detail::Plan> plan;
  error_t e = c.family->build_engine(facts, c.engine_id, c.knobs, plan);
  if (e.is_good() && g.max_workspace && plan->workspace_size() > *g.max_workspace)
    e = {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED,
         "workspace " + std::to_string(plan->workspace_size()) + " exceeds the limit " +
             std::to_string(*g.max_workspace)};
  if (e.is_bad()) {
    c.build_error = e.get_message();
    return e;
  }
  c.plan = std::move(plan);
  g.stage = Stage::PLANS_BUILT;
  return {};
}

}  // namespace

error_t Graph::build_plan_at_index(const Handle& handle, int64_t index) {
  if (state_->stage < Stage::PLANS_CREATED) return stage_error("build_plan_at_index", "create_execution_plans()");
  expand_all(*state_);
  FROST_CHECK(check_index(*state_, index));
  return build_candidate(*state_, handle, index);
}

error_t Graph::build_plans(const Handle& handle, BuildPlanPolicy_t policy) {
  if (state_->stage < Stage::PLANS_CREATED) return stage_error("build_plans", "create_execution_plans()");
  std::string failures;
  bool any = false;
  for (int64_t i = 0; i < static_cast<int64_t>(state_->candidates.size()); ++i) {
    // A lazy family reached in rank order lists its engines here; a decline leaves nothing at i.
    while (i < static_cast<int64_t>(state_->candidates.size()) && state_->candidates[static_cast<size_t>(i)].pending)
      expand_at(*state_, static_cast<size_t>(i));
    if (i == static_cast<int64_t>(state_->candidates.size())) break;
    error_t e = build_candidate(*state_, handle, i);
    if (e.is_good()) {
      any = true;
      if (policy == BuildPlanPolicy_t::HEURISTICS_CHOICE) break;
    } else {
      if (e.get_code() == error_code_t::HANDLE_ERROR) return e;
      failures += "\n  " + detail::plan_name(*state_->candidates[i].family, state_->candidates[i].engine_id, state_->candidates[i].knobs) + ": " +
                  e.get_message();
    }
  }
  if (!any)
    return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED,
            "no plan could be built:" + failures + join_declines(state_->declines)};
  return {};
}

error_t Graph::build(const Handle& handle, const std::vector<HeurMode_t>& modes, BuildPlanPolicy_t policy) {
  FROST_CHECK(validate());
  FROST_CHECK(build_operation_graph(handle));
  FROST_CHECK(create_execution_plans(modes));
  FROST_CHECK(check_support(handle));
  return build_plans(handle, policy);
}

Graph& Graph::deselect_engines(const std::vector<std::string>& names) {
  auto& d = state_->deselected_engines;
  d.insert(d.end(), names.begin(), names.end());
  auto& c = state_->candidates;
  c.erase(std::remove_if(c.begin(), c.end(),
                         [&](const Candidate& x) { return std::count(names.begin(), names.end(), std::string(x.family->name())) > 0; }),
          c.end());
  return *this;
}
Graph& Graph::deselect_workspace_greater_than(int64_t bytes) { state_->max_workspace = bytes; return *this; }
Graph& Graph::select_numeric_notes(const std::vector<NumericalNote_t>& v) { state_->required_numeric_notes = v; return *this; }
Graph& Graph::deselect_numeric_notes(const std::vector<NumericalNote_t>& v) { state_->excluded_numeric_notes = v; return *this; }
Graph& Graph::select_behavior_notes(const std::vector<BehaviorNote_t>& v) { state_->required_behavior_notes = v; return *this; }
Graph& Graph::deselect_behavior_notes(const std::vector<BehaviorNote_t>& v) { state_->excluded_behavior_notes = v; return *this; }

error_t Graph::get_workspace_size(int64_t& bytes) const {
  const Candidate* c = selected(*state_);
  if (!c) return stage_error("get_workspace_size", "build_plans()");
  bytes = c->plan->workspace_size();
  return {};
}

error_t Graph::get_workspace_size_plan_at_index(int64_t index, int64_t& bytes) const {
  expand_all(*state_);
  FROST_CHECK(check_index(*state_, index));
  const auto& c = state_->candidates[index];
  if (!c.plan) return stage_error("get_workspace_size_plan_at_index", "build_plan_at_index()");
  bytes = c.plan->workspace_size();
  return {};
}

int64_t Graph::get_execution_plan_count() const {
  expand_all(*state_);
  return static_cast<int64_t>(state_->candidates.size());
}

error_t Graph::get_plan_name(std::string& name) const {
  const Candidate* c = selected(*state_);
  if (!c) return stage_error("get_plan_name", "build_plans()");
  name = detail::plan_name(*c->family, c->engine_id, c->knobs);
  return {};
}

error_t Graph::get_plan_name_at_index(int64_t index, std::string& name) const {
  expand_all(*state_);
  FROST_CHECK(check_index(*state_, index));
  const auto& c = state_->candidates[index];
  name = detail::plan_name(*c.family, c.engine_id, c.knobs);
  return {};
}

error_t Graph::get_engine_and_knobs_at_index(int64_t index, int64_t& engine_id, KnobMap& knobs) const {
  expand_all(*state_);
  FROST_CHECK(check_index(*state_, index));
  engine_id = state_->candidates[index].engine_id;
  knobs = state_->candidates[index].knobs;
  return {};
}

error_t Graph::get_behavior_notes(std::vector<BehaviorNote_t>& notes) const {
  const Candidate* c = selected(*state_);
  if (!c) return stage_error("get_behavior_notes", "build_plans()");
  notes = behavior_notes_of(*c);
  return {};
}

error_t Graph::get_behavior_notes_for_plan_at_index(int64_t index, std::vector<BehaviorNote_t>& notes) const {
  expand_all(*state_);
  FROST_CHECK(check_index(*state_, index));
  notes = behavior_notes_of(state_->candidates[index]);
  return {};
}

error_t Graph::get_numeric_notes_for_plan_at_index(int64_t index, std::vector<NumericalNote_t>& notes) const {
  expand_all(*state_);
  FROST_CHECK(check_index(*state_, index));
  notes = numeric_notes_of(state_->candidates[index]);
  return {};
}

std::vector<std::string> Graph::get_decline_reasons() const { return state_->declines; }

error_t Graph::execute_plan_at_index(const Handle& handle, const std::unordered_map<int64_t, void*>& pack,
                                     void* workspace, int64_t index) const {
  FROST_CHECK(check_index(*state_, index));
  const auto& c = state_->candidates[index];
  if (!c.plan) return stage_error("execute", "build_plans()");
  if (!(handle.device().kind == state_->device.kind && handle.device().ordinal == state_->device.ordinal))
    return {error_code_t::HANDLE_ERROR, "the plan was built for " + state_->device.to_string() + ", handle is on " +
                                            handle.device().to_string()};
  FROST_CHECK(check_pack(*state_, pack));
  if (c.plan->workspace_size() > 0 && workspace == nullptr)
    return {error_code_t::INVALID_VALUE, "the plan needs " + std::to_string(c.plan->workspace_size()) +
                                             " bytes of workspace and the workspace pointer is null"};
  return c.plan->execute(pack, workspace, handle);
}

error_t Graph::execute(const Handle& handle, const std::unordered_map<int64_t, void*>& pack, void* workspace) const {
  for (int64_t i = 0; i < static_cast<int64_t>(state_->candidates.size()); ++i)
    if (state_->candidates[i].plan) return execute_plan_at_index(handle, pack, workspace, i);
  return stage_error("execute", "build_plans()");
}

error_t Graph::execute(const Handle& handle, const std::unordered_map<TensorPtr, void*>& pack, void* workspace) const {
  std::unordered_map<int64_t, void*> by_uid;
  for (const auto& [t, p] : pack) {
    if (!t) return {error_code_t::INVALID_VARIANT_PACK, "variant pack holds a null tensor"};
    by_uid[t->get_uid()] = p;
  }
  return execute(handle, by_uid, workspace);
}

error_t Graph::execute(const Handle& handle, const std::vector<void*>& pointers, const std::vector<int64_t>& uids,
                       void* workspace) const {
  if (pointers.size() != uids.size())
    return {error_code_t::INVALID_VARIANT_PACK, std::to_string(pointers.size()) + " pointers for " +
                                                    std::to_string(uids.size()) + " uids"};
  std::unordered_map<int64_t, void*> by_uid;
  by_uid.reserve(uids.size());
  for (size_t i = 0; i < uids.size(); ++i) by_uid[uids[i]] = pointers[i];
  return execute(handle, by_uid, workspace);
}

error_t Graph::autotune(const Handle& handle, const std::unordered_map<int64_t, void*>& pack, void* workspace) {
  auto& cands = state_->candidates;
  std::vector<std::pair<double, size_t>> timed;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].plan) continue;
    FROST_CHECK(execute_plan_at_index(handle, pack, workspace, static_cast<int64_t>(i)));  // warm-up
    FROST_CHECK(detail::device_synchronize(handle));
    const auto t0 = std::chrono::steady_clock::now();
    constexpr int kRuns = 3;
    for (int r = 0; r < kRuns; ++r) FROST_CHECK(execute_plan_at_index(handle, pack, workspace, static_cast<int64_t>(i)));
    FROST_CHECK(detail::device_synchronize(handle));
    timed.push_back({std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), i});
  }
  if (timed.empty()) return stage_error("autotune", "build_plans()");
  const size_t best = std::min_element(timed.begin(), timed.end())->second;
  if (best != 0) std::rotate(cands.begin(), cands.begin() + static_cast<int64_t>(best), cands.begin() + static_cast<int64_t>(best) + 1);
  return {};
}

}  // namespace frost::graph
