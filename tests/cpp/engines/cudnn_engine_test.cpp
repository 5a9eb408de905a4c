// The cudnn engine where no GPU is needed: knob mapping both ways, plan names, finding and refusing
// libraries, declining cleanly without a library or GPU, and (when a libcudnn is at hand) that every
// lowering's tensor and operation descriptors are accepted by the backend.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engines/cudnn/cudnn_knobs.h"
#include "engines/cudnn/cudnn_library.h"
#include "engines/cudnn/cudnn_lowering.h"
#include "plan/engine.h"
#include "test_util.h"

namespace frost::test {
namespace {

namespace fs = std::filesystem;

// Sets (or unsets, with null) an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

fs::path temp_dir(const std::string& leaf) {
  fs::path p = fs::temp_directory_path() / ("frost_cudnn_test_" + std::to_string(::getpid())) / leaf;
  fs::create_directories(p);
  return p;
}

TEST(CudnnKnobs, EveryBackendKnobRoundTrips) {
  for (int32_t n = 0; n < 200; ++n) {
    const KnobType_t k = detail::knob_from_backend(n);
    ASSERT_EQ(detail::knob_to_backend(k), std::optional<int32_t>(n)) << n;
    const auto name = to_string(k);
    ASSERT_NE(name, "UNKNOWN") << n;
    EXPECT_EQ(knob_from_string(name), std::optional<KnobType_t>(k)) << name;
  }
}

TEST(CudnnKnobs, NamedKnobsTakeTheFrontendNamesAndOthersStayRaw) {
  EXPECT_EQ(detail::knob_from_backend(1), KnobType_t::SWIZZLE);
  EXPECT_EQ(detail::knob_from_backend(4), KnobType_t::EDGE);
  EXPECT_EQ(detail::knob_from_backend(13), KnobType_t::TILEK);
  EXPECT_EQ(detail::knob_from_backend(24), KnobType_t::KERNEL_CFG);
  EXPECT_EQ(detail::knob_from_backend(43), KnobType_t::SWAP_AB);
  // Retired backend knobs and ones newer than frost's table keep their integer.
  EXPECT_EQ(to_string(detail::knob_from_backend(3)), "CUDNN_KNOB_3");
  EXPECT_EQ(to_string(detail::knob_from_backend(0)), "CUDNN_KNOB_0");
  EXPECT_EQ(to_string(detail::knob_from_backend(57)), "CUDNN_KNOB_57");
  // frost's own knobs have no backend integer.
  EXPECT_FALSE(detail::knob_to_backend(KnobType_t::SPLIT_KV).has_value());
  EXPECT_FALSE(detail::knob_to_backend(KnobType_t::INPUT_TMA_ENABLE).has_value());
  EXPECT_FALSE(knob_from_string("CUDNN_KNOB_").has_value());
  EXPECT_FALSE(knob_from_string("CUDNN_KNOB_1x").has_value());
}

TEST(CudnnKnobs, NotesKeepTheBackendOrder) {
  EXPECT_EQ(detail::numeric_notes_from_backend({0, 4, 9, 10}),
            (std::vector<NumericalNote_t>{NumericalNote_t::TENSOR_CORE, NumericalNote_t::NONDETERMINISTIC,
                                          NumericalNote_t::STRICT_NAN_PROP}));
  EXPECT_EQ(detail::behavior_notes_from_backend({0, 3, 4}),
            (std::vector<BehaviorNote_t>{BehaviorNote_t::RUNTIME_COMPILATION,
                                         BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API}));
}

TEST(CudnnEnums, EveryFrostModeAndTypeHasItsBackendValue) {
  int32_t v = 0;
  for (int m = 1; m <= static_cast<int>(PointwiseMode_t::RECIPROCAL); ++m)
    EXPECT_TRUE(detail::backend_pointwise_mode(static_cast<PointwiseMode_t>(m), v)) << m;
  for (int r = 1; r <= static_cast<int>(ReductionMode_t::MUL_NO_ZEROS); ++r)
    EXPECT_TRUE(detail::backend_reduction_mode(static_cast<ReductionMode_t>(r), v)) << r;
  for (int d = 1; d <= static_cast<int>(DataType_t::INT4); ++d)
    EXPECT_TRUE(detail::backend_dtype(static_cast<DataType_t>(d), v)) << d;
  EXPECT_FALSE(detail::backend_dtype(DataType_t::NOT_SET, v));
  ASSERT_TRUE(detail::backend_pointwise_mode(PointwiseMode_t::BINARY_SELECT, v));
  EXPECT_EQ(v, 601);
  ASSERT_TRUE(detail::backend_dtype(DataType_t::BFLOAT16, v));
  EXPECT_EQ(v, 9);
}

TEST(CudnnEngine, PlanNamesCarryTheBackendEngineId) {
  const detail::EngineFamily* f = detail::find_engine(3);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->name(), "cudnn");
  EXPECT_EQ(detail::find_engine(9999), f);
  EXPECT_NE(detail::find_engine(10000), f);
  graph::KnobMap knobs{{KnobType_t::TILE_SIZE, 2}, {detail::knob_from_backend(3), 1}};
  EXPECT_EQ(detail::plan_name(*f, 3, knobs), "cudnn[engine=3, TILE_SIZE=2, CUDNN_KNOB_3=1]");
  const detail::EngineFamily* ref = detail::find_engine(10000);
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(detail::plan_name(*ref, 10000, {}), "reference");
}

TEST(CudnnLibrary, PinnedPathThatDoesNotExistIsNamed) {
  ScopedEnv pin("FROST_CUDNN_PATH", "/nonexistent/frost/libcudnn.so.9");
  std::string why;
  EXPECT_EQ(detail::open_cudnn(why), nullptr);
  EXPECT_NE(why.find("FROST_CUDNN_PATH"), std::string::npos) << why;
  EXPECT_NE(why.find("/nonexistent/frost/libcudnn.so.9"), std::string::npos) << why;
}

TEST(CudnnLibrary, PinnedFileThatIsNoLibraryIsRefused) {
  const fs::path dir = temp_dir("not_a_library");
  std::ofstream(dir / "libcudnn.so.9") << "not an ELF file\n";
  ScopedEnv pin("FROST_CUDNN_PATH", dir.c_str());  // a folder: its libcudnn.so.9 is tried
  std::string why;
  EXPECT_EQ(detail::open_cudnn(why), nullptr);
  EXPECT_NE(why.find((dir / "libcudnn.so.9").string()), std::string::npos) << why;
  fs::remove_all(dir);
}

TEST(CudnnLibrary, FindsThePythonPackageOfAVirtualEnvironment) {
  const fs::path venv = temp_dir("venv");
  const fs::path lib = venv / "lib" / "python3.12" / "site-packages" / "nvidia" / "cudnn" / "lib";
  fs::create_directories(lib);
  std::ofstream(lib / "libcudnn.so.9") << "";
  ScopedEnv unpin("FROST_CUDNN_PATH", nullptr);
  ScopedEnv env("VIRTUAL_ENV", venv.c_str());
  const auto paths = detail::cudnn_candidate_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths.front(), (lib / "libcudnn.so.9").string());
  fs::remove_all(venv);
}

// y = relu(a + b): a graph every handle has a plan for (the reference on the host).
graph::Graph small_graph() {
  graph::Graph g;
  g.set_io_data_type(DataType_t::FLOAT)
      .set_intermediate_data_type(DataType_t::FLOAT)
      .set_compute_data_type(DataType_t::FLOAT);
  auto a = input(g, "a", {2, 3});
  auto b = input(g, "b", {2, 3});
  auto y = g.pointwise(g.pointwise(a, b, graph::Pointwise_attributes().set_mode(PointwiseMode_t::ADD)),
                       graph::Pointwise_attributes().set_mode(PointwiseMode_t::RELU_FWD));
  y->set_output(true);
  return g;
}

TEST(CudnnEngine, DeclinesOnTheHostWithTheReasonNamed) {
  auto g = small_graph();
  ASSERT_TRUE(g.validate().is_good()) << g.validate().get_message();
  ASSERT_TRUE(g.build_operation_graph(cpu_handle()).is_good());
  ASSERT_TRUE(g.create_execution_plans({HeurMode_t::B}).is_good());
  std::string reason;
  for (const auto& d : g.get_decline_reasons())
    if (d.rfind("cudnn: ", 0) == 0) reason = d;
  ASSERT_FALSE(reason.empty());
  const bool no_library = reason.find("libcudnn") != std::string::npos;
  const bool no_gpu = reason.find("needs a CUDA handle") != std::string::npos;
  EXPECT_TRUE(no_library || no_gpu) << reason;
  std::string plan;
  ASSERT_TRUE(g.build_plans(cpu_handle()).is_good());
  ASSERT_TRUE(g.get_plan_name(plan).is_good());
  EXPECT_EQ(plan, "reference");
}

TEST(CudnnEngine, OpenSourceModeLeavesItOut) {
  auto g = small_graph();
  ASSERT_TRUE(g.validate().is_good()) << g.validate().get_message();
  ASSERT_TRUE(g.build_operation_graph(cpu_handle()).is_good());
  ASSERT_TRUE(g.create_execution_plans({HeurMode_t::OPENSOURCE}).is_good());
  bool left_out = false;
  for (const auto& d : g.get_decline_reasons())
    left_out = left_out || d.rfind("cudnn: not enabled for the requested heuristic modes", 0) == 0;
  EXPECT_TRUE(left_out);
}

TEST(CudnnEngine, ReplayingABackendEngineIdDeclinesOnTheHost) {
  auto g = small_graph();
  ASSERT_TRUE(g.validate().is_good()) << g.validate().get_message();
  ASSERT_TRUE(g.build_operation_graph(cpu_handle()).is_good());
  auto e = g.create_execution_plan(3, {{KnobType_t::TILE_SIZE, 1}});
  EXPECT_EQ(e.get_code(), error_code_t::GRAPH_NOT_SUPPORTED);
  EXPECT_EQ(e.get_message().rfind("cudnn: ", 0), 0u) << e.get_message();
}

}  // namespace
}  // namespace frost::test
