// TIDE plan library: pure C++ (no CUDA, no NCCL).
//
// Everything a collective needs to know before it moves a byte: the topology,
// the group's byte geometry (Sec. 2.1), the all-gather schedule (Sec. 3), the
// reduce-scatter Level 1 descriptors and Level 2 Latin-square waves (Sec. 4),
// outbox depth and the memory model (Sec. 5), and the sizing solver (App. G).
// A plan is plain data; plan_json.hpp prints it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tide::plan {

// ---------------------------------------------------------------- errors

// Why a topology, group or plan is refused. Names (reasonName) are stable: the
// FSDP2 adapter logs them as its fallback reason and tests match on them.
enum class Reason : int {
  kOk = 0,
  kBadTopology,       // M < 1, L outside 1..8, rank out of range
  kEmptyGroup,        // no parameters
  kTooManyParams,     // more than kMaxParams
  kMixedDtypes,       // parameters of one group disagree on dtype
  kUnsupportedDtype,  // not bf16 / fp32
  kZeroDimTensor,     // 0-d parameter: nothing to shard on dim 0
  kEmptyParam,        // a parameter with zero elements
  kBadOption,         // wave width, round width, passes, slots out of range
  kPlanCollision,     // two contributors on one GPU at one offset in a wave
  kBadCalibration,    // non-positive rates
  kTooLarge,          // a byte count would overflow 64 bits
};
const char* reasonName(Reason r);

class PlanError : public std::runtime_error {
 public:
  PlanError(Reason reason, const std::string& what) : std::runtime_error(what), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

inline constexpr int kMaxParams = 256;
// Largest sum or landing CTA budget a plan takes (RsOptions::sumCtas, landingCtas).
inline constexpr int kMaxCtaBudget = 1024;
inline constexpr int kMaxGpusPerNode = 8;

// ---------------------------------------------------------------- topology

enum class DType : int { kBF16 = 0, kFP32 = 1 };
int itemSize(DType t);
const char* dtypeName(DType t);
DType parseDtype(const std::string& s);  // "bf16" | "fp32", else PlanError(kUnsupportedDtype)

// M nodes x L GPUs, node-major ranks r = n*L + l. Rail l joins local rank l of
// every node.
struct Topology {
  int nodes = 1;         // M
  int gpusPerNode = 1;   // L

  static Topology make(int nodes, int gpusPerNode);  // validates, else PlanError(kBadTopology)
  int ranks() const { return nodes * gpusPerNode; }
  int nodeOf(int rank) const { return rank / gpusPerNode; }
  int localOf(int rank) const { return rank % gpusPerNode; }
  int rankOf(int node, int local) const { return node * gpusPerNode + local; }
  // Same-rail peer on node (n + delta) mod M.
  int railPeer(int rank, int delta) const;
  void checkRank(int rank) const;
};

// ---------------------------------------------------------------- group layout

struct ParamSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::kBF16;
};

// Parameter p logically reshaped to (D_p, K_p), padded to N*R_p rows.
struct ParamLayout {
  int64_t rows = 0;           // D_p
  int64_t rowElems = 0;       // K_p
  int64_t shardRows = 0;      // R_p = ceil(D_p / N)
  int64_t shardBytes = 0;     // s_p = R_p K_p b_ag
  int64_t shardOffset = 0;    // o_p (bytes into the packed shard)
  int64_t outElems = 0;       // R_p K_p (elements of the per-rank RS output)
  int64_t outOffset = 0;      // q_p (elements into the packed per-rank RS output)
  // Rows of rank r's shard that hold data (the rest is tail padding).
  int64_t validRows(int rank) const;
};

struct GroupLayout {
  Topology topo;
  DType agDtype = DType::kBF16;    // all-gather item type (b_ag)
  DType gradDtype = DType::kBF16;  // reduce-scatter input type (b_grad)
  std::vector<ParamLayout> params;
  int64_t shardBytes = 0;  // S
  int64_t outElems = 0;    // E = sum R_p K_p (per-rank RS output, fp32 elements)

  int64_t unshardedBytes() const { return shardBytes * topo.ranks(); }
  int64_t outBytes() const { return outElems * 4; }  // S_fp32
  int64_t gradShardBytes() const { return outElems * itemSize(gradDtype); }  // S_grad
  // Eq. 2: where rank r's shard of parameter p lands in the unsharded buffer.
  int64_t landing(int p, int rank) const;
};

// Contract check (Sec. 2.5 / DESIGN §5). Returns kOk or the first reason the
// group falls outside it; `detail` names the parameter.
Reason checkGroup(const std::vector<ParamSpec>& specs, std::string* detail = nullptr);
// Throws PlanError on a group checkGroup refuses.
GroupLayout makeGroupLayout(const Topology& topo, const std::vector<ParamSpec>& specs,
                            DType gradDtype);

// ---------------------------------------------------------------- copy descriptors

// Memory regions a descriptor refers to. Offsets are bytes into the region of
// the named rank; kGrad uses `index` for the parameter.
enum class Region : int {
  kShard = 0,  // the rank's packed S-byte shard (resident-shard region)
  kLanding,    // the rank's N*S-byte parameter-major landing
  kStage,      // AG receive stage: slots 1..M-1, slot i at (i-1)*S
  kGrad,       // parameter `index`'s unsharded gradient, D_p*K_p*b_grad bytes
  kStaging,    // RS Level 1 staging slots
  kOutbox,     // RS outbox blocks
  kInbox,      // RS inbox blocks
  kOutput,     // RS per-rank fp32 output
};
const char* regionName(Region r);

struct BufferRef {
  int rank = 0;
  Region region = Region::kShard;
  int index = 0;
  int64_t offset = 0;
  bool operator==(const BufferRef&) const = default;
};

// A 2-D strided copy: `rows` rows of `width` bytes; row i reads
// src.offset + i*srcPitch and writes dst.offset + i*dstPitch. rows == 1 is a
// flat copy.
struct CopyDesc {
  BufferRef src;
  BufferRef dst;
  int64_t width = 0;
  int64_t rows = 1;
  int64_t srcPitch = 0;
  int64_t dstPitch = 0;
  int64_t bytes() const { return width * rows; }
  bool operator==(const CopyDesc&) const = default;
};

// Expands strided descriptors into one flat descriptor per row.
std::vector<CopyDesc> flatten(const std::vector<CopyDesc>& descs);

// ---------------------------------------------------------------- all-gather

// The most groups the all-gather's last round may be scattered in: each group
// takes a counter (the collectives keep one per scatter group) and costs a
// descriptor count over every node when planned.
inline constexpr int kMaxLastRoundGroups = 32;

struct AgOptions {
  int64_t headBytes = 8ll << 20;  // head/tail split of each rail transfer (Sec. 3.1)
  int minStridedRun = 4;          // runs of at least this many slots become one strided copy
  int lastRoundGroups = 4;        // the last round is scattered in at most this many groups (1..kMaxLastRoundGroups)
  // App. F's rail lane for one GPU per node across nodes (L = 1, M > 1): the
  // Bruck rounds put landing rows straight into the peers' landings (each
  // rank's rows sit at the same offset on every rank), so there is no receive
  // stage, no scatter and no rail source copy. Ignored elsewhere
  // (AgPlan::railLane says whether it applies).
  bool railLane = false;
};

// One Bruck round d on a rail: send slots [0, slots) to node (n - 2^d) mod M,
// receive as many into slots [2^d, 2^d + slots) from node (n + 2^d) mod M.
struct AgRound {
  int index = 0;      // d
  int slots = 0;      // c_d = min(2^d, M - 2^d)
  int firstSlot = 0;  // 2^d
  int64_t bytes = 0;  // c_d * S
  int64_t headBytes = 0;
};

// Stage slots [firstSlot, firstSlot + slots) of one round, scattered together
// once they have arrived.
struct AgScatterGroup {
  int round = 0;
  int firstSlot = 0;
  int slots = 0;
};

struct AgPlan {
  bool railLane = false;                    // AgOptions::railLane, where it applies: no stage, no scatter groups
  std::vector<AgRound> rounds;              // empty when M == 1
  std::vector<AgScatterGroup> scatterGroups;
  int64_t stageBytes = 0;                   // (M-1) S
  AgOptions options;
  // Per-rank descriptor counts, maximised over ranks (they differ where the
  // node index wraps): flat = one copy per (slot, parameter, local GPU).
  int64_t descriptorsFlat = 0;
  int64_t descriptors = 0;
};

AgPlan makeAgPlan(const GroupLayout& g, const AgOptions& opt = {});
// The copies `rank` issues to put its own shard into every local landing.
// inPlace: the shard already sits in `rank`'s own landing rows; the copies
// read it there and none goes to the own landing.
std::vector<CopyDesc> agLocalDescriptors(const GroupLayout& g, int rank, bool inPlace = false);
// Rail puts of round d from `rank` to its rail peer on node (n - 2^d) mod M:
// slot 0 from the shard, slots 1..c_d-1 from the stage. Not for a rail-lane plan (no stage).
std::vector<CopyDesc> agRoundPuts(const GroupLayout& g, const AgPlan& plan, int rank, int round);
// Copies `rank` issues to scatter one group of stage slots into every local
// landing; coalesced (strided) or flat.
std::vector<CopyDesc> agScatterDescriptors(const GroupLayout& g, const AgPlan& plan, int rank,
                                           const AgScatterGroup& group, bool coalesced = true);
// Node whose shard sits in stage slot i of `node` after all rounds.
inline int agSlotSource(int node, int slot, int nodes) { return (node + slot) % nodes; }

// ---------------------------------------------------------------- reduce-scatter

enum class Mode : int { kInPlace = 0, kSlotReuse = 1 };
const char* modeName(Mode m);
Mode parseMode(const std::string& s);  // "in-place" | "slot-reuse"

// Level 2 landing direction (DESIGN.md section 4, no multicast): kPull, the
// landing kernel reads each contributor's row from the local GPU that holds
// it through peer addresses; kPush, that GPU's copy engine first writes the
// row into the lander's push area, and the landing reads local memory only.
// Same sources in the same order, so the same bits.
enum class Landing : int { kPull = 0, kPush = 1 };
const char* landingName(Landing l);
Landing parseLanding(const std::string& s);  // "pull" | "push"

// Calibrated rates for the sizing solver (App. G). Bandwidths in bytes/s.
struct Calibration {
  double nicBw = 47.5e9;       // BW_NIC, sustained per rail
  double fabricBw = 390e9;     // node-local copy-engine rate (one node: Level 1 keeps pace with it)
  double sumBwPerCta = 99e9;   // BW_sum, logical read+write per CTA
  double landBwPerCta = 21e9;  // BW_land
  double landCap = 90e9;       // BW_cap, landing fabric ceiling
  double roundWait = 1.3e-3;   // t_rnd, seconds per network round
  double skew = 1.5;           // gamma_skew
  double tail = 0.05;          // eta_tail
  int maxRoundWidth = 4;       // k_max
  void validate() const;       // PlanError(kBadCalibration)
};

struct SolverResult {
  int sumCtas = 0;
  int landingCtas = 0;
  int roundWidth = 0;
  double nicSeconds = 0;  // t_NIC
};

// CTA budgets a caller gave (RsOptions::sumCtas, landingCtas); 0: the solver's.
struct GivenCtas {
  int sum = 0;
  int landing = 0;
};

// Eq. 13, Eq. 14 and the k-doubling rule. A budget given is taken as it is:
// the calibration's rate for it (sumBwPerCta, landBwPerCta) then sizes nothing,
// so a count it would ask for past kMaxCtaBudget is not refused.
SolverResult solveSizing(const Topology& topo, int gradItemSize, int64_t outBytes, int waveWidth,
                         int passes, const Calibration& cal, GivenCtas given = {});
// Network rounds for `remote` remote contributors 1..remote (+ own node) at
// wave width W and at most k transfers per round, rounds confined to waves.
int countNetworkRounds(int nodes, int waveWidth, int roundWidth);

struct RsOptions {
  Mode mode = Mode::kInPlace;
  int waveWidth = 0;     // 0: L
  int roundWidth = 0;    // 0: solver
  int passes = 1;        // n_part
  int stagingSlots = 2;  // n_stg
  int sumCtas = 0;       // 0: solver
  int landingCtas = 0;   // 0: solver
  Landing landing = Landing::kPull;
  // App. F's rail lane for groups with one GPU per node across nodes (L = 1,
  // M > 1): no Level 1 staging, outbox or spares; each node sends its
  // gradient rows straight into the destination's double-buffered inbox in
  // the gradient dtype, and the destination sums them into its output wave
  // by wave in the same order and association as the staged path, so the
  // bits are the same. Ignored elsewhere (RsPlan::railLane says whether it
  // applies). Off by default until measured on GPUs.
  bool railLane = false;
  Calibration calibration;
  bool validate = true;  // reject colliding plans (turn off only to test the validator)
};

// Contributor index c(m, n) of Eq. 6: (m - n) mod M for n != m, M for the own node.
int contributorIndex(int destNode, int srcNode, int nodes);
// Eq. 7: sub-slice a sender's local rank j handles for contributor index c.
int subSlice(int local, int contributor, int nodes, int gpusPerNode);
// Eq. 8: destination GPU of contributor c's sub-slice s.
int landingGpu(int subSlice, int contributor, int nodes, int gpusPerNode);

// A network round: every node sends its partials for the listed contributor
// indices c (to node (n + c) mod M), one outbox block each.
struct RsRound {
  std::vector<int> contributors;
};

struct InboxBlock {
  int gpu = 0;    // destination local GPU j
  int block = 0;  // inbox block (= sub-slice s)
  bool operator==(const InboxBlock&) const = default;
};

struct RsWave {
  int index = 0;       // global wave index over all passes
  int pass = 0;
  int generation = 0;  // inbox buffer generation, index mod generations
  std::vector<int> contributors;  // increasing c; M (own node) only in the last wave of a pass
  std::vector<RsRound> rounds;    // remote contributors only, at most k per round
  std::vector<InboxBlock> writes;  // blocks written in this wave (per destination node)
  std::vector<InboxBlock> zero;    // stale blocks to zero before landing (pull landing)
  bool hasOwnNode = false;         // contributors ends with M
  // Last wave on its generation in a call: the landing clears the blocks it
  // read, so every call (and every group sharing the inbox) starts from zero.
  // Pull landing only: a push landing reads exactly the blocks written in its
  // wave, so it needs neither zeroing nor clearing.
  bool clearAfterLanding = false;
};

struct RsPlan {
  Mode mode = Mode::kInPlace;
  // App. F's rail lane (RsOptions::railLane on L = 1 across nodes): blockBytes
  // is then one inbox block in the gradient dtype (E_sub elements), and
  // there are no outbox blocks or spares (and, at L = 1, staging slots hold
  // no bytes).
  bool railLane = false;
  int passes = 1;
  int64_t subElems = 0;      // E_sub: fp32 elements per sub-slice row
  int64_t stagingSpan = 0;   // E_stg = L * passes * E_sub >= E
  int waveWidth = 0;
  int wavesPerPass = 0;
  int bufferGenerations = 0;
  int roundWidth = 0;
  std::vector<RsWave> waves;     // all passes, in execution order
  int networkRounds = 0;
  int outboxBlocks = 0;          // n_out per bank
  Landing landing = Landing::kPull;
  // Own-node partial blocks per bank (several nodes): min(passes, 2). Pass q
  // writes spare q mod 2 once the network queue has moved pass q-2's out, so
  // the area stays bounded as passes grow while reads run a pass ahead.
  int spareBlocks = 0;
  int stagingSlots = 0;          // n_stg
  int sumCtas = 0;
  int landingCtas = 0;
  double nicSeconds = 0;
  // Bytes per rank.
  int64_t blockBytes = 0;        // one outbox / inbox / spare block: L rows of E_sub fp32
  int64_t stagingSlotBytes = 0;  // (L-1) senders x L rows x E_sub x b_grad
  int64_t pushAreaBytes = 0;     // push landing: rows pushed to this GPU, the size of the inbox
  int64_t stagingBytes = 0;      // Area_RS: staging + inbox generations + outbox banks + spares (+ push area)
  int64_t level1DescriptorsFlat = 0;
  int64_t level1Descriptors = 0;
};

RsPlan makeRsPlan(const GroupLayout& g, const RsOptions& opt = {});

// Element range [begin, end) of sub-slice s in pass q on the per-rank output axis.
struct ElemRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end > begin ? end - begin : 0; }
};
ElemRange subSliceRange(const GroupLayout& g, const RsPlan& plan, int pass, int subSlice);

// Level 1 copies that sender `rank` pushes for one destination block in pass
// q. On several nodes the block is destination node t: each other local rank
// j (the owner) gets the rows of its sub-slice s = (j + c) mod L for the L
// destination ranks of t. On one node (M == 1) the block is chunk s of the
// output axis and every other local rank owns its own rows. Destinations are
// offsets into one staging slot of the owner (the caller adds the slot base):
// sender-major over the L-1 senders in local-rank order (owner excluded), then
// destination row (L rows on several nodes, 1 on one node), E_sub elements
// each. Rows past D_p are not copied: the sum treats them as zero.
std::vector<CopyDesc> level1Pushes(const GroupLayout& g, const RsPlan& plan, int rank, int pass,
                                   int block, bool coalesced = true);
// Position of `sender` among the owner's L-1 staged senders.
inline int stagedSenderIndex(int senderLocal, int ownerLocal) {
  return senderLocal < ownerLocal ? senderLocal : senderLocal - 1;
}

// ---------------------------------------------------------------- validation

struct ValidationIssue {
  int wave = -1;
  int destGpu = -1;
  int block = -1;
  std::vector<int> contributors;  // colliding contributors, or the stale one
  std::string message;
};

// Checks every wave for collisions (two contributors on one GPU at one block)
// and for stale blocks not zeroed. Empty when the plan is sound.
std::vector<ValidationIssue> validateRsPlan(const Topology& topo, const RsPlan& plan);

// ---------------------------------------------------------------- memory model

// Eqs. 10-12 and Sec. 5.4, in units of NS (one unsharded group, N x S bytes),
// for the plan's pass count.
struct MemoryModel {
  double rsAreaBound = 0;     // Eq. 10 bound in NS units
  double rsAreaInPlace = 0;   // Eq. 11
  double rsAreaSlotReuse = 0; // Eq. 12
  double fsdp2Live = 4.0;     // FSDP2's live bytes during a layer's backward (3 NS for an fp32 group)
  double tideLive = 0;        // TIDE's bound for the plan's mode
  double tideLiveInPlace = 0;
  double tideLiveSlotReuse = 0;
  // Set by makePlan: what the plan's staging takes beyond the closed form,
  // from its sub-chunks rounded up to multiples of 8 elements (0 where E divides
  // evenly; a large share of NS for tiny groups). Included in rsAreaBound and
  // tideLive (the plan's mode), not in the per-mode closed forms above.
  double stagingRounding = 0;
};

// Closed-form model for M nodes of L GPUs (n_stg staging slots). The paper's
// Eqs. 10-12 are the defaults (bf16 group and gradients, pull landing); fp32
// gradients double the staging slots and In-Place's live gradients, a push
// landing adds its push area (one more inbox); with makePlan's stagingRounding
// the bound covers RsPlan::stagingBytes. Slot-Reuse's gradients wider than the
// group do not fit its slot and count as In-Place's. An fp32 group (agItemSize 4) doubles NS itself, so
// every fp32 term halves in NS units and FSDP2 holds 3 NS.
// The rail lane (railLane) holds only its inbox generations, in the gradient
// dtype; the all-gather's lane (agRailLane) has no receive stage. The paper's
// equations are for one pass (the default); P passes divide every staging term
// by P, the spares being min(P, 2) blocks per bank.
MemoryModel memoryModel(int nodes, int gpusPerNode, int bufferGenerations, int roundWidth,
                        int stagingSlots, Mode mode, int gradItemSize = 2, Landing landing = Landing::kPull,
                        int agItemSize = 2, bool railLane = false, bool agRailLane = false, int passes = 1);

// ---------------------------------------------------------------- whole plan

struct PlanOptions {
  AgOptions ag;
  RsOptions rs;
};

struct Plan {
  GroupLayout group;
  AgPlan ag;
  RsPlan rs;
  MemoryModel memory;
};

Plan makePlan(const Topology& topo, const std::vector<ParamSpec>& specs, DType gradDtype,
              const PlanOptions& opt = {});

}  // namespace tide::plan
