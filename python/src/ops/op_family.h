// What every op family's binding file (python/src/ops/<family>.cpp, one per include/frost/ops header)
// shares. A family binds its enums, its attributes classes (with the C++ setter names) and its Graph
// builders, then registers itself with FROST_PY_OP_FAMILY; bind_graph runs every registered family once
// the Graph class exists. Adding an op therefore touches its family's file and nothing else here.
#pragma once

#include <nanobind/stl/array.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <utility>

#include "bindings.h"

namespace frost::python {

using GraphClass = nb::class_<graph::Graph>;
using OpFamilyBinder = void (*)(nb::module_&, GraphClass&);

// Adds a family to the list bind_op_families walks. Returns true, so that a namespace-scope constant
// can call it during static initialization.
bool register_op_family(OpFamilyBinder binder);
void bind_op_families(nb::module_& m, GraphClass& graph_class);

// An attributes class bound under its C++ name, with set_name, set_compute_data_type and get_name.
// Setters return the attributes object itself, so calls chain as in C++.
template <class Cls>
class AttributesClass {
 public:
  AttributesClass(nb::module_& m, const char* py_name) : c_(m, py_name) {
    c_.def(nb::init<>());
    setter("set_name", &Cls::set_name);
    setter("set_compute_data_type", &Cls::set_compute_data_type);
    c_.def("get_name", &Cls::get_name);
  }

  // A one-argument setter. Give Arg explicitly to pick one of overloaded setters (set_attn_scale<float>).
  template <class Arg, class Base, class Ret>
  AttributesClass& setter(const char* name, Ret& (Base::*fn)(Arg)) {
    c_.def(
        name, [fn](Cls& a, Arg v) -> Cls& { return (a.*fn)(std::move(v)); }, nb::rv_policy::reference);
    return *this;
  }

  // A setter of a tensor port that may be None (an empty port; validation names it if it is required).
  template <class Base, class Ret>
  AttributesClass& tensor_setter(const char* name, Ret& (Base::*fn)(graph::TensorPtr)) {
    c_.def(
        name, [fn](Cls& a, graph::TensorPtr t) -> Cls& { return (a.*fn)(std::move(t)); }, nb::arg("tensor").none(),
        nb::rv_policy::reference);
    return *this;
  }

  // Anything else (setters of several arguments, getters), as nb::class_::def.
  template <class... Args>
  AttributesClass& def(Args&&... args) {
    c_.def(std::forward<Args>(args)...);
    return *this;
  }

 private:
  nb::class_<Cls> c_;
};

}  // namespace frost::python

// Registers a family's binder from its own file (a namespace-scope constant initialized at load time).
#define FROST_PY_OP_FAMILY(binder) \
  [[maybe_unused]] static const bool binder##_registered = ::frost::python::register_op_family(&binder)
