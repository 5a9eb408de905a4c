// JSON 2.0 (de)serialization of graphs and plans, and the graph key.
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "graph/graph_state.h"
#include "graph/json_util.h"
#include "graph/shape_util.h"
#include "plan/engine.h"

namespace frost::detail {
namespace {

constexpr const char* kJsonVersion = "2.0";
constexpr size_t kMaxJsonBytes = size_t{64} << 20;
constexpr int kMaxJsonDepth = 64;

json tensor_to_json(const graph::Tensor_attributes& t, bool with_names) {
  json j;
  if (with_names) j["name"] = t.get_name();
  j["uid"] = t.get_uid();
  j["data_type"] = to_string(t.get_data_type());
  j["dim"] = t.get_dim();
  j["stride"] = t.get_stride();
  j["is_virtual"] = t.get_is_virtual();
  j["is_pass_by_value"] = t.get_is_pass_by_value();
  j["pass_by_value"] = t.get_pass_by_value() ? json(*t.get_pass_by_value()) : json(nullptr);
  j["reordering_type"] = to_string(t.get_reordering_type());
  j["alignment"] = t.get_alignment();
  j["ragged_offset_uid"] = t.get_ragged_offset() ? json(t.get_ragged_offset()->get_uid()) : json(nullptr);
  return j;
}

json graph_to_json(const GraphState& g, bool with_names) {
  json root;
  root["json_version"] = kJsonVersion;
  json ctx;
  if (with_names) ctx["name"] = g.ctx.name;
  ctx["io_data_type"] = to_string(g.ctx.io_data_type);
  ctx["intermediate_data_type"] = to_string(g.ctx.intermediate_data_type);
  ctx["compute_data_type"] = to_string(g.ctx.compute_data_type);
  ctx["sm_count"] = g.ctx.sm_count;
  ctx["sm_version"] = g.ctx.sm_version;
  ctx["dynamic_shape_enabled"] = g.ctx.dynamic_shape_enabled;
  ctx["override_shape_enabled"] = g.ctx.override_shape_enabled;
  root["context"] = ctx;
  json tensors = json::object();
  json nodes = json::array();
  for (const auto& node : g.nodes) {
    json n;
    n["tag"] = node->tag();
    if (with_names) n["name"] = node->name();
    n["compute_data_type"] = to_string(node->compute_data_type());
    node->attributes_to_json(n);
    json ins = json::object(), outs = json::object();
    for (const auto& p : const_cast<Node&>(*node).ports()) {
      const TensorPtr& t = *p.slot;
      if (!t) continue;
      (p.is_output ? outs : ins)[p.name] = t->get_uid();
      tensors[std::to_string(t->get_uid())] = tensor_to_json(*t, with_names);
      if (const auto& r = t->get_ragged_offset()) tensors[std::to_string(r->get_uid())] = tensor_to_json(*r, with_names);
    }
    n["inputs"] = ins;
    n["outputs"] = outs;
    nodes.push_back(n);
  }
  root["tensors"] = tensors;
  root["nodes"] = nodes;
  return root;
}

// Rejects inputs nested deeper than kMaxJsonDepth before the parser sees them.
bool depth_ok(const std::string& s) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return false;
    } else if (c == ']' || c == '}') --depth;
  }
  return true;
}

error_t parse_json(const std::string& text, json& out) {
  if (text.size() > kMaxJsonBytes) return json_format_error("document", "larger than 64 MiB");
  if (!depth_ok(text)) return json_format_error("document", "nested deeper than 64 levels");
  // Duplicate keys would silently overwrite each other: reject them.
  std::vector<std::unordered_set<std::string>> keys;
  std::string duplicate;
  auto cb = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) keys.emplace_back();
    else if (ev == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    else if (ev == json::parse_event_t::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get<std::string>()).second && duplicate.empty()) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  out = json::parse(text, cb, /*allow_exceptions=*/false);
  if (out.is_discarded()) return json_format_error("document", "not valid JSON");
  if (!duplicate.empty()) return json_format_error(duplicate, "duplicate key");
  return {};
}

error_t tensor_from_json(const std::string& key, const json& j, graph::Tensor_attributes& t, int64_t& ragged_uid) {
  if (!j.is_object()) return json_format_error("tensors." + key, "must be an object");
  int64_t uid = 0;
  FROST_CHECK(read_int(j, "uid", uid, true));
  if (key != std::to_string(uid)) return json_format_error("tensors." + key, "key does not match uid " + std::to_string(uid));
  std::string name;
  FROST_CHECK(read_string(j, "name", name));
  DataType_t dt = DataType_t::NOT_SET;
  FROST_CHECK(read_enum(j, "data_type", dt));
  std::vector<int64_t> dim, stride;
  FROST_CHECK(read_int_list(j, "dim", dim, true));
  FROST_CHECK(read_int_list(j, "stride", stride));
  if (!dim.empty() && !checked_volume(dim))
    return json_format_error("tensors." + key + ".dim", dims_string(dim) + " must be positive and hold at most 2^48 elements");
  for (int64_t s : stride)
    if (s < 0 || s > kMaxElements) return json_format_error("tensors." + key + ".stride", dims_string(stride) + " must be in [0, 2^48]");
  bool is_virtual = false, is_pbv = false;
  FROST_CHECK(read_bool(j, "is_virtual", is_virtual));
  FROST_CHECK(read_bool(j, "is_pass_by_value", is_pbv));
  TensorReordering_t reorder = TensorReordering_t::NONE;
  FROST_CHECK(read_enum(j, "reordering_type", reorder));
  int64_t alignment = 16;
  FROST_CHECK(read_int(j, "alignment", alignment));
  t.set_uid(uid).set_name(name).set_data_type(dt).set_dim(dim).set_stride(stride).set_is_virtual(is_virtual);
  t.set_reordering_type(reorder).set_alignment(alignment);
  if (j.contains("pass_by_value") && !j["pass_by_value"].is_null()) {
    double v = 0;
    FROST_CHECK(read_double(j, "pass_by_value", v, true));
    t.set_pass_by_value(v);
  }
  t.set_is_pass_by_value(is_pbv);
  ragged_uid = -1;
  if (j.contains("ragged_offset_uid") && !j["ragged_offset_uid"].is_null())
    FROST_CHECK(read_int(j, "ragged_offset_uid", ragged_uid, true));
  return {};
}

error_t bind_ports(Node& node, const json& j, const char* which, bool outputs,
                   const std::unordered_map<int64_t, TensorPtr>& tensors) {
  if (!j.contains(which)) return {};
  const json& m = j[which];
  if (!m.is_object()) return json_format_error(std::string("nodes.") + which, "must be an object");
  auto ports = node.ports();
  for (const auto& [port, uidj] : m.items()) {
    auto p = std::find_if(ports.begin(), ports.end(), [&](const Port& x) { return x.name == port && x.is_output == outputs; });
    if (p == ports.end())
      return json_format_error(std::string("nodes.") + which + "." + port, "is not a port of " + std::string(node.tag()));
    if (!uidj.is_number_integer()) return json_format_error(std::string("nodes.") + which + "." + port, "must be a uid");
    auto t = tensors.find(uidj.get<int64_t>());
    if (t == tensors.end())
      return json_format_error(std::string("nodes.") + which + "." + port,
                               "refers to uid " + std::to_string(uidj.get<int64_t>()) + ", which no tensor has");
    *p->slot = t->second;
  }
  return {};
}

error_t graph_from_json(const json& root, GraphState& g) {
  if (!root.is_object()) return json_format_error("document", "must be an object");
  std::string version;
  FROST_CHECK(read_string(root, "json_version", version, true));
  if (version != kJsonVersion) return json_format_error("json_version", "'" + version + "' is not supported (expected 2.0)");
  if (root.contains("context")) {
    const json& c = root["context"];
    if (!c.is_object()) return json_format_error("context", "must be an object");
    FROST_CHECK(read_string(c, "name", g.ctx.name));
    FROST_CHECK(read_enum(c, "io_data_type", g.ctx.io_data_type));
    FROST_CHECK(read_enum(c, "intermediate_data_type", g.ctx.intermediate_data_type));
    FROST_CHECK(read_enum(c, "compute_data_type", g.ctx.compute_data_type));
    int64_t v = -1;
    FROST_CHECK(read_int(c, "sm_count", v));
    g.ctx.sm_count = static_cast<int32_t>(std::clamp<int64_t>(v, -1, 1 << 20));
    v = -1;
    FROST_CHECK(read_int(c, "sm_version", v));
    g.ctx.sm_version = static_cast<int32_t>(std::clamp<int64_t>(v, -1, 1 << 20));
    FROST_CHECK(read_bool(c, "dynamic_shape_enabled", g.ctx.dynamic_shape_enabled));
    FROST_CHECK(read_bool(c, "override_shape_enabled", g.ctx.override_shape_enabled));
  }
  if (!root.contains("tensors") || !root["tensors"].is_object()) return json_format_error("tensors", "must be an object");
  if (!root.contains("nodes") || !root["nodes"].is_array()) return json_format_error("nodes", "must be an array");
  std::unordered_map<int64_t, TensorPtr> tensors;
  std::vector<std::pair<TensorPtr, int64_t>> ragged;
  for (const auto& [key, tj] : root["tensors"].items()) {
    auto t = std::make_shared<graph::Tensor_attributes>();
    int64_t ragged_uid = -1;
    FROST_CHECK(tensor_from_json(key, tj, *t, ragged_uid));
    if (!tensors.emplace(t->get_uid(), t).second) return json_format_error("tensors." + key, "duplicate uid");
    if (ragged_uid >= 0) ragged.push_back({t, ragged_uid});
    g.tensors.push_back(t);
  }
  for (auto& [t, uid] : ragged) {
    auto r = tensors.find(uid);
    if (r == tensors.end())
      return json_format_error("tensors." + std::to_string(t->get_uid()) + ".ragged_offset_uid",
                               "refers to uid " + std::to_string(uid) + ", which no tensor has");
    t->set_ragged_offset(r->second);
  }
  size_t index = 0;
  for (const json& nj : root["nodes"]) {
    const std::string where = "nodes[" + std::to_string(index++) + "]";
    if (!nj.is_object()) return json_format_error(where, "must be an object");
    std::string tag;
    FROST_CHECK(read_string(nj, "tag", tag, true));
    auto node = make_node(tag);
    if (!node) return json_format_error(where + ".tag", "unknown op '" + tag + "'");
    std::string name;
    FROST_CHECK(read_string(nj, "name", name));
    node->set_name(name.empty() ? tag + "_" + std::to_string(g.nodes.size()) : name);
    DataType_t cdt = DataType_t::NOT_SET;
    FROST_CHECK(read_enum(nj, "compute_data_type", cdt));
    node->set_compute_data_type(cdt);
    FROST_CHECK(node->attributes_from_json(nj));
    FROST_CHECK(bind_ports(*node, nj, "inputs", false, tensors));
    FROST_CHECK(bind_ports(*node, nj, "outputs", true, tensors));
    g.nodes.push_back(std::move(node));
  }
  return {};
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

error_t plan_to_json(const GraphState& g, const Candidate& c, json& out) {
  out = json::object();
  out["frost_version"] = version_string();
  out["engine_id"] = c.engine_id;
  json knobs = json::object();
  for (const auto& [k, v] : c.knobs) knobs[std::string(to_string(k))] = v;
  out["knobs"] = knobs;
  out["graph"] = graph_to_json(g, true);
  return {};
}

}  // namespace frost::detail

namespace frost::graph {

error_t Graph::serialize(std::string& text) const {
  if (state_->stage < detail::Stage::VALIDATED) return {error_code_t::INVALID_VALUE, "serialize: call validate() first"};
  text = detail::graph_to_json(*state_, true).dump(1);
  return {};
}

error_t Graph::deserialize(const std::string& text) {
  try {
    detail::json root;
    FROST_CHECK(detail::parse_json(text, root));
    auto fresh = std::make_unique<detail::GraphState>();
    FROST_CHECK(detail::graph_from_json(root, *fresh));
    state_ = std::move(fresh);
    return {};
  } catch (const std::exception& e) {
    return {error_code_t::UNSUPPORTED_GRAPH_FORMAT, std::string("JSON: ") + e.what()};
  }
}

error_t Graph::serialize(std::vector<uint8_t>& bytes) const {
  const detail::Candidate* sel = nullptr;
  for (const auto& c : state_->candidates)
    if (c.plan) { sel = &c; break; }
  if (!sel) return {error_code_t::INVALID_VALUE, "serialize(plan): call build_plans() first"};
  detail::json j;
  FROST_CHECK(detail::plan_to_json(*state_, *sel, j));
  const std::string s = j.dump();
  bytes.assign(s.begin(), s.end());
  return {};
}

error_t Graph::deserialize(const Handle& handle, const std::vector<uint8_t>& bytes) {
  try {
    detail::json root;
    FROST_CHECK(detail::parse_json(std::string(bytes.begin(), bytes.end()), root));
    if (!root.is_object() || !root.contains("graph")) return detail::json_format_error("plan", "has no graph");
    int64_t engine_id = 0;
    FROST_CHECK(detail::read_int(root, "engine_id", engine_id, true));
    KnobMap knobs;
    if (root.contains("knobs")) {
      if (!root["knobs"].is_object()) return detail::json_format_error("knobs", "must be an object");
      for (const auto& [k, v] : root["knobs"].items()) {
        auto type = knob_from_string(k);
        if (!type) return detail::json_format_error("knobs." + k, "unknown knob");
        if (!v.is_number_integer()) return detail::json_format_error("knobs." + k, "must be an integer");
        knobs[*type] = v.get<int64_t>();
      }
    }
    auto fresh = std::make_unique<detail::GraphState>();
    FROST_CHECK(detail::graph_from_json(root["graph"], *fresh));
    Graph replay;
    replay.state_ = std::move(fresh);
    FROST_CHECK(replay.validate());
    FROST_CHECK(replay.build_operation_graph(handle));
    FROST_CHECK(replay.create_execution_plan(engine_id, knobs));
    FROST_CHECK(replay.build_plans(handle));
    *this = std::move(replay);
    return {};
  } catch (const std::exception& e) {
    return {error_code_t::UNSUPPORTED_GRAPH_FORMAT, std::string("JSON: ") + e.what()};
  }
}

int64_t Graph::key() const {
  return static_cast<int64_t>(detail::fnv1a(detail::graph_to_json(*state_, false).dump()) & 0x7fffffffffffffffull);
}

}  // namespace frost::graph
