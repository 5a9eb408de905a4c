// The plan pipeline: validate -> build_operation_graph -> create_execution_plans -> check_support ->
// build_plans -> execute, its queries and filters, and every error path on the way.
#include <cstdlib>

#include "test_util.h"

namespace frost::test {
namespace {

using M = PointwiseMode_t;

// y = relu(a + b) on [3, 17] floats.
struct SmallGraph {
  graph::Graph g;
  TensorPtr a, b, y;
  SmallGraph() {
    g.set_io_data_type(DataType_t::FLOAT).set_intermediate_data_type(DataType_t::FLOAT);
    a = input(g, "a", {3, 17});
    b = input(g, "b", {3, 17});
    auto s = g.pointwise(a, b, graph::Pointwise_attributes().set_mode(M::ADD).set_name("sum"));
    y = g.pointwise(s, graph::Pointwise_attributes().set_mode(M::RELU_FWD).set_name("relu"));
    y->set_output(true);
  }
};

TEST(Lifecycle, StepByStepMatchesBuild) {
  SmallGraph s;
  Handle h = cpu_handle();
  ASSERT_TRUE(s.g.validate().is_good());
  ASSERT_TRUE(s.g.build_operation_graph(h).is_good());
  ASSERT_TRUE(s.g.create_execution_plans({HeurMode_t::A}).is_good());
  ASSERT_TRUE(s.g.check_support(h).is_good());
  ASSERT_TRUE(s.g.build_plans(h, BuildPlanPolicy_t::ALL).is_good());
  EXPECT_EQ(s.g.get_execution_plan_count(), 1);
  std::string name;
  ASSERT_TRUE(s.g.get_plan_name_at_index(0, name).is_good());
  EXPECT_EQ(name, "reference");
  int64_t id = 0;
  graph::KnobMap knobs;
  ASSERT_TRUE(s.g.get_engine_and_knobs_at_index(0, id, knobs).is_good());
  EXPECT_EQ(id, 10000);
  int64_t ws = -1;
  ASSERT_TRUE(s.g.get_workspace_size(ws).is_good());
  EXPECT_EQ(ws, 0);

  HostTensor ab(s.a), bb(s.b), yb(s.y);
  std::mt19937_64 rng(11);
  ab.fill_random(rng);
  bb.fill_random(rng);
  yb.poison();
  // Ordered pointers + uids.
  ASSERT_TRUE(s.g.execute(h, {ab.data(), bb.data(), yb.data()}, {s.a->get_uid(), s.b->get_uid(), s.y->get_uid()}, nullptr).is_good());
  for (int64_t n = 0; n < 51; ++n) EXPECT_FLOAT_EQ(yb.get(n), std::max(0.0f, float(ab.get(n)) + float(bb.get(n))));
  // A map keyed by tensor handles.
  yb.poison();
  std::unordered_map<TensorPtr, void*> by_tensor{{s.a, ab.data()}, {s.b, bb.data()}, {s.y, yb.data()}};
  ASSERT_TRUE(s.g.execute(h, by_tensor, nullptr).is_good());
  EXPECT_FALSE(std::isnan(yb.get(50)));
}

TEST(Lifecycle, UidsKeptAssignedAndDuplicatesRejected) {
  SmallGraph s;
  s.a->set_uid(42);
  ASSERT_TRUE(s.g.validate().is_good());
  EXPECT_EQ(s.a->get_uid(), 42);
  EXPECT_TRUE(s.b->has_uid());
  EXPECT_NE(s.b->get_uid(), 42);
  SmallGraph d;
  d.a->set_uid(5);
  d.b->set_uid(5);
  auto e = d.g.validate();
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("share uid 5"), std::string::npos) << e.get_message();
}

TEST(Lifecycle, CallsOutOfOrderAreErrors) {
  SmallGraph s;
  Handle h = cpu_handle();
  EXPECT_TRUE(s.g.build_operation_graph(h).is_bad());
  EXPECT_TRUE(s.g.create_execution_plans({HeurMode_t::A}).is_bad());
  EXPECT_TRUE(s.g.build_plans(h).is_bad());
  int64_t ws = 0;
  EXPECT_TRUE(s.g.get_workspace_size(ws).is_bad());
  std::unordered_map<int64_t, void*> pack;
  EXPECT_TRUE(s.g.execute(h, pack, nullptr).is_bad());
  std::string name;
  EXPECT_EQ(s.g.get_plan_name_at_index(3, name).get_code(), error_code_t::INVALID_VALUE);
}

TEST(Lifecycle, VariantPackErrorsLeaveOutputsUntouched) {
  SmallGraph s;
  Handle h = cpu_handle();
  ASSERT_TRUE(s.g.build(h, {HeurMode_t::A}).is_good());
  HostTensor ab(s.a), bb(s.b), yb(s.y);
  yb.poison();
  const auto before = yb.bytes;
  std::unordered_map<int64_t, void*> missing{{s.a->get_uid(), ab.data()}, {s.y->get_uid(), yb.data()}};
  auto e = s.g.execute(h, missing, nullptr);
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VARIANT_PACK);
  EXPECT_NE(e.get_message().find("'b'"), std::string::npos) << e.get_message();
  std::unordered_map<int64_t, void*> null_ptr{{s.a->get_uid(), ab.data()}, {s.b->get_uid(), nullptr}, {s.y->get_uid(), yb.data()}};
  EXPECT_EQ(s.g.execute(h, null_ptr, nullptr).get_code(), error_code_t::INVALID_VARIANT_PACK);
  EXPECT_EQ(s.g.execute(h, {ab.data()}, {s.a->get_uid(), s.b->get_uid()}, nullptr).get_code(), error_code_t::INVALID_VARIANT_PACK);
  EXPECT_EQ(yb.bytes, before);
}

TEST(Lifecycle, DeclinesListEveryEngineAndFallbackMode) {
  SmallGraph s;
  ASSERT_TRUE(s.g.validate().is_good());
  // No engine serves a graph on a CUDA device in a CPU-only process: the error lists the reasons.
  if (cuda_device_count() == 0) {
    Handle gpu(Device::cuda(0));
    auto e = s.g.build_operation_graph(gpu);
    EXPECT_EQ(e.get_code(), error_code_t::INVALID_CUDA_DEVICE);
  }
  Handle h = cpu_handle();
  ASSERT_TRUE(s.g.build_operation_graph(h).is_good());
  ASSERT_TRUE(s.g.create_execution_plans({HeurMode_t::FALLBACK}).is_good());
  EXPECT_EQ(s.g.get_execution_plan_count(), 1);
  s.g.deselect_engines({"reference"});
  EXPECT_EQ(s.g.get_execution_plan_count(), 0);
  auto e = s.g.create_execution_plans({HeurMode_t::A});
  EXPECT_EQ(e.get_code(), error_code_t::GRAPH_NOT_SUPPORTED);
  EXPECT_NE(e.get_message().find("reference: deselected"), std::string::npos) << e.get_message();
  bool listed = false;
  for (const auto& r : s.g.get_decline_reasons()) listed = listed || r.rfind("reference", 0) == 0;
  EXPECT_TRUE(listed);
}

TEST(Lifecycle, EnvironmentAllowListAndDenyList) {
  SmallGraph s;
  Handle h = cpu_handle();
  setenv("FROST_DISABLE_ENGINES", "reference", 1);
  auto e = s.g.build(h, {HeurMode_t::A});
  unsetenv("FROST_DISABLE_ENGINES");
  EXPECT_EQ(e.get_code(), error_code_t::GRAPH_NOT_SUPPORTED);
  EXPECT_NE(e.get_message().find("FROST_DISABLE_ENGINES"), std::string::npos) << e.get_message();
  setenv("FROST_ENGINES", "reference", 1);
  e = s.g.build(h, {HeurMode_t::A});
  unsetenv("FROST_ENGINES");
  EXPECT_TRUE(e.is_good()) << e.get_message();
}

TEST(Lifecycle, CreateExecutionPlanFromEngineIdAndKnobs) {
  SmallGraph s;
  Handle h = cpu_handle();
  ASSERT_TRUE(s.g.validate().is_good());
  ASSERT_TRUE(s.g.build_operation_graph(h).is_good());
  EXPECT_EQ(s.g.create_execution_plan(12345, {}).get_code(), error_code_t::GRAPH_NOT_SUPPORTED);
  EXPECT_EQ(s.g.create_execution_plan(10000, {{KnobType_t::TILE_M, 64}}).get_code(), error_code_t::INVALID_VALUE);
  ASSERT_TRUE(s.g.create_execution_plan(10000, {}).is_good());
  ASSERT_TRUE(s.g.build_plans(h).is_good());
  std::string name;
  ASSERT_TRUE(s.g.get_plan_name(name).is_good());
  EXPECT_EQ(name, "reference");
}

TEST(Lifecycle, HandleOnAnotherDeviceIsRejectedAtExecute) {
  SmallGraph s;
  Handle h = cpu_handle();
  ASSERT_TRUE(s.g.build(h, {HeurMode_t::A}).is_good());
  Handle other(Device::cuda(0));
  std::unordered_map<int64_t, void*> pack;
  EXPECT_EQ(s.g.execute(other, pack, nullptr).get_code(), error_code_t::HANDLE_ERROR);
}

TEST(Lifecycle, VirtualInputNeverWrittenIsAnError) {
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT).set_intermediate_data_type(DataType_t::FLOAT);
  auto v = input(g, "v", {2});
  v->set_is_virtual(true);
  g.pointwise(v, graph::Pointwise_attributes().set_mode(M::EXP))->set_output(true);
  auto e = g.validate();
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("no earlier node writes"), std::string::npos) << e.get_message();
}

TEST(Lifecycle, BadTensorsAreTypedErrors) {
  auto validate_with = [](std::vector<int64_t> dims, std::vector<int64_t> strides, DataType_t dt) {
    graph::Graph g;
    g.set_io_data_type(dt).set_intermediate_data_type(DataType_t::FLOAT);
    auto x = input(g, "x", std::move(dims), dt, std::move(strides));
    g.pointwise(x, graph::Pointwise_attributes().set_mode(M::NEG))->set_output(true);
    return g.validate();
  };
  EXPECT_EQ(validate_with({2, -3}, {}, DataType_t::FLOAT).get_code(), error_code_t::INVALID_VALUE);
  EXPECT_EQ(validate_with({2, 0}, {}, DataType_t::FLOAT).get_code(), error_code_t::INVALID_VALUE);
  EXPECT_EQ(validate_with({int64_t{1} << 40, int64_t{1} << 40}, {}, DataType_t::FLOAT).get_code(), error_code_t::INVALID_VALUE);
  EXPECT_EQ(validate_with({2, 3}, {3}, DataType_t::FLOAT).get_code(), error_code_t::INVALID_VALUE);
  EXPECT_EQ(validate_with({2, 3}, {3, -1}, DataType_t::FLOAT).get_code(), error_code_t::INVALID_VALUE);
  EXPECT_EQ(validate_with({2, 3}, {}, DataType_t::NOT_SET).get_code(), error_code_t::ATTRIBUTE_NOT_SET);
  auto e = validate_with({2, 3}, {}, DataType_t::INT8x32);
  EXPECT_EQ(e.get_code(), error_code_t::INVALID_VALUE);
  EXPECT_NE(e.get_message().find("INT8x32"), std::string::npos) << e.get_message();
}

TEST(Lifecycle, AutotuneKeepsAWorkingPlanFirst) {
  SmallGraph s;
  Handle h = cpu_handle();
  ASSERT_TRUE(s.g.build(h, {HeurMode_t::A}, BuildPlanPolicy_t::ALL).is_good());
  HostTensor ab(s.a), bb(s.b), yb(s.y);
  std::unordered_map<int64_t, void*> pack{{s.a->get_uid(), ab.data()}, {s.b->get_uid(), bb.data()}, {s.y->get_uid(), yb.data()}};
  ASSERT_TRUE(s.g.autotune(h, pack, nullptr).is_good());
  ASSERT_TRUE(s.g.execute(h, pack, nullptr).is_good());
}

}  // namespace
}  // namespace frost::test
