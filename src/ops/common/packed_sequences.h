// The sequences of a recurrent-state op on the CPU reference (linear attention, Mamba-2): one per batch row, or
// packed along T by cu_seqlens, each with the row of the state it starts from.
#pragma once

#include <vector>

#include "engines/reference/ref_exec.h"

namespace frost::detail {

// One packed sequence: tokens [first, first + len) of the flattened [B * T] token axis.
struct Sequence {
  int64_t first = 0, len = 0, state_row = 0;
};

// Sequences from cu_seqlens (or one per batch row) and their state rows (state_indices into the initial-state pool
// `init`, else the sequence's own index), checked before any output is written so that bad offsets or indices
// leave the caller's buffers untouched. `cu` and `indices` may be null.
error_t load_sequences(const Node& n, const RefExec& ex, const TensorPtr& cu, const TensorPtr& indices,
                       const TensorPtr& init, int64_t batch, int64_t len, std::vector<Sequence>& out);

}  // namespace frost::detail
