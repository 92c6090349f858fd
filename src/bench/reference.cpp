#include "bench/reference.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace tide::bench {

double loadValue(const void* base, int64_t i, plan::DType t) {
  const auto* bytes = static_cast<const uint8_t*>(base);
  if (t == plan::DType::kBF16) {
    // Decoded here, not with the fabric's bf16ToFloat: the reference must not share the
    // code it checks. bf16 is the high half of an fp32 word.
    uint16_t b;
    std::memcpy(&b, bytes + i * 2, 2);
    const uint32_t word = uint32_t{b} << 16;
    float f;
    std::memcpy(&f, &word, 4);
    return f;
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

int64_t wrongLandingBytes(const plan::GroupLayout& g, const std::vector<const uint8_t*>& shards,
                          const uint8_t* landing) {
  int64_t wrong = 0;
  for (size_t p = 0; p < g.params.size(); ++p) {
    const plan::ParamLayout& P = g.params[p];
    for (size_t src = 0; src < shards.size(); ++src) {
      const uint8_t* want = shards[src] + P.shardOffset;
      const uint8_t* got = landing + g.landing(static_cast<int>(p), static_cast<int>(src));
      for (int64_t b = 0; b < P.shardBytes; ++b) wrong += want[b] != got[b] ? 1 : 0;
    }
  }
  return wrong;
}

float outputPoison() { return std::bit_cast<float>(kOutputPoisonBits); }

OutputCheck checkShardOutput(const plan::GroupLayout& g, const std::vector<std::vector<const void*>>& grads, int rank,
                             float alpha, const float* before, const float* y, bool exact) {
  std::vector<double> ref = referenceShardSums(g, grads, rank);
  double refMax = 0;
  for (size_t x = 0; x < ref.size(); ++x) {
    ref[x] *= double{alpha};
    if (before != nullptr) ref[x] += before[x];
    if (std::isfinite(ref[x])) refMax = std::max(refMax, std::fabs(ref[x]));
  }
  const double scale = std::max(1.0, refMax);
  OutputCheck out;
  for (size_t x = 0; x < ref.size(); ++x) {
    const double want = ref[x], got = y[x];
    bool match;
    if (std::isnan(want)) match = std::isnan(got) && std::bit_cast<uint32_t>(y[x]) != kOutputPoisonBits;  // written
    else if (std::isinf(want)) match = got == want;
    else {
      // A NaN where a number belongs is an infinite error, so the printed worst error shows it.
      const double err = std::isnan(got) ? std::numeric_limits<double>::infinity() : std::fabs(got - want) / scale;
      match = exact ? got == want : err <= 1e-5;
      out.maxRelErr = std::max(out.maxRelErr, err);
    }
    out.wrong += match ? 0 : 1;
  }
  return out;
}

}  // namespace tide::bench
