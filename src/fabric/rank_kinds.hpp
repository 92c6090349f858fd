// Which ranks reported what: the part of a "the ranks disagree" message that
// lists the ranks of each kind, as " ranks 0,2: <kind>; rank 1: <kind>;",
// kinds in order of their lowest rank. Shared by every cross-rank comparison
// (the arena size at bootstrap, the C API's groups and landing offsets), so
// that their messages read alike.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace tide::fabric {

// perRank[r]: what rank r reported (equality-comparable); describe(kind) -> std::string.
template <typename Kind, typename Describe>
std::string describeRankKinds(const std::vector<Kind>& perRank, Describe&& describe) {
  std::vector<std::pair<Kind, std::vector<int>>> kinds;  // few kinds: searched linearly
  for (size_t r = 0; r < perRank.size(); ++r) {
    auto it = kinds.begin();
    while (it != kinds.end() && !(it->first == perRank[r])) ++it;
    if (it == kinds.end()) it = kinds.insert(kinds.end(), {perRank[r], {}});
    it->second.push_back(static_cast<int>(r));
  }
  std::string out;
  for (const auto& [kind, ranks] : kinds) {
    out += ranks.size() > 1 ? " ranks " : " rank ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(ranks[i]);
    }
    out += ": ";
    out += describe(kind);
    out += ';';
  }
  return out;
}

}  // namespace tide::fabric
