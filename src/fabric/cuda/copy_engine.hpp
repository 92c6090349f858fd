// Copy-engine copies for one queue: flat copies go out as one
// cudaMemcpyBatchAsync, strided ones as cudaMemcpy2DAsync. Copies of one call
// may run in any order relative to each other (batch semantics), so they must
// not overlap; calls on one stream run in order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "tide/fabric.hpp"

namespace tide::fabric::cuda {

// Enqueues `ops` on `stream`; returns the bytes they move.
int64_t issueCopies(cudaStream_t stream, const std::vector<CopyOp>& ops);

}  // namespace tide::fabric::cuda
