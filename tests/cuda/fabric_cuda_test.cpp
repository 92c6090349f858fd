// GPU tests of the CUDA fabric's primitives against CPU references.
//
//   tide_cuda_fabric_test --ranks N --nodes M [--rails auto|send-recv|rma] [--timeout-case] [--perf]
//                         [--no-freed-replay]
//
// Forks N ranks (rank r on GPU r) over a virtual topology of M nodes x N/M
// GPUs and checks, on every rank: copies and 2-D copies into every peer's
// arena (also as cached copy graphs), signal/wait ordering across GPUs (ring ping-pong with a log of what
// each signal made visible), rail puts, events between queues, the caller's
// stream as queue 0, SumOp and LandOp bit for bit against reference_arith.hpp
// on fresh random bf16/fp32 data with NaN/Inf and poisoned outputs (also with
// peer arena sources), determinism across CTA budgets, zero(), stats and a
// lost-signal fault. --timeout-case also checks that a wait nobody signals
// fails stop, with a message, within its deadline, and that an error reported
// while a wait is pending (an NCCL asynchronous error) stops it at once, and
// that a watchdog blocked in its own query is stopped by the stall monitor.
// Every run ends with the arena tag case (arenaTagCase). --no-freed-replay leaves
// out the copy graph replayed over a freed and reallocated block (under
// compute-sanitizer memcheck, whose tracking of graph operands crashes the
// host process there; run 6 of session 10). --perf prints the
// bandwidth of a copy into a peer and of the sum and landing kernels.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "fabric_fault_checks.hpp"
#include "fabric/cuda/cuda_endpoint.hpp"
#include "fabric/cuda/device_arena.hpp"
#include "fabric/cuda/kernels/reduce_kernels.hpp"
#include "fabric/cuda/stream_memops.hpp"
#include "fabric/cuda/wait_watchdog.hpp"
#include "rank_launcher.hpp"
#include "reference_arith.hpp"
#include "test_data.hpp"

namespace tide::test {
namespace {

using fabric::CopyOp;
using fabric::LandOp;
using fabric::SumOp;
using fabric::SumSource;
using fabric::cuda::CudaEndpoint;
using fabric::cuda::CudaFabricOptions;

// ---- arena map of the tests (bytes)
constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kArenaBytes = 64 * kMiB;
constexpr int64_t kCopyRegion = 0;          // 2 MiB per writer
constexpr int64_t kCopySlot = 2 * kMiB;
constexpr int64_t kRailRegion = 16 * kMiB;  // 2 MiB per source node
constexpr int64_t kRingRegion = 32 * kMiB;  // ring payload, then the log
constexpr int64_t kRingPayload = 1 * kMiB;
constexpr int64_t kRingLog = 33 * kMiB;     // 256 B per round
constexpr int64_t kPullRegion = 48 * kMiB;  // fp32 data peers read in land()
constexpr int64_t kPullElems = 1 << 20;
constexpr int64_t kGraphSource = 56 * kMiB;  // copy sources inside the arena (copy graphs)

// ---- counters
constexpr int kCopyDone = 0;  // + writer rank
constexpr int kRailDone = 8;  // + source node
constexpr int kRingSignal = 16;
constexpr int kFaultBase = 20;

constexpr uint8_t kPoisonByte = 0xEE;
constexpr uint32_t kPoisonFloat = 0x7fbadbadu;

// Value stream `stream` of this run (runSeed mixed in; the same on every rank for one stream).
uint64_t streamSeed(uint64_t stream) { return runSeed() * 1000003ull + stream; }

struct Args {
  uint64_t seed = std::random_device{}();
  int ranks = 1;
  int nodes = 1;
  std::string rails = "auto";
  bool timeoutCase = false;
  bool perf = false;
  bool freedReplay = true;
  bool graphCap = true;
};

struct Ctx {
  CudaEndpoint& ep;
  int rank;
  int ranks;
  bool freedReplay = true;
  bool graphCap = true;
};

// A case this configuration cannot run: said, so that PASS never hides it.
void skipped(const Ctx& c, const char* what, const char* why) {
  std::printf("[rank %d] SKIP %s case: %s\n", c.rank, what, why);
}

std::vector<uint8_t> download(const void* dev, int64_t bytes) {
  std::vector<uint8_t> h(static_cast<size_t>(bytes));
  TCUDA(cudaMemcpy(h.data(), dev, static_cast<size_t>(bytes), cudaMemcpyDefault));
  return h;
}

// cudaMemcpy from pageable memory and cudaMemset may return before the device
// is done, and the fabric's queues do not wait for the legacy stream: sync.
void upload(void* dev, const void* host, int64_t bytes) {
  TCUDA(cudaMemcpy(dev, host, static_cast<size_t>(bytes), cudaMemcpyDefault));
  TCUDA(cudaDeviceSynchronize());
}

void fill(void* dev, int byte, int64_t bytes) {
  TCUDA(cudaMemset(dev, byte, static_cast<size_t>(bytes)));
  TCUDA(cudaDeviceSynchronize());
}

template <typename T>
T* deviceAlloc(int64_t count) {
  void* p = nullptr;
  TCUDA(cudaMalloc(&p, static_cast<size_t>(count) * sizeof(T)));
  return static_cast<T*>(p);
}

// ------------------------------------------------------------------ copies

// What `writer` copies into its slot of every rank's copy region: three flat
// pieces and one 2-D piece, laid out the same for every destination.
struct CopyPlan {
  struct Piece {
    int64_t srcOffset, dstOffset, width, rows, srcPitch, dstPitch;
  };
  std::vector<Piece> pieces = {
      {0, 0, 1 * kMiB / 2, 1, 0, 0},
      {600000, 600000, 17, 1, 0, 0},
      {700001, 700032, 4099, 1, 0, 0},
      {800000, 900000, 1000, 64, 1024, 1536},  // strided
  };
  int64_t srcBytes = 1 * kMiB;
};

std::vector<uint8_t> expectedSlot(int writer, const CopyPlan& plan, int tag = 1) {
  std::vector<uint8_t> slot(static_cast<size_t>(kCopySlot), kPoisonByte);
  const std::vector<uint8_t> src = pattern(writer, tag, plan.srcBytes);
  for (const auto& p : plan.pieces)
    for (int64_t r = 0; r < p.rows; ++r)
      std::memcpy(&slot[static_cast<size_t>(p.dstOffset + r * p.dstPitch)],
                  &src[static_cast<size_t>(p.srcOffset + r * p.srcPitch)], static_cast<size_t>(p.width));
  return slot;
}

void testPeerCopies(Ctx& c) {
  const CopyPlan plan;
  const std::vector<uint8_t> srcHost = pattern(c.rank, 1, plan.srcBytes);
  auto* src = deviceAlloc<uint8_t>(plan.srcBytes);
  upload(src, srcHost.data(), plan.srcBytes);
  fill(c.ep.arena() + kCopyRegion, kPoisonByte, 8 * kCopySlot);
  c.ep.barrier();

  c.ep.setCallContext("peer_copies#0");
  for (int d = 0; d < c.ranks; ++d) {
    std::byte* dst = c.ep.peerArena(d);
    TCHECK(dst != nullptr, "rank " + std::to_string(d) + " not reachable");
    if (dst == nullptr) continue;
    std::vector<CopyOp> ops;
    for (const auto& p : plan.pieces) {
      CopyOp op;
      op.dst = dst + kCopyRegion + c.rank * kCopySlot + p.dstOffset;
      op.src = src + p.srcOffset;
      op.width = p.width;
      op.rows = p.rows;
      op.srcPitch = p.srcPitch;
      op.dstPitch = p.dstPitch;
      ops.push_back(op);
    }
    c.ep.copy(1, ops);
    c.ep.signal(1, d, kCopyDone + c.rank, 1);
  }
  for (int s = 0; s < c.ranks; ++s) c.ep.wait(2, kCopyDone + s, 1, s, "peer copies");
  c.ep.synchronizeAll();
  for (int s = 0; s < c.ranks; ++s) {
    const auto got = download(c.ep.arena() + kCopyRegion + s * kCopySlot, kCopySlot);
    const auto want = expectedSlot(s, plan);
    int64_t wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
    TCHECK(wrong == 0, std::to_string(wrong) + " wrong bytes in the slot written by rank " + std::to_string(s));
  }
  const auto st = c.ep.stats();
  TCHECK(st.copyOps == 4 * c.ranks, "copyOps " + std::to_string(st.copyOps));
  TCHECK(st.copyBytes == c.ranks * (kMiB / 2 + 17 + 4099 + 64000), "copyBytes " + std::to_string(st.copyBytes));
  TCUDA(cudaFree(src));
  c.ep.barrier();
}

// The same copy lists call after call, with fresh source bytes and poisoned
// destinations: sighted twice, built at the start of the third call (the
// device is quiescent there), they go out as one graph launch from the third
// call on (copy_engine.hpp), which must copy what the sources hold at the time.
// Sources in the arena and in cudaMalloc memory enter graphs; pinned host
// memory never does. With TIDE_COPY_GRAPHS=0 nothing does.
// TIDE_COPY_GRAPHS as the fabric reads it: anything but "0" leaves graphs on.
bool copyGraphsOn() {
  const char* knob = std::getenv("TIDE_COPY_GRAPHS");
  return knob == nullptr || std::string(knob) != "0";
}

void testCopyGraphs(Ctx& c) {
  const CopyPlan plan;
  const bool graphsOn = copyGraphsOn();
  uint64_t signalValue = 1;  // testPeerCopies signalled 1 on the same counters
  auto copyAll = [&](const std::byte* src, const char* call) {
    ++signalValue;
    c.ep.setCallContext(call);
    for (int d = 0; d < c.ranks; ++d) {
      std::byte* dst = c.ep.peerArena(d);
      std::vector<CopyOp> ops;
      for (const auto& p : plan.pieces)
        ops.push_back(CopyOp{dst + kCopyRegion + c.rank * kCopySlot + p.dstOffset, src + p.srcOffset, p.width, p.rows,
                             p.srcPitch, p.dstPitch});
      c.ep.copy(1, ops);
      c.ep.signal(1, d, kCopyDone + c.rank, signalValue);
    }
    for (int s = 0; s < c.ranks; ++s) c.ep.wait(2, kCopyDone + s, signalValue, s, "graph copies");
    c.ep.synchronizeAll();
  };
  // At an offset: testPeerCopies' freed source may sit at the allocation's start, and its list is remembered.
  constexpr int64_t kOffset = 4096;
  auto* device = deviceAlloc<uint8_t>(plan.srcBytes + kOffset);
  uint8_t* pinned = nullptr;
  TCUDA(cudaMallocHost(&pinned, static_cast<size_t>(plan.srcBytes)));
  struct Source {
    const char* name;
    std::byte* bytes;
    bool graphed;
  };
  const Source sources[] = {{"arena", c.ep.arena() + kGraphSource, graphsOn},
                            {"cudaMalloc", reinterpret_cast<std::byte*>(device + kOffset), graphsOn},
                            {"pinned host", reinterpret_cast<std::byte*>(pinned), false}};
  // One call from `src` with fresh bytes into poisoned slots, checked on every rank.
  auto oneRound = [&](const char* name, std::byte* src, int tag) {
    const std::vector<uint8_t> srcHost = pattern(c.rank, tag, plan.srcBytes);
    upload(src, srcHost.data(), plan.srcBytes);
    fill(c.ep.arena() + kCopyRegion, kPoisonByte, 8 * kCopySlot);
    c.ep.barrier();
    copyAll(src, "copy_graphs#0");
    for (int s = 0; s < c.ranks; ++s) {
      const auto got = download(c.ep.arena() + kCopyRegion + s * kCopySlot, kCopySlot);
      const auto want = expectedSlot(s, plan, tag);
      int64_t wrong = 0;
      for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
      TCHECK(wrong == 0, std::string(name) + " source, tag " + std::to_string(tag) + ": " + std::to_string(wrong) +
                             " wrong bytes in the slot written by rank " + std::to_string(s));
    }
    c.ep.barrier();
  };
  constexpr int kRounds = 4;
  for (const Source& src : sources) {
    const auto before = c.ep.copyGraphStats();
    for (int r = 0; r < kRounds; ++r) oneRound(src.name, src.bytes, 10 + r);
    const auto after = c.ep.copyGraphStats();
    const int64_t wantBuilt = src.graphed ? c.ranks : 0;
    const int64_t wantLaunches = src.graphed ? int64_t{c.ranks} * (kRounds - 2) : 0;
    TCHECK(after.built - before.built == wantBuilt, std::string(src.name) + " source: copy graphs built " +
                                                        std::to_string(after.built - before.built) + ", want " +
                                                        std::to_string(wantBuilt));
    TCHECK(after.launches - before.launches == wantLaunches,
           std::string(src.name) + " source: copy graph launches " + std::to_string(after.launches - before.launches) +
               ", want " + std::to_string(wantLaunches));
  }
  // The source block freed and allocated again, as a caching allocator does: at
  // the same address the remembered graph runs and must copy what it holds now.
  if (!c.freedReplay) {
    std::printf("[rank %d] copy graphs: replay over a reallocated block left out (--no-freed-replay)\n", c.rank);
    TCUDA(cudaFree(device));
    TCUDA(cudaFreeHost(pinned));
    return;
  }
  const std::byte* was = reinterpret_cast<std::byte*>(device + kOffset);
  TCUDA(cudaFree(device));
  device = deviceAlloc<uint8_t>(plan.srcBytes + kOffset);
  const bool sameAddress = reinterpret_cast<std::byte*>(device + kOffset) == was;
  const auto before = c.ep.copyGraphStats();
  oneRound("reallocated", reinterpret_cast<std::byte*>(device + kOffset), 30);
  if (sameAddress)
    TCHECK(c.ep.copyGraphStats().launches - before.launches == (graphsOn ? c.ranks : 0),
           "a reallocated block at the same address did not replay its graph");
  else
    std::printf("[rank %d] copy graphs: the reallocated block moved; its replay is not checked\n", c.rank);
  TCUDA(cudaFree(device));
  TCUDA(cudaFreeHost(pinned));
  std::printf("[rank %d] copy graphs: %lld built, %lld launches\n", c.rank,
              static_cast<long long>(c.ep.copyGraphStats().built), static_cast<long long>(c.ep.copyGraphStats().launches));
}

// More recurring lists than the engine keeps graphs for (1024): each new graph
// past the cap drops the least recently launched (or built) one, which then
// starts over as a first sighting. 1026 lists of one 256-byte copy each, inside
// the own arena, one call each round (graphs are built at a call's start); the
// last round's bytes are checked against poisoned slots.
void testCopyGraphCap(Ctx& c) {
  if (!copyGraphsOn()) return skipped(c, "copy-graph cap", "TIDE_COPY_GRAPHS=0");
  if (!c.graphCap) {
    std::printf("[rank %d] copy-graph cap case left out (--no-graph-cap)\n", c.rank);
    return;
  }
  constexpr int64_t kCap = 1024;  // copy_engine.cpp's kMaxGraphs
  constexpr int64_t kPiece = 256;
  const auto before = c.ep.copyGraphStats();
  // The earlier tests' graphs, launched before these: the first `live` drops are theirs.
  const int64_t live = before.built - before.dropped;
  const int64_t lists = kCap + 2;
  std::byte* src = c.ep.arena() + kGraphSource;
  std::byte* dst = c.ep.arena() + kCopyRegion + c.rank * kCopySlot;
  const std::vector<uint8_t> srcHost = pattern(c.rank, 40, lists * kPiece);
  upload(src, srcHost.data(), lists * kPiece);
  int calls = 0;
  auto round = [&] {
    c.ep.synchronizeAll();  // quiescent at the call's start: wanted graphs get built
    c.ep.setCallContext("copy_graph_cap#" + std::to_string(calls++));
    for (int64_t i = 0; i < lists; ++i) c.ep.copy(1, {CopyOp{dst + i * kPiece, src + i * kPiece, kPiece, 1, 0, 0}});
  };
  auto text = [](const char* what, int64_t got, int64_t want) {
    return std::string(what) + " " + std::to_string(got) + ", want " + std::to_string(want);
  };
  round();  // first sightings
  round();  // second sightings: every list wanted
  const auto second = c.ep.copyGraphStats();
  TCHECK(second.built == before.built, text("round 2: built", second.built - before.built, 0));
  // Every list gets a graph at the call's start: the earlier tests' graphs go
  // first, then lists 0 and 1 (the first built), which come up here as first sightings.
  round();
  const auto third = c.ep.copyGraphStats();
  TCHECK(third.built - second.built == lists, text("round 3: built", third.built - second.built, lists));
  TCHECK(third.dropped - second.dropped == live + 2, text("round 3: dropped", third.dropped - second.dropped, live + 2));
  TCHECK(third.launches - second.launches == lists - 2,
         text("round 3: launches", third.launches - second.launches, lists - 2));
  round();  // lists 0 and 1 wanted again; the others replay
  const auto fourth = c.ep.copyGraphStats();
  TCHECK(fourth.built == third.built, text("round 4: built", fourth.built - third.built, 0));
  TCHECK(fourth.launches - third.launches == lists - 2,
         text("round 4: launches", fourth.launches - third.launches, lists - 2));
  c.ep.synchronizeAll();
  fill(dst, kPoisonByte, lists * kPiece);
  // Lists 0 and 1 get graphs again, dropping the two least recently launched,
  // lists 2 and 3, which then come up as first sightings in this same round.
  round();
  c.ep.synchronizeAll();
  const auto fifth = c.ep.copyGraphStats();
  TCHECK(fifth.built - fourth.built == 2, text("round 5: built", fifth.built - fourth.built, 2));
  TCHECK(fifth.dropped - fourth.dropped == 2, text("round 5: dropped", fifth.dropped - fourth.dropped, 2));
  TCHECK(fifth.launches - fourth.launches == lists - 2,
         text("round 5: launches", fifth.launches - fourth.launches, lists - 2));
  TCHECK(download(dst, lists * kPiece) == srcHost, "round 5: the copied bytes differ");
  c.ep.barrier();
}

// ------------------------------------------------------------------ ring ping-pong

// Round i: rank r overwrites its payload with byte i, copies it into rank
// r+1's ring region and signals; rank r+1 waits for that signal and copies the
// first 256 bytes it sees into its log. A signal that overtook its data would
// leave an older byte in the log.
void testRingOrdering(Ctx& c) {
  if (c.ranks < 2) return skipped(c, "ring ordering", "one rank");
  const int next = (c.rank + 1) % c.ranks;
  const int prev = (c.rank + c.ranks - 1) % c.ranks;
  constexpr int kRounds = 64;
  auto* payload = deviceAlloc<uint8_t>(kRingPayload);
  fill(c.ep.arena() + kRingRegion, 0, 2 * kMiB);
  c.ep.barrier();
  c.ep.setCallContext("ring#0");
  for (int i = 1; i <= kRounds; ++i) {
    TCUDA(cudaMemsetAsync(payload, i, static_cast<size_t>(kRingPayload), c.ep.stream(1)));
    CopyOp op;
    op.dst = c.ep.peerArena(next) + kRingRegion;
    op.src = payload;
    op.width = kRingPayload;
    c.ep.copy(1, {op});
    c.ep.signal(1, next, kRingSignal, static_cast<uint64_t>(i));

    c.ep.wait(2, kRingSignal, static_cast<uint64_t>(i), prev, "ring payload");
    CopyOp log;
    log.dst = c.ep.arena() + kRingLog + (i - 1) * 256;
    log.src = c.ep.arena() + kRingRegion + kRingPayload - 256;  // the tail: written last
    log.width = 256;
    c.ep.copy(2, {log});
    // The sender may overwrite our region only after we logged this round.
    const uint64_t logged = c.ep.record(2);
    c.ep.waitEvent(1, 2, logged);
    c.ep.signal(2, prev, kRingSignal + 1, static_cast<uint64_t>(i));
    c.ep.wait(1, kRingSignal + 1, static_cast<uint64_t>(i), next, "ring log done");
  }
  c.ep.synchronizeAll();
  const auto logHost = download(c.ep.arena() + kRingLog, kRounds * 256);
  int64_t wrong = 0;
  for (int i = 1; i <= kRounds; ++i)
    for (int b = 0; b < 256; ++b) wrong += logHost[static_cast<size_t>((i - 1) * 256 + b)] != static_cast<uint8_t>(i);
  TCHECK(wrong == 0, std::to_string(wrong) + " log bytes show data older than their signal");
  TCHECK(c.ep.counterValue(kRingSignal) == kRounds, "ring counter " + std::to_string(c.ep.counterValue(kRingSignal)));
  TCUDA(cudaFree(payload));
  c.ep.barrier();
}

// ------------------------------------------------------------------ rails

// duplicatePutAfter = 0: the first put's bytes land again after the second
// put to the same place, before the second put's signal.
void testDuplicatePut(Ctx& c) {
  const auto& topo = c.ep.topology();
  const int64_t bytes = 64 * 1024;
  const int64_t offset = kRailRegion + 8 * kMiB;
  const auto first = pattern(c.rank, 4, bytes);
  const auto second = pattern(c.rank, 5, bytes);
  auto* a = deviceAlloc<uint8_t>(bytes);
  auto* b = deviceAlloc<uint8_t>(bytes);
  upload(a, first.data(), bytes);
  upload(b, second.data(), bytes);
  fabric::FabricFaults f;
  f.duplicatePutAfter = 0;
  c.ep.setFabricFaults(f);
  c.ep.setCallContext("duplicate_put#0");
  const int to = topo.railPeer(c.rank, 1);
  const int from = topo.railPeer(c.rank, -1);
  c.ep.railPut(1, to, offset, a, bytes, -1, 0);
  c.ep.railPut(1, to, offset, b, bytes, kFaultBase + 5, 1);
  c.ep.wait(2, kFaultBase + 5, 1, from, "second put");
  c.ep.synchronizeAll();
  TCHECK(c.ep.fabricFaultFirings() == 1, "the replay counted " + std::to_string(c.ep.fabricFaultFirings()) +
                                             " times (want 1)");
  c.ep.setFabricFaults(fabric::FabricFaults{});
  TCHECK(c.ep.fabricFaultFirings() == 0, "setFabricFaults did not reset the firing count");
  const auto got = download(c.ep.arena() + offset, bytes);
  TCHECK(got == pattern(from, 4, bytes), "the first put's bytes were not replayed over the second's");
  TCUDA(cudaFree(a));
  TCUDA(cudaFree(b));
  c.ep.barrier();
}

void testRailPuts(Ctx& c) {
  const auto& topo = c.ep.topology();
  if (topo.nodes < 2) return skipped(c, "rail puts", "one node");
  const int64_t bytes = kMiB + 5;
  const std::vector<uint8_t> mine = pattern(c.rank, 2, bytes);
  auto* buffer = deviceAlloc<uint8_t>(bytes);
  // RMA rails read only from the arena (a registered window): there, the
  // source sits in the copy region, done with by now.
  uint8_t* src = c.ep.railSourcesInArena() ? reinterpret_cast<uint8_t*>(c.ep.arena() + kCopyRegion + 14 * kMiB)
                                           : buffer;
  upload(src, mine.data(), bytes);
  fill(c.ep.arena() + kRailRegion, kPoisonByte, 16 * kMiB);
  c.ep.barrier();
  c.ep.setCallContext("rail_puts#0");
  const int node = topo.nodeOf(c.rank);
  // Send/recv rails: a zero-byte transfer rides in the same group (nothing is
  // sent; the receive only sets its counter, after the group's data).
  const bool twoSided = c.ep.railsTwoSided();
  for (int d = 1; d < topo.nodes; ++d) {
    const int peer = topo.railPeer(c.rank, d);
    c.ep.railPut(3, peer, kRailRegion + node * 2 * kMiB, src, bytes, kRailDone + node, 7);
    if (twoSided) c.ep.railPut(3, peer, kRailRegion + node * 2 * kMiB, src, 0, kRailDone + node, 8);
  }
  for (int d = 1; d < topo.nodes; ++d) {
    const int peer = topo.railPeer(c.rank, -d);
    const int peerNode = topo.nodeOf(peer);
    c.ep.railRecv(3, peer, kRailRegion + peerNode * 2 * kMiB, bytes, kRailDone + peerNode, 7);
    if (twoSided) c.ep.railRecv(3, peer, kRailRegion + peerNode * 2 * kMiB, 0, kRailDone + peerNode, 8);
  }
  for (int d = 1; d < topo.nodes; ++d) {
    const int peer = topo.railPeer(c.rank, -d);
    c.ep.wait(2, kRailDone + topo.nodeOf(peer), twoSided ? 8 : 7, peer, "rail put");
  }
  c.ep.synchronizeAll();
  for (int d = 1; d < topo.nodes; ++d) {
    const int peer = topo.railPeer(c.rank, -d);
    const int peerNode = topo.nodeOf(peer);
    const auto got = download(c.ep.arena() + kRailRegion + peerNode * 2 * kMiB, 2 * kMiB);
    const auto want = pattern(peer, 2, bytes);
    int64_t wrong = 0;
    for (int64_t i = 0; i < bytes; ++i) wrong += got[static_cast<size_t>(i)] != want[static_cast<size_t>(i)];
    for (int64_t i = bytes; i < 2 * kMiB; ++i) wrong += got[static_cast<size_t>(i)] != kPoisonByte;
    TCHECK(wrong == 0, std::to_string(wrong) + " wrong bytes from the rail put of rank " + std::to_string(peer));
  }
  const int64_t puts = (topo.nodes - 1) * (twoSided ? 2 : 1);
  TCHECK(c.ep.stats().railPuts == puts, "railPuts " + std::to_string(c.ep.stats().railPuts));
  TCUDA(cudaFree(buffer));
  c.ep.barrier();
  if (c.ep.railsByCopy()) testDuplicatePut(c);
}

// railPuts: several pieces to one peer as one submission (copy-engine rails:
// one copy batch, then the counter), each at its own offset from its own
// source, the bytes between them untouched; other rails put each in turn.
void testRailPieceLists(Ctx& c) {
  const auto& topo = c.ep.topology();
  if (topo.nodes < 2) return skipped(c, "rail piece lists", "one node");
  if (!c.ep.railsByCopy()) return skipped(c, "rail piece lists", "two-sided rails (each piece its own put)");
  const int64_t bytes = 3 * 65536 + 7;
  const std::vector<uint8_t> mine = pattern(c.rank, 6, bytes);
  auto* src = deviceAlloc<uint8_t>(bytes);
  upload(src, mine.data(), bytes);
  fill(c.ep.arena() + kRailRegion, kPoisonByte, 16 * kMiB);
  c.ep.barrier();
  c.ep.setCallContext("rail_piece_lists#0");
  const int node = topo.nodeOf(c.rank);
  // Pieces out of order, with gaps: [0, a), [a, b) and [b, bytes) of the source
  // to dst offsets 2 b, 0 and b + 4096 of this node's 2 MiB.
  const int64_t a = 65536 + 3, b = 2 * 65536 + 5;
  const int64_t base = kRailRegion + node * 2 * kMiB;
  const std::vector<fabric::Endpoint::RailPiece> pieces = {
      {base + 2 * b, src, a}, {base, src + a, b - a}, {base + b + 4096, src + b, bytes - b}};
  const int64_t putsBefore = c.ep.stats().railPuts;
  for (int d = 1; d < topo.nodes; ++d) c.ep.railPuts(3, topo.railPeer(c.rank, d), pieces, kRailDone + node, 9);
  for (int d = 1; d < topo.nodes; ++d) {
    const int peer = topo.railPeer(c.rank, -d);
    c.ep.wait(2, kRailDone + topo.nodeOf(peer), 9, peer, "rail piece list");
  }
  c.ep.synchronizeAll();
  for (int d = 1; d < topo.nodes; ++d) {
    const int peer = topo.railPeer(c.rank, -d);
    const auto got = download(c.ep.arena() + kRailRegion + topo.nodeOf(peer) * 2 * kMiB, 2 * kMiB);
    std::vector<uint8_t> want(static_cast<size_t>(2 * kMiB), kPoisonByte);
    const auto theirs = pattern(peer, 6, bytes);
    std::copy(theirs.begin(), theirs.begin() + a, want.begin() + 2 * b);
    std::copy(theirs.begin() + a, theirs.begin() + b, want.begin());
    std::copy(theirs.begin() + b, theirs.end(), want.begin() + b + 4096);
    int64_t wrong = 0;
    for (size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
    TCHECK(wrong == 0, std::to_string(wrong) + " wrong bytes from the rail piece list of rank " + std::to_string(peer));
  }
  TCHECK(c.ep.stats().railPuts - putsBefore == 3 * (topo.nodes - 1),
         "railPuts counted " + std::to_string(c.ep.stats().railPuts - putsBefore));
  TCUDA(cudaFree(src));
  c.ep.barrier();
}

// ------------------------------------------------------------------ events, caller stream, zero

// The endpoint works on its own GPU whatever device the calling thread has
// current, and leaves that choice alone: with another GPU current, an event
// made on first use, a kernel and a wait still go to the rank's GPU.
void testOtherCurrentDevice(Ctx& c) {
  int devices = 0;
  TCUDA(cudaGetDeviceCount(&devices));
  if (devices < 2) return skipped(c, "other current device", "one GPU");
  const int other = (c.rank + 1) % devices;
  TCUDA(cudaSetDevice(other));
  c.ep.setCallContext("other_device#0");
  c.ep.delay(1, 0.001);
  const uint64_t ev = c.ep.record(1);
  c.ep.waitEvent(2, 1, ev);
  c.ep.synchronize(2);
  int current = -1;
  TCUDA(cudaGetDevice(&current));
  TCHECK(current == other, "an endpoint operation changed the thread's current device");
  TCUDA(cudaSetDevice(c.rank));
}

void testEventsCallerStreamZero(Ctx& c) {
  const int64_t bytes = 32 * kMiB;
  auto* a = deviceAlloc<uint8_t>(bytes);
  auto* b = deviceAlloc<uint8_t>(bytes);
  auto* d = deviceAlloc<uint8_t>(bytes);
  const auto pat = pattern(c.rank, 3, bytes);
  upload(a, pat.data(), bytes);
  fill(b, 0, bytes);
  // q1: a -> b (long); q2 must see b complete after waiting on the event.
  c.ep.setCallContext("events#0");
  c.ep.copy(1, {CopyOp{b, a, bytes, 1, 0, 0}});
  const uint64_t ev = c.ep.record(1);
  c.ep.waitEvent(2, 1, ev);
  c.ep.copy(2, {CopyOp{d, b, bytes, 1, 0, 0}});
  c.ep.synchronize(2);
  const auto got = download(d, bytes);
  TCHECK(got == pat, "copy after waitEvent saw an unfinished copy");

  // Queue 0 on the caller's stream.
  cudaStream_t mine = nullptr;
  TCUDA(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
  c.ep.setCallerStream(mine);
  TCHECK(c.ep.stream(0) == mine, "queue 0 is not the caller's stream");
  TCUDA(cudaMemsetAsync(d, 0, static_cast<size_t>(bytes), mine));
  c.ep.copy(0, {CopyOp{d, a, 4096, 1, 0, 0}});
  TCUDA(cudaStreamSynchronize(mine));
  const auto head = download(d, 8192);
  TCHECK(std::equal(head.begin(), head.begin() + 4096, pat.begin()), "copy on the caller stream");
  TCHECK(std::all_of(head.begin() + 4096, head.end(), [](uint8_t x) { return x == 0; }), "caller stream order");
  // The legacy default stream (PyTorch's default) works as queue 0 too, with
  // batched copies falling back to single ones.
  c.ep.setCallerStream(nullptr);
  fill(d, 0, 8192);
  c.ep.copy(0, {CopyOp{d, a, 1000, 1, 0, 0}, CopyOp{d + 2000, a + 2000, 1000, 1, 0, 0}});
  TCUDA(cudaStreamSynchronize(nullptr));
  const auto legacy = download(d, 3000);
  TCHECK(std::equal(legacy.begin(), legacy.begin() + 1000, pat.begin()) &&
             std::equal(legacy.begin() + 2000, legacy.end(), pat.begin() + 2000),
         "batched copy on the legacy default stream");
  c.ep.clearCallerStream();
  TCHECK(c.ep.stream(0) != mine && c.ep.stream(0) != nullptr, "queue 0 did not get its own stream back");
  TCUDA(cudaStreamDestroy(mine));

  // delay(): the queue idles before its next op.
  const auto t0 = std::chrono::steady_clock::now();
  c.ep.delay(3, 0.2);
  c.ep.zero(3, d, 16);
  c.ep.synchronize(3);
  const double idled = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  TCHECK(idled >= 0.19, "delay(0.2) idled only " + std::to_string(idled) + " s");

  // zero(): exactly the range.
  fill(d, kPoisonByte, 1 << 16);
  c.ep.zero(2, d + 100, 5000);
  c.ep.synchronize(2);
  const auto z = download(d, 1 << 16);
  int64_t wrong = 0;
  for (int64_t i = 0; i < (1 << 16); ++i)
    wrong += z[static_cast<size_t>(i)] != ((i >= 100 && i < 5100) ? 0 : kPoisonByte);
  TCHECK(wrong == 0, "zero(): " + std::to_string(wrong) + " wrong bytes");
  TCUDA(cudaFree(a));
  TCUDA(cudaFree(b));
  TCUDA(cudaFree(d));
}

// ------------------------------------------------------------------ sum

struct SumCase {
  bool bf16;
  int sources;
  int pieces;
  int64_t rows;
  int64_t elems;
  bool misaligned;
  bool accumulate;
  float alpha;
};

// One piece of a sum case: host data, device buffers, reference output.
struct PieceData {
  std::vector<RefSource> ref;
  std::vector<std::vector<uint16_t>> hb;
  std::vector<std::vector<float>> hf;
  std::vector<void*> devs;
  std::vector<float> dst0, want;
  float* dstDev = nullptr;
  int64_t shift = 0;
};

// One SumOp of several pieces on fresh data, at three CTA budgets: every
// result equals the reference and the others bit for bit.
void runSumCase(Ctx& c, const SumCase& sc, uint64_t seed) {
  ValueGen gen(seed);
  const int64_t item = sc.bf16 ? 2 : 4;
  SumOp op;
  op.srcType = sc.bf16 ? plan::DType::kBF16 : plan::DType::kFP32;
  op.alpha = sc.alpha;
  op.accumulate = sc.accumulate;
  std::vector<PieceData> data(static_cast<size_t>(sc.pieces));
  for (int pi = 0; pi < sc.pieces; ++pi) {
    PieceData& pd = data[static_cast<size_t>(pi)];
    fabric::SumPiece piece;
    piece.rows = sc.rows;
    piece.elems = pi == 0 ? sc.elems : 1 + static_cast<int64_t>(gen.next() % static_cast<uint64_t>(sc.elems + 64));
    pd.shift = (sc.misaligned && pi % 2 == 0) ? 1 : 0;  // one element off 16-byte alignment
    pd.ref.resize(static_cast<size_t>(sc.sources));
    pd.hb.resize(static_cast<size_t>(sc.sources));
    pd.hf.resize(static_cast<size_t>(sc.sources));
    for (int k = 0; k < sc.sources; ++k) {
      RefSource& rs = pd.ref[static_cast<size_t>(k)];
      rs.bf16 = sc.bf16;
      rs.pitch = piece.elems + static_cast<int64_t>(gen.next() % 3) * 8;
      const int64_t n = rs.pitch * piece.rows;
      if (sc.bf16) {
        pd.hb[static_cast<size_t>(k)] = gen.bf16s(static_cast<size_t>(n));
        rs.data = pd.hb[static_cast<size_t>(k)].data();
      } else {
        pd.hf[static_cast<size_t>(k)] = gen.fp32s(static_cast<size_t>(n));
        rs.data = pd.hf[static_cast<size_t>(k)].data();
      }
      for (int64_t r = 0; r < piece.rows; ++r) {
        const uint64_t pick = gen.next() % 4;
        rs.valid.push_back(pick == 0 ? static_cast<int64_t>(gen.next() % static_cast<uint64_t>(piece.elems + 1))
                                     : (pick == 1 ? 0 : piece.elems));
      }
      auto* dev = deviceAlloc<uint8_t>((n + pd.shift) * item);
      upload(dev + pd.shift * item, rs.data, n * item);
      pd.devs.push_back(dev);
      piece.sources.push_back(SumSource{dev + pd.shift * item, rs.pitch, rs.valid});
    }
    piece.dstPitch = piece.elems + 4;
    const int64_t dstN = piece.dstPitch * piece.rows;
    pd.dst0.assign(static_cast<size_t>(dstN), bitsToFloat(kPoisonFloat));
    if (sc.accumulate)
      for (int64_t r = 0; r < piece.rows; ++r)
        for (int64_t x = 0; x < piece.elems; ++x) pd.dst0[static_cast<size_t>(r * piece.dstPitch + x)] = gen.fp32();
    pd.want = pd.dst0;
    referenceSum(pd.want, piece.dstPitch, piece.rows, piece.elems, pd.ref, sc.alpha, sc.accumulate);
    pd.dstDev = deviceAlloc<float>(dstN + pd.shift);
    piece.dst = pd.dstDev + pd.shift;
    op.pieces.push_back(piece);
  }

  const std::string name = std::string(sc.bf16 ? "bf16" : "fp32") + " K=" + std::to_string(sc.sources) +
                           " pieces=" + std::to_string(sc.pieces) + " rows=" + std::to_string(sc.rows) +
                           " elems=" + std::to_string(sc.elems) + (sc.misaligned ? " misaligned" : "") +
                           (sc.accumulate ? " acc" : "") + " alpha=" + std::to_string(sc.alpha);
  std::vector<std::vector<std::vector<float>>> got;  // [budget][piece]
  for (int ctas : {1, 7, 132}) {
    for (PieceData& pd : data) upload(pd.dstDev + pd.shift, pd.dst0.data(), static_cast<int64_t>(pd.dst0.size()) * 4);
    c.ep.setCtaBudget(ctas, 16);
    c.ep.sum(1, op);
    c.ep.synchronize(1);
    got.emplace_back();
    for (PieceData& pd : data) {
      got.back().emplace_back(pd.dst0.size());
      TCUDA(cudaMemcpy(got.back().back().data(), pd.dstDev + pd.shift, pd.dst0.size() * 4, cudaMemcpyDeviceToHost));
    }
  }
  c.ep.setCtaBudget(16, 16);
  // Inside the rows x elems block: the reference's value (any NaN for a NaN),
  // never the poison; in the pitch gaps: the poison, untouched.
  int64_t wrong = 0, knobDiffs = 0;
  for (int pi = 0; pi < sc.pieces; ++pi) {
    const PieceData& pd = data[static_cast<size_t>(pi)];
    const auto& piece = op.pieces[static_cast<size_t>(pi)];
    for (size_t i = 0; i < pd.want.size(); ++i) {
      const float g = got[0][static_cast<size_t>(pi)][i];
      const float w = pd.want[i];
      const bool inBlock = static_cast<int64_t>(i) % piece.dstPitch < piece.elems;
      wrong += inBlock ? (!sameFloat(g, w) || floatBits(g) == kPoisonFloat) : floatBits(g) != floatBits(w);
      for (size_t v = 1; v < got.size(); ++v) knobDiffs += floatBits(got[v][static_cast<size_t>(pi)][i]) != floatBits(g);
    }
  }
  TCHECK(wrong == 0, name + ": " + std::to_string(wrong) + " elements differ from the reference");
  TCHECK(knobDiffs == 0, name + ": results differ across CTA budgets");
  for (PieceData& pd : data) {
    for (void* p : pd.devs) TCUDA(cudaFree(p));
    TCUDA(cudaFree(pd.dstDev));
  }
}

void testSum(Ctx& c) {
  c.ep.setCallContext("sum#0");
  int cases = 0;
  const std::vector<int64_t> elemsList = {1, 7, 8, 1000, 4099, 65536 + 3};
  uint64_t seed = streamSeed(1000 + static_cast<uint64_t>(c.rank));
  ValueGen pick(streamSeed(77 + static_cast<uint64_t>(c.rank)), 0);
  for (bool bf16 : {true, false})
    for (int k : {1, 2, 3, 4, 7, 8, 9, 16})
      for (int variant = 0; variant < 4; ++variant) {
        SumCase sc;
        sc.bf16 = bf16;
        sc.sources = k;
        sc.pieces = 1 + variant;
        sc.rows = std::vector<int64_t>{1, 2, 5, 17}[static_cast<size_t>(variant)];
        sc.elems = elemsList[pick.next() % elemsList.size()];
        if (sc.rows > 2 && sc.elems > 5000) sc.elems = 4099;
        sc.misaligned = variant == 1 || variant == 3;
        sc.accumulate = variant >= 2;
        sc.alpha = std::vector<float>{1.0f, 0.5f, -0.25f, 0.37f}[static_cast<size_t>(variant)];
        runSumCase(c, sc, seed++);
        ++cases;
      }
  // Many pieces in one op: more than one launch holds.
  SumCase many{true, 8, 130, 1, 300, false, false, 1.0f};
  runSumCase(c, many, seed++);
  ++cases;
  // Rows of many tiles: a pipelined kernel's stages wrap around several times
  // at one CTA (the TMA kernel's tile is 16 KB of each source).
  for (const SumCase& big : {SumCase{true, 2, 1, 3, 300000, false, true, 0.5f},
                             SumCase{false, 4, 2, 1, 200000, false, false, -0.25f},
                             SumCase{true, 1, 1, 1, 1 << 20, false, false, 1.0f}}) {
    runSumCase(c, big, seed++);
    ++cases;
  }
  // The vector path is taken where it should be.
  namespace k = fabric::cuda::kernels;
  const void* aligned[1] = {reinterpret_cast<const void*>(uintptr_t{512})};
  const void* odd[1] = {reinterpret_cast<const void*>(uintptr_t{514})};
  const int64_t pitch[1] = {64};
  auto* dst = reinterpret_cast<const float*>(uintptr_t{256});
  TCHECK(k::sumPieceVectorizable(dst, 64, 2, 1, aligned, pitch, k::SourceType::kBF16), "aligned piece not vectorized");
  TCHECK(!k::sumPieceVectorizable(dst, 64, 2, 1, odd, pitch, k::SourceType::kBF16), "misaligned piece vectorized");
  std::printf("[rank %d] sum: %d cases x 3 CTA budgets\n", c.rank, cases);
}

// ------------------------------------------------------------------ land

std::vector<float> pullData(int owner) {
  ValueGen gen(streamSeed(5000 + static_cast<uint64_t>(owner)));
  return gen.fp32s(static_cast<size_t>(kPullElems));
}

void testLand(Ctx& c) {
  // Every rank publishes fp32 data in its pull region; landings read peers' copies.
  const auto own = pullData(c.rank);
  upload(c.ep.arena() + kPullRegion, own.data(), kPullElems * 4);
  c.ep.barrier();
  c.ep.setCallContext("land#0");
  int cases = 0;
  ValueGen gen(streamSeed(9000 + static_cast<uint64_t>(c.rank)));
  for (int k : {1, 2, 3, 5, 8, 9})
    for (int variant = 0; variant < 4; ++variant) {
      const int64_t elems = std::vector<int64_t>{1, 1001, 4096, 300001}[static_cast<size_t>(variant)];
      const bool misaligned = variant == 1;
      const bool accumulate = variant >= 2;
      const bool clear = variant == 3;
      const float alpha = variant == 2 ? -0.5f : 0.25f;
      const int64_t shift = misaligned ? 1 : 0;
      // Sources: local buffers, plus (when peers exist and nothing is cleared) peer pull regions.
      std::vector<std::vector<float>> host;
      std::vector<float*> devs;
      LandOp op;
      for (int s = 0; s < k; ++s) {
        const int peer = (c.rank + s) % c.ranks;
        if (!clear && s % 2 == 1 && c.ranks > 1 && c.ep.peerArena(peer) != nullptr) {
          const auto data = pullData(peer);
          const int64_t off = (s * 4099 + shift) % (kPullElems - elems);
          host.emplace_back(data.begin() + off, data.begin() + off + elems);
          op.sources.push_back(reinterpret_cast<float*>(c.ep.peerArena(peer) + kPullRegion) + off);
          continue;
        }
        host.push_back(gen.fp32s(static_cast<size_t>(elems)));
        auto* d = deviceAlloc<float>(elems + shift);
        upload(d + shift, host.back().data(), elems * 4);
        devs.push_back(d);
        op.sources.push_back(d + shift);
      }
      std::vector<float> dst0(static_cast<size_t>(elems));
      for (auto& v : dst0) v = accumulate ? gen.fp32() : bitsToFloat(kPoisonFloat);
      std::vector<const float*> refSrc;
      for (auto& h : host) refSrc.push_back(h.data());
      std::vector<float> want = dst0;
      referenceLand(want, refSrc, elems, alpha, accumulate);

      auto* dstDev = deviceAlloc<float>(elems + shift);
      upload(dstDev + shift, dst0.data(), elems * 4);
      op.dst = dstDev + shift;
      op.elems = elems;
      op.alpha = alpha;
      op.accumulate = accumulate;
      op.clearSources = clear;
      c.ep.land(2, op);
      c.ep.synchronize(2);
      std::vector<float> got(static_cast<size_t>(elems));
      TCUDA(cudaMemcpy(got.data(), dstDev + shift, static_cast<size_t>(elems) * 4, cudaMemcpyDeviceToHost));
      int64_t wrong = 0;
      for (int64_t i = 0; i < elems; ++i)
        wrong += !sameFloat(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) ||
                 floatBits(got[static_cast<size_t>(i)]) == kPoisonFloat;
      TCHECK(wrong == 0, "land K=" + std::to_string(k) + " elems=" + std::to_string(elems) + ": " +
                             std::to_string(wrong) + " elements differ");
      if (clear) {
        int64_t notCleared = 0;
        for (float* s : op.sources) {
          std::vector<float> back(static_cast<size_t>(elems));
          TCUDA(cudaMemcpy(back.data(), s, static_cast<size_t>(elems) * 4, cudaMemcpyDeviceToHost));
          for (float v : back) notCleared += floatBits(v) != 0;
        }
        TCHECK(notCleared == 0, "clearSources left " + std::to_string(notCleared) + " values");
      }
      for (float* d : devs) TCUDA(cudaFree(d));
      TCUDA(cudaFree(dstDev));
      ++cases;
    }
  std::printf("[rank %d] land: %d cases\n", c.rank, cases);
  c.ep.barrier();
}

// ------------------------------------------------------------------ faults

// What `issue` was refused with as a usage error, "wrong kind: ..." for another error, or
// "accepted".
template <typename F>
std::string usageRefusal(F&& issue) {
  try {
    issue();
  } catch (const fabric::FabricError& e) {
    return e.kind() == fabric::FabricError::Kind::kUsage ? std::string(e.what()) : "wrong kind: " + std::string(e.what());
  }
  return "accepted";
}

// A stall is a host-fabric fault: on CUDA it would sleep in the caller's
// thread past every peer's failure, so it is refused, and the faults set
// before stay as they were. So is a failing host task.
void testStallRefused(Ctx& c) {
  fabric::FabricFaults f;
  f.stallSeconds = 1.0;
  std::string refused = usageRefusal([&] { c.ep.setFabricFaults(f); });
  TCHECK(refused.find("stallSeconds is a host-fabric fault") != std::string::npos,
         "a CUDA stall was not refused as a usage error: '" + refused + "'");
  c.ep.setCallContext("after_refused_stall#0");
  c.ep.signal(1, c.rank, kFaultBase + 7, 1);
  c.ep.wait(1, kFaultBase + 7, 1, c.rank, "own signal after a refused stall");
  const auto before = std::chrono::steady_clock::now();
  c.ep.synchronize(1);  // returns at once: no stall was armed
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  TCHECK(took < 0.5, "synchronize after a refused stall took " + std::to_string(took) + " s: the 1 s stall was armed");
  // A failing host task is a host-fabric fault too: the CUDA fabric has no host tasks.
  fabric::FabricFaults failTask;
  failTask.failTaskAfter = 0;
  refused = usageRefusal([&] { c.ep.setFabricFaults(failTask); });
  TCHECK(refused.find("failTaskAfter is a host-fabric fault") != std::string::npos,
         "a CUDA task failure was not refused as a usage error: '" + refused + "'");
}

// Layouts the kernels cannot run (fabric/reduce_op_rules.hpp) are refused at issue, before any
// launch: a misaligned element would trap and end the CUDA context, overlapping destination rows
// and a landing onto its own source would race.
void testLayoutsRefused(Ctx& c) {
  auto* bytes = c.ep.arena();
  auto* f = reinterpret_cast<float*>(bytes);
  fabric::SumOp sum;
  sum.srcType = plan::DType::kBF16;
  sum.pieces = {fabric::SumPiece{reinterpret_cast<float*>(bytes + 2), 8, 1, 8, {{f + 64, 8, {8}}}}};
  std::string why = usageRefusal([&] { c.ep.sum(0, sum); });
  TCHECK(why.find("its destination is not 4-byte aligned") != std::string::npos, "misaligned sum destination: " + why);
  sum.pieces = {fabric::SumPiece{f, 8, 1, 8, {{bytes + 129, 8, {8}}}}};
  why = usageRefusal([&] { c.ep.sum(0, sum); });
  TCHECK(why.find("its source 0 is not 2-byte aligned") != std::string::npos, "misaligned sum source: " + why);
  sum.pieces = {fabric::SumPiece{f, 4, 2, 8, {{f + 64, 8, {8, 8}}}}};
  why = usageRefusal([&] { c.ep.sum(0, sum); });
  TCHECK(why.find("its destination rows overlap") != std::string::npos, "overlapping sum rows: " + why);
  fabric::LandOp land;
  land.dst = f;
  land.elems = 16;
  land.sources = {f + 64, f + 8};
  why = usageRefusal([&] { c.ep.land(0, land); });
  TCHECK(why.find("its destination overlaps its source 1") != std::string::npos, "landing onto a source: " + why);
  land.sources = {f + 64, f + 70};
  land.clearSources = true;
  why = usageRefusal([&] { c.ep.land(0, land); });
  TCHECK(why.find("it clears its sources, and source 0 partly overlaps source 1") != std::string::npos,
         "clearing landing of shifted sources: " + why);
}

// Shapes the kernels cannot launch, refused with the host fabric's words (reduce_op_rules.hpp),
// and the no-event that every fabric takes as complete (fabric.hpp).
void testShapesRefusedAndNoEvent(Ctx& c) {
  auto* f = reinterpret_cast<float*>(c.ep.arena());
  const fabric::SumSource one{f + 256, 8, {8}};
  fabric::SumOp sum;
  sum.srcType = plan::DType::kFP32;
  sum.pieces = {fabric::SumPiece{f, 8, 1, 8, {}}};
  std::string why = usageRefusal([&] { c.ep.sum(0, sum); });
  TCHECK(why.find("sum piece 0: 0 sources (1..16 taken)") != std::string::npos, "sum without sources: " + why);
  sum.pieces = {fabric::SumPiece{f, 8, 1, 8, {one, {nullptr, 8, {8}}}}};
  why = usageRefusal([&] { c.ep.sum(0, sum); });
  TCHECK(why.find("sum piece 0: source 1 is null") != std::string::npos, "null sum source: " + why);
  fabric::LandOp land;
  land.dst = f;
  land.elems = 8;
  land.sources = std::vector<float*>(17, f + 256);
  why = usageRefusal([&] { c.ep.land(0, land); });
  TCHECK(why.find("landing: 17 sources (1..16 taken)") != std::string::npos, "17 landing sources: " + why);
  TCHECK(c.ep.eventLive(0, fabric::Endpoint::kNoEvent), "the no-event is not live");
  c.ep.waitEvent(0, 1, fabric::Endpoint::kNoEvent);
  c.ep.synchronizeEvent(1, fabric::Endpoint::kNoEvent);
  why = usageRefusal([&] { c.ep.waitEvent(0, 99, fabric::Endpoint::kNoEvent); });
  TCHECK(why.find("queue 99 out of range") != std::string::npos, "no-event from a bad queue: " + why);
  c.ep.synchronize(0);
}

void testLostSignal(Ctx& c) {
  if (c.ranks < 2) return skipped(c, "lost signal", "one rank");
  checkLostSignal(c.ep, c.rank, c.ranks, kFaultBase);
}

// ------------------------------------------------------------------ perf (--perf)

// Median time of `body` enqueued on queue q, in ms (events around each call).
template <typename F>
double medianMs(CudaEndpoint& ep, int q, int iters, F&& body) {
  std::vector<cudaEvent_t> ev(static_cast<size_t>(2 * iters));
  for (auto& e : ev) TCUDA(cudaEventCreate(&e));
  body();  // warm-up
  for (int i = 0; i < iters; ++i) {
    TCUDA(cudaEventRecord(ev[static_cast<size_t>(2 * i)], ep.stream(q)));
    body();
    TCUDA(cudaEventRecord(ev[static_cast<size_t>(2 * i + 1)], ep.stream(q)));
  }
  ep.synchronize(q);
  std::vector<float> ms(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i)
    TCUDA(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], ev[static_cast<size_t>(2 * i)], ev[static_cast<size_t>(2 * i + 1)]));
  for (auto& e : ev) TCUDA(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Bandwidths of the fabric's own primitives on this rank (printed, not checked):
// a copy-engine write into the next rank's arena, and the sum / landing
// kernels at several CTA budgets (bytes read + written per second).
void perf(Ctx& c) {
  c.ep.setCallContext("perf#0");
  const int peer = (c.rank + 1) % c.ranks;
  const int64_t copyBytes = 16 * kMiB;
  auto* src = deviceAlloc<uint8_t>(copyBytes);
  fill(src, 1, copyBytes);
  const double copyMs = medianMs(c.ep, 1, 20, [&] {
    c.ep.copy(1, {CopyOp{c.ep.peerArena(peer) + kCopyRegion, src, copyBytes, 1, 0, 0}});
  });
  std::printf("[rank %d] perf copy 16 MiB -> rank %d: %.1f us, %.1f GB/s\n", c.rank, peer, copyMs * 1e3,
              copyBytes / (copyMs * 1e-3) / 1e9);
  TCUDA(cudaFree(src));
  c.ep.barrier();

  // Level 1 shaped sum: L bf16 sources of E elements -> fp32 (E = 64 Mi).
  const int64_t elems = 64 * kMiB;
  const int k = std::max(2, c.ranks);
  std::vector<uint16_t*> srcs;
  SumOp op;
  op.srcType = plan::DType::kBF16;
  fabric::SumPiece piece;
  piece.elems = elems;
  piece.dstPitch = elems;
  auto* dst = deviceAlloc<float>(elems);
  piece.dst = dst;
  for (int i = 0; i < k; ++i) {
    srcs.push_back(deviceAlloc<uint16_t>(elems));
    fill(srcs.back(), 0x3c, elems * 2);
    piece.sources.push_back(SumSource{srcs.back(), elems, {elems}});
  }
  op.pieces.push_back(piece);
  for (int ctas : {2, 4, 8, 16, 32, 132}) {
    c.ep.setCtaBudget(ctas, ctas);
    const double ms = medianMs(c.ep, 1, 10, [&] { c.ep.sum(1, op); });
    const double bytes = static_cast<double>(elems) * (2.0 * k + 4.0);
    std::printf("[rank %d] perf sum bf16 K=%d E=64Mi ctas=%3d: %8.1f us, %7.1f GB/s (%.1f GB/s per CTA)\n", c.rank,
                k, ctas, ms * 1e3, bytes / (ms * 1e-3) / 1e9, bytes / (ms * 1e-3) / 1e9 / ctas);
  }
  // Four sources (a node of four GPUs), E = 32 Mi.
  SumOp op4 = op;
  op4.pieces[0].elems = elems / 2;
  op4.pieces[0].dstPitch = elems / 2;
  op4.pieces[0].sources.clear();
  for (int i = 0; i < 4; ++i)
    op4.pieces[0].sources.push_back(
        SumSource{srcs[static_cast<size_t>(i % k)] + (i < k ? 0 : elems / 2), elems / 2, {elems / 2}});
  for (int ctas : {4, 16, 32, 132}) {
    c.ep.setCtaBudget(ctas, ctas);
    const double ms = medianMs(c.ep, 1, 10, [&] { c.ep.sum(1, op4); });
    const double bytes = static_cast<double>(elems / 2) * (2.0 * 4 + 4.0);
    std::printf("[rank %d] perf sum bf16 K=4 E=32Mi ctas=%3d: %8.1f us, %7.1f GB/s (%.1f GB/s per CTA)\n", c.rank,
                ctas, ms * 1e3, bytes / (ms * 1e-3) / 1e9, bytes / (ms * 1e-3) / 1e9 / ctas);
  }
  // Landing: fp32 sources, one per rank, pulled through LSA addresses (E = 16 Mi).
  const int64_t landElems = 16 * kMiB;
  auto* landSrc = deviceAlloc<float>(landElems);
  fill(landSrc, 0, landElems * 4);
  LandOp land;
  land.dst = dst;
  land.elems = landElems;
  land.sources.push_back(landSrc);
  for (int r = 1; r < c.ranks; ++r)
    land.sources.push_back(reinterpret_cast<float*>(c.ep.peerArena((c.rank + r) % c.ranks) + kCopyRegion));
  for (int ctas : {2, 4, 8, 16, 32, 132}) {
    c.ep.setCtaBudget(16, ctas);
    const double ms = medianMs(c.ep, 1, 10, [&] { c.ep.land(1, land); });
    const double bytes = static_cast<double>(landElems) * 4.0 * (static_cast<double>(land.sources.size()) + 1.0);
    std::printf("[rank %d] perf land fp32 K=%zu (%d remote) E=16Mi ctas=%3d: %8.1f us, %7.1f GB/s\n", c.rank,
                land.sources.size(), c.ranks - 1, ctas, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
  }
  c.ep.setCtaBudget(16, 16);
  for (auto* p : srcs) TCUDA(cudaFree(p));
  TCUDA(cudaFree(landSrc));
  TCUDA(cudaFree(dst));
  c.ep.barrier();
}

// ------------------------------------------------------------------ drivers

int rankMain(const Args& a, int rank, const ncclUniqueId& id) {
  rankForLog() = rank;
  try {
    // Another GPU current while the endpoint is made (where there is one): it must stay current.
    int devices = 0;
    TCUDA(cudaGetDeviceCount(&devices));
    const int elsewhere = (rank + 1) % devices;
    TCUDA(cudaSetDevice(elsewhere));
    CudaFabricOptions o;
    o.topology = plan::Topology::make(a.nodes, a.ranks / a.nodes);
    o.rank = rank;
    o.device = rank;
    o.arenaBytes = kArenaBytes;
    o.numCounters = 256;
    o.numQueues = 4;
    o.waitTimeoutSeconds = 30;
    o.rails = a.rails == "send-recv" ? CudaFabricOptions::Rails::kSendRecv
              : a.rails == "rma"     ? CudaFabricOptions::Rails::kRma
                                     : CudaFabricOptions::Rails::kAuto;
    {
      // Best effort at handing the arena memory an earlier allocation left bytes in: the
      // arena must read zero however its memory came (fabric.hpp).
      TCUDA(cudaSetDevice(rank));
      void* junk = nullptr;
      TCUDA(cudaMalloc(&junk, static_cast<size_t>(kArenaBytes)));
      TCUDA(cudaMemset(junk, 0xA5, static_cast<size_t>(kArenaBytes)));
      TCUDA(cudaFree(junk));
      TCUDA(cudaSetDevice(elsewhere));
    }
    CudaEndpoint ep(o, id);
    {
      std::vector<uint8_t> start(static_cast<size_t>(kArenaBytes));
      TCUDA(cudaMemcpy(start.data(), ep.arena(), start.size(), cudaMemcpyDeviceToHost));
      const auto nonzero = std::count_if(start.begin(), start.end(), [](uint8_t b) { return b != 0; });
      TCHECK(nonzero == 0, "the arena starts with " + std::to_string(nonzero) + " nonzero bytes");
    }
    int current = -1;
    TCUDA(cudaGetDevice(&current));
    TCHECK(current == elsewhere, "making the endpoint changed the thread's current device");
    TCUDA(cudaSetDevice(rank));  // the test's own buffers go to the rank's GPU
    Ctx c{ep, rank, a.ranks, a.freedReplay, a.graphCap};
    TCHECK(ep.arenaBytes() == kArenaBytes, "arena size");
    testOtherCurrentDevice(c);  // first: no event of queue 1 made yet
    TCHECK(ep.railsByCopy() == (a.rails == "auto"), "rail mode");
    testPeerCopies(c);
    testCopyGraphs(c);
    testCopyGraphCap(c);
    ep.resetStats();
    testRingOrdering(c);
    testRailPuts(c);
    testRailPieceLists(c);
    testEventsCallerStreamZero(c);
    testSum(c);
    testLand(c);
    testStallRefused(c);
    testLayoutsRefused(c);
    testShapesRefusedAndNoEvent(c);
    testLostSignal(c);
    if (a.perf) perf(c);
    ep.synchronizeAll();
  } catch (const std::exception& e) {
    fail(__FILE__, __LINE__, std::string("exception: ") + e.what());
  }
  std::printf("[rank %d] %s (%d failures)\n", rank, failures() == 0 ? "PASS" : "FAIL", failures());
  return failures() == 0 ? 0 : 1;
}

// A wait nobody signals: the watchdog must abort the process with a message
// naming rank, call, counter, value, peer and what, within the deadline.
int timeoutCase() {
  constexpr double kDeadline = 2.0;
  const ChildOutcome out = runCapturingStderr(kDeadline + 60, [] {
    ncclUniqueId id{};
    if (ncclGetUniqueId(&id) != ncclSuccess) return 3;
    CudaFabricOptions o;
    o.topology = plan::Topology::make(1, 1);
    o.device = 0;
    o.arenaBytes = kMiB;
    o.waitTimeoutSeconds = kDeadline;
    CudaEndpoint ep(o, id);
    ep.setCallContext("timeout_probe#0");
    ep.wait(1, 5, 1, 0, "a signal nobody sends");
    ep.synchronize(1);  // never returns: the watchdog aborts first
    return 0;
  });
  std::printf("timeout case: %.1f s, %s, stderr:\n%s", out.seconds,
              out.timedOut ? "TIMED OUT" : (out.exited ? "exited" : "signalled"), out.stderrText.c_str());
  TCHECK(!out.timedOut, "the wait hung instead of failing stop");
  TCHECK(!out.exited && out.signal == SIGABRT, "expected SIGABRT, got exit " + std::to_string(out.exitCode) +
                                                    " / signal " + std::to_string(out.signal));
  TCHECK(out.seconds < kDeadline + 20, "fail stop took " + std::to_string(out.seconds) + " s");
  for (const char* needle : {"rank 0", "timeout_probe#0", "counter 5 >= 1", "peer 0", "a signal nobody sends"})
    TCHECK(out.stderrText.find(needle) != std::string::npos, std::string("message lacks '") + needle + "'");
  return failures() == 0 ? 0 : 1;
}

// In a child process: a stream wait that nobody satisfies, under a watchdog
// of deadline `deadline` whose error probe is `probe`, then a sleep of
// `childSeconds` that the watchdog (or its monitor) must cut short.
ChildOutcome pendingWaitUnderProbe(double deadline, std::function<std::string()> probe, const char* call,
                                   const char* what, int childSeconds) {
  return runCapturingStderr(childSeconds + 10, [&] {
    TCUDA(cudaSetDevice(0));
    uint64_t* counter = nullptr;
    TCUDA(cudaMalloc(&counter, sizeof(uint64_t)));
    TCUDA(cudaMemset(counter, 0, sizeof(uint64_t)));
    TCUDA(cudaDeviceSynchronize());
    cudaStream_t s = nullptr;
    TCUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    tide::fabric::cuda::WaitWatchdog watchdog(0, 0, deadline);
    watchdog.setErrorProbe(probe);
    watchdog.before(s);
    tide::fabric::cuda::StreamMemOps::get().waitGeq(s, counter, 1);
    watchdog.after(s, {.call = call, .queue = 1, .counterId = 5, .value = 1, .peer = 0, .what = what,
                       .counter = counter});
    std::this_thread::sleep_for(std::chrono::seconds(childSeconds));
    return 0;
  });
}

// An error reported while a wait is pending (the probe stands in for an NCCL
// communicator's asynchronous error): the watchdog must abort the process at
// once with that error, long before the wait's deadline.
int errorProbeCase() {
  int asked = 0;
  const ChildOutcome out = pendingWaitUnderProbe(
      60.0, [&asked] { return ++asked < 20 ? std::string() : std::string("injected NCCL error"); }, "error_probe#0",
      "a signal a failed transfer never sends", 20);
  std::printf("error-probe case: %s after %.1f s; stderr:\n%s\n",
              out.timedOut ? "TIMED OUT" : (out.exited ? "exited" : "signalled"), out.seconds,
              out.stderrText.c_str());
  TCHECK(!out.timedOut && !out.exited && out.signal == SIGABRT, "expected SIGABRT from the error probe");
  TCHECK(out.seconds < 15, "the error stopped the process after " + std::to_string(out.seconds) + " s");
  for (const char* needle : {"injected NCCL error", "error_probe#0", "counter 5 >= 1"})
    TCHECK(out.stderrText.find(needle) != std::string::npos, std::string("message lacks '") + needle + "'");
  return failures() == 0 ? 0 : 1;
}

// The watchdog's own query blocked (the probe stands in for a driver or NCCL
// call that does not return) while a wait is pending: the stall monitor,
// which makes no CUDA call, must abort the process near the deadline, naming
// the blocked watchdog; the blocked query itself never returns.
int stalledProbeCase() {
  constexpr double kDeadline = 2.0;
  const ChildOutcome out = pendingWaitUnderProbe(
      kDeadline,
      [] {
        std::this_thread::sleep_for(std::chrono::hours(1));
        return std::string();
      },
      "stalled_probe#0", "a signal nobody sends", 30);
  std::printf("stalled-probe case: %s after %.1f s; stderr:\n%s\n",
              out.timedOut ? "TIMED OUT" : (out.exited ? "exited" : "signalled"), out.seconds,
              out.stderrText.c_str());
  TCHECK(!out.timedOut && !out.exited && out.signal == SIGABRT, "expected SIGABRT from the stall monitor");
  TCHECK(out.seconds < kDeadline + 15, "the blocked watchdog stopped the process after " +
                                           std::to_string(out.seconds) + " s");
  TCHECK(out.stderrText.find("wait watchdog's own query") != std::string::npos, "message lacks the blocked watchdog");
  return failures() == 0 ? 0 : 1;
}

// An arena whose peer addresses the test gives: verifyPeers must take a peer
// address for rank r only where it reaches rank r's arena of the same
// communicator (the same tag nonce), not another communicator's rank r.
class ArenaWithGivenPeers final : public fabric::cuda::DeviceArena {
 public:
  ArenaWithGivenPeers(int rank, uint64_t nonce, cudaStream_t s, double setupDeadlineSeconds = 30)
      : DeviceArena(kMiB, 4, kDeviceMemoryAlign, setupDeadlineSeconds), rank_(rank) {
    allocateDeviceMemory();
    initCountersAndTag(rank, nonce, s);
  }
  ~ArenaWithGivenPeers() override { freeDeviceMemory(); }
  // Empty when verifyPeers accepts `peers`, else its message.
  std::string verify(std::vector<std::byte*> peers, cudaStream_t s) {
    peers_ = std::move(peers);
    try {
      verifyPeers(rank_, s);
      return "";
    } catch (const fabric::FabricError& e) {
      return e.what();
    }
  }

 private:
  int rank_;
};

int arenaTagCase() {
  TCUDA(cudaSetDevice(0));
  cudaStream_t s = nullptr;
  TCUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t ours = rng();
  const uint64_t theirs = ours ^ (uint64_t{1} << (rng() % 64));  // one bit apart
  {
    ArenaWithGivenPeers ours0(0, ours, s), ours1(1, ours, s), theirs1(1, theirs, s);
    const std::string right = ours0.verify({ours0.base(), ours1.base()}, s);
    const std::string otherComm = ours0.verify({ours0.base(), theirs1.base()}, s);
    const std::string otherRank = ours0.verify({ours0.base(), ours0.base()}, s);
    std::printf("arena tag case: same communicator %s; rank 1 of another communicator %s; rank 0 posing as rank 1 %s\n",
                right.empty() ? "accepted" : "REFUSED", otherComm.empty() ? "ACCEPTED" : "refused",
                otherRank.empty() ? "ACCEPTED" : "refused");
    TCHECK(right.empty(), "the right peers were refused: " + right);
    TCHECK(otherComm.find("does not reach that rank's arena") != std::string::npos,
           "another communicator's arena passed as a peer's: '" + otherComm + "'");
    TCHECK(!otherRank.empty(), "rank 0's arena passed as rank 1's");
  }
  TCUDA(cudaStreamDestroy(s));
  return failures() == 0 ? 0 : 1;
}

// Arena setup on a blocked stream (a stream wait that nothing satisfies yet)
// fails within its deadline, naming the step, instead of hanging; the arena's
// memory stays allocated, and the stream runs on once released.
int arenaSetupDeadlineCase() {
  TCUDA(cudaSetDevice(0));
  cudaStream_t blocked = nullptr;
  cudaStream_t releaser = nullptr;
  TCUDA(cudaStreamCreateWithFlags(&blocked, cudaStreamNonBlocking));
  TCUDA(cudaStreamCreateWithFlags(&releaser, cudaStreamNonBlocking));
  uint64_t* gate = nullptr;
  TCUDA(cudaMalloc(&gate, sizeof(uint64_t)));
  TCUDA(cudaMemset(gate, 0, sizeof(uint64_t)));
  TCUDA(cudaDeviceSynchronize());
  fabric::cuda::StreamMemOps::get().waitGeq(blocked, gate, 1);
  std::string error;
  fabric::FabricError::Kind kind = fabric::FabricError::Kind::kUsage;
  const auto start = std::chrono::steady_clock::now();
  try {
    ArenaWithGivenPeers arena(0, std::random_device{}(), blocked, 1.0);
  } catch (const fabric::FabricError& e) {
    error = e.what();
    kind = e.kind();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fabric::cuda::StreamMemOps::get().write(releaser, gate, 1);
  TCUDA(cudaStreamSynchronize(blocked));
  std::printf("arena setup deadline case: %s after %.2f s: %s\n", error.empty() ? "NO ERROR" : "refused", seconds,
              error.c_str());
  TCHECK(kind == fabric::FabricError::Kind::kTimeout, "expected a timeout: '" + error + "'");
  TCHECK(error.find("zeroing the arena and writing its tag did not finish within 1 s") != std::string::npos,
         "message lacks the step: '" + error + "'");
  TCHECK(seconds < 10, "the setup wait took " + std::to_string(seconds) + " s against a 1 s deadline");
  TCUDA(cudaStreamDestroy(blocked));
  TCUDA(cudaStreamDestroy(releaser));
  TCUDA(cudaFree(gate));
  return failures() == 0 ? 0 : 1;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--ranks") a.ranks = std::stoi(next());
    else if (k == "--nodes") a.nodes = std::stoi(next());
    else if (k == "--rails") a.rails = next();
    else if (k == "--timeout-case") a.timeoutCase = true;
    else if (k == "--perf") a.perf = true;
    else if (k == "--no-freed-replay") a.freedReplay = false;
    else if (k == "--no-graph-cap") a.graphCap = false;
    else if (k == "--seed") a.seed = std::stoull(next());
    else {
      std::fprintf(stderr, "usage: %s --ranks N --nodes M [--rails auto|send-recv|rma] [--timeout-case] [--perf] "
                           "[--no-freed-replay] [--no-graph-cap] [--seed S]\n", argv[0]);
      std::exit(2);
    }
  }
  if (a.ranks < 1 || a.nodes < 1 || a.ranks % a.nodes != 0) {
    std::fprintf(stderr, "--ranks must be a positive multiple of --nodes\n");
    std::exit(2);
  }
  return a;
}

}  // namespace
}  // namespace tide::test

int main(int argc, char** argv) {
  using namespace tide::test;
  const Args a = parse(argc, argv);
  runSeed() = a.seed;  // before the ranks fork: each inherits it
  std::printf("tide_cuda_fabric_test: %d rank(s), %d node(s) x %d, rails %s, seed %llu (replay with --seed)\n",
              a.ranks, a.nodes, a.ranks / a.nodes, a.rails.c_str(), static_cast<unsigned long long>(a.seed));
  std::fflush(stdout);
  const int failedRanks =
      launchRanks(a.ranks, 70, [&](int rank, const ncclUniqueId& id) { return rankMain(a, rank, id); });
  int rc = failedRanks == 0 ? 0 : 1;
  if (a.timeoutCase && timeoutCase() != 0) rc = 1;
  if (a.timeoutCase && errorProbeCase() != 0) rc = 1;
  if (a.timeoutCase && stalledProbeCase() != 0) rc = 1;
  if (arenaTagCase() != 0) rc = 1;  // last: CUDA in this process, and forks above
  if (arenaSetupDeadlineCase() != 0) rc = 1;
  std::printf("tide_cuda_fabric_test: %s\n", rc == 0 ? "PASS" : "FAIL");
  return rc;
}
