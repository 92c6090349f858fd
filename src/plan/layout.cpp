// Group geometry of Sec. 2.1: D_p, K_p, R_p, s_p, o_p, S and the landing map.
#include <string>

#include "tide/plan.hpp"

namespace tide::plan {

namespace {
// Keeps every byte count (N padded rows, x4 for fp32, x N ranks) far from
// int64 overflow.
constexpr int64_t kMaxElems = int64_t{1} << 40;
}  // namespace

int64_t ParamLayout::validRows(int rank) const {
  // A negative rank would count a whole shard of rows before the parameter.
  if (rank < 0) throw PlanError(Reason::kBadTopology, "rank " + std::to_string(rank) + " out of range");
  int64_t begin = static_cast<int64_t>(rank) * shardRows;
  if (begin >= rows) return 0;
  int64_t end = begin + shardRows;
  return (end > rows ? rows : end) - begin;
}

int64_t GroupLayout::landing(int p, int rank) const {
  // A PlanError, as every other bad index into a plan gets, not std::out_of_range.
  if (p < 0 || static_cast<size_t>(p) >= params.size())
    throw PlanError(Reason::kBadOption, "parameter " + std::to_string(p) + " out of range (the group has " +
                                            std::to_string(params.size()) + ")");
  const ParamLayout& pl = params[static_cast<size_t>(p)];
  topo.checkRank(rank);
  return pl.shardOffset * topo.ranks() + static_cast<int64_t>(rank) * pl.shardBytes;
}

Reason checkGroup(const std::vector<ParamSpec>& specs, std::string* detail) {
  auto say = [&](Reason r, const std::string& d) {
    if (detail) *detail = d;
    return r;
  };
  if (specs.empty()) return say(Reason::kEmptyGroup, "the group has no parameters");
  if (specs.size() > static_cast<size_t>(kMaxParams))
    return say(Reason::kTooManyParams, "the group has " + std::to_string(specs.size()) +
                                           " parameters (at most " + std::to_string(kMaxParams) +
                                           ")");
  for (size_t p = 0; p < specs.size(); ++p) {
    const ParamSpec& s = specs[p];
    const std::string name = "parameter " + std::to_string(p);
    if (s.dtype != DType::kBF16 && s.dtype != DType::kFP32)
      return say(Reason::kUnsupportedDtype, name + " has an unsupported dtype");
    if (s.dtype != specs[0].dtype)
      return say(Reason::kMixedDtypes, name + " is " + dtypeName(s.dtype) + ", parameter 0 is " +
                                           dtypeName(specs[0].dtype));
    if (s.shape.empty()) return say(Reason::kZeroDimTensor, name + " is 0-d");
    // Extents first: a zero anywhere makes the tensor empty whatever the others are
    // (a [2^40, 2, 0] shape is empty, not too large).
    for (int64_t d : s.shape) {
      if (d < 0) return say(Reason::kEmptyParam, name + " has a negative extent");
      if (d == 0) return say(Reason::kEmptyParam, name + " has zero elements");
    }
    int64_t numel = 1;
    for (int64_t d : s.shape) {
      if (numel > kMaxElems / d) return say(Reason::kTooLarge, name + " has more than 2^40 elements");
      numel *= d;
    }
  }
  if (detail) detail->clear();
  return Reason::kOk;
}

GroupLayout makeGroupLayout(const Topology& topo, const std::vector<ParamSpec>& specs,
                            DType gradDtype) {
  std::string detail;
  Reason r = checkGroup(specs, &detail);
  if (r != Reason::kOk) throw PlanError(r, detail);
  GroupLayout g;
  g.topo = Topology::make(topo.nodes, topo.gpusPerNode);
  g.agDtype = specs[0].dtype;
  g.gradDtype = gradDtype;
  const int64_t n = topo.ranks();
  const int64_t b = itemSize(g.agDtype);
  for (const ParamSpec& s : specs) {
    ParamLayout pl;
    pl.rows = s.shape[0];
    pl.rowElems = 1;
    for (size_t i = 1; i < s.shape.size(); ++i) pl.rowElems *= s.shape[i];
    pl.shardRows = (pl.rows + n - 1) / n;  // FSDP2: torch.chunk's ceil, tail padding only
    pl.shardBytes = pl.shardRows * pl.rowElems * b;
    pl.shardOffset = g.shardBytes;
    pl.outElems = pl.shardRows * pl.rowElems;
    pl.outOffset = g.outElems;
    g.shardBytes += pl.shardBytes;
    g.outElems += pl.outElems;
    g.params.push_back(pl);
    if (g.outElems > kMaxElems)
      throw PlanError(Reason::kTooLarge, "the group has more than 2^40 elements per rank");
  }
  if (g.unshardedBytes() / n != g.shardBytes || g.shardBytes > (int64_t{1} << 50))
    throw PlanError(Reason::kTooLarge, "the group's unsharded size overflows");
  return g;
}

}  // namespace tide::plan
