// The pieces of one sum run at once on the GPU (one launch, every piece's rows
// spread over its CTAs), one after another on the host. So no piece may write
// bytes that another piece reads or writes, nor bytes its own sources read,
// except a source that is exactly its destination (fp32, same rows): each
// element is then read and written by one thread, and both fabrics give the
// same bits. The host fabric checks every sum against this rule (the CUDA
// fabric trusts its callers, as for copy lists: copy_batch_overlap.hpp).
#pragma once

#include <string>

#include "tide/fabric.hpp"

namespace tide::fabric {

// "" when the sum keeps the rule, else which rows meet, and how. Shapes must
// have passed sumPieceShapeProblem (one valid count per row).
std::string findSumOpOverlap(const SumOp& op);

}  // namespace tide::fabric
