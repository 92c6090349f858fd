// Fresh random inputs for the collectives' runners and tests: each value drawn
// from one of three kinds, stored as bf16 or fp32.
#pragma once

#include <cstdint>
#include <random>

#include "tide/plan.hpp"

namespace tide::bench {

enum class InputKind { kRandomNormal, kInteger, kNonFinite };

// kRandomNormal: N(0, 1); kInteger: an integer in [-8, 8] (sums stay exact);
// kNonFinite: N(0, 1) with one value in 64 NaN, +Inf or -Inf.
float drawValue(std::mt19937_64& rng, InputKind kind);

// Element i of a bf16 (rounded to nearest even) or fp32 buffer := v.
void storeValue(uint8_t* base, int64_t i, plan::DType t, float v);

}  // namespace tide::bench
