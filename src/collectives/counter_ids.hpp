// Counter ids of the collectives' protocol. Every counter has one writer; its
// value is a cumulative call or step count, so nothing is ever reset.
#pragma once

namespace tide::collectives::ids {

inline constexpr int kMaxLocal = 8;
inline constexpr int kMaxRounds = 32;
inline constexpr int kMaxScatterGroups = 64;
inline constexpr int kMaxNodes = 1024;

// TIDE-AG
inline constexpr int kAgReady = 0;                              // [writer local]: its landing is free
inline constexpr int kAgDone = kAgReady + kMaxLocal;            // [writer local]: its writes into my landing are done
inline constexpr int kAgHead = kAgDone + kMaxLocal;             // [round]: head of the round arrived
inline constexpr int kAgGroup = kAgHead + kMaxRounds;           // [scatter group]: its slots arrived
inline constexpr int kAgLead = kAgGroup + kMaxScatterGroups;    // [round]: my target holds the previous round
inline constexpr int kAgCredit = kAgLead + kMaxRounds;          // [round]: my target's stage is free again
// TIDE-RS
inline constexpr int kRsFree = kAgCredit + kMaxRounds;          // [owner local]: it consumed my staged chunk
inline constexpr int kRsArrive = kRsFree + kMaxLocal;           // [sender local]: its chunk is in my staging
inline constexpr int kRsSent = kRsArrive + kMaxLocal;           // [bank] (self): outbox blocks sent
inline constexpr int kRsSpareFree = kRsSent + 2;                // [bank] (self): own-node spares consumed
inline constexpr int kRsCredit = kRsSpareFree + 2;              // [dest node]: its inbox takes my next wave
inline constexpr int kRsInbox = kRsCredit + kMaxNodes;          // [source node]: its block arrived in my inbox
inline constexpr int kRsArrived = kRsInbox + kMaxNodes;         // [local]: its inbox holds the wave
inline constexpr int kRsLanded = kRsArrived + kMaxLocal;        // [local]: it landed the wave
// TIDE-AG, two-sided rails
inline constexpr int kAgStageFree = kRsLanded + kMaxLocal;      // (self): my copies consumed the call's stage
// TIDE-AG on the rail lane (L = 1): rounds put into the landings themselves
inline constexpr int kAgLaneFree = kAgStageFree + 1;            // [round]: my target's landing is free for the call
inline constexpr int kAgLaneRows = kAgLaneFree + kMaxRounds;    // [round]: the round's rows are in my landing
inline constexpr int kEnd = kAgLaneRows + kMaxRounds;

}  // namespace tide::collectives::ids
