// TIDE-RS schedule (Sec. 4, 5.2-5.3): sub-slices, Latin-square placement,
// waves and rounds, outbox depth, staging sizes, and Level 1 pushes.
#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>

#include "tide/plan.hpp"

namespace tide::plan {
namespace {

constexpr int64_t kMaxWaves = int64_t{1} << 22;  // a plan's reduce-scatter waves, all passes
constexpr int64_t kElemAlign = 8;  // 32 B of fp32, 16 B of bf16: vector loads stay aligned

int64_t alignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
int mod(int a, int m) { return ((a % m) + m) % m; }

[[noreturn]] void stagingTooLarge() {
  throw PlanError(Reason::kTooLarge, "the group's reduce-scatter staging overflows 64 bits (too many nodes for "
                                     "this per-rank output size)");
}

// Non-negative byte counts of the staging area, refused (kTooLarge) past int64.
int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) stagingTooLarge();
  return r;
}

int64_t checkedSum(std::initializer_list<int64_t> terms) {
  int64_t r = 0;
  for (int64_t t : terms)
    if (__builtin_add_overflow(r, t, &r)) stagingTooLarge();
  return r;
}

// Wave-local copy of the inbox blocks a set of contributors writes on one
// destination node.
std::vector<InboxBlock> waveWrites(const std::vector<int>& contributors, int nodes, int gpus) {
  std::vector<InboxBlock> w;
  for (int c : contributors)
    for (int s = 0; s < gpus; ++s) w.push_back({landingGpu(s, c, nodes, gpus), s});
  return w;
}

// What would bring the wave count down, among what the caller can change.
std::string lessWaves(int passes, int waveWidth, int l) {
  std::string ways;
  if (passes > 1) ways += "fewer passes";
  if (waveWidth < l)
    ways += std::string(ways.empty() ? "" : " or ") + "a wider wave (at most L = " + std::to_string(l) + ")";
  return ways.empty() ? "fewer nodes" : ways;
}

}  // namespace

int contributorIndex(int destNode, int srcNode, int nodes) {
  return destNode == srcNode ? nodes : mod(destNode - srcNode, nodes);
}

int subSlice(int local, int contributor, int nodes, int gpusPerNode) {
  return mod(local + contributor % nodes, gpusPerNode);
}

int landingGpu(int sub, int contributor, int nodes, int gpusPerNode) {
  return mod(sub - contributor % nodes, gpusPerNode);
}

RsPlan makeRsPlan(const GroupLayout& g, const RsOptions& opt) {
  const int m = g.topo.nodes;
  const int l = g.topo.gpusPerNode;
  if (opt.passes < 1 || opt.passes > 64)
    throw PlanError(Reason::kBadOption, "passes must be in 1..64, got " + std::to_string(opt.passes));
  if (opt.waveWidth < 0 || opt.waveWidth > l)
    throw PlanError(Reason::kBadOption, "wave width must be in 1..L=" + std::to_string(l) +
                                            " (0: L), got " + std::to_string(opt.waveWidth));
  if (opt.roundWidth < 0)
    throw PlanError(Reason::kBadOption, "round width must be >= 1 (0: the solver's), got " +
                                            std::to_string(opt.roundWidth));
  if (opt.stagingSlots < 1 || opt.stagingSlots > 16)
    throw PlanError(Reason::kBadOption, "staging slots must be in 1..16, got " + std::to_string(opt.stagingSlots));
  // The CTA budgets are checked by solveSizing, which takes them.

  RsPlan plan;
  plan.mode = opt.mode;
  plan.railLane = opt.railLane && m > 1 && l == 1;
  plan.passes = opt.passes;
  plan.stagingSlots = opt.stagingSlots;  // L = 1 slots hold no bytes (no local peers), lane or not
  plan.subElems = alignUp((g.outElems + int64_t{l} * opt.passes - 1) / (int64_t{l} * opt.passes),
                          kElemAlign);
  plan.stagingSpan = plan.subElems * l * opt.passes;
  plan.waveWidth = opt.waveWidth == 0 ? l : opt.waveWidth;
  const int gradBytes = itemSize(g.gradDtype);

  const SolverResult solved =
      solveSizing(g.topo, gradBytes, g.outBytes(), plan.waveWidth, opt.passes, opt.calibration,
                  GivenCtas{opt.sumCtas, opt.landingCtas});
  plan.sumCtas = solved.sumCtas;
  plan.landingCtas = solved.landingCtas;  // 0 on one node: nothing lands from the network
  plan.nicSeconds = solved.nicSeconds;
  plan.roundWidth = m == 1 ? 0 : (opt.roundWidth > 0 ? std::min(opt.roundWidth, m - 1) : solved.roundWidth);

  if (m > 1) {
    plan.wavesPerPass = (m + plan.waveWidth - 1) / plan.waveWidth;
    // Each wave is a few hundred bytes of plan: 2^20 nodes at 64 passes would
    // take some 16 GiB before anything could refuse it.
    if (int64_t{plan.wavesPerPass} * opt.passes > kMaxWaves)
      throw PlanError(Reason::kTooLarge, std::to_string(int64_t{plan.wavesPerPass} * opt.passes) +
                                             " reduce-scatter waves (" + std::to_string(plan.wavesPerPass) +
                                             " per pass x " + std::to_string(opt.passes) + " passes), more than " +
                                             std::to_string(kMaxWaves) + ": " + lessWaves(opt.passes, plan.waveWidth, l));
    const int total = plan.wavesPerPass * opt.passes;
    plan.bufferGenerations = total == 1 ? 1 : 2;
    for (int q = 0; q < opt.passes; ++q) {
      for (int w = 0; w < plan.wavesPerPass; ++w) {
        RsWave wave;
        wave.index = q * plan.wavesPerPass + w;
        wave.pass = q;
        wave.generation = wave.index % plan.bufferGenerations;
        const int first = w * plan.waveWidth + 1;
        const int last = std::min(first + plan.waveWidth - 1, m);
        for (int c = first; c <= last; ++c) wave.contributors.push_back(c);
        wave.hasOwnNode = last == m;
        for (int c = first; c <= std::min(last, m - 1);) {
          RsRound round;
          for (int k = 0; k < plan.roundWidth && c <= std::min(last, m - 1); ++k, ++c)
            round.contributors.push_back(c);
          wave.rounds.push_back(round);
        }
        wave.writes = waveWrites(wave.contributors, m, l);
        plan.waves.push_back(std::move(wave));
      }
    }
    // Stale blocks: written by the previous wave on the same generation in
    // this call and not rewritten now. The last wave on each generation clears
    // what it read, so a call starts from an all-zero inbox.
    std::vector<int> previous(static_cast<size_t>(plan.bufferGenerations), -1);
    for (size_t w = 0; w < plan.waves.size(); ++w) {
      RsWave& wave = plan.waves[w];
      const int prev = previous[static_cast<size_t>(wave.generation)];
      if (prev >= 0) {
        std::set<std::pair<int, int>> now;
        for (const InboxBlock& b : wave.writes) now.insert({b.gpu, b.block});
        for (const InboxBlock& b : plan.waves[static_cast<size_t>(prev)].writes)
          if (!now.count({b.gpu, b.block})) wave.zero.push_back(b);
      }
      previous[static_cast<size_t>(wave.generation)] = static_cast<int>(w);
    }
    for (int last : previous)
      if (last >= 0) plan.waves[static_cast<size_t>(last)].clearAfterLanding = true;

    std::vector<int> roundSizes;
    for (const RsWave& wave : plan.waves)
      for (const RsRound& r : wave.rounds) roundSizes.push_back(static_cast<int>(r.contributors.size()));
    plan.networkRounds = static_cast<int>(roundSizes.size());
    if (plan.railLane) {
      plan.outboxBlocks = 0;  // rows go out from the gradients themselves
    } else if (opt.mode == Mode::kInPlace) {
      // A full outbox: at one pass no read waits for the network (the paper's claim, for its
      // one-pass default); at P passes a pass's reads still wait for the previous pass's sends.
      plan.outboxBlocks = m - 1;
    } else {
      int depth = 0;  // Eq. 9: two consecutive rounds
      for (size_t i = 0; i < roundSizes.size(); ++i)
        depth = std::max(depth, roundSizes[i] + (i > 0 ? roundSizes[i - 1] : 0));
      // Never past In-Place's full outbox, which already lets no read wait for the network (two rounds of
      // several waves or passes can hold more blocks than there are other nodes); a round still fits, as it
      // has at most M - 1 contributors.
      plan.outboxBlocks = std::min(depth, m - 1);
    }
  }

  // The layout keeps one rank's output below 2^40 elements, but an In-Place
  // outbox holds M-1 blocks of it: on 2^20 ranks that sum passes 2^63.
  // The rail lane's inbox block holds one row in the gradient dtype.
  plan.blockBytes = checkedMul(int64_t{l} * plan.subElems, plan.railLane ? gradBytes : 4);
  const int64_t rowsPerSender = m > 1 ? l : 1;
  plan.stagingSlotBytes = checkedMul(int64_t{l - 1} * rowsPerSender * plan.subElems, gradBytes);
  const int64_t inbox = m > 1 ? checkedMul(int64_t{plan.bufferGenerations} * l, plan.blockBytes) : 0;
  const int64_t outbox = checkedMul(2 * int64_t{plan.outboxBlocks}, plan.blockBytes);
  plan.spareBlocks = m > 1 && !plan.railLane ? std::min(opt.passes, 2) : 0;
  const int64_t spares = checkedMul(2 * int64_t{plan.spareBlocks}, plan.blockBytes);
  // One node has no Level 2, so nothing to push.
  // The rail lane lands by a sum from its own inbox: no Level 2 landing direction.
  plan.landing = m > 1 && !plan.railLane ? opt.landing : Landing::kPull;
  plan.pushAreaBytes = plan.landing == Landing::kPush ? inbox : 0;
  plan.stagingBytes = checkedSum({checkedMul(plan.stagingSlots, plan.stagingSlotBytes), inbox, outbox, spares,
                                  plan.pushAreaBytes});

  if (opt.validate) {
    std::vector<ValidationIssue> issues = validateRsPlan(g.topo, plan);
    if (!issues.empty()) throw PlanError(Reason::kPlanCollision, issues.front().message);
  }
  return plan;
}

ElemRange subSliceRange(const GroupLayout& g, const RsPlan& plan, int pass, int sub) {
  ElemRange r;
  r.begin = (int64_t{pass} * g.topo.gpusPerNode + sub) * plan.subElems;
  r.end = std::min(r.begin + plan.subElems, g.outElems);
  if (r.begin > g.outElems) r.begin = g.outElems;
  return r;
}

std::vector<CopyDesc> level1Pushes(const GroupLayout& g, const RsPlan& plan, int rank, int pass,
                                   int block, bool coalesced) {
  g.topo.checkRank(rank);
  const int m = g.topo.nodes;
  const int l = g.topo.gpusPerNode;
  const int node = g.topo.nodeOf(rank);
  const int me = g.topo.localOf(rank);
  const int64_t b = itemSize(g.gradDtype);
  const int rowsPerSender = m > 1 ? l : 1;
  // Out of range, a block or pass would alias another pass's sub-slice (one
  // node: block L is pass q+1's chunk 0) or read before the gradient.
  const int blocks = m > 1 ? m : l;
  if (pass < 0 || pass >= plan.passes || block < 0 || block >= blocks)
    throw PlanError(Reason::kBadOption, "level 1 pass " + std::to_string(pass) + " block " + std::to_string(block) +
                                            " outside passes 0.." + std::to_string(plan.passes - 1) + ", blocks 0.." +
                                            std::to_string(blocks - 1));
  std::vector<CopyDesc> out;
  for (int owner = 0; owner < l; ++owner) {
    if (owner == me) continue;
    // Which sub-slice the owner sums, and for which destination ranks.
    const int sub = m > 1 ? subSlice(owner, contributorIndex(block, node, m), m, l) : block;
    const int destNode = m > 1 ? block : node;
    const ElemRange range = subSliceRange(g, plan, pass, sub);
    const int firstRow = m > 1 ? 0 : owner;  // first destination local rank
    const int64_t senderBase = int64_t{stagedSenderIndex(me, owner)} * rowsPerSender * plan.subElems;
    for (size_t p = 0; p < g.params.size(); ++p) {
      const ParamLayout& pl = g.params[p];
      const int64_t a = std::max(range.begin, pl.outOffset);
      const int64_t e = std::min(range.end, pl.outOffset + pl.outElems);
      if (a >= e) continue;
      const int64_t total = pl.rows * pl.rowElems;  // gradient elements that exist
      int fullRows = 0;
      std::vector<std::pair<int, int64_t>> partial;  // (row, valid elements)
      for (int i = 0; i < rowsPerSender; ++i) {
        const int destRank = g.topo.rankOf(destNode, firstRow + i);
        const int64_t start = int64_t{destRank} * pl.outElems + (a - pl.outOffset);
        const int64_t valid = std::clamp<int64_t>(total - start, 0, e - a);
        if (valid == e - a && i == fullRows) ++fullRows;
        else if (valid > 0) partial.push_back({i, valid});
      }
      auto rowDesc = [&](int i, int64_t elems, int rows) {
        const int destRank = g.topo.rankOf(destNode, firstRow + i);
        CopyDesc d;
        d.src = {rank, Region::kGrad, static_cast<int>(p),
                 (int64_t{destRank} * pl.outElems + (a - pl.outOffset)) * b};
        d.dst = {g.topo.rankOf(node, owner), Region::kStaging, 0,
                 (senderBase + int64_t{i} * plan.subElems + (a - range.begin)) * b};
        d.width = elems * b;
        d.rows = rows;
        d.srcPitch = rows > 1 ? pl.outElems * b : 0;
        d.dstPitch = rows > 1 ? plan.subElems * b : 0;
        out.push_back(d);
      };
      if (coalesced && fullRows > 1) {
        rowDesc(0, e - a, fullRows);
      } else {
        for (int i = 0; i < fullRows; ++i) rowDesc(i, e - a, 1);
      }
      for (auto [i, valid] : partial) rowDesc(i, valid, 1);  // the short tail
    }
  }
  return out;
}

}  // namespace tide::plan
