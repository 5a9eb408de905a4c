// Backend knobs <-> frost's KnobType_t, and backend notes <-> frost's notes.
//
// frost's KnobType_t mirrors cuDNN Frontend's numbering, which is not the backend's: the backend
// enum keeps retired knobs (USE_TEX, KBLOCK, ...) that the frontend dropped. Each named backend knob
// maps to the frontend name; every other backend integer, retired or newer than this table, is kept
// as kBackendKnobBand + n ("CUDNN_KNOB_<n>") so that a plan replays with exactly the knobs the
// backend proposed.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "frost/knobs.h"
#include "frost/types.h"

namespace frost::detail {

// Backend knob integer -> frost knob; total.
KnobType_t knob_from_backend(int32_t backend_knob);
// frost knob -> backend integer; empty for frost's own knobs and frontend names the backend lacks.
std::optional<int32_t> knob_to_backend(KnobType_t knob);

// Backend note integers -> frost notes; notes frost has no name for are left out.
std::vector<NumericalNote_t> numeric_notes_from_backend(const std::vector<int32_t>& notes);
std::vector<BehaviorNote_t> behavior_notes_from_backend(const std::vector<int32_t>& notes);

}  // namespace frost::detail
