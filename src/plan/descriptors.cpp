// Strided copy descriptors and their flat expansion.
#include "tide/plan.hpp"

namespace tide::plan {

std::vector<CopyDesc> flatten(const std::vector<CopyDesc>& descs) {
  std::vector<CopyDesc> out;
  for (const CopyDesc& d : descs) {
    for (int64_t i = 0; i < d.rows; ++i) {
      CopyDesc f;
      f.src = d.src;
      f.dst = d.dst;
      f.src.offset += i * d.srcPitch;
      f.dst.offset += i * d.dstPitch;
      f.width = d.width;
      f.rows = 1;
      out.push_back(f);
    }
  }
  return out;
}

}  // namespace tide::plan
