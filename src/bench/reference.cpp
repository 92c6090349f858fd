#include "bench/reference.hpp"

#include <cstring>

#include "fabric/host/host_kernels.hpp"

namespace tide::bench {

double loadValue(const void* base, int64_t i, plan::DType t) {
  const auto* bytes = static_cast<const uint8_t*>(base);
  if (t == plan::DType::kBF16) {
    uint16_t b;
    std::memcpy(&b, bytes + i * 2, 2);
    return fabric::host::bf16ToFloat(b);
  }
  float f;
  std::memcpy(&f, bytes + i * 4, 4);
  return f;
}

std::vector<double> referenceShardSums(const plan::GroupLayout& g,
                                       const std::vector<std::vector<const void*>>& grads, int rank) {
  std::vector<double> ref(static_cast<size_t>(g.outElems), 0.0);
  for (size_t p = 0; p < g.params.size(); ++p) {
    const plan::ParamLayout& P = g.params[p];
    for (int64_t x = 0; x < P.outElems; ++x) {
      const int64_t flat = int64_t{rank} * P.outElems + x;
      if (flat >= P.rows * P.rowElems) continue;
      double s = 0;
      for (const auto& rankGrads : grads) s += loadValue(rankGrads[p], flat, g.gradDtype);
      ref[static_cast<size_t>(P.outOffset + x)] = s;
    }
  }
  return ref;
}

}  // namespace tide::bench
