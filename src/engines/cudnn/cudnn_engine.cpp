// Engine family `cudnn`: the graph lowered to the cuDNN backend (cudnn_lowering.h), planned by the
// backend's own heuristics, built and executed by the backend. Each backend engine keeps its global
// index as frost's engine id, in [0, 10000); its knobs map to KnobType_t (cudnn_knobs.h).
#include <algorithm>

#include "engines/cudnn/cudnn_device.h"
#include "engines/cudnn/cudnn_knobs.h"
#include "engines/cudnn/cudnn_lowering.h"
#include "plan/engine.h"

namespace frost::detail {
namespace {
namespace A = cudnn_abi::attr;
namespace D = cudnn_abi::desc;
namespace T = cudnn_abi::type;

constexpr int64_t kMaxBackendEngineId = 10000;
constexpr int64_t kMaxNotes = 16;

// Library, device and the operation graph on the device's handle.
struct Prepared {
  const CudnnLibrary* lib = nullptr;
  CudnnDeviceHandle* handle = nullptr;
  Lowered lowered;
};

error_t prepare(const GraphFacts& f, Prepared& p) {
  std::string why;
  p.lib = cudnn_library(&why);
  if (!p.lib) return {error_code_t::GRAPH_NOT_SUPPORTED, why};
  if (std::string r = cudnn_device_reason(f.device); !r.empty()) return {error_code_t::GRAPH_NOT_SUPPORTED, r};
  FROST_CHECK(cudnn_device_handle(*p.lib, f.device.ordinal, p.handle));
  return lower_graph(*p.lib, f.graph, p.handle->handle, p.lowered);
}

int32_t backend_heur_mode(HeurMode_t m) {
  switch (m) {
    case HeurMode_t::B:
      return cudnn_abi::heur::B;
    case HeurMode_t::FALLBACK:
      return cudnn_abi::heur::FALLBACK;
    default:
      return cudnn_abi::heur::A;
  }
}

// Reads one engine config the heuristics returned.
error_t read_config(const CudnnLibrary& lib, const DescPtr& cfg, EngineChoice& out) {
  std::vector<DescPtr> engine;
  FROST_CHECK(get_descs(lib, cfg, A::ENGINECFG_ENGINE, D::ENGINE, 1, engine));
  if (engine.empty()) return {error_code_t::HEURISTIC_QUERY_FAILED, "an engine config without an engine"};
  FROST_CHECK(get_i64(lib, engine[0], A::ENGINE_GLOBAL_INDEX, out.engine_id));
  std::vector<DescPtr> choices;
  FROST_CHECK(get_descs(lib, cfg, A::ENGINECFG_KNOB_CHOICES, D::KNOB_CHOICE, cudnn_abi::kKnobCount + 16, choices));
  for (const auto& c : choices) {
    std::vector<int32_t> type;
    int64_t value = 0;
    FROST_CHECK(get_enums(lib, c, A::KNOB_CHOICE_KNOB_TYPE, T::KNOB_TYPE, 1, type));
    FROST_CHECK(get_i64(lib, c, A::KNOB_CHOICE_KNOB_VALUE, value));
    if (!type.empty()) out.knobs[knob_from_backend(type[0])] = value;
  }
  std::vector<int32_t> notes;
  FROST_CHECK(get_enums(lib, engine[0], A::ENGINE_NUMERICAL_NOTE, T::NUMERICAL_NOTE, kMaxNotes, notes));
  out.numeric_notes = numeric_notes_from_backend(notes);
  FROST_CHECK(get_enums(lib, engine[0], A::ENGINE_BEHAVIOR_NOTE, T::BEHAVIOR_NOTE, kMaxNotes, notes));
  out.behavior_notes = behavior_notes_from_backend(notes);
  return {};
}

// The backend's engine configs for one heuristic mode, best first.
error_t heuristics_for_mode(const Prepared& p, HeurMode_t mode, std::vector<EngineChoice>& out) {
  DescBuilder hb(*p.lib, D::ENGINEHEUR, "heuristics (mode " + std::string(to_string(mode)) + ")");
  hb.desc(A::ENGINEHEUR_OPERATION_GRAPH, p.lowered.op_graph)
      .enumeration(A::ENGINEHEUR_MODE, T::HEUR_MODE, backend_heur_mode(mode));
  DescPtr heur;
  FROST_CHECK(hb.finalize(heur, error_code_t::HEURISTIC_QUERY_FAILED));
  int64_t count = 0;
  const cudnn_abi::Status s =
      p.lib->get_attribute(heur->get(), A::ENGINEHEUR_RESULTS, T::BACKEND_DESCRIPTOR, 0, &count, nullptr);
  if (s != cudnn_abi::kSuccess)
    return {error_code_t::HEURISTIC_QUERY_FAILED,
            "heuristics (mode " + std::string(to_string(mode)) + "): " + p.lib->describe(s)};
  std::vector<DescPtr> cfgs;
  FROST_CHECK(get_descs(*p.lib, heur, A::ENGINEHEUR_RESULTS, D::ENGINECFG, count, cfgs));
  for (const auto& cfg : cfgs) {
    EngineChoice c;
    FROST_CHECK(read_config(*p.lib, cfg, c));
    out.push_back(std::move(c));
  }
  return {};
}

// The backend's ranked engine configs for each requested mode, concatenated without repeats. A mode
// the backend cannot answer is skipped; `why` collects why.
void query_heuristics(const Prepared& p, const GraphFacts& f, std::vector<EngineChoice>& out, std::string& why) {
  for (HeurMode_t mode : f.modes) {
    if (mode == HeurMode_t::OPENSOURCE) continue;
    std::vector<EngineChoice> ranked;
    if (error_t e = heuristics_for_mode(p, mode, ranked); e.is_bad()) {
      why += (why.empty() ? "" : "; ") + e.get_message();
      continue;
    }
    for (auto& c : ranked) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const EngineChoice& e) {
        return e.engine_id == c.engine_id && e.knobs == c.knobs;
      });
      if (!seen) out.push_back(std::move(c));
    }
  }
}

class CudnnPlan final : public Plan {
 public:
  CudnnPlan(const CudnnLibrary& lib, CudnnDeviceHandle& h, int ordinal, Lowered lowered, DescPtr plan,
            int64_t backend_ws)
      : lib_(lib),
        handle_(h),
        ordinal_(ordinal),
        lowered_(std::move(lowered)),
        plan_(std::move(plan)),
        backend_ws_(backend_ws) {
    uids_.reserve(lowered_.bindings.size());
    for (const auto& b : lowered_.bindings) uids_.push_back(b.uid);
    ptrs_.resize(uids_.size());
  }
  int64_t workspace_size() const override { return lowered_.frost_workspace + backend_ws_; }

  error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const override {
    auto* ws = static_cast<char*>(workspace);
    std::lock_guard<std::mutex> lock(handle_.mutex);
    for (size_t i = 0; i < uids_.size(); ++i) {
      const Binding& b = lowered_.bindings[i];
      switch (b.source) {
        case Binding::Source::CALLER: {
          auto it = pack.find(b.uid);
          if (it == pack.end())
            return {error_code_t::INVALID_VARIANT_PACK, "cudnn: uid " + std::to_string(b.uid) + " has no buffer"};
          ptrs_[i] = it->second;
          break;
        }
        case Binding::Source::BY_VALUE:
          ptrs_[i] = const_cast<uint8_t*>(lowered_.by_value[static_cast<size_t>(b.index)].data());
          break;
        case Binding::Source::WORKSPACE:
          ptrs_[i] = ws + b.index;
          break;
      }
    }
    void* backend_ws = ws && backend_ws_ > 0 ? ws + lowered_.frost_workspace : nullptr;
    DescBuilder vb(lib_, D::VARIANT_PACK, "variant pack");
    vb.set(A::VARIANT_PACK_UNIQUE_IDS, T::INT64, static_cast<int64_t>(uids_.size()), uids_.data())
        .set(A::VARIANT_PACK_DATA_POINTERS, T::VOID_PTR, static_cast<int64_t>(ptrs_.size()), ptrs_.data())
        .set(A::VARIANT_PACK_WORKSPACE, T::VOID_PTR, 1, &backend_ws);
    DescPtr vp;
    if (auto e = vb.finalize(vp, error_code_t::GRAPH_EXECUTION_FAILED); e.is_bad()) return e;
    FROST_CHECK(cudnn_set_device(ordinal_));
    cudnn_abi::Status s = lib_.set_stream(handle_.handle, handle.stream());
    if (s == cudnn_abi::kSuccess) s = lib_.execute(handle_.handle, plan_->get(), vp->get());
    if (s != cudnn_abi::kSuccess)
      return {error_code_t::GRAPH_EXECUTION_FAILED, "cudnnBackendExecute: " + lib_.describe(s)};
    return {};
  }

 private:
  const CudnnLibrary& lib_;
  CudnnDeviceHandle& handle_;
  int ordinal_;
  Lowered lowered_;
  DescPtr plan_;
  int64_t backend_ws_;
  std::vector<int64_t> uids_;
  mutable std::vector<void*> ptrs_;  // filled under the handle's lock
};

class CudnnEngine final : public EngineFamily {
 public:
  std::string_view name() const override { return "cudnn"; }
  // The family spans the backend's engine ids [0, 10000); -1 names no single engine.
  int64_t engine_id() const override { return -1; }
  EngineClass engine_class() const override { return EngineClass::CUDNN; }
  bool owns_engine_id(int64_t id) const override { return id >= 0 && id < kMaxBackendEngineId; }
  // Lowering the graph and querying the backend's heuristics costs tens of milliseconds: below a
  // frost engine that serves, the planner asks only when these plans are needed.
  bool expands_lazily() const override { return true; }

  std::string support(const GraphFacts& f) const override {
    Prepared p;
    if (error_t e = prepare(f, p); e.is_bad()) return e.get_message();
    if (f.modes.empty()) return {};
    std::vector<EngineChoice> choices;
    std::string why;
    query_heuristics(p, f, choices, why);
    if (choices.empty())
      return "the backend's heuristics offer no engine for this graph" + (why.empty() ? "" : " (" + why + ")");
    return {};
  }

  std::vector<EngineChoice> recommend_engines(const GraphFacts& f) const override {
    Prepared p;
    std::vector<EngineChoice> choices;
    std::string why;
    if (prepare(f, p).is_good()) query_heuristics(p, f, choices, why);
    return choices;
  }

  std::vector<Knob> knob_space_of(const GraphFacts& f, int64_t id) const override {
    Prepared p;
    DescPtr engine;
    if (prepare(f, p).is_bad() || make_engine(p, id, engine).is_bad()) return {};
    std::vector<DescPtr> infos;
    if (get_descs(*p.lib, engine, A::ENGINE_KNOB_INFO, D::KNOB_INFO, cudnn_abi::kKnobCount + 16, infos).is_bad())
      return {};
    std::vector<Knob> space;
    for (const auto& info : infos) {
      std::vector<int32_t> type;
      Knob k;
      if (get_enums(*p.lib, info, A::KNOB_INFO_TYPE, T::KNOB_TYPE, 1, type).is_bad() || type.empty() ||
          get_i64(*p.lib, info, A::KNOB_INFO_MINIMUM_VALUE, k.minValue).is_bad() ||
          get_i64(*p.lib, info, A::KNOB_INFO_MAXIMUM_VALUE, k.maxValue).is_bad() ||
          get_i64(*p.lib, info, A::KNOB_INFO_STRIDE, k.stride).is_bad())
        continue;
      k.type = knob_from_backend(type[0]);
      space.push_back(k);
    }
    return space;
  }

  error_t build(const GraphFacts&, const graph::KnobMap&, std::unique_ptr<Plan>&) const override {
    return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "cudnn: a plan names one backend engine id"};
  }

  error_t build_engine(const GraphFacts& f, int64_t id, const graph::KnobMap& knobs,
                       std::unique_ptr<Plan>& out) const override {
    Prepared p;
    if (error_t e = prepare(f, p); e.is_bad())
      return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "cudnn: " + e.get_message()};
    DescPtr engine;
    FROST_CHECK(make_engine(p, id, engine));
    std::vector<DescPtr> choices;
    for (const auto& [type, value] : knobs) {
      const auto backend = knob_to_backend(type);
      if (!backend)
        return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED,
                "cudnn: knob " + std::string(to_string(type)) + " has no cuDNN backend equivalent"};
      DescBuilder kb(*p.lib, D::KNOB_CHOICE, "knob " + std::string(to_string(type)));
      kb.enumeration(A::KNOB_CHOICE_KNOB_TYPE, T::KNOB_TYPE, *backend).i64(A::KNOB_CHOICE_KNOB_VALUE, value);
      DescPtr c;
      FROST_CHECK(kb.finalize(c, error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED));
      choices.push_back(c);
    }
    DescBuilder cb(*p.lib, D::ENGINECFG, "engine config of engine " + std::to_string(id));
    cb.desc(A::ENGINECFG_ENGINE, engine);
    if (!choices.empty()) cb.descs(A::ENGINECFG_KNOB_CHOICES, choices);
    DescPtr cfg, plan;
    FROST_CHECK(cb.finalize(cfg, error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED));
    DescBuilder pb(*p.lib, D::EXECUTION_PLAN, "execution plan of engine " + std::to_string(id));
    pb.handle(A::EXECUTION_PLAN_HANDLE, p.handle->handle).desc(A::EXECUTION_PLAN_ENGINE_CONFIG, cfg);
    FROST_CHECK(pb.finalize(plan, error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED));
    int64_t ws = 0;
    FROST_CHECK(get_i64(*p.lib, plan, A::EXECUTION_PLAN_WORKSPACE_SIZE, ws));
    p.lowered.keep.insert(p.lowered.keep.end(), {engine, cfg});
    p.lowered.keep.insert(p.lowered.keep.end(), choices.begin(), choices.end());
    out = std::make_unique<CudnnPlan>(*p.lib, *p.handle, f.device.ordinal, std::move(p.lowered), plan, ws);
    return {};
  }

 private:
  static error_t make_engine(const Prepared& p, int64_t id, DescPtr& out) {
    DescBuilder eb(*p.lib, D::ENGINE, "backend engine " + std::to_string(id));
    eb.desc(A::ENGINE_OPERATION_GRAPH, p.lowered.op_graph).i64(A::ENGINE_GLOBAL_INDEX, id);
    return eb.finalize(out, error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED);
  }
};

const EngineRegistrar kRegister(std::make_unique<CudnnEngine>());

}  // namespace
}  // namespace frost::detail
