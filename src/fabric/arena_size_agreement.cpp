#include "fabric/arena_size_agreement.hpp"

#include <algorithm>

#include "fabric/rank_kinds.hpp"

namespace tide::fabric {

std::string arenaSizeDisagreement(const std::string& who, const std::vector<uint64_t>& everyRanks) {
  if (everyRanks.empty() || std::all_of(everyRanks.begin(), everyRanks.end(),
                                        [&](uint64_t b) { return b == everyRanks.front(); }))
    return "";
  return who + ": the ranks asked for different arena sizes (the arena is symmetric: every rank must ask for the "
               "same size):" +
         describeRankKinds(everyRanks, [](uint64_t bytes) { return std::to_string(bytes) + " bytes"; });
}

}  // namespace tide::fabric
