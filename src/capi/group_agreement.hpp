// Do the ranks of a communicator register the same groups? The collectives
// never compare plans: each rank runs its own, and peers' writes land where
// the writer's plan says. Groups that differ across ranks would give wrong
// landings and sums without an error, so before a group's first collective
// the ranks exchange a digest of every group registered so far and all fail
// alike, naming the ranks that differ, when the digests do.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tide/plan.hpp"

namespace tide::capi {

// 64-bit digest of what the protocol depends on in `plan` (layouts, rounds,
// waves, passes, landing, staging), not of rank-local choices (the sum and
// landing CTA budgets, the solver's time estimate), which ranks may pick apart.
uint64_t protocolDigest(const plan::Plan& plan);

// A registered group as the comparison sees it: its plan, and its
// protocolDigest (computed once, when the group is registered).
struct GroupDigest {
  const plan::Plan* plan = nullptr;
  uint64_t digest = 0;
};

// Words every rank contributes: the group count, its top bit set where this
// rank compares every call (TIDE_CHECK_CALLS, call_agreement.hpp: ranks that
// set it differently would meet in different exchanges at every call, so they
// fail at their first collective instead), then a digest of every group's
// protocolDigest in registration order.
std::vector<uint64_t> groupsDigest(const std::vector<GroupDigest>& groups, bool callChecks);

// "" when every rank's words (rank-major, as `gather` returns them) equal
// this rank's; else the message every rank raises: which ranks registered
// how many groups under which digest, and this rank's groups in words.
std::string groupsDisagreement(const std::vector<GroupDigest>& groups, bool callChecks, int rank,
                               const std::vector<uint64_t>& everyRanksWords);

}  // namespace tide::capi
