#include "capi/landing_agreement.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "fabric/rank_kinds.hpp"

namespace tide::capi {

namespace {
// Two words per rank, as the groups' comparison has (group_agreement.hpp): an
// NCCL all-gather whose ranks disagree on its size would not fail cleanly, and
// ranks out of step may meet in different exchanges. The first word's high
// half, "TLND", tells a landing comparison from the groups' (whose first
// word is a group count) in a message; its low half is the group's index.
constexpr uint64_t kLandingTag = uint64_t{0x544c4e44} << 32;
constexpr uint64_t kTagMask = ~uint64_t{0xffffffff};
constexpr size_t kWords = 2;
}  // namespace

bool AgreedLandings::contains(int64_t offset) const {
  return std::find(offsets_.begin(), offsets_.end(), offset) != offsets_.end();
}

bool AgreedLandings::add(int64_t offset) {
  if (contains(offset)) return false;
  offsets_.push_back(offset);
  return offsets_.size() == kManyLandings;
}

bool isLandingComparison(uint64_t firstWord) { return (firstWord & kTagMask) == kLandingTag; }

std::vector<uint64_t> landingWords(size_t groupIndex, int64_t offset) {
  if (groupIndex > 0xffffffff) throw std::invalid_argument("group index " + std::to_string(groupIndex) + " beyond 32 bits");
  return {kLandingTag | groupIndex, static_cast<uint64_t>(offset)};
}

std::string landingDisagreement(size_t groupIndex, int64_t offset, int rank,
                                const std::vector<uint64_t>& everyRanksWords) {
  const std::vector<uint64_t> mine = landingWords(groupIndex, offset);
  // What each rank compared: (group, offset), or, for a rank in another exchange (out of step), none.
  using Kind = std::optional<std::pair<uint64_t, int64_t>>;
  std::vector<Kind> perRank;
  bool same = everyRanksWords.size() % kWords == 0;
  for (size_t r = 0; (r + 1) * kWords <= everyRanksWords.size(); ++r) {
    const uint64_t* w = everyRanksWords.data() + r * kWords;
    same = same && w[0] == mine[0] && w[1] == mine[1];
    perRank.push_back(isLandingComparison(w[0]) ? Kind{{w[0] & ~kTagMask, static_cast<int64_t>(w[1])}}
                                                       : Kind{});
  }
  if (same) return "";
  return "the ranks passed different landing offsets to an all-gather (peers write a rank's landing at the offset "
         "of their own call, so every rank must pass the same one):" +
         fabric::describeRankKinds(perRank,
                                   [](const Kind& k) {
                                     return k ? "group " + std::to_string(k->first) + " at offset " +
                                                    std::to_string(k->second)
                                              : std::string("in another exchange (the ranks are out of step)");
                                   }) +
         " this rank (" + std::to_string(rank) + ") passed offset " + std::to_string(offset) + " to group " +
         std::to_string(groupIndex) + ". The communicator is unusable: destroy it on every rank";
}

}  // namespace tide::capi
