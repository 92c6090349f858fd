// The Level 1 fp32 sum of TIDE-RS as a fabric SumOp, shared by the single-
// and multi-node reduce-scatter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tide/fabric.hpp"
#include "tide/plan.hpp"

namespace tide::collectives {

// Level 1 sum pieces for the destination ranks `firstRank .. firstRank+rows-1`
// over element range `range`: contributions in local-rank order (staged ones
// from the staging slot, the own one from the gradient). Local-rank order,
// not "staged then own", keeps the bits independent of which rank owns an
// element, so passes and chunking never change them.
fabric::SumOp level1Sum(const plan::GroupLayout& g, const plan::RsPlan& rs, int me, int firstRank, int rows,
                        plan::ElemRange range, const std::byte* stagingSlot,
                        const std::vector<const void*>& grads, float* dst, int64_t dstPitch);

}  // namespace tide::collectives
