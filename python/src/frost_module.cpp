// frost._frost: the extension module behind the `frost` package.
#include "bindings.h"

NB_MODULE(_frost, m) {
  m.doc() = "frost graph library: low-level bindings (use the `frost` package instead)";
  using namespace frost::python;
  bind_enums(m);
  bind_errors(m);
  bind_tensor(m);
  bind_handle(m);
  bind_graph(m);
  bind_buffers(m);
}
