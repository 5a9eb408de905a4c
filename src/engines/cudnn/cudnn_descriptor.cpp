#include "engines/cudnn/cudnn_descriptor.h"

namespace frost::detail {

error_t make_desc(const CudnnLibrary& lib, int32_t type, DescPtr& out) {
  cudnn_abi::Descriptor d = nullptr;
  const cudnn_abi::Status s = lib.create_descriptor(type, &d);
  if (s != cudnn_abi::kSuccess)
    return {error_code_t::CUDNN_BACKEND_API_FAILED,
            "cudnnBackendCreateDescriptor(type " + std::to_string(type) + "): " + lib.describe(s)};
  out = std::make_shared<BackendDesc>(lib, d);
  return {};
}

DescBuilder::DescBuilder(const CudnnLibrary& lib, int32_t type, std::string what) : lib_(lib), what_(std::move(what)) {
  error_ = make_desc(lib, type, d_);
}

DescBuilder& DescBuilder::set(int32_t attr, int32_t type, int64_t count, const void* values) {
  if (error_.is_bad()) return *this;
  const cudnn_abi::Status s = lib_.set_attribute(d_->get(), attr, type, count, values);
  if (s != cudnn_abi::kSuccess)
    error_ = {error_code_t::GRAPH_NOT_SUPPORTED,
              what_ + ": the backend refused attribute " + std::to_string(attr) + ": " + lib_.describe(s)};
  return *this;
}

DescBuilder& DescBuilder::i64s(int32_t attr, const std::vector<int64_t>& v) {
  return set(attr, cudnn_abi::type::INT64, static_cast<int64_t>(v.size()), v.data());
}

DescBuilder& DescBuilder::desc(int32_t attr, const DescPtr& d) {
  cudnn_abi::Descriptor raw = d->get();
  return set(attr, cudnn_abi::type::BACKEND_DESCRIPTOR, 1, &raw);
}

DescBuilder& DescBuilder::descs(int32_t attr, const std::vector<DescPtr>& ds) {
  std::vector<cudnn_abi::Descriptor> raw;
  raw.reserve(ds.size());
  for (const auto& d : ds) raw.push_back(d->get());
  return set(attr, cudnn_abi::type::BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()), raw.data());
}

error_t DescBuilder::finalize(DescPtr& out, error_code_t code) {
  if (error_.is_bad()) return error_;
  const cudnn_abi::Status s = lib_.finalize(d_->get());
  if (s != cudnn_abi::kSuccess) return {code, what_ + ": the backend refused it: " + lib_.describe(s)};
  out = d_;
  return {};
}

error_t get_i64(const CudnnLibrary& lib, const DescPtr& d, int32_t attr, int64_t& out) {
  int64_t n = 0;
  const cudnn_abi::Status s = lib.get_attribute(d->get(), attr, cudnn_abi::type::INT64, 1, &n, &out);
  if (s != cudnn_abi::kSuccess)
    return {error_code_t::CUDNN_BACKEND_API_FAILED,
            "reading attribute " + std::to_string(attr) + ": " + lib.describe(s)};
  return {};
}

error_t get_enums(const CudnnLibrary& lib, const DescPtr& d, int32_t attr, int32_t type, int64_t max,
                  std::vector<int32_t>& out) {
  out.assign(static_cast<size_t>(max), 0);
  int64_t n = 0;
  const cudnn_abi::Status s = lib.get_attribute(d->get(), attr, type, max, &n, out.data());
  if (s != cudnn_abi::kSuccess)
    return {error_code_t::CUDNN_BACKEND_API_FAILED,
            "reading attribute " + std::to_string(attr) + ": " + lib.describe(s)};
  out.resize(static_cast<size_t>(std::min(n, max)));
  return {};
}

error_t get_descs(const CudnnLibrary& lib, const DescPtr& d, int32_t attr, int32_t elem_type, int64_t max,
                  std::vector<DescPtr>& out) {
  std::vector<DescPtr> made(static_cast<size_t>(max));
  std::vector<cudnn_abi::Descriptor> raw(static_cast<size_t>(max));
  for (size_t i = 0; i < made.size(); ++i) {
    FROST_CHECK(make_desc(lib, elem_type, made[i]));
    raw[i] = made[i]->get();
  }
  int64_t n = 0;
  const cudnn_abi::Status s =
      lib.get_attribute(d->get(), attr, cudnn_abi::type::BACKEND_DESCRIPTOR, max, &n, raw.data());
  if (s != cudnn_abi::kSuccess)
    return {error_code_t::CUDNN_BACKEND_API_FAILED,
            "reading attribute " + std::to_string(attr) + ": " + lib.describe(s)};
  made.resize(static_cast<size_t>(std::min(n, max)));
  out = std::move(made);
  return {};
}

}  // namespace frost::detail
