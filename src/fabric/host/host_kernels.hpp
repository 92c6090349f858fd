// The host fabric's sum and landing steps: plain loops in exactly the
// association order the CUDA kernels use (fabric.hpp documents it). This file
// is compiled with -ffp-contract=off so no FMA changes the bits.
#pragma once

#include "tide/fabric.hpp"

namespace tide::fabric::host {

float bf16ToFloat(uint16_t bits);
uint16_t floatToBf16(float f);  // round to nearest even (NaN stays NaN)

int64_t runSum(const SumOp& op);   // returns elements written
int64_t runLand(const LandOp& op);

}  // namespace tide::fabric::host
