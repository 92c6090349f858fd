#include "capi/call_agreement.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "capi/landing_agreement.hpp"
#include "fabric/fnv1a.hpp"
#include "fabric/rank_kinds.hpp"

namespace tide::capi {
namespace {

// The first word's high half, "TCAL", tells a call comparison from the
// groups' (a group count) and the landings' ("TLND"); bit 31 is the kind, the
// low 31 bits the group's index. The second word: the call number's low 32
// bits above the landing offset's digest.
constexpr uint64_t kCallTag = uint64_t{0x5443414c} << 32;
constexpr uint64_t kTagMask = ~uint64_t{0xffffffff};
constexpr uint64_t kKindBit = uint64_t{1} << 31;
constexpr uint64_t kMaxGroupIndex = kKindBit - 1;
constexpr size_t kWords = 2;

uint32_t offsetDigest(int64_t offset) {
  const uint64_t h = fabric::fnv1a(std::to_string(offset));
  return static_cast<uint32_t>(h ^ (h >> 32));
}

// What a rank's two words say it was doing: its call, or the other exchange it was in.
std::string describe(const uint64_t* w) {
  if (!isCallComparison(w[0])) {
    return isLandingComparison(w[0]) ? std::string("in another exchange (comparing a landing offset: the ranks are "
                                                   "out of step)")
                                     : std::string("in another exchange (comparing the registered groups: the ranks "
                                                   "are out of step)");
  }
  const bool allGather = (w[0] & kKindBit) == 0;
  std::string s = "call " + std::to_string(w[1] >> 32) + ", " + (allGather ? "all-gather" : "reduce-scatter") +
                  " of group " + std::to_string(w[0] & kMaxGroupIndex);
  if (allGather) {
    char landing[16];
    std::snprintf(landing, sizeof landing, "%08x", static_cast<uint32_t>(w[1]));
    s += " (landing digest " + std::string(landing) + ")";
  }
  return s;
}

}  // namespace

bool isCallComparison(uint64_t firstWord) { return (firstWord & kTagMask) == kCallTag; }

std::vector<uint64_t> callWords(CallKind kind, size_t groupIndex, uint64_t callNumber, int64_t landingOffset) {
  if (groupIndex > kMaxGroupIndex)
    throw std::invalid_argument("group index " + std::to_string(groupIndex) + " beyond 31 bits");
  const uint64_t first = kCallTag | (kind == CallKind::kReduceScatter ? kKindBit : 0) | groupIndex;
  const uint32_t landing = kind == CallKind::kAllGather ? offsetDigest(landingOffset) : 0;
  return {first, ((callNumber & 0xffffffff) << 32) | landing};
}

std::string callDisagreement(const std::vector<uint64_t>& mine, int rank,
                             const std::vector<uint64_t>& everyRanksWords) {
  bool same = everyRanksWords.size() % kWords == 0;
  // Ranks are grouped by what they read as (describeRankKinds), so ranks in
  // the same other exchange are listed together.
  std::vector<std::string> described;
  for (size_t r = 0; (r + 1) * kWords <= everyRanksWords.size(); ++r) {
    const uint64_t* w = everyRanksWords.data() + r * kWords;
    same = same && w[0] == mine[0] && w[1] == mine[1];
    described.push_back(describe(w));
  }
  if (same) return "";
  return "the ranks issued different collectives (TIDE_CHECK_CALLS=1 compares every call; every rank must issue "
         "the same collectives, on the same groups and landings, in the same order):" +
         fabric::describeRankKinds(described, [](const std::string& s) { return s; }) + " this rank (" +
         std::to_string(rank) + ") issued " + describe(mine.data()) +
         ". The communicator is unusable: destroy it on every rank";
}

bool callChecksFromEnv() {
  const char* v = std::getenv("TIDE_CHECK_CALLS");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") != 0) throw std::invalid_argument(std::string("TIDE_CHECK_CALLS=") + v + " (want 0 or 1)");
  return true;
}

}  // namespace tide::capi
