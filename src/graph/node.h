// The internal shape of an op node. Each op family lives in src/ops/<op>/ and registers its node
// type with the op registry; the graph and the engines only see this interface.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "frost/error.h"
#include "frost/tensor.h"
#include "frost/types.h"

namespace frost::detail {

using graph::TensorPtr;
using json = nlohmann::json;

class RefExec;

struct GraphContext {
  DataType_t io_data_type = DataType_t::NOT_SET;
  DataType_t intermediate_data_type = DataType_t::NOT_SET;
  DataType_t compute_data_type = DataType_t::NOT_SET;
  std::string name;
  bool dynamic_shape_enabled = false;
  bool override_shape_enabled = false;
  int32_t sm_count = -1;
  int32_t sm_version = -1;
};

// A named slot of a node that holds (or may hold) a tensor.
struct Port {
  std::string name;
  TensorPtr* slot;
  bool is_output;
};

class Node {
 public:
  virtual ~Node() = default;
  virtual std::string_view tag() const = 0;
  virtual const std::string& name() const = 0;
  virtual void set_name(std::string) = 0;
  virtual DataType_t compute_data_type() const = 0;
  virtual void set_compute_data_type(DataType_t) = 0;
  // Every port in a stable order; optional ports may hold null.
  virtual std::vector<Port> ports() = 0;
  // Called with every present input fully described (dims, strides, data type). Fills what the
  // user left unset on the outputs (dims, and strides/data types where the op decides them) and
  // checks every attribute, naming node, attribute and value on failure.
  virtual error_t infer_and_validate(const GraphContext&) = 0;
  virtual void attributes_to_json(json&) const = 0;
  virtual error_t attributes_from_json(const json&) = 0;
  // CPU reference: reads inputs and writes outputs through the executor.
  virtual error_t run_reference(RefExec&) const = 0;

  std::vector<Port> inputs();
  std::vector<Port> outputs();
  TensorPtr port(std::string_view name);
};

// Registry of op families by JSON tag, filled by each op's own folder.
using NodeFactory = std::function<std::unique_ptr<Node>()>;
void register_op(std::string tag, NodeFactory make);
std::unique_ptr<Node> make_node(std::string_view tag);
std::vector<std::string> registered_op_tags();

struct OpRegistrar {
  OpRegistrar(std::string tag, NodeFactory make) { register_op(std::move(tag), std::move(make)); }
};

// "node 'name' (TAG): attribute 'attr' = value: why"
error_t attr_error(const Node& n, std::string_view attr, std::string_view value, std::string_view why,
                   error_code_t code = error_code_t::INVALID_VALUE);
// Checks that every named port holds a tensor (deserialized graphs may leave any port empty).
error_t require_ports(Node& n, std::initializer_list<std::string_view> names);
std::string describe(const TensorPtr& t);  // "'name' [2, 3, 4] BFLOAT16"
std::string dims_string(const std::vector<int64_t>& d);

}  // namespace frost::detail
