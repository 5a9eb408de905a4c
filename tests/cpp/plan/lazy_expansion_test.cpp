// A family that expands lazily (the cuDNN delegate) is consulted only when its plans are needed: not
// while a higher-ranked family's plan builds, but when the plans are listed, when build_plans reaches
// it, or when it ranks first. Two test families stand in for a frost engine and for the backend.
#include <gtest/gtest.h>

#include "plan/engine.h"
#include "test_util.h"

namespace frost::test {
namespace {

using detail::EngineClass;
using detail::EngineFamily;
using detail::GraphFacts;

class NoWorkPlan final : public detail::Plan {
 public:
  int64_t workspace_size() const override { return 0; }
  error_t execute(const detail::VariantPack&, void*, const Handle&) const override { return {}; }
};

// Ranked with the Hopper engines; serves host graphs; its builds fail when `fail_build` is set.
class ServingFamily final : public EngineFamily {
 public:
  bool fail_build = false;
  std::string_view name() const override { return "test_serving"; }
  int64_t engine_id() const override { return 19800; }
  EngineClass engine_class() const override { return EngineClass::SM90; }
  std::string support(const GraphFacts& f) const override { return f.device.is_cuda() ? "host graphs only" : ""; }
  error_t build(const GraphFacts&, const graph::KnobMap&, std::unique_ptr<detail::Plan>& out) const override {
    if (fail_build) return {error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, "test_serving: told to fail"};
    out = std::make_unique<NoWorkPlan>();
    return {};
  }
};

// Ranked with the cuDNN delegate, expands lazily, counts every consultation of its "backend".
class LazyFamily final : public EngineFamily {
 public:
  mutable int support_calls = 0, recommend_calls = 0;
  std::string_view name() const override { return "test_lazy"; }
  int64_t engine_id() const override { return 19900; }
  EngineClass engine_class() const override { return EngineClass::CUDNN; }
  bool expands_lazily() const override { return true; }
  bool owns_engine_id(int64_t id) const override { return id == 19900 || id == 19901; }
  std::string support(const GraphFacts&) const override {
    ++support_calls;
    return {};
  }
  std::vector<detail::EngineChoice> recommend_engines(const GraphFacts&) const override {
    ++recommend_calls;
    return {{19901, {}, std::nullopt, std::nullopt}, {19900, {}, std::nullopt, std::nullopt}};
  }
  error_t build(const GraphFacts&, const graph::KnobMap&, std::unique_ptr<detail::Plan>& out) const override {
    out = std::make_unique<NoWorkPlan>();
    return {};
  }
  int calls() const { return support_calls + recommend_calls; }
};

// Registers both test families for one test and removes them after.
struct TestFamilies {
  ServingFamily* serving;
  LazyFamily* lazy;
  TestFamilies() {
    auto s = std::make_unique<ServingFamily>();
    auto l = std::make_unique<LazyFamily>();
    serving = s.get();
    lazy = l.get();
    detail::register_engine(std::move(s));
    detail::register_engine(std::move(l));
  }
  ~TestFamilies() {
    detail::unregister_engine(serving);
    detail::unregister_engine(lazy);
  }
};

graph::Graph small_graph() {
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT).set_intermediate_data_type(DataType_t::FLOAT);
  g.pointwise(input(g, "x", {4, 8}), graph::Pointwise_attributes().set_mode(PointwiseMode_t::RELU_FWD))
      ->set_output(true);
  return g;
}

bool has_decline(const graph::Graph& g, const std::string& family) {
  for (const auto& d : g.get_decline_reasons())
    if (d.rfind(family + ": ", 0) == 0) return true;
  return false;
}

TEST(LazyExpansion, TheCudnnDelegateExpandsLazily) {
  bool found = false;
  for (const auto& f : detail::registered_engines())
    if (f->name() == "cudnn") {
      found = true;
      EXPECT_TRUE(f->expands_lazily());
    }
  EXPECT_TRUE(found) << "the cudnn family is registered in every build";
}

TEST(LazyExpansion, NotConsultedWhileAHigherRankedPlanBuilds) {
  TestFamilies fam;
  auto g = small_graph();
  ASSERT_TRUE(g.build(cpu_handle(), {HeurMode_t::A}).is_good());
  std::string plan;
  ASSERT_TRUE(g.get_plan_name(plan).is_good());
  EXPECT_EQ(plan, "test_serving");
  EXPECT_EQ(fam.lazy->calls(), 0);
  // The real delegate waits too: no decline of its own (it would name the host handle) yet.
  EXPECT_FALSE(has_decline(g, "cudnn"));

  // Listing the plans expands it in its ranked place: after test_serving, before the reference.
  ASSERT_EQ(g.get_execution_plan_count(), 4);
  EXPECT_EQ(fam.lazy->support_calls, 1);
  EXPECT_EQ(fam.lazy->recommend_calls, 1);
  std::vector<std::string> names(4);
  for (int64_t i = 0; i < 4; ++i) ASSERT_TRUE(g.get_plan_name_at_index(i, names[static_cast<size_t>(i)]).is_good());
  EXPECT_EQ(names, (std::vector<std::string>{"test_serving", "test_lazy[engine=19901]", "test_lazy", "reference"}));
  EXPECT_TRUE(has_decline(g, "cudnn"));
  // The built plan keeps its index and executes.
  ASSERT_TRUE(g.get_plan_name(plan).is_good());
  EXPECT_EQ(plan, "test_serving");
  std::vector<float> x(32, 1.f), y(32, 0.f);
  EXPECT_TRUE(g.execute(cpu_handle(), {x.data(), y.data()}, {g.state().bound_tensors[0]->get_uid(),
                                                            g.state().bound_tensors[1]->get_uid()}, nullptr)
                  .is_good());
  g.get_execution_plan_count();
  EXPECT_EQ(fam.lazy->calls(), 2) << "expanded once only";
}

TEST(LazyExpansion, ConsultedWhenBuildPlansReachesIt) {
  TestFamilies fam;
  fam.serving->fail_build = true;
  auto g = small_graph();
  ASSERT_TRUE(g.build(cpu_handle(), {HeurMode_t::A}).is_good());
  std::string plan;
  ASSERT_TRUE(g.get_plan_name(plan).is_good());
  EXPECT_EQ(plan, "test_lazy[engine=19901]");
  EXPECT_EQ(fam.lazy->calls(), 2);
}

TEST(LazyExpansion, ConsultedAtOnceWhenRankedFirst) {
  TestFamilies fam;
  auto g = small_graph();
  g.deselect_engines({"test_serving"});
  ASSERT_TRUE(g.validate().is_good());
  ASSERT_TRUE(g.build_operation_graph(cpu_handle()).is_good());
  ASSERT_TRUE(g.create_execution_plans({HeurMode_t::A}).is_good());
  EXPECT_EQ(fam.lazy->calls(), 2);
  auto b = small_graph();
  ASSERT_TRUE(b.validate().is_good());
  ASSERT_TRUE(b.build_operation_graph(cpu_handle()).is_good());
  ASSERT_TRUE(b.create_execution_plans({HeurMode_t::B}).is_good());  // B ranks the delegate's class first
  EXPECT_EQ(fam.lazy->calls(), 4);
  ASSERT_TRUE(b.build_plans(cpu_handle()).is_good());
  std::string plan;
  ASSERT_TRUE(b.get_plan_name(plan).is_good());
  EXPECT_EQ(plan.rfind("test_lazy", 0), 0u) << plan;
}

TEST(LazyExpansion, AllPolicyAndIndexedBuildsExpandEveryFamily) {
  TestFamilies fam;
  auto g = small_graph();
  ASSERT_TRUE(g.build(cpu_handle(), {HeurMode_t::A}, BuildPlanPolicy_t::ALL).is_good());
  EXPECT_EQ(fam.lazy->calls(), 2);
  EXPECT_EQ(g.get_execution_plan_count(), 4);

  auto h = small_graph();
  ASSERT_TRUE(h.validate().is_good());
  ASSERT_TRUE(h.build_operation_graph(cpu_handle()).is_good());
  ASSERT_TRUE(h.create_execution_plans({HeurMode_t::A}).is_good());
  EXPECT_EQ(fam.lazy->calls(), 2);
  ASSERT_TRUE(h.build_plan_at_index(cpu_handle(), 2).is_good());
  EXPECT_EQ(fam.lazy->calls(), 4);
  int64_t id = 0;
  graph::KnobMap knobs;
  ASSERT_TRUE(h.get_engine_and_knobs_at_index(2, id, knobs).is_good());
  EXPECT_EQ(id, 19900);
}

TEST(LazyExpansion, ReplayFromEngineIdSkipsTheHeuristics) {
  TestFamilies fam;
  auto g = small_graph();
  ASSERT_TRUE(g.validate().is_good());
  ASSERT_TRUE(g.build_operation_graph(cpu_handle()).is_good());
  ASSERT_TRUE(g.create_execution_plan(19901, {}).is_good());
  ASSERT_TRUE(g.build_plans(cpu_handle()).is_good());
  std::string plan;
  ASSERT_TRUE(g.get_plan_name(plan).is_good());
  EXPECT_EQ(plan, "test_lazy[engine=19901]");
  EXPECT_EQ(fam.lazy->recommend_calls, 0);
}

}  // namespace
}  // namespace frost::test
