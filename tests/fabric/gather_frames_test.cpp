// The CUDA fabric's gather frames (fabric/gather_frames.hpp), without CUDA:
// the frames a gather of ranks in step returns, and the failure of ranks out
// of step, which every rank must raise alike.
#include "fabric/gather_frames.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "expect_usage_error.hpp"
#include "test_seed.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric {
namespace {

// What the NCCL all-gather returns: the ranks' frames, rank-major.
std::vector<uint64_t> gathered(const std::vector<std::vector<uint64_t>>& perRank) {
  std::vector<uint64_t> frames;
  for (const auto& words : perRank) {
    const std::vector<uint64_t> f = gatherFrame(words, "test");
    frames.insert(frames.end(), f.begin(), f.end());
  }
  return frames;
}

TEST(GatherFrames, RanksInStepGetEveryRanksWordsRankMajor) {
  TIDE_TRACED_SEED(seed);
  std::mt19937_64 rng(seed);
  for (size_t n = 0; n < kGatherFrameWords; ++n) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      std::vector<std::vector<uint64_t>> perRank(static_cast<size_t>(ranks));
      std::vector<uint64_t> expected;
      for (auto& words : perRank) {
        for (size_t i = 0; i < n; ++i) words.push_back(rng());
        expected.insert(expected.end(), words.begin(), words.end());
      }
      EXPECT_EQ(wordsOfGatheredFrames(gathered(perRank), ranks, n, "test"), expected) << n << " words, " << ranks;
    }
  }
}

TEST(GatherFrames, EveryFrameHasTheSameSize) {
  // The NCCL all-gather's count: the same for every rank, whatever it gathers.
  EXPECT_EQ(gatherFrame({}, "t").size(), kGatherFrameWords);
  EXPECT_EQ(gatherFrame({1, 2, 3, 4}, "t").size(), kGatherFrameWords);
  EXPECT_EQ(gatherFrame({9, 8}, "t")[0], 2u);
}

TEST(GatherFrames, TooManyWordsAreRefusedBeforeTheGather) {
  expectUsageError([] { gatherFrame(std::vector<uint64_t>(kGatherFrameWords, 7), "cuda fabric: rank 1: x"); },
                   "cuda fabric: rank 1: x: a gather of 5 words (at most 4)");
}

TEST(GatherFrames, RanksOutOfStepFailAlikeNamingTheRanksOfEachCount) {
  // Rank 1 compares where its user memory ends (1 word) where ranks 0 and 2 compare their groups (2 words):
  // each rank sees the same frames, and each fails with the same listing.
  const std::vector<uint64_t> frames = gathered({{3, 0xabc}, {4096}, {3, 0xabc}});
  for (const size_t mine : {size_t{2}, size_t{1}}) {
    try {
      wordsOfGatheredFrames(frames, 3, mine, "cuda fabric: rank r: comparing");
      FAIL() << "no error for a rank gathering " << mine;
    } catch (const FabricError& e) {
      EXPECT_EQ(e.kind(), FabricError::Kind::kUsage);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("cuda fabric: rank r: comparing: the ranks gathered different numbers of words"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find(" ranks 0,2: 2 words; rank 1: 1 words;"), std::string::npos) << msg;
    }
  }
}

// A frame holds at most kGatherFrameWords - 1 words: more words per rank are
// refused, not read past each frame's end, even where the frames' counts
// claim them (no gatherFrame writes such a count; a corrupted one could).
TEST(GatherFrames, MoreWordsPerRankThanAFrameHoldsAreRefused) {
  std::vector<uint64_t> frames(2 * kGatherFrameWords, 9);
  frames[0] = frames[kGatherFrameWords] = kGatherFrameWords;
  expectUsageError([&] { wordsOfGatheredFrames(frames, 2, kGatherFrameWords, "cuda fabric: rank 0: x"); },
                   "cuda fabric: rank 0: x: 5 words per rank, where a frame holds at most 4");
}

TEST(GatherFrames, FramesOfAnotherRankCountAreRefused) {
  EXPECT_THROW(wordsOfGatheredFrames(gathered({{1}, {2}}), 3, 1, "t"), FabricError);
}

}  // namespace
}  // namespace tide::fabric
