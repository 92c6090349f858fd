#include "capi/landing_agreement.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

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

std::vector<uint64_t> landingWords(size_t groupIndex, int64_t offset) {
  if (groupIndex > 0xffffffff) throw std::invalid_argument("group index " + std::to_string(groupIndex) + " beyond 32 bits");
  return {kLandingTag | groupIndex, static_cast<uint64_t>(offset)};
}

std::string landingDisagreement(size_t groupIndex, int64_t offset, int rank,
                                const std::vector<uint64_t>& everyRanksWords) {
  const std::vector<uint64_t> mine = landingWords(groupIndex, offset);
  // Ranks by (group, offset), in order of the lowest rank of each kind.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<int>> kinds;
  std::vector<std::pair<uint64_t, uint64_t>> order;
  bool same = true;
  for (size_t r = 0; (r + 1) * kWords <= everyRanksWords.size(); ++r) {
    const uint64_t* w = everyRanksWords.data() + r * kWords;
    same = same && w[0] == mine[0] && w[1] == mine[1];
    // A rank in another exchange (out of step) is listed as such.
    const bool isLanding = (w[0] & kTagMask) == kLandingTag;
    const std::pair<uint64_t, uint64_t> kind = isLanding ? std::pair{w[0] & ~kTagMask, w[1]}
                                                         : std::pair{~uint64_t{0}, uint64_t{0}};
    auto [it, fresh] = kinds.try_emplace(kind);
    if (fresh) order.push_back(kind);
    it->second.push_back(static_cast<int>(r));
  }
  if (same && everyRanksWords.size() % kWords == 0) return "";
  std::string msg = "the ranks passed different landing offsets to an all-gather (peers write a rank's landing at "
                    "the offset of their own call, so every rank must pass the same one):";
  for (const auto& kind : order) {
    const std::vector<int>& ranks = kinds[kind];
    msg += ranks.size() > 1 ? " ranks " : " rank ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i > 0) msg += ',';
      msg += std::to_string(ranks[i]);
    }
    if (kind.first == ~uint64_t{0}) {
      msg += ": in another exchange (the ranks are out of step);";
      continue;
    }
    msg += ": group ";
    msg += std::to_string(kind.first);
    msg += " at offset ";
    msg += std::to_string(static_cast<int64_t>(kind.second));
    msg += ';';
  }
  msg += " this rank (";
  msg += std::to_string(rank);
  msg += ") passed offset ";
  msg += std::to_string(offset);
  msg += " to group ";
  msg += std::to_string(groupIndex);
  msg += ". The communicator is unusable: destroy it on every rank";
  return msg;
}

}  // namespace tide::capi
