// Do the ranks pass the same landing offset to a group's all-gather? Peers
// write this rank's landing at the offset of *their* call, so ranks that pass
// different offsets get each other's rows in the wrong places without an
// error. Comparing every call would put a host exchange into every
// all-gather; instead the ranks compare each (group, offset) pair the first
// time a rank uses it. Ranks that issue the same calls see a pair for the
// first time at the same call, so the exchange meets on every rank; a rank
// whose offset differs from another's either fails that exchange alike
// (both new) or waits in it until the deadline (the others had used theirs
// before) and fails stop with a message that says what it compared. What
// stays unseen: ranks that swap between offsets each of them has already
// used for that group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tide::capi {

// The offsets of one group's all-gathers that every rank has used alike.
class AgreedLandings {
 public:
  bool contains(int64_t offset) const;
  // Records `offset`; true when this makes the group's count reach
  // kManyLandings (the caller says once that new offsets keep costing exchanges).
  bool add(int64_t offset);
  size_t size() const { return offsets_.size(); }

  // A group whose landing moves this often is likely moving it every call.
  static constexpr size_t kManyLandings = 64;

 private:
  std::vector<int64_t> offsets_;  // few per group (the FSDP2 adapter: one), searched linearly
};

// Words every rank contributes for one comparison.
std::vector<uint64_t> landingWords(size_t groupIndex, int64_t offset);

// Whether a rank's words, by their first, are a landing comparison's: a rank
// out of step may bring them to another comparison's exchange (the groups').
bool isLandingComparison(uint64_t firstWord);

// "" when every rank's words (rank-major, as the fabric's gather returns
// them) equal this rank's; else the message every rank raises: which ranks
// passed which offset to which group.
std::string landingDisagreement(size_t groupIndex, int64_t offset, int rank,
                                const std::vector<uint64_t>& everyRanksWords);

}  // namespace tide::capi
