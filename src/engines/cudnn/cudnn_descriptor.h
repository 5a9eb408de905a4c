// Backend descriptors with an owner, and a builder that sets attributes and finalizes, keeping the
// first failure with the attribute it was setting and the backend's own message.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engines/cudnn/cudnn_library.h"
#include "frost/error.h"

namespace frost::detail {

// One backend descriptor, destroyed with its last owner. Descriptors that another one refers to must
// outlive it: owners keep them in shared_ptrs (see Lowered::keep).
class BackendDesc {
 public:
  BackendDesc(const CudnnLibrary& lib, cudnn_abi::Descriptor d) : lib_(&lib), d_(d) {}
  ~BackendDesc() {
    if (d_) lib_->destroy_descriptor(d_);
  }
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  cudnn_abi::Descriptor get() const { return d_; }

 private:
  const CudnnLibrary* lib_;
  cudnn_abi::Descriptor d_;
};
using DescPtr = std::shared_ptr<BackendDesc>;

// Creates an empty descriptor of the given type (to receive a get_attribute).
error_t make_desc(const CudnnLibrary& lib, int32_t type, DescPtr& out);

class DescBuilder {
 public:
  // `what` names the descriptor in errors: "tensor 'q' (uid 1)", "pointwise node 'relu'", ...
  DescBuilder(const CudnnLibrary& lib, int32_t type, std::string what);

  DescBuilder& set(int32_t attr, int32_t type, int64_t count, const void* values);
  DescBuilder& i64(int32_t attr, int64_t v) { return set(attr, cudnn_abi::type::INT64, 1, &v); }
  DescBuilder& i64s(int32_t attr, const std::vector<int64_t>& v);
  DescBuilder& f64(int32_t attr, double v) { return set(attr, cudnn_abi::type::DOUBLE, 1, &v); }
  DescBuilder& f32(int32_t attr, float v) { return set(attr, cudnn_abi::type::FLOAT, 1, &v); }
  DescBuilder& boolean(int32_t attr, bool v) { return set(attr, cudnn_abi::type::BOOLEAN, 1, &v); }
  // An attribute whose type is one of the backend's enums (data type, pointwise mode, ...).
  DescBuilder& enumeration(int32_t attr, int32_t type, int32_t v) { return set(attr, type, 1, &v); }
  DescBuilder& desc(int32_t attr, const DescPtr& d);
  DescBuilder& descs(int32_t attr, const std::vector<DescPtr>& ds);
  DescBuilder& handle(int32_t attr, cudnn_abi::HandlePtr h) { return set(attr, cudnn_abi::type::HANDLE, 1, &h); }

  // Finalizes; on any failure so far (or of the finalize) returns the first error.
  error_t finalize(DescPtr& out, error_code_t code = error_code_t::GRAPH_NOT_SUPPORTED);

 private:
  const CudnnLibrary& lib_;
  std::string what_;
  DescPtr d_;
  error_t error_;
};

// The value of an INT64 attribute of a finalized descriptor.
error_t get_i64(const CudnnLibrary& lib, const DescPtr& d, int32_t attr, int64_t& out);
// Up to `max` elements of an enum-typed attribute (notes, knob types).
error_t get_enums(const CudnnLibrary& lib, const DescPtr& d, int32_t attr, int32_t type, int64_t max,
                  std::vector<int32_t>& out);
// Descriptor-valued array attribute: creates `max` descriptors of `elem_type`, lets the backend fill them,
// keeps the ones it filled.
error_t get_descs(const CudnnLibrary& lib, const DescPtr& d, int32_t attr, int32_t elem_type, int64_t max,
                  std::vector<DescPtr>& out);

}  // namespace frost::detail
