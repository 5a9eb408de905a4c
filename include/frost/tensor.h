// Tensor declarations. A tensor is a description (dims, strides, data type); the graph never owns
// its memory. Handles are shared_ptr<Tensor_attributes>, as in cuDNN Frontend.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frost/types.h"

namespace frost::graph {

class Tensor_attributes {
 public:
  using uid_t = int64_t;

  Tensor_attributes() = default;

  Tensor_attributes& set_name(std::string v) { name_ = std::move(v); return *this; }
  Tensor_attributes& set_dim(std::vector<int64_t> v) { dim_ = std::move(v); return *this; }
  Tensor_attributes& set_stride(std::vector<int64_t> v) { stride_ = std::move(v); return *this; }
  Tensor_attributes& set_data_type(DataType_t v) { data_type_ = v; return *this; }
  Tensor_attributes& set_uid(uid_t v) { uid_ = v; uid_assigned_ = true; return *this; }
  Tensor_attributes& clear_uid() { uid_ = 0; uid_assigned_ = false; return *this; }
  Tensor_attributes& set_is_virtual(bool v) { is_virtual_ = v; return *this; }
  // An output of the graph is a non-virtual tensor the caller binds a buffer to.
  Tensor_attributes& set_output(bool v) { is_virtual_ = !v; return *this; }
  Tensor_attributes& set_is_pass_by_value(bool v) { is_pass_by_value_ = v; return *this; }
  Tensor_attributes& set_pass_by_value(double v) { pass_by_value_ = v; is_pass_by_value_ = true; return *this; }
  Tensor_attributes& set_reordering_type(TensorReordering_t v) { reordering_ = v; return *this; }
  Tensor_attributes& set_ragged_offset(std::shared_ptr<Tensor_attributes> v) { ragged_offset_ = std::move(v); return *this; }
  Tensor_attributes& set_alignment(int64_t bytes) { alignment_ = bytes; return *this; }

  const std::string& get_name() const { return name_; }
  const std::vector<int64_t>& get_dim() const { return dim_; }
  const std::vector<int64_t>& get_stride() const { return stride_; }
  DataType_t get_data_type() const { return data_type_; }
  uid_t get_uid() const { return uid_; }
  bool has_uid() const { return uid_assigned_; }
  bool get_is_virtual() const { return is_virtual_; }
  bool get_is_pass_by_value() const { return is_pass_by_value_; }
  std::optional<double> get_pass_by_value() const { return pass_by_value_; }
  TensorReordering_t get_reordering_type() const { return reordering_; }
  const std::shared_ptr<Tensor_attributes>& get_ragged_offset() const { return ragged_offset_; }
  int64_t get_alignment() const { return alignment_; }

  // Number of elements (product of dims); 0 when dims are not set.
  int64_t get_volume() const;

 private:
  std::string name_;
  std::vector<int64_t> dim_;
  std::vector<int64_t> stride_;
  DataType_t data_type_ = DataType_t::NOT_SET;
  uid_t uid_ = 0;
  bool uid_assigned_ = false;
  bool is_virtual_ = false;
  bool is_pass_by_value_ = false;
  std::optional<double> pass_by_value_;
  TensorReordering_t reordering_ = TensorReordering_t::NONE;
  std::shared_ptr<Tensor_attributes> ragged_offset_;
  int64_t alignment_ = 16;
};

using TensorPtr = std::shared_ptr<Tensor_attributes>;

}  // namespace frost::graph
