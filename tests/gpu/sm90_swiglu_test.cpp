// SwiGLU on the sm90_gemm engine against the reference: the SWIGLU_MLP op (separate N-major and
// K-major gate/up weights, which the plan packs into the workspace, and the interleaved W_GATE_UP),
// the four-node matmul -> swish -> mul gate/up graph, odd token counts down to T = 1, outputs poisoned
// with NaN, a CUDA-graph replay with new inputs, both SwiGLU kernels (ping-pong 128x128 by default, cooperative
// 128x256 by TILE_N=256), and declines that name the attribute.
#include "gpu_util.h"
#include "graph/shape_util.h"

namespace frost::test {
namespace {

using M = PointwiseMode_t;
constexpr DataType_t kBf16 = DataType_t::BFLOAT16;

enum class Form { SEPARATE, INTERLEAVED, GATE_UP_GRAPH };

struct SwigluCase {
  int64_t t = 17, h = 256, f = 136;
  Form form = Form::SEPARATE;
  bool k_major = false;  // separate gate and up stored [F, H] (nn.Linear's layout)
};

std::string name_of(const SwigluCase& c) {
  const char* forms[] = {"separate", "interleaved", "gate/up graph"};
  return "T" + std::to_string(c.t) + " H" + std::to_string(c.h) + " F" + std::to_string(c.f) + " " +
         forms[static_cast<int>(c.form)] + (c.k_major ? " K-major" : "");
}

TensorPtr dense(graph::Graph& g, const std::string& name, std::vector<int64_t> dims,
                std::vector<int64_t> strides = {}) {
  if (strides.empty()) strides = detail::packed_strides(dims);
  return input(g, name, std::move(dims), kBf16, std::move(strides));
}

struct SwigluGraph {
  graph::Graph g;
  std::vector<TensorPtr> inputs;
  TensorPtr out;
};

void build(SwigluGraph& x, const SwigluCase& c) {
  x.g.set_io_data_type(kBf16).set_intermediate_data_type(DataType_t::FLOAT).set_compute_data_type(DataType_t::FLOAT);
  auto xt = dense(x.g, "x", {c.t, c.h});
  auto weight = [&](const std::string& name) {
    return c.k_major ? dense(x.g, name, {c.h, c.f}, {1, c.h}) : dense(x.g, name, {c.h, c.f});
  };
  if (c.form == Form::GATE_UP_GRAPH) {
    auto wg = weight("w_gate"), wu = weight("w_up");
    x.inputs = {xt, wg, wu};
    auto g = x.g.matmul(xt, wg, graph::Matmul_attributes().set_name("gate"));
    auto u = x.g.matmul(xt, wu, graph::Matmul_attributes().set_name("up"));
    auto s = x.g.pointwise(g, graph::Pointwise_attributes().set_mode(M::SWISH_FWD).set_name("silu"));
    x.out = x.g.pointwise(s, u, graph::Pointwise_attributes().set_mode(M::MUL).set_name("gated"));
  } else {
    auto wd = dense(x.g, "w_down", {c.f, c.h});
    if (c.form == Form::INTERLEAVED) {
      auto wgu = dense(x.g, "w_gate_up", {c.h, 2 * c.f});
      x.inputs = {xt, wgu, wd};
      x.out = x.g.swiglu_mlp(xt, wgu, wd, graph::Swiglu_mlp_attributes().set_name("mlp"));
    } else {
      auto wg = weight("w_gate"), wu = weight("w_up");
      x.inputs = {xt, wg, wu, wd};
      x.out = x.g.swiglu_mlp(xt, wg, wu, wd, graph::Swiglu_mlp_attributes().set_name("mlp"));
    }
  }
  x.out->set_output(true).set_data_type(kBf16);
}

struct Buffers {
  std::vector<std::unique_ptr<DeviceTensor>> owned;
  std::unordered_map<int64_t, void*> pack, host_pack;
  void add(const TensorPtr& t) {
    owned.push_back(std::make_unique<DeviceTensor>(t));
    pack[t->get_uid()] = owned.back()->dev;
    host_pack[t->get_uid()] = owned.back()->host.data();
  }
  // Unit-scale X, weights of scale 1/sqrt(fan-in) so that every stage stays of order one.
  void fill(std::mt19937_64& rng) {
    for (auto& t : owned) {
      const double s =
          t->host.t->get_name() == "x" ? 1.0 : 1.0 / std::sqrt(static_cast<double>(t->host.t->get_dim()[0]));
      t->host.fill_random(rng, -s * std::sqrt(3.0), s * std::sqrt(3.0));
      t->upload();
    }
  }
};

// The device output against the reference (gpu_util.h's rule), and a check that the checker can fail.
void check_against_reference(SwigluGraph& x, Buffers& b, DeviceTensor& out) {
  ASSERT_NO_FATAL_FAILURE(expect_within_reference_error(x.g, x.out, b.host_pack, out));
  // The checker can fail: an all-zero answer is far off.
  const auto got = out.host.values();
  EXPECT_GT(compare(got, std::vector<double>(got.size(), 0.0)).rel_l2, 0.5);
}

constexpr int64_t kSm90GemmEngineId = 10200;

// knobs empty: the first plan of the heuristics (must be sm90_gemm's); else sm90_gemm's plan with those knobs.
void run_case(const SwigluCase& c, bool replay_in_cuda_graph = false, const graph::KnobMap& knobs = {}) {
  SCOPED_TRACE(name_of(c));
  SwigluGraph x;
  build(x, c);
  Handle h(Device::cuda(0));
  if (knobs.empty()) {
    ASSERT_NO_FATAL_FAILURE(build_on(x.g, h, "sm90_gemm"));
  } else {
    ASSERT_NO_FATAL_FAILURE(build_with_knobs(x.g, h, kSm90GemmEngineId, knobs));
  }
  DeviceWorkspace ws(x.g);
  ASSERT_TRUE(ws.ok);
  void* const workspace = ws.ptr;
  std::mt19937_64 rng(static_cast<uint64_t>(c.t * 131 + c.f * 7 + static_cast<int>(c.form)));
  Buffers b;
  for (const auto& t : x.inputs) b.add(t);
  b.fill(rng);
  DeviceTensor out(x.out);
  out.host.poison();
  out.upload();
  b.pack[x.out->get_uid()] = out.dev;

  if (!replay_in_cuda_graph) {
    ASSERT_TRUE(x.g.execute(h, b.pack, workspace).is_good());
    CUDA_OK(cudaDeviceSynchronize());
    check_against_reference(x, b, out);
  } else {
    auto refill = [&](int) {
      b.fill(rng);  // new X and weights: the replay must read them
      out.host.poison();
      out.upload();
    };
    EXPECT_NO_FATAL_FAILURE(capture_and_replay(
        h, [&] { return x.g.execute(h, b.pack, workspace); }, 2, refill,
        [&](int) { check_against_reference(x, b, out); }));
  }
}

TEST(Sm90Swiglu, MlpEveryWeightFormAgainstTheReference) {
  REQUIRE_SM90();
  for (int variant = 0; variant < 3; ++variant)
    for (int64_t t : {1, 17, 333}) {
      SwigluCase c;
      c.t = t, c.form = variant == 2 ? Form::INTERLEAVED : Form::SEPARATE, c.k_major = variant == 1;
      if (t == 333) c.h = 512, c.f = 520;
      run_case(c);
    }
}

TEST(Sm90Swiglu, GateUpGraphIsOneFusedExecution) {
  REQUIRE_SM90();
  for (int64_t t : {1, 17, 200}) {
    SwigluCase c;
    c.t = t, c.form = Form::GATE_UP_GRAPH;
    run_case(c);
  }
  SwigluCase k_major;
  k_major.t = 33, k_major.form = Form::GATE_UP_GRAPH, k_major.k_major = true;
  run_case(k_major);
}

// TILE_N picks the SwiGLU kernel: 128 the ping-pong 128x128 one (the default), 256 the cooperative 128x256 one.
TEST(Sm90Swiglu, EachTileAgainstTheReference) {
  REQUIRE_SM90();
  for (int64_t tile_n : {128, 256}) {
    SCOPED_TRACE("TILE_N=" + std::to_string(tile_n));
    const graph::KnobMap knobs{{KnobType_t::TILE_N, tile_n}};
    for (Form form : {Form::SEPARATE, Form::INTERLEAVED, Form::GATE_UP_GRAPH})
      for (int64_t t : {1, 200}) {
        SwigluCase c;
        c.t = t, c.form = form, c.k_major = t == 200;
        if (t == 200) c.h = 320, c.f = 264;
        run_case(c, false, knobs);
      }
    SwigluCase replay;
    replay.t = 45;
    run_case(replay, true, knobs);
  }
}

TEST(Sm90Swiglu, CudaGraphReplayReadsNewInputs) {
  REQUIRE_SM90();
  for (Form form : {Form::SEPARATE, Form::INTERLEAVED, Form::GATE_UP_GRAPH}) {
    SwigluCase c;
    c.t = 45, c.form = form;
    run_case(c, true);
  }
}

std::string decline_reasons(graph::Graph& g) {
  Handle h(Device::cuda(0));
  EXPECT_TRUE(g.validate().is_good());
  EXPECT_TRUE(g.build_operation_graph(h).is_good());
  g.create_execution_plans({HeurMode_t::A});
  std::string reasons;
  for (const auto& r : g.get_decline_reasons()) reasons += r + "\n";
  return reasons;
}

TEST(Sm90Swiglu, DeclinesWithTheAttributeNamed) {
  REQUIRE_SM90();
  {  // F off the interleave block of 8
    graph::Graph g;
    g.set_io_data_type(kBf16);
    auto y = g.swiglu_mlp(dense(g, "x", {4, 64}), dense(g, "wg", {64, 12}), dense(g, "wu", {64, 12}),
                          dense(g, "wd", {12, 64}), graph::Swiglu_mlp_attributes());
    y->set_output(true);
    const std::string r = decline_reasons(g);
    EXPECT_NE(r.find("sm90_gemm:"), std::string::npos) << r;
    EXPECT_NE(r.find("f must be a positive multiple of 8"), std::string::npos) << r;
  }
  {  // FLOAT inputs
    graph::Graph g;
    auto f32 = [&](const std::string& n, std::vector<int64_t> d) { return input(g, n, d, DataType_t::FLOAT); };
    auto y = g.swiglu_mlp(f32("x", {4, 64}), f32("wg", {64, 16}), f32("wu", {64, 16}), f32("wd", {16, 64}),
                          graph::Swiglu_mlp_attributes());
    y->set_output(true);
    const std::string r = decline_reasons(g);
    EXPECT_NE(r.find("X is FLOAT"), std::string::npos) << r;
  }
  {  // a gate/up graph whose links are BFLOAT16 (rounded between nodes) is not the fused computation
    graph::Graph g;
    g.set_io_data_type(kBf16).set_intermediate_data_type(kBf16);
    auto xt = dense(g, "x", {4, 64});
    auto gt = g.matmul(xt, dense(g, "wg", {64, 16}), graph::Matmul_attributes());
    auto u = g.matmul(xt, dense(g, "wu", {64, 16}), graph::Matmul_attributes());
    auto s = g.pointwise(gt, graph::Pointwise_attributes().set_mode(M::SWISH_FWD));
    auto y = g.pointwise(s, u, graph::Pointwise_attributes().set_mode(M::MUL));
    y->set_output(true);
    const std::string r = decline_reasons(g);
    EXPECT_NE(r.find("must be virtual FLOAT"), std::string::npos) << r;
  }
}

}  // namespace
}  // namespace frost::test
