#include "graph/node.h"

#include <map>
#include <mutex>
#include <sstream>

namespace frost::detail {
namespace {
std::map<std::string, NodeFactory, std::less<>>& op_registry() {
  static std::map<std::string, NodeFactory, std::less<>> r;
  return r;
}
}  // namespace

void register_op(std::string tag, NodeFactory make) { op_registry()[std::move(tag)] = std::move(make); }

std::unique_ptr<Node> make_node(std::string_view tag) {
  auto it = op_registry().find(tag);
  return it == op_registry().end() ? nullptr : it->second();
}

std::vector<std::string> registered_op_tags() {
  std::vector<std::string> r;
  for (const auto& [k, v] : op_registry()) r.push_back(k);
  return r;
}

std::vector<Port> Node::inputs() {
  std::vector<Port> r;
  for (auto& p : ports())
    if (!p.is_output) r.push_back(p);
  return r;
}

std::vector<Port> Node::outputs() {
  std::vector<Port> r;
  for (auto& p : ports())
    if (p.is_output) r.push_back(p);
  return r;
}

TensorPtr Node::port(std::string_view name) {
  for (auto& p : ports())
    if (p.name == name) return *p.slot;
  return nullptr;
}

error_t require_ports(Node& n, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names)
    if (!n.port(name)) return attr_error(n, name, "null", "this port must hold a tensor", error_code_t::ATTRIBUTE_NOT_SET);
  return {};
}

std::string dims_string(const std::vector<int64_t>& d) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < d.size(); ++i) o << (i ? ", " : "") << d[i];
  o << ']';
  return o.str();
}

std::string describe(const TensorPtr& t) {
  if (!t) return "(null)";
  return "'" + t->get_name() + "' " + dims_string(t->get_dim()) + " " + std::string(to_string(t->get_data_type()));
}

error_t attr_error(const Node& n, std::string_view attr, std::string_view value, std::string_view why,
                   error_code_t code) {
  std::string msg = "node '" + n.name() + "' (" + std::string(n.tag()) + "): attribute '" + std::string(attr) + "'";
  if (!value.empty()) msg += " = " + std::string(value);
  msg += ": " + std::string(why);
  return {code, msg};
}

}  // namespace frost::detail
