// frost._frost.Graph: the C++ Graph with its lifecycle, queries and execution (builders: ops/*.cpp). Every
// bad error_t becomes a typed Python exception; the frost package adds cuDNN Frontend's keywords.
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unordered_map.h>
#include <nanobind/stl/vector.h>

#include <unordered_set>

#include "bindings.h"
#include "graph/graph_state.h"
#include "ops/op_family.h"

namespace frost::python {

using namespace graph;

namespace {

using Pack = std::unordered_map<int64_t, uintptr_t>;

std::unordered_map<int64_t, void*> to_pointers(const Pack& pack) {
  std::unordered_map<int64_t, void*> out;
  out.reserve(pack.size());
  for (const auto& [uid, p] : pack) out.emplace(uid, reinterpret_cast<void*>(p));
  return out;
}

// The non-virtual tensors the graph's nodes read or write (ragged offsets included): exactly the
// ones a variant pack binds, plus pass-by-value scalars, which the caller filters out.
std::vector<TensorPtr> bound_tensors(Graph& g) {
  std::vector<TensorPtr> out;
  std::unordered_set<const Tensor_attributes*> seen;
  auto add = [&](const TensorPtr& t) {
    if (t && !t->get_is_virtual() && seen.insert(t.get()).second) out.push_back(t);
  };
  for (auto& node : g.state().nodes)
    for (auto& port : node->ports())
      if (*port.slot) {
        add(*port.slot);
        add((*port.slot)->get_ragged_offset());
      }
  return out;
}

TensorPtr scalar(Graph& g, double value, DataType_t type) {
  switch (type) {
    case DataType_t::FLOAT: return g.tensor(static_cast<float>(value));
    case DataType_t::DOUBLE: return g.tensor(value);
    case DataType_t::INT32: return g.tensor(static_cast<int32_t>(value));
    case DataType_t::INT64: return g.tensor(static_cast<int64_t>(value));
    default:
      throw FrostException(error_code_t::INVALID_VALUE, "a pass-by-value scalar is FLOAT, DOUBLE, INT32 or INT64, not " +
                                                            std::string(to_string(type)));
  }
}

}  // namespace

void bind_graph(nb::module_& m) {
  constexpr auto self = nb::rv_policy::reference;
  using release_gil = nb::call_guard<nb::gil_scoped_release>;
  nb::class_<Graph> c(m, "Graph");
  c.def(nb::init<>())
      .def("set_io_data_type", [](Graph& g, DataType_t t) -> Graph& { return g.set_io_data_type(t); }, self)
      .def("set_intermediate_data_type", [](Graph& g, DataType_t t) -> Graph& { return g.set_intermediate_data_type(t); }, self)
      .def("set_compute_data_type", [](Graph& g, DataType_t t) -> Graph& { return g.set_compute_data_type(t); }, self)
      .def("set_name", [](Graph& g, std::string n) -> Graph& { return g.set_name(std::move(n)); }, self)
      .def("set_dynamic_shape_enabled", [](Graph& g, bool v) -> Graph& { return g.set_dynamic_shape_enabled(v); }, self)
      .def("set_override_shape_enabled", [](Graph& g, bool v) -> Graph& { return g.set_override_shape_enabled(v); }, self)
      .def("set_sm_count", [](Graph& g, int32_t v) -> Graph& { return g.set_sm_count(v); }, self)
      .def("set_sm_version", [](Graph& g, int32_t v) -> Graph& { return g.set_sm_version(v); }, self);

  // Declarations and builders.
  c.def("tensor", [](Graph& g, const Tensor_attributes& a) { return g.tensor(a); })
      .def("scalar", &scalar, nb::arg("value"), nb::arg("data_type") = DataType_t::FLOAT)
      .def("tensor_like", &Graph::tensor_like, nb::arg("like"), nb::arg("name") = "");

  // Op builders and their attributes classes: one file per op family under ops/.
  bind_op_families(m, c);

  // Lifecycle.
  c.def("validate", [](Graph& g) { check(g.validate()); })
      .def("build_operation_graph", [](Graph& g, const Handle& h) { check(g.build_operation_graph(h)); })
      .def("create_execution_plans", [](Graph& g, const std::vector<HeurMode_t>& modes) { check(g.create_execution_plans(modes)); })
      .def("create_execution_plan", [](Graph& g, int64_t engine_id, const KnobMap& knobs) {
        check(g.create_execution_plan(engine_id, knobs));
      })
      .def("check_support", [](Graph& g, const Handle& h) { check(g.check_support(h)); })
      .def("build_plans", [](Graph& g, const Handle& h, BuildPlanPolicy_t p) { check(g.build_plans(h, p)); }, release_gil())
      .def("build_plan_at_index", [](Graph& g, const Handle& h, int64_t i) { check(g.build_plan_at_index(h, i)); },
           release_gil())
      .def("deselect_engines", [](Graph& g, const std::vector<std::string>& v) -> Graph& { return g.deselect_engines(v); }, self)
      .def("deselect_workspace_greater_than", [](Graph& g, int64_t b) -> Graph& { return g.deselect_workspace_greater_than(b); }, self)
      .def("select_numeric_notes", [](Graph& g, const std::vector<NumericalNote_t>& v) -> Graph& { return g.select_numeric_notes(v); }, self)
      .def("deselect_numeric_notes", [](Graph& g, const std::vector<NumericalNote_t>& v) -> Graph& { return g.deselect_numeric_notes(v); }, self)
      .def("select_behavior_notes", [](Graph& g, const std::vector<BehaviorNote_t>& v) -> Graph& { return g.select_behavior_notes(v); }, self)
      .def("deselect_behavior_notes", [](Graph& g, const std::vector<BehaviorNote_t>& v) -> Graph& { return g.deselect_behavior_notes(v); }, self);

  // Queries.
  c.def("get_workspace_size", [](const Graph& g) { int64_t b = 0; check(g.get_workspace_size(b)); return b; })
      .def("get_workspace_size_plan_at_index", [](const Graph& g, int64_t i) {
        int64_t b = 0;
        check(g.get_workspace_size_plan_at_index(i, b));
        return b;
      })
      .def("get_execution_plan_count", &Graph::get_execution_plan_count)
      .def("get_plan_name", [](const Graph& g) { std::string n; check(g.get_plan_name(n)); return n; })
      .def("get_plan_name_at_index", [](const Graph& g, int64_t i) { std::string n; check(g.get_plan_name_at_index(i, n)); return n; })
      .def("get_engine_and_knobs_at_index", [](const Graph& g, int64_t i) {
        int64_t engine_id = 0;
        KnobMap knobs;
        check(g.get_engine_and_knobs_at_index(i, engine_id, knobs));
        return std::make_pair(engine_id, knobs);
      })
      .def("get_behavior_notes", [](const Graph& g) { std::vector<BehaviorNote_t> v; check(g.get_behavior_notes(v)); return v; })
      .def("get_behavior_notes_for_plan_at_index", [](const Graph& g, int64_t i) {
        std::vector<BehaviorNote_t> v;
        check(g.get_behavior_notes_for_plan_at_index(i, v));
        return v;
      })
      .def("get_numeric_notes_for_plan_at_index", [](const Graph& g, int64_t i) {
        std::vector<NumericalNote_t> v;
        check(g.get_numeric_notes_for_plan_at_index(i, v));
        return v;
      })
      .def("get_decline_reasons", &Graph::get_decline_reasons)
      .def("get_tensors", &Graph::get_tensors)
      .def("bound_tensors", &bound_tensors)
      .def("key", &Graph::key);

  // Execution on raw pointers; the frost package checks buffers against declarations first.
  c.def("execute", [](const Graph& g, const Handle& h, const Pack& pack, uintptr_t ws) {
        check(g.execute(h, to_pointers(pack), reinterpret_cast<void*>(ws)));
      }, release_gil())
      // The fast path of pygraph.execute: the package has matched every buffer to its declaration already.
      .def("execute_uids", [](const Graph& g, const Handle& h, const std::vector<int64_t>& uids,
                              const std::vector<uintptr_t>& pointers, uintptr_t ws) {
        std::unordered_map<int64_t, void*> pack;
        pack.reserve(uids.size());
        for (size_t i = 0; i < uids.size() && i < pointers.size(); ++i)
          pack.emplace(uids[i], reinterpret_cast<void*>(pointers[i]));
        check(g.execute(h, pack, reinterpret_cast<void*>(ws)));
      }, release_gil())
      .def("execute_plan_at_index", [](const Graph& g, const Handle& h, const Pack& pack, uintptr_t ws, int64_t i) {
        check(g.execute_plan_at_index(h, to_pointers(pack), reinterpret_cast<void*>(ws), i));
      }, release_gil())
      .def("autotune", [](Graph& g, const Handle& h, const Pack& pack, uintptr_t ws) {
        check(g.autotune(h, to_pointers(pack), reinterpret_cast<void*>(ws)));
      }, release_gil());

  // Serialization: JSON text of the graph, or bytes of the graph plus its selected plan.
  c.def("serialize", [](const Graph& g) { std::string s; check(g.serialize(s)); return s; })
      .def("deserialize", [](Graph& g, const std::string& s) { check(g.deserialize(s)); })
      .def("serialize_plan", [](const Graph& g) {
        std::vector<uint8_t> bytes;
        check(g.serialize(bytes));
        return nb::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      })
      .def("deserialize_plan", [](Graph& g, const Handle& h, const nb::bytes& data) {
        const auto* p = static_cast<const uint8_t*>(data.data());
        check(g.deserialize(h, std::vector<uint8_t>(p, p + data.size())));
      });
}

}  // namespace frost::python
