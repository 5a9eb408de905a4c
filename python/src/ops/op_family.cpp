// The list of op families that bind themselves (see op_family.h).
#include "op_family.h"

#include <vector>

namespace frost::python {

namespace {

std::vector<OpFamilyBinder>& families() {
  static std::vector<OpFamilyBinder> list;
  return list;
}

}  // namespace

bool register_op_family(OpFamilyBinder binder) {
  families().push_back(binder);
  return true;
}

void bind_op_families(nb::module_& m, GraphClass& graph_class) {
  for (OpFamilyBinder binder : families()) binder(m, graph_class);
}

}  // namespace frost::python
