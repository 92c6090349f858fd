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

// Bytes of a landing (the unsharded group, as TIDE-AG writes it) that differ
// from the shards their owners hold: shards[u] is rank u's packed shard.
int64_t wrongLandingBytes(const plan::GroupLayout& g, const std::vector<const uint8_t*>& shards,
                          const uint8_t* landing);

// The poison an output holds before a reduce-scatter writes it: a NaN with a
// payload no sum produces (arithmetic gives the default NaN, or an input's),
// so an element left unwritten is caught even where the reference is NaN.
inline constexpr uint32_t kOutputPoisonBits = 0x7FC0DEADu;
float outputPoison();

struct OutputCheck {
  int64_t wrong = 0;      // elements that missed
  double maxRelErr = 0;   // over the finite reference elements, misses included
};

// `rank`'s reduce-scatter output `y` against alpha * referenceShardSums (+ `before`,
// the output's prior contents, when accumulating; else null): NaN where the
// reference is NaN (but never the poison, kOutputPoisonBits), the same infinity,
// exact when `exact` (integer inputs), else within 1e-5 * max(1, |reference|_inf).
OutputCheck checkShardOutput(const plan::GroupLayout& g, const std::vector<std::vector<const void*>>& grads, int rank,
                             float alpha, const float* before, const float* y, bool exact);

}  // namespace tide::bench
