#include "collectives/level1_sum.hpp"

#include <algorithm>

namespace tide::collectives {

namespace {

int64_t clampValid(int64_t total, int64_t start, int64_t len) {
  return std::clamp<int64_t>(total - start, 0, len);
}

}  // namespace

fabric::SumOp level1Sum(const plan::GroupLayout& g, const plan::RsPlan& rs, int me, int firstRank, int rows,
                        plan::ElemRange range, const std::byte* stagingSlot,
                        const std::vector<const void*>& grads, float* dst, int64_t dstPitch) {
  const plan::Topology& t = g.topo;
  const int local = t.localOf(me);
  const int64_t b = plan::itemSize(g.gradDtype);
  fabric::SumOp op;
  op.srcType = g.gradDtype;
  for (size_t p = 0; p < g.params.size(); ++p) {
    const plan::ParamLayout& pl = g.params[p];
    const int64_t a = std::max(range.begin, pl.outOffset);
    const int64_t e = std::min(range.end, pl.outOffset + pl.outElems);
    if (a >= e) continue;
    fabric::SumPiece pc;
    pc.dst = dst + (a - range.begin);
    pc.dstPitch = dstPitch;
    pc.rows = rows;
    pc.elems = e - a;
    std::vector<int64_t> valid;
    for (int i = 0; i < rows; ++i)
      valid.push_back(clampValid(pl.rows * pl.rowElems, int64_t{firstRank + i} * pl.outElems + (a - pl.outOffset), e - a));
    for (int u = 0; u < t.gpusPerNode; ++u) {
      fabric::SumSource src;
      src.valid = valid;
      if (u == local) {
        src.ptr = static_cast<const std::byte*>(grads[p]) + (int64_t{firstRank} * pl.outElems + (a - pl.outOffset)) * b;
        src.pitch = pl.outElems;
      } else {
        const int64_t row0 = int64_t{plan::stagedSenderIndex(u, local)} * rows * rs.subElems + (a - range.begin);
        src.ptr = stagingSlot + row0 * b;
        src.pitch = rs.subElems;
      }
      pc.sources.push_back(src);
    }
    op.pieces.push_back(pc);
  }
  return op;
}

}  // namespace tide::collectives
