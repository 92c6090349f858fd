#include "fabric/gather_frames.hpp"

#include <algorithm>

#include "fabric/rank_kinds.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric {

std::vector<uint64_t> gatherFrame(const std::vector<uint64_t>& mine, const std::string& what) {
  if (mine.size() > kGatherFrameWords - 1)
    throw FabricError(FabricError::Kind::kUsage, what + ": a gather of " + std::to_string(mine.size()) +
                                                     " words (at most " + std::to_string(kGatherFrameWords - 1) + ")");
  std::vector<uint64_t> frame(kGatherFrameWords, 0);
  frame[0] = mine.size();
  std::copy(mine.begin(), mine.end(), frame.begin() + 1);
  return frame;
}

std::vector<uint64_t> wordsOfGatheredFrames(const std::vector<uint64_t>& frames, int ranks, size_t wordsPerRank,
                                            const std::string& what) {
  // More words than a frame holds would be read past each frame's end (into the next rank's, or past the last).
  if (wordsPerRank > kGatherFrameWords - 1)
    throw FabricError(FabricError::Kind::kUsage, what + ": " + std::to_string(wordsPerRank) +
                                                     " words per rank, where a frame holds at most " +
                                                     std::to_string(kGatherFrameWords - 1));
  if (ranks < 0 || frames.size() != static_cast<size_t>(ranks) * kGatherFrameWords)
    throw FabricError(FabricError::Kind::kUsage, what + ": " + std::to_string(frames.size()) +
                                                     " gathered words are not " + std::to_string(ranks) + " frames");
  std::vector<uint64_t> counts;
  std::vector<uint64_t> all;
  all.reserve(static_cast<size_t>(ranks) * wordsPerRank);
  for (int r = 0; r < ranks; ++r) {
    const auto at = frames.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * kGatherFrameWords);
    counts.push_back(*at);
    if (*at == wordsPerRank) all.insert(all.end(), at + 1, at + 1 + static_cast<std::ptrdiff_t>(wordsPerRank));
  }
  if (std::any_of(counts.begin(), counts.end(), [&](uint64_t c) { return c != wordsPerRank; }))
    throw FabricError(FabricError::Kind::kUsage,
                      what + ": the ranks gathered different numbers of words (their calls are out of step, each "
                             "in a different exchange):" +
                          describeRankKinds(counts, [](uint64_t c) { return std::to_string(c) + " words"; }));
  return all;
}

}  // namespace tide::fabric
