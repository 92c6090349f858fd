// Names, dtypes and the M x L topology.
#include <string>

#include "tide/plan.hpp"

namespace tide::plan {

const char* reasonName(Reason r) {
  switch (r) {
    case Reason::kOk: return "ok";
    case Reason::kBadTopology: return "bad_topology";
    case Reason::kEmptyGroup: return "empty_group";
    case Reason::kTooManyParams: return "too_many_params";
    case Reason::kMixedDtypes: return "mixed_dtypes";
    case Reason::kUnsupportedDtype: return "unsupported_dtype";
    case Reason::kZeroDimTensor: return "zero_dim_tensor";
    case Reason::kEmptyParam: return "empty_param";
    case Reason::kBadOption: return "bad_option";
    case Reason::kPlanCollision: return "plan_collision";
    case Reason::kBadCalibration: return "bad_calibration";
    case Reason::kTooLarge: return "too_large";
  }
  return "unknown";
}

int itemSize(DType t) { return t == DType::kBF16 ? 2 : 4; }

const char* dtypeName(DType t) { return t == DType::kBF16 ? "bf16" : "fp32"; }

DType parseDtype(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  if (s == "fp32" || s == "float32") return DType::kFP32;
  throw PlanError(Reason::kUnsupportedDtype, "unsupported dtype '" + s + "' (bf16 or fp32)");
}

const char* modeName(Mode m) { return m == Mode::kInPlace ? "in-place" : "slot-reuse"; }

const char* landingName(Landing l) { return l == Landing::kPull ? "pull" : "push"; }

Landing parseLanding(const std::string& s) {
  if (s == "pull") return Landing::kPull;
  if (s == "push") return Landing::kPush;
  throw PlanError(Reason::kBadOption, "unknown landing '" + s + "' (pull or push)");
}

Mode parseMode(const std::string& s) {
  if (s == "in-place") return Mode::kInPlace;
  if (s == "slot-reuse") return Mode::kSlotReuse;
  throw PlanError(Reason::kBadOption, "unknown mode '" + s + "' (in-place or slot-reuse)");
}

const char* regionName(Region r) {
  switch (r) {
    case Region::kShard: return "shard";
    case Region::kLanding: return "landing";
    case Region::kStage: return "stage";
    case Region::kGrad: return "grad";
    case Region::kStaging: return "staging";
    case Region::kOutbox: return "outbox";
    case Region::kInbox: return "inbox";
    case Region::kOutput: return "output";
  }
  return "unknown";
}

Topology Topology::make(int nodes, int gpusPerNode) {
  if (nodes < 1)
    throw PlanError(Reason::kBadTopology, "nodes must be >= 1, got " + std::to_string(nodes));
  if (gpusPerNode < 1 || gpusPerNode > kMaxGpusPerNode)
    throw PlanError(Reason::kBadTopology, "gpus per node must be in 1.." +
                                              std::to_string(kMaxGpusPerNode) + ", got " +
                                              std::to_string(gpusPerNode));
  if (static_cast<int64_t>(nodes) * gpusPerNode > (1 << 20))
    throw PlanError(Reason::kBadTopology, "more than 2^20 ranks");
  Topology t;
  t.nodes = nodes;
  t.gpusPerNode = gpusPerNode;
  return t;
}

void Topology::checkRank(int rank) const {
  if (rank < 0 || rank >= ranks())
    throw PlanError(Reason::kBadTopology, "rank " + std::to_string(rank) + " outside 0.." +
                                              std::to_string(ranks() - 1));
}

int Topology::railPeer(int rank, int delta) const {
  checkRank(rank);
  int n = ((nodeOf(rank) + delta) % nodes + nodes) % nodes;
  return rankOf(n, localOf(rank));
}

}  // namespace tide::plan
