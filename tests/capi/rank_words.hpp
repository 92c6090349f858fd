// Every rank's words of one comparison, rank-major, as the fabric's gather returns them: for the
// C API comparisons' tests, which build them by hand instead of from ranks.
#pragma once

#include <cstdint>
#include <vector>

namespace tide::capi {

inline std::vector<uint64_t> concat(const std::vector<std::vector<uint64_t>>& perRank) {
  std::vector<uint64_t> all;
  for (const auto& w : perRank) all.insert(all.end(), w.begin(), w.end());
  return all;
}

}  // namespace tide::capi
