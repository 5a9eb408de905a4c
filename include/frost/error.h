// Error objects returned by every frost API call. No exception crosses the API.
#pragma once

#include <string>
#include <utility>

namespace frost {

enum class error_code_t {
  OK,
  ATTRIBUTE_NOT_SET,
  SHAPE_DEDUCTION_FAILED,
  INVALID_TENSOR_NAME,
  INVALID_VARIANT_PACK,
  GRAPH_NOT_SUPPORTED,
  GRAPH_EXECUTION_PLAN_CREATION_FAILED,
  GRAPH_EXECUTION_FAILED,
  HEURISTIC_QUERY_FAILED,
  UNSUPPORTED_GRAPH_FORMAT,
  CUDA_API_FAILED,
  CUDNN_BACKEND_API_FAILED,
  INVALID_CUDA_DEVICE,
  HANDLE_ERROR,
  INVALID_VALUE,
  NVRTC_COMPILATION_FAILED,
};

const char* to_string(error_code_t code);

struct error_object {
  error_code_t code = error_code_t::OK;
  std::string err_msg;

  error_object() = default;
  error_object(error_code_t c, std::string msg) : code(c), err_msg(std::move(msg)) {}

  bool is_good() const { return code == error_code_t::OK; }
  bool is_bad() const { return code != error_code_t::OK; }
  error_code_t get_code() const { return code; }
  const std::string& get_message() const { return err_msg; }
  bool operator==(error_code_t c) const { return code == c; }
  bool operator!=(error_code_t c) const { return code != c; }
};

using error_t = error_object;

inline error_t ok() { return {}; }

}  // namespace frost

// Propagates a bad error_t to the caller.
#define FROST_CHECK(expr)                \
  do {                                   \
    ::frost::error_t frost_err_ = (expr); \
    if (frost_err_.is_bad()) return frost_err_; \
  } while (0)
