// Helpers for op builders: name the node, check inputs, create outputs.
#pragma once

#include <initializer_list>
#include <string>

#include "graph/graph_state.h"

namespace frost::detail {

// Gives the attributes a default name ("<TAG>_<n>") when the user set none.
template <class Attr>
void default_name(GraphState& g, Attr& a, std::string_view tag) {
  if (a.name.empty()) a.name = std::string(tag) + "_" + std::to_string(g.nodes.size());
}

// Records an error (reported at validate) for each required input that is null.
inline void require_inputs(GraphState& g, const std::string& node_name, std::string_view tag,
                           std::initializer_list<std::pair<const char*, const TensorPtr*>> inputs) {
  for (const auto& [port, t] : inputs)
    if (!*t)
      g.note_error({error_code_t::ATTRIBUTE_NOT_SET,
                    "node '" + node_name + "' (" + std::string(tag) + "): input " + port + " is null"});
}

}  // namespace frost::detail
