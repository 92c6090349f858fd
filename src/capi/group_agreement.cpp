#include "capi/group_agreement.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "capi/call_agreement.hpp"
#include "capi/landing_agreement.hpp"
#include "fabric/fnv1a.hpp"
#include "fabric/rank_kinds.hpp"
#include "plan/plan_json.hpp"

namespace tide::capi {

namespace {

using fabric::fnv1a;

std::string hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string describe(const GroupDigest& group, size_t index) {
  const plan::Plan& p = *group.plan;
  const plan::GroupLayout& g = p.group;
  return "group " + std::to_string(index) + ": " + std::to_string(g.params.size()) + " parameters, " +
         plan::dtypeName(g.agDtype) + " gathered, " + plan::dtypeName(g.gradDtype) + " gradients, shard " +
         std::to_string(g.shardBytes) + " bytes, " + plan::modeName(p.rs.mode) + ", " +
         std::to_string(p.rs.passes) + " pass(es), round width " + std::to_string(p.rs.roundWidth) +
         " (digest " + hex(group.digest) + ")";
}

}  // namespace

uint64_t protocolDigest(const plan::Plan& plan) {
  // The plan's JSON summary holds most quantities the protocol runs on (new
  // fields there join the digest by themselves); what it leaves out is added
  // below, and what a rank may choose alone is taken out.
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(plan::planToJson(plan, -1));
  j.erase("memory");
  for (const char* local : {"sum_ctas", "landing_ctas", "nic_seconds"}) j["reduce_scatter"].erase(local);
  // All-gather options the summary leaves out: the rounds' head/tail split
  // sets a counter mark, and the scatter grouping the copies a peer waits for.
  const plan::AgOptions& ag = plan.ag.options;
  nlohmann::ordered_json heads = nlohmann::ordered_json::array();
  for (const plan::AgRound& r : plan.ag.rounds) heads.push_back(r.headBytes);
  j["all_gather_options"] = {{"head_bytes", ag.headBytes},
                             {"min_strided_run", ag.minStridedRun},
                             {"last_round_groups", ag.lastRoundGroups},
                             {"round_head_bytes", heads}};
  return fnv1a(j.dump());
}

namespace {
constexpr uint64_t kCallChecksBit = uint64_t{1} << 63;
}  // namespace

std::vector<uint64_t> groupsDigest(const std::vector<GroupDigest>& groups, bool callChecks) {
  uint64_t h = fnv1a("tide groups");
  for (const GroupDigest& g : groups) h = fnv1a(hex(g.digest), h);
  return {static_cast<uint64_t>(groups.size()) | (callChecks ? kCallChecksBit : 0), h};
}

std::string groupsDisagreement(const std::vector<GroupDigest>& groups, bool callChecks, int rank,
                               const std::vector<uint64_t>& everyRanksWords) {
  const std::vector<uint64_t> mine = groupsDigest(groups, callChecks);
  const size_t n = mine.size();
  std::vector<std::vector<uint64_t>> perRank;
  bool same = true;
  for (size_t r = 0; (r + 1) * n <= everyRanksWords.size(); ++r) {
    perRank.emplace_back(everyRanksWords.begin() + static_cast<std::ptrdiff_t>(r * n),
                         everyRanksWords.begin() + static_cast<std::ptrdiff_t>((r + 1) * n));
    same = same && perRank.back() == mine;
  }
  if (same) return "";
  // A rank out of step may have brought a landing comparison to this exchange
  // (landing_agreement.hpp): its words are no group count and digest.
  auto inAnotherExchange = [](const std::vector<uint64_t>& words) {
    return isLandingComparison(words[0]) || isCallComparison(words[0]);
  };
  const bool outOfStep = std::any_of(perRank.begin(), perRank.end(), inAnotherExchange);
  // Ranks whose words differ only in the call checks' bit registered the same groups.
  const bool checksDiffer = !outOfStep && std::all_of(perRank.begin(), perRank.end(), [&](const auto& words) {
    return (words[0] & ~kCallChecksBit) == (mine[0] & ~kCallChecksBit) && words[1] == mine[1];
  });
  std::string msg =
      outOfStep      ? "the ranks are out of step: where this rank compared its registered groups, another compared a "
                       "landing offset or a call (every rank must issue the same collectives in the same order):"
      : checksDiffer ? "the ranks set TIDE_CHECK_CALLS differently (a rank that compares every call meets its peers "
                       "in an exchange at every collective: set it alike on every rank):"
                     : "the ranks registered different groups before this collective (every rank must register the "
                       "same groups in the same order; the ranks do not compare plans in their collectives, which "
                       "would pair wrong landings and sums):";
  msg += fabric::describeRankKinds(perRank, [](const std::vector<uint64_t>& words) {
    if (isLandingComparison(words[0]))
      return std::string("in another exchange (comparing a landing offset: the ranks are out of step)");
    if (isCallComparison(words[0]))
      return std::string("in another exchange (comparing a call, TIDE_CHECK_CALLS=1: the ranks are out of step)");
    std::string kind = std::to_string(words[0] & ~kCallChecksBit);
    kind += " group(s), digest ";
    kind += hex(words[1]);
    if (words[0] & kCallChecksBit) kind += ", comparing every call";
    return kind;
  });
  msg += " this rank (" + std::to_string(rank) + ") registered";
  if (groups.empty()) msg += " none";
  constexpr size_t kListed = 8;
  for (size_t i = 0; i < groups.size() && i < kListed; ++i) {
    msg += i > 0 ? "; " : " ";
    msg += describe(groups[i], i);
  }
  if (groups.size() > kListed) msg += "; and " + std::to_string(groups.size() - kListed) + " more";
  return msg + ". The communicator is unusable: destroy it on every rank";
}

}  // namespace tide::capi
