// The handle names where a graph executes (the host, or a CUDA device) and on which stream.
#pragma once

#include <string>

#include "frost/error.h"

namespace frost {

enum class DeviceKind { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int ordinal = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int ordinal = 0) { return {DeviceKind::CUDA, ordinal}; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  std::string to_string() const;  // "cpu" or "cuda:0"
};

class Handle {
 public:
  Handle() = default;
  explicit Handle(Device d) : device_(d) {}

  const Device& device() const { return device_; }
  // A cudaStream_t (as void*); null is the default stream. Ignored on the CPU.
  void* stream() const { return stream_; }
  void set_stream(void* s) { stream_ = s; }

 private:
  Device device_;
  void* stream_ = nullptr;
};

// Number of CUDA devices usable by this process (0 without a driver or a CUDA build).
int cuda_device_count();

// A handle on CUDA device 0 when one is usable, else on the host.
error_t create_handle(Handle& out);
error_t create_handle(Handle& out, Device device);
inline error_t set_stream(Handle& h, void* stream) { h.set_stream(stream); return {}; }
inline void* get_stream(const Handle& h) { return h.stream(); }

// frost's version and the cuDNN graph-API feature level its surface matches (cuDNN numbering).
const char* version_string();
int64_t backend_version();
const char* backend_version_string();

}  // namespace frost
