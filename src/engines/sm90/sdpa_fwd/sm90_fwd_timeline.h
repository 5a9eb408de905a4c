// Debug builds only (-DFROST_FWD_TIMELINE): per-unit timestamps of every CTA, to see where a persistent grid's
// time goes (e.g. the tail split's units, merges and waits). Host and device.
#pragma once
#ifdef FROST_FWD_TIMELINE
#include <cstdint>

namespace frost::sm90::fwd {

// One record per (CTA, unit), [cta * kTimelineUnits + iter]; %globaltimer in ns.
constexpr int kTimelineUnits = 64;
struct TimelineRecord {
  uint64_t start;   // the consumers begin the unit (before waiting for its Q)
  uint64_t merged;  // the owner has folded in every piece (0 for other units)
  uint64_t end;     // the unit's epilogue (or piece) is done
  int tile, n_lo, n_hi, kind;  // kind as UnitKind; n_lo = n_hi = 0 for whole-wave tiles
};

// Set by the C API; null disables recording.
extern TimelineRecord* g_timeline;

}  // namespace frost::sm90::fwd
#endif
