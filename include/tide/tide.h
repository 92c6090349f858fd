/* TIDE C API: the one boundary that bindings and other languages use.
 * Every call returns a tideResult_t; on failure tideGetLastError() holds a
 * message for the calling thread. Handles are opaque. */
#ifndef TIDE_H_
#define TIDE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIDE_VERSION_MAJOR 0
#define TIDE_VERSION_MINOR 2

typedef enum {
  tideSuccess = 0,
  tideInvalidArgument = 1,  /* bad input: topology, option, null pointer */
  tidePlanRejected = 2,     /* group outside the contract, or a colliding plan */
  tideInternalError = 3,
  tideTimeout = 4,          /* a wait passed its deadline (fail stop) */
  tideProtocolError = 5,    /* the protocol checker saw a violation */
  tideUnavailable = 6,      /* fabric not built or not usable here */
} tideResult_t;

typedef enum { tideBF16 = 0, tideFP32 = 1 } tideDataType_t;
typedef enum { tideInPlace = 0, tideSlotReuse = 1 } tideMode_t;
/* Level 2 landing across nodes: pull through peer addresses, or push by copy engine first. */
typedef enum { tideLandPull = 0, tideLandPush = 1 } tideLanding_t;

/* A collective that fails after it has started (some of its work enqueued,
 * its peers counting it) leaves its communicator unusable: every later
 * collective (tideAllGather, tideReduceScatter) returns tideInternalError,
 * reason "communicator_unusable"; destroy the communicator on every rank and
 * make a new one. The other calls still answer (tideCommSynchronize returns a
 * failure its queues hold), so that the caller can see what happened first.
 * That holds as well for a collective whose enqueued work fails later, before
 * any synchronize saw it
 * (the host fabric: a wait past its deadline, a peer's recorded failure); the
 * CUDA fabric ends the process on such a failure instead (fail stop). On the
 * host fabric a collective that fails after it started is recorded as the
 * job's failure, so that its peers' waits end at once, naming it. */
/* Thread-local message of this thread's last call that returns a
 * tideResult_t: empty when it succeeded (every such call clears it first),
 * else why it failed. The calls that return no tideResult_t (tideHasCuda,
 * tideFaultNames, tideFreeString, tideGetErrorString and these getters) leave
 * it as it was, so that it can be read after them. */
const char* tideGetLastError(void);
/* Stable name of the reason the last tidePlanRejected/tideInvalidArgument
 * carried (e.g. "too_many_params"), or "ok". */
const char* tideGetLastReason(void);
const char* tideGetErrorString(tideResult_t result);

/* ------------------------------------------------------------ plans */

typedef struct {
  double nicBw, sumBwPerCta, landBwPerCta, landCap, roundWait; /* bytes/s, seconds */
  double fabricBw; /* node-local copy-engine bytes/s (0: default) */
} tideCalibration_t;

typedef struct {
  int nodes;          /* M */
  int gpusPerNode;    /* L */
  int numParams;      /* P */
  const int* ndims;   /* per parameter, 0..16 */
  const int64_t* dims;           /* all shapes, concatenated */
  const tideDataType_t* dtypes;  /* per parameter (all-gather dtype) */
  tideDataType_t gradDtype;
  tideMode_t mode;
  int waveWidth;      /* 0: L */
  int roundWidth;     /* 0: solver */
  int passes;         /* 0: 1 */
  int sumCtas;        /* 0: solver */
  int landingCtas;    /* 0: solver */
  const tideCalibration_t* calibration; /* NULL: the paper's platform */
  tideLanding_t landing; /* 0: pull */
  /* 1: a group with one GPU per node across nodes (L = 1, M > 1) runs both
   * collectives on the paper's rail lane (App. F): the all-gather's rounds
   * put rows straight into the peers' landings (no receive stage); the
   * reduce-scatter puts gradient rows straight into a double-buffered inbox
   * (no staging, outbox or spares; the same bits). Ignored elsewhere. Over
   * NCCL host RMA, whose puts read only from the arena, each wave's rows are
   * first copied into the inbox's other generation and put from there.
   * 0: off (the default). */
  int railLane;
} tidePlanConfig_t;

typedef struct tidePlan* tidePlan_t;

tideResult_t tidePlanCreate(const tidePlanConfig_t* config, tidePlan_t* plan);
/* JSON of the plan summary; the string lives as long as the plan. */
tideResult_t tidePlanGetJson(tidePlan_t plan, const char** json);
/* A destroyed or never created plan is refused (tideInvalidArgument); NULL is a no-op. */
tideResult_t tidePlanDestroy(tidePlan_t plan);

/* ------------------------------------------------------------ communicators
 * One communicator per rank. Groups are registered (same order on every rank)
 * before the first collective, which sizes the shared scratch; user memory
 * (landings) comes from tideCommAlloc, called identically on every rank, and
 * a collective's landingOffset must be the same on every rank: peers write
 * this rank's landing at their own offset. The ranks compare each (group,
 * landingOffset) pair the first time a rank uses it, in a host-blocking
 * exchange like the groups' below: offsets that differ fail that
 * tideAllGather on every rank with reason "landings_differ" (or, where one
 * rank's offset is new and another's is not, at the deadline) and leave the
 * communicator unusable. Ranks that swap between offsets each has already
 * used for the group are not caught; a group that keeps its landing (the
 * FSDP2 adapter's) pays one exchange in all. Nor are ranks that swap two
 * registered groups' calls. For debugging, TIDE_CHECK_CALLS=1 (read when the
 * communicator is made; set it alike on every rank, or the first collective
 * fails with "groups_differ" saying so) makes every collective compare its
 * kind, group, landing and call number across the ranks in a host-blocking
 * exchange first: a difference fails it on every rank, tideInvalidArgument
 * with reason "calls_differ" naming each rank's call, and leaves the
 * communicator unusable.
 * Collectives are enqueued on `stream` (a cudaStream_t on the CUDA fabric,
 * ignored on the host fabric) and must be issued in the same order on every
 * rank. A communicator may be called from several threads: its calls take a
 * lock and run one at a time (their order is the order they took it).
 * Every rank must register the same groups in the same order. The
 * collectives never compare plans, so the ranks compare a digest of their
 * groups in a host-blocking exchange under the bootstrap's deadline, at points
 * of the call sequence (not at registration, whose timing may differ): the
 * communicator's first collective compares every group registered so far
 * (they size the scratch), and the first collective on a group registered
 * later compares the groups up to it. Groups that differ (shapes, dtypes,
 * order, count, mode, passes, waves, rounds, landing; not the rank-local CTA
 * budgets) fail that call on every rank, tideInvalidArgument with reason
 * "groups_differ", naming the ranks of each kind, and leave the communicator
 * unusable. The first collective also compares where each rank's user memory
 * ends: where the scratch would not fit above it on some rank (or on every
 * rank, or the scratch alone exceeds the arena), it fails on every rank with
 * reason "arena_too_small", naming those ranks. Those
 * calls (the first collective, and the first on a later group) meet the
 * other ranks on the host, so issue them in the same order relative
 * to other host-blocking steps (another communicator's first collective, a
 * barrier) on every rank; other collectives only enqueue. On several nodes the groups of one
 * communicator share one Level 2 landing (plan option landing): a group
 * asking for the other one is refused at registration. */

typedef struct tideComm* tideComm_t;
typedef struct tideGroup* tideGroup_t;

#define TIDE_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[TIDE_UNIQUE_ID_BYTES];
} tideUniqueId_t;

typedef struct {
  int nodes;              /* M (virtual nodes are fine), at most 1024 */
  int gpusPerNode;        /* L */
  int rank;               /* node-major */
  int64_t arenaBytes;     /* symmetric arena per rank: the same on every rank (a start that differs is refused on every rank) */
  double timeoutSeconds;  /* deadline of every wait; 0: the fabric's default */
  int device;             /* CUDA ordinal (CUDA fabric); -1: the current device */
} tideCommConfig_t;

/* Nonzero when this build has the CUDA fabric. */
int tideHasCuda(void);
tideResult_t tideGetUniqueId(tideUniqueId_t* id);
/* Every call on a CUDA communicator runs on its device, whatever device the
 * calling thread has current, and leaves the thread's current device as it was. */
tideResult_t tideCommInitCuda(const tideCommConfig_t* config, const tideUniqueId_t* id, tideComm_t* comm);
/* Host fabric, one process per rank over POSIX shared memory, bootstrapped
 * through files in `storeDir` (shared by all ranks, fresh per job). The files
 * serve the bootstrap only: once every rank's init has returned, the directory
 * may be removed (the ranks compare their groups through shared memory).
 * Test hook of both fabrics: TIDE_TEST_FAULT=<name> (see tideFaultNames; the
 * faults the collectives inject) and TIDE_TEST_FAULT_RANK=<rank> (default 0)
 * make the communicators of this process misbehave on purpose. */
tideResult_t tideCommInitHost(const tideCommConfig_t* config, const char* storeDir, tideComm_t* comm);
/* CUDA fabric without NCCL, for tests: one process per rank, ranks reaching
 * each other's arenas through CUDA IPC, bootstrapped through files in
 * `storeDir` (shared by all ranks, fresh per job). Several ranks may share a
 * GPU (`device`, or the current one), which NCCL refuses; rails are
 * copy-engine copies. The store serves the ranks' barriers and group
 * comparisons until every rank has destroyed its communicator. */
tideResult_t tideCommInitCudaIpc(const tideCommConfig_t* config, const char* storeDir, tideComm_t* comm);
/* Drains the communicator's work, then frees it. A collective that fails in
 * that drain (a peer that never made it) is returned after the teardown,
 * which happens all the same. A call another thread has inside finishes
 * first; calls still waiting for the communicator are refused
 * (tideInvalidArgument, reason "bad_argument", the message saying it was
 * destroyed). NULL is a no-op. */
tideResult_t tideCommDestroy(tideComm_t comm);
tideResult_t tideCommAlloc(tideComm_t comm, int64_t bytes, int64_t* offset, void** ptr);
/* Arena bytes the collectives' scratch takes for these groups (what the first
 * collective reserves at the arena's top, alignment included): size an arena
 * as user memory + this, counting each tideCommAlloc from a multiple of 4096
 * (every allocation but the last rounded up to 4096 bytes). The configs must
 * share one topology, as one communicator's groups do (tideInvalidArgument
 * otherwise), and count must be at least 1. */
tideResult_t tideScratchBytes(const tidePlanConfig_t* configs, int count, int64_t* bytes);
tideResult_t tideGroupRegister(tideComm_t comm, const tidePlanConfig_t* config, tideGroup_t* group);
/* The group's plan as JSON; the string lives as long as the group, which is
 * until its communicator is destroyed. */
tideResult_t tideGroupGetJson(tideGroup_t group, const char** json);

/* shard: this rank's packed shard; NULL on a single node when the shard
 * already sits in this rank's own landing rows (in place: the caller cast or
 * copied it there, and the own landing is not copied again). A shard inside
 * the arena must not overlap the call's landing (peers write it while the
 * shard is read) nor the collectives' scratch: refused, tideInvalidArgument.
 * stream (CUDA): the call starts where `stream` is at the call and its
 * completion is on it. Consecutive calls may come on different, unordered
 * streams: peers write into a call's landing only after its own stream and
 * every earlier all-gather's have reached their calls. A stream being
 * captured into a CUDA graph is refused (calls carry sequence numbers; a
 * replay would reuse them). */
tideResult_t tideAllGather(tideComm_t comm, tideGroup_t group, const void* shard, int64_t landingOffset,
                           void* stream);
/* grads: one pointer per parameter (its unsharded gradient); out: this rank's
 * packed fp32 shard. out = (accumulate ? out : 0) + alpha * sum over ranks;
 * alpha must be finite. out must not share a byte with any gradient (the
 * sums write it while the gradients are still read; no reduce-scatter in
 * place): refused, tideInvalidArgument. */
tideResult_t tideReduceScatter(tideComm_t comm, tideGroup_t group, const void* const* grads, float* out,
                               float alpha, int accumulate, void* stream);
/* Read-done point of the last tideReduceScatter this rank issued on `comm`:
 * its Level 1 pushes and sums have read every gradient; the network phase may
 * still run. Orders the caller after that point:
 *   CUDA fabric: work enqueued on `stream` after this call waits for it (the
 *     host does not block), so e.g. an allocator may hand the gradients'
 *     memory out again on `stream` before the reduce-scatter completes;
 *   host fabric (no streams; `stream` ignored): the host blocks until then
 *     (under the deadline; a failure of the reduce-scatter's reads, or of work
 *     before them, is returned here; one of later work, by the next call).
 * The output is final only once the reduce-scatter completes (work ordered
 * after it on its own stream, or tideCommSynchronize). tideInvalidArgument
 * before the first reduce-scatter, and after one that failed or was refused. Waited for
 * after many later calls (more than the fabric keeps events for), the host
 * blocks until all of the communicator's work has drained instead. */
tideResult_t tideCommWaitInputsRead(tideComm_t comm, void* stream);
/* Host waits until everything this rank enqueued has completed: every
 * collective's work, whatever stream each was given (CUDA: each call's stream
 * as far as the call enqueued on it, fenced into the communicator's own queue
 * when the call returns; a stream is never queried after its call returned,
 * so the caller may destroy it before this or tideCommDestroy). */
tideResult_t tideCommSynchronize(tideComm_t comm);
/* Bytes this rank's fabric holds for the arena outside any framework
 * allocator (torch.cuda.memory_reserved() does not see them): the CUDA
 * fabric's ncclMemAlloc symmetric window (arenaBytes, counters, alignment),
 * the host fabric's shared-memory segment. */
tideResult_t tideCommReservedBytes(tideComm_t comm, int64_t* bytes);
/* How this rank's rails travel, chosen at run time, and why, e.g.
 * "copy-engine (every rail peer is load/store reachable)", "nccl-host-rma
 * (requested)", "nccl-send-recv (host RMA unavailable: ...)". *name stays
 * valid until the communicator is destroyed. */
tideResult_t tideCommGetRails(tideComm_t comm, const char** name);

/* What this rank's fabric has done since the communicator was made. */
typedef struct {
  int64_t copyBytes;          /* bytes moved by node-local copies */
  int64_t copyDescriptors;    /* copies issued */
  int64_t railBytes;          /* bytes moved by rail transfers */
  int64_t railPuts;
  int64_t sumElems;           /* fp32 elements written by Level 1 sums */
  int64_t landElems;          /* elements written by Level 2 landings */
  int64_t copyGraphLaunches;  /* copy lists that went out as one launch of a cached graph (CUDA; 0 on the host) */
  int64_t copyGraphsBuilt;    /* graphs built for recurring copy lists */
  int64_t allGatherCalls;     /* tideAllGather calls that returned tideSuccess */
  int64_t allGatherHostNs;    /* host time spent inside them (on CUDA the enqueue; the copies run later) */
  int64_t reduceScatterCalls; /* tideReduceScatter calls that returned tideSuccess */
  int64_t reduceScatterHostNs;
} tideCommStats_t;

tideResult_t tideCommGetStats(tideComm_t comm, tideCommStats_t* stats);

/* ------------------------------------------------------------ host-fabric runs */

typedef struct {
  int iters;              /* timed calls of each collective (>= 1) */
  uint64_t seed;          /* inputs are drawn fresh from this seed */
  int inputKind;          /* 0 normal, 1 integer (exact), 2 with NaN/Inf */
  double timeoutSeconds;  /* every wait's deadline */
  const char* fault;      /* fault kind name or NULL ("none") */
  int faultRank;
  int rails;              /* how rail transfers travel: 0 one-sided puts with signals (copy engines),
                             1 send/recv (each transfer received by its peer, as NCCL's),
                             2 one-sided puts with counted signals and credits (NCCL host RMA) */
} tideHostRunOptions_t;

/* Runs both collectives for the planned group on CPU ranks (threads), checks
 * every output against an independent reference and returns a JSON report in
 * *json (freed with tideFreeString). A fabric failure (deadline, peer
 * failure) is reported in the JSON "error" key with tideTimeout. */
tideResult_t tideHostRun(const tidePlanConfig_t* config, const tideHostRunOptions_t* options, char** json);
/* Names of the injectable faults, comma separated. */
const char* tideFaultNames(void);
void tideFreeString(char* s);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_H_ */
