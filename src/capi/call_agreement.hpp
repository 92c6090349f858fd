// Do the ranks issue the same collective, call by call? The collectives pair
// by call number alone: ranks that swap two groups of the same shape, or an
// all-gather's landing between two offsets each has used before, get each
// other's bytes in the wrong places without an error (group_agreement.hpp and
// landing_agreement.hpp catch only the first use of a group or an offset).
// With TIDE_CHECK_CALLS=1 (a debugging aid, like PyTorch's
// TORCH_DISTRIBUTED_DEBUG=DETAIL collective fingerprints) every collective
// first compares what it is across the ranks in a host-blocking exchange, and
// all ranks fail alike, naming each rank's call, where they differ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tide::capi {

enum class CallKind : uint8_t { kAllGather = 0, kReduceScatter = 1 };

// What this rank's collective number `callNumber` (counted over both kinds)
// is, as the words every rank contributes: two, as the other comparisons'
// (the ranks may meet in different exchanges when out of step). The landing
// offset enters as a 32-bit digest (reduce-scatters have none).
std::vector<uint64_t> callWords(CallKind kind, size_t groupIndex, uint64_t callNumber, int64_t landingOffset);

// Whether a rank's words, by their first, are a call comparison's.
bool isCallComparison(uint64_t firstWord);

// "" when every rank's words (rank-major) equal `mine`; else the message
// every rank raises: which ranks issued which call, and this rank's call.
std::string callDisagreement(const std::vector<uint64_t>& mine, int rank,
                             const std::vector<uint64_t>& everyRanksWords);

// TIDE_CHECK_CALLS: unset, "" or "0" off, "1" on; anything else is refused.
bool callChecksFromEnv();

}  // namespace tide::capi
