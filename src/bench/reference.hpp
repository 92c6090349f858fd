// Independent float64 reference of the reduce-scatter, shared by the host
// runner and the multi-process tests.
#pragma once

#include <cstdint>
#include <vector>

#include "tide/plan.hpp"

namespace tide::bench {

// Element i of a bf16 or fp32 buffer, widened to double.
double loadValue(const void* base, int64_t i, plan::DType t);

// `rank`'s packed output (E elements) as float64 sums over every rank's
// gradients: grads[u][p] is rank u's unsharded gradient of parameter p. Rows
// past D_p are zero, as FSDP2 pads them.
std::vector<double> referenceShardSums(const plan::GroupLayout& g,
                                       const std::vector<std::vector<const void*>>& grads, int rank);

}  // namespace tide::bench
