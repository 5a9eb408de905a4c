// The CPU reference engine: serves every op on host memory. It is the oracle for every other
// engine and the default where no GPU is present.
#include "engines/reference/ref_exec.h"
#include "plan/engine.h"

namespace frost::detail {
namespace {

class ReferencePlan final : public Plan {
 public:
  ReferencePlan(const GraphState& g, Precision p) : graph_(g), precision_(p) {}
  int64_t workspace_size() const override { return 0; }
  error_t execute(const VariantPack& pack, void*, const Handle&) const override {
    return reference_execute(graph_, pack, precision_);
  }

 private:
  const GraphState& graph_;
  Precision precision_;
};

class ReferenceEngine final : public EngineFamily {
 public:
  std::string_view name() const override { return "reference"; }
  int64_t engine_id() const override { return 10000; }
  EngineClass engine_class() const override { return EngineClass::REFERENCE; }

  std::string support(const GraphFacts& f) const override {
    if (f.device.is_cuda())
      return "runs on host memory only; the handle is on " + f.device.to_string();
    return {};
  }

  error_t build(const GraphFacts& f, const graph::KnobMap&, std::unique_ptr<Plan>& out) const override {
    // The graph's compute type DOUBLE selects the fp64 mode; everything else computes in fp32.
    const Precision p = f.graph.ctx.compute_data_type == DataType_t::DOUBLE ? Precision::F64 : Precision::F32;
    out = std::make_unique<ReferencePlan>(f.graph, p);
    return {};
  }
};

const EngineRegistrar kRegister(std::make_unique<ReferenceEngine>());

}  // namespace
}  // namespace frost::detail
