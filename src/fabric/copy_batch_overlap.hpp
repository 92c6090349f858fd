// The ops of one copy() call run in any order, or at once (fabric.hpp: one
// batched submission; cudaMemcpyBatchAsync on the CUDA fabric), and each is a
// memcpy, not a memmove. So no op may write bytes that another op of the
// call reads or writes, nor bytes it reads itself, nor one of its own rows
// twice. The host fabric, which runs a call's ops one after another, checks
// every call against this rule, so that CPU runs catch a batch whose result
// would depend on the GPU's order.
#pragma once

#include <string>
#include <vector>

#include "tide/fabric.hpp"

namespace tide::fabric {

// "" when the batch keeps the rule, else which two ops' rows meet, and how.
std::string findCopyBatchOverlap(const std::vector<CopyOp>& ops);

}  // namespace tide::fabric
