// Fault injection (Sec. 3.2, App. E): each kind breaks one safety condition.
// Every injected fault must be detected, by a wrong result or a deadline.
#pragma once

#include <string>
#include <vector>

namespace tide::collectives {

enum class Fault {
  kNone = 0,
  kDropCredit,            // AG: a stage credit is never sent (rail-lane RS: an inbox credit)
  kSkipCompletionFence,   // AG: the caller does not wait for peers' landing writes
  kCallOrder,             // ranks issue the groups' calls in different orders (test-driven)
  kCorruptStagedChunk,    // RS: a staged chunk is overwritten after its push
  kStallPeer,             // a rank stalls past every deadline
  kSkipStaleZeroing,      // RS: stale inbox blocks are not zeroed before landing
  kReuseOutboxEarly,      // RS: an outbox block is refilled before its send completes
  kWrongLandingOffset,    // AG: one shard lands one row off
  kLoseSignal,            // a remote signal is dropped
  kDuplicatePut,          // a rail put is replayed late
  kReleaseGradsEarly,     // RS: gradients are released (overwritten) before read completion
};

// How long a fault that needs a lost race stalls the queue that would win it.
inline constexpr double kFaultRaceSeconds = 0.3;

const char* faultName(Fault f);
Fault parseFault(const std::string& name);  // throws std::invalid_argument
std::vector<Fault> allFaults();             // every kind but kNone

struct FaultConfig {
  Fault kind = Fault::kNone;
  int rank = 0;  // the rank that misbehaves
};

}  // namespace tide::collectives
