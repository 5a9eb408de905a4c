// Common shape of every op's attributes class: a name, a compute data type, and the tensors bound
// to the op's named ports.
#pragma once

#include <map>
#include <string>

#include "frost/tensor.h"

namespace frost::graph {

template <class Derived, class InputNames, class OutputNames>
class Attributes {
 public:
  using input_names = InputNames;
  using output_names = OutputNames;

  std::string name;
  DataType_t compute_data_type = DataType_t::NOT_SET;
  std::map<InputNames, TensorPtr> inputs;
  std::map<OutputNames, TensorPtr> outputs;

  Derived& set_name(std::string v) { name = std::move(v); return self(); }
  Derived& set_compute_data_type(DataType_t v) { compute_data_type = v; return self(); }
  const std::string& get_name() const { return name; }

 protected:
  Derived& self() { return static_cast<Derived&>(*this); }
};

}  // namespace frost::graph
