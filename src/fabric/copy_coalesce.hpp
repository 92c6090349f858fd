// Merges a list of flat copies into fewer copy-engine operations.
//
// Every copy-engine operation costs the host a few microseconds to enqueue,
// whatever its size (about 2.5 us per copy in a cudaMemcpyBatchAsync on an
// H200 host), so a group of many equal parameters enqueues one copy per
// parameter and peer and becomes host-bound. Runs of consecutive flat copies
// that share one width and advance source and destination by constant
// strides are one strided copy (rows = run length, pitches = the strides);
// runs that are back to back on both sides are one flat copy. Strided
// copies in the input and copies that break a run pass through unchanged.
#pragma once

#include <cstdint>
#include <vector>

#include "tide/fabric.hpp"

namespace tide::fabric {

// The largest pitch a strided copy may use (cudaDeviceProp::memPitch is
// 2^31 - 1 on current GPUs).
constexpr int64_t kMaxCopyPitch = (int64_t{1} << 31) - 1;

// Same bytes to the same places as `ops`, in as few ops as the runs allow.
// Ops of one list may run in any order (batch semantics), so their order
// inside a run does not matter; runs are kept in input order.
std::vector<CopyOp> coalesceCopies(const std::vector<CopyOp>& ops, int64_t maxPitch = kMaxCopyPitch);

}  // namespace tide::fabric
