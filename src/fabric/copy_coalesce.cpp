#include "fabric/copy_coalesce.hpp"

#include <cstddef>

namespace tide::fabric {

namespace {

bool flat(const CopyOp& op) { return op.rows == 1 && op.width > 0; }

std::ptrdiff_t delta(const void* to, const void* from) {
  return static_cast<const std::byte*>(to) - static_cast<const std::byte*>(from);
}

// A run of `rows` flat copies of `first.width` bytes, strides srcStep / dstStep.
CopyOp runToOp(const CopyOp& first, int64_t rows, int64_t srcStep, int64_t dstStep) {
  if (rows == 1) return first;
  CopyOp op = first;
  if (srcStep == first.width && dstStep == first.width) {  // back to back: one flat copy
    op.width = first.width * rows;
    op.rows = 1;
    op.srcPitch = op.dstPitch = 0;
    return op;
  }
  op.rows = rows;
  op.srcPitch = srcStep;
  op.dstPitch = dstStep;
  return op;
}

}  // namespace

std::vector<CopyOp> coalesceCopies(const std::vector<CopyOp>& ops, int64_t maxPitch) {
  std::vector<CopyOp> out;
  out.reserve(ops.size());
  size_t i = 0;
  while (i < ops.size()) {
    const CopyOp& first = ops[i];
    if (!flat(first)) {
      out.push_back(first);
      ++i;
      continue;
    }
    int64_t rows = 1, srcStep = 0, dstStep = 0;
    size_t j = i + 1;
    for (; j < ops.size(); ++j) {
      const CopyOp& next = ops[j];
      const CopyOp& prev = ops[j - 1];
      if (!flat(next) || next.width != first.width) break;
      const int64_t s = delta(next.src, prev.src), d = delta(next.dst, prev.dst);
      if (rows == 1) {
        // Forward strides no shorter than a row keep the rows from
        // overlapping; a strided copy's pitch has a hardware limit, a flat
        // run's does not.
        const bool backToBack = s == first.width && d == first.width;
        if (s < first.width || d < first.width || (!backToBack && (s > maxPitch || d > maxPitch))) break;
        srcStep = s;
        dstStep = d;
      } else if (s != srcStep || d != dstStep) {
        break;
      }
      ++rows;
    }
    out.push_back(runToOp(first, rows, srcStep, dstStep));
    i = j;
  }
  return out;
}

}  // namespace tide::fabric
