// An executable plan: built by an engine family for one graph and one knob set.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "frost/error.h"
#include "frost/handle.h"

namespace frost::detail {

using VariantPack = std::unordered_map<int64_t, void*>;

class Plan {
 public:
  virtual ~Plan() = default;
  virtual int64_t workspace_size() const = 0;
  // Binds pointers by uid (every non-virtual, non-pass-by-value tensor is present: checked before).
  // GPU plans neither allocate nor synchronize the host here.
  virtual error_t execute(const VariantPack& pack, void* workspace, const Handle& handle) const = 0;
};

}  // namespace frost::detail
