#include "bench/random_inputs.hpp"

#include <cstring>
#include <limits>

#include "fabric/host/host_kernels.hpp"

namespace tide::bench {

float drawValue(std::mt19937_64& rng, InputKind kind) {
  switch (kind) {
    case InputKind::kInteger: return static_cast<float>(static_cast<int>(rng() % 17) - 8);
    case InputKind::kNonFinite: {
      const uint64_t r = rng() % 64;
      if (r == 0) return std::numeric_limits<float>::quiet_NaN();
      if (r == 1) return std::numeric_limits<float>::infinity();
      if (r == 2) return -std::numeric_limits<float>::infinity();
      [[fallthrough]];
    }
    case InputKind::kRandomNormal:
    default: {
      std::normal_distribution<float> nd(0.0f, 1.0f);
      return nd(rng);
    }
  }
}

void storeValue(uint8_t* base, int64_t i, plan::DType t, float v) {
  if (t == plan::DType::kBF16) {
    const uint16_t b = fabric::host::floatToBf16(v);
    std::memcpy(base + i * 2, &b, 2);
  } else {
    std::memcpy(base + i * 4, &v, 4);
  }
}

}  // namespace tide::bench
