// The frames of the CUDA fabric's word gather over NCCL. An NCCL all-gather
// needs the same count on every rank: ranks out of step, each in a different
// exchange with a different number of words, would hang in it or read a
// peer's stale words. So every rank sends one frame of a fixed size, its word
// count first, and every rank compares the counts after the gather and fails
// alike, naming the ranks of each count. Host code, tested without CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tide::fabric {

// One rank's frame: its word count, then at most kGatherFrameWords - 1 words, zero-padded.
inline constexpr size_t kGatherFrameWords = 5;

// The frame of `mine`; a usage error (naming `what`) above kGatherFrameWords - 1 words.
std::vector<uint64_t> gatherFrame(const std::vector<uint64_t>& mine, const std::string& what);

// Every rank's words, rank-major, from `ranks` frames as the gather returned
// them; a usage error, naming `what` and the ranks of each count, when a
// frame's count is not `wordsPerRank` (every rank sees the same frames and
// fails alike), or `wordsPerRank` is more than a frame holds.
std::vector<uint64_t> wordsOfGatheredFrames(const std::vector<uint64_t>& frames, int ranks, size_t wordsPerRank,
                                            const std::string& what);

}  // namespace tide::fabric
