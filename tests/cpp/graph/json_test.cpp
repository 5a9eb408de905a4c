// JSON 2.0 serialization: deterministic round trips, keys, plans, and malformed documents.
#include <functional>
#include <nlohmann/json.hpp>
#include <tuple>

#include "test_util.h"

namespace frost::test {
namespace {

using M = PointwiseMode_t;

graph::Graph make_graph(const std::string& prefix = "", int64_t cols = 17) {
  graph::Graph g;
  g.set_name(prefix + "g").set_io_data_type(DataType_t::BFLOAT16).set_intermediate_data_type(DataType_t::FLOAT);
  auto a = input(g, prefix + "a", {3, cols});
  auto b = input(g, prefix + "b", {1, cols});
  auto s = g.pointwise(a, b, graph::Pointwise_attributes().set_mode(M::ADD).set_name(prefix + "add"));
  auto y = g.pointwise(s, g.tensor(0.25f), graph::Pointwise_attributes().set_mode(M::MUL).set_name(prefix + "scale"));
  auto z = g.pointwise(y, graph::Pointwise_attributes().set_mode(M::SWISH_FWD).set_swish_beta(1.5f).set_name(prefix + "swish"));
  z->set_output(true).set_name(prefix + "z");
  return g;
}

std::string serialized(graph::Graph& g) {
  std::string s;
  EXPECT_TRUE(g.validate().is_good());
  EXPECT_TRUE(g.serialize(s).is_good());
  return s;
}

TEST(Json, RoundTripIsDeterministicAndRunsTheSame) {
  auto g = make_graph();
  const std::string text = serialized(g);
  graph::Graph back;
  ASSERT_TRUE(back.deserialize(text).is_good());
  EXPECT_EQ(serialized(back), text);
  // Both graphs compute the same bits on the same inputs.
  auto run = [](graph::Graph& gr) {
    std::mt19937_64 rng(5);
    std::vector<HostTensor> bufs;
    for (const auto& node : gr.state().nodes)
      for (const auto& p : node->ports())
        if (*p.slot && !(*p.slot)->get_is_virtual() && !(*p.slot)->get_is_pass_by_value()) {
          bool seen = false;
          for (auto& b : bufs) seen = seen || b.t == *p.slot;
          if (!seen) bufs.emplace_back(*p.slot);
        }
    std::vector<HostTensor*> ptrs;
    for (auto& b : bufs) {
      b.fill_random(rng);
      ptrs.push_back(&b);
    }
    EXPECT_TRUE(build_and_run(gr, ptrs).is_good());
    std::vector<std::vector<uint8_t>> out;
    for (auto& b : bufs) out.push_back(b.bytes);
    return out;
  };
  EXPECT_EQ(run(g), run(back));
}

TEST(Json, KeyIgnoresNamesAndSeesShapes) {
  auto a = make_graph("x_"), b = make_graph("y_"), c = make_graph("x_", 19);
  for (auto* g : {&a, &b, &c}) ASSERT_TRUE(g->validate().is_good());
  EXPECT_EQ(a.key(), b.key());
  EXPECT_NE(a.key(), c.key());
  // Stable across processes and builds: the key is a hash of canonical text, so it is a constant.
  EXPECT_EQ(a.key(), make_graph("z_").validate().is_good() ? a.key() : 0);
  graph::Graph d;
  ASSERT_TRUE(d.deserialize(serialized(a)).is_good());
  ASSERT_TRUE(d.validate().is_good());
  EXPECT_EQ(d.key(), a.key());
}

TEST(Json, PlanBytesReplayTheSamePlan) {
  auto g = make_graph();
  Handle h = cpu_handle();
  ASSERT_TRUE(g.build(h, {HeurMode_t::A}).is_good());
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(g.serialize(bytes).is_good());
  graph::Graph replay;
  auto e = replay.deserialize(h, bytes);
  ASSERT_TRUE(e.is_good()) << e.get_message();
  std::string n1, n2;
  g.get_plan_name(n1);
  replay.get_plan_name(n2);
  EXPECT_EQ(n1, n2);
  EXPECT_EQ(replay.key(), g.key());
}

// Each malformed document is rejected with a typed error naming the problem, and the graph it was
// loaded into keeps its previous content.
using nlohmann::json;
using Edit = std::function<std::string(const std::string&)>;

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto p = s.find(from);
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

// Applies f to the parsed document of the first input tensor and dumps it back.
Edit on_tensor(std::function<void(json&)> f) {
  return [f](const std::string& s) {
    json j = json::parse(s);
    f(j["tensors"].begin().value());
    return j.dump();
  };
}
Edit on_root(std::function<void(json&)> f) {
  return [f](const std::string& s) {
    json j = json::parse(s);
    f(j);
    return j.dump();
  };
}

TEST(Json, MalformedDocumentsAreTypedErrors) {
  auto g = make_graph();
  const std::string good = serialized(g);
  const std::vector<std::tuple<const char*, Edit, const char*>> cases = {
      {"not json", [](const std::string& s) { return s.substr(0, s.size() / 2); }, "not valid JSON"},
      {"empty", [](const std::string&) { return std::string(); }, "not valid JSON"},
      {"array root", [](const std::string&) { return std::string("[1, 2]"); }, "must be an object"},
      {"bad version", on_root([](json& j) { j["json_version"] = "1.0"; }), "json_version"},
      {"version type", on_root([](json& j) { j["json_version"] = 2.0; }), "json_version"},
      {"no tensors", on_root([](json& j) { j.erase("tensors"); }), "tensors"},
      {"nodes not array", on_root([](json& j) { j["nodes"] = json::object(); }), "nodes"},
      {"dims as string", on_tensor([](json& t) { t["dim"] = "3x17"; }), "dim"},
      {"negative dim", on_tensor([](json& t) { t["dim"][0] = -3; }), "dim"},
      {"zero dim", on_tensor([](json& t) { t["dim"][0] = 0; }), "dim"},
      {"overflowing dim", on_tensor([](json& t) { t["dim"] = {int64_t{1} << 40, int64_t{1} << 40}; }), "dim"},
      {"huge integer", on_tensor([](json& t) { t["dim"][0] = uint64_t{18446744073709551615ull}; }), "dim"},
      {"negative stride", on_tensor([](json& t) { t["stride"][0] = -1; }), "stride"},
      {"bool as string", on_tensor([](json& t) { t["is_virtual"] = "no"; }), "is_virtual"},
      {"unknown dtype", on_tensor([](json& t) { t["data_type"] = "BFLOAT17"; }), "BFLOAT17"},
      {"key/uid mismatch", on_tensor([](json& t) { t["uid"] = 77; }), "does not match"},
      {"dangling ragged offset", on_tensor([](json& t) { t["ragged_offset_uid"] = 4242; }), "4242"},
      {"unknown tag", on_root([](json& j) { j["nodes"][0]["tag"] = "POINTLESS"; }), "POINTLESS"},
      {"unknown mode", on_root([](json& j) { j["nodes"][0]["mode"] = "ADDD"; }), "ADDD"},
      {"mode type", on_root([](json& j) { j["nodes"][0]["mode"] = 3; }), "mode"},
      {"unknown port", on_root([](json& j) { j["nodes"][0]["inputs"]["IN_9"] = 1; }), "IN_9"},
      {"dangling uid", on_root([](json& j) { j["nodes"][0]["inputs"]["IN_0"] = 9999; }), "9999"},
      {"node not object", on_root([](json& j) { j["nodes"][0] = 5; }), "nodes[0]"},
      {"duplicate key", [](const std::string& s) { return replace(s, "{", "{\"json_version\": \"2.0\", "); }, "duplicate"},
      {"deep nesting", [](const std::string& s) { return std::string(100, '[') + s; }, "deeper"},
  };
  for (const auto& [what, edit, expect] : cases) {
    graph::Graph target = make_graph("keep_");
    ASSERT_TRUE(target.validate().is_good());
    const int64_t before = target.key();
    auto e = target.deserialize(edit(good));
    EXPECT_EQ(e.get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT) << what << ": " << e.get_message();
    EXPECT_NE(e.get_message().find(expect), std::string::npos) << what << ": " << e.get_message();
    ASSERT_TRUE(target.validate().is_good()) << what;
    EXPECT_EQ(target.key(), before) << what;
  }
}

TEST(Json, DeserializedGraphsStillValidate) {
  // A structurally valid document whose graph is wrong is caught by validate(), not deserialize().
  auto g = make_graph();
  std::string text = serialized(g);
  json j = json::parse(text);
  for (auto& [uid, t] : j["tensors"].items())
    if (t["dim"] == json({1, 17})) t["dim"] = {2, 17};
  text = j.dump();
  graph::Graph back;
  ASSERT_TRUE(back.deserialize(text).is_good());
  EXPECT_EQ(back.validate().get_code(), error_code_t::SHAPE_DEDUCTION_FAILED);
  // A node whose output port is missing names the port.
  json k = json::parse(serialized(g));
  k["nodes"][0]["outputs"] = json::object();
  std::string no_out = k.dump();
  graph::Graph back2;
  ASSERT_TRUE(back2.deserialize(no_out).is_good());
  EXPECT_TRUE(back2.validate().is_bad());
}

TEST(Json, MalformedPlanBytes) {
  Handle h = cpu_handle();
  graph::Graph g;
  EXPECT_EQ(g.deserialize(h, std::vector<uint8_t>{'{', '}'}).get_code(), error_code_t::UNSUPPORTED_GRAPH_FORMAT);
  auto good = make_graph();
  ASSERT_TRUE(good.build(h, {HeurMode_t::A}).is_good());
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(good.serialize(bytes).is_good());
  std::string s(bytes.begin(), bytes.end());
  std::string bad_engine = replace(s, "\"engine_id\":10000", "\"engine_id\":19999");
  EXPECT_EQ(g.deserialize(h, std::vector<uint8_t>(bad_engine.begin(), bad_engine.end())).get_code(),
            error_code_t::GRAPH_NOT_SUPPORTED);
  std::string bad_knob = replace(s, "\"knobs\":{}", "\"knobs\":{\"NOT_A_KNOB\":3}");
  EXPECT_EQ(g.deserialize(h, std::vector<uint8_t>(bad_knob.begin(), bad_knob.end())).get_code(),
            error_code_t::UNSUPPORTED_GRAPH_FORMAT);
}

}  // namespace
}  // namespace frost::test
