// What the CUDA copy engine does when the driver refuses a copy list's graph
// (fabric/cuda/copy_engine.hpp): that list goes out as batches from then on,
// other lists keep their graphs, and after kRefusalsBeforeGraphsOff refusals
// graphs go off; every copy writes every byte throughout.
//
// The refusals are the driver's own, not simulated: a copy whose source spans
// two cudaMalloc allocations that lie back to back in the address space, as a
// list's memory may after it went back to the driver and was handed out again
// with other bounds. Copy engines copy it (a batch resolves virtual addresses
// as it runs), but a graph memcpy node wants one allocation: on an H100 with
// CUDA 13 the driver answers "invalid argument" when the node is added. (Two
// physical allocations mapped into one reserved virtual range, as a caching
// allocator's expandable segment lays a block out, it accepts.) The test first
// asks the driver whether it refuses such a node, and fails if it does not:
// then this test reaches nothing.
//
//   tide_copy_graph_refusal_test
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "fabric/cuda/copy_engine.hpp"
#include "fabric/cuda/cuda_check.hpp"

namespace {

using tide::fabric::CopyOp;
using tide::fabric::cuda::CopyEngine;

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += ok ? 0 : 1;
}

// Two cudaMalloc allocations of kHalf bytes each, the second starting where
// the first ends: [at(0), at(2 * kHalf)). cudaMalloc gives no such promise, so
// this allocates until two blocks lie back to back (consecutive allocations of
// a size the driver maps whole usually do) and frees the others.
struct SplitRange {
  static constexpr int64_t kHalf = 2 << 20;  // one 2 MiB page each
  static constexpr int kTries = 256;
  std::byte* halves[2] = {};

  SplitRange() {
    std::vector<std::byte*> blocks;
    for (int i = 0; i < kTries && halves[0] == nullptr; ++i) {
      void* p = nullptr;
      TIDE_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(kHalf)));
      auto* b = static_cast<std::byte*>(p);
      for (std::byte* q : blocks)
        if (q + kHalf == b || b + kHalf == q) {
          halves[0] = std::min(q, b);
          halves[1] = std::max(q, b);
        }
      blocks.push_back(b);
    }
    for (std::byte* q : blocks)
      if (q != halves[0] && q != halves[1]) cudaFree(q);
    if (halves[0] == nullptr)
      throw std::runtime_error("no two of " + std::to_string(kTries) + " cudaMalloc blocks lie back to back");
  }
  ~SplitRange() {
    for (std::byte* h : halves) cudaFree(h);
  }
  SplitRange(const SplitRange&) = delete;
  SplitRange& operator=(const SplitRange&) = delete;
  std::byte* at(int64_t offset) const { return halves[0] + offset; }
};

// Whether the driver refuses a graph memcpy node from `src` (bytes) to `dst`.
bool driverRefusesNode(void* dst, const void* src, size_t bytes) {
  cudaGraph_t graph = nullptr;
  TIDE_CUDA_CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t node = nullptr;
  cudaError_t e = cudaGraphAddMemcpyNode1D(&node, graph, nullptr, 0, dst, src, bytes, cudaMemcpyDefault);
  cudaGraphExec_t exec = nullptr;
  if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGetLastError();
  std::printf("driver: a memcpy node across two allocations: %s\n", cudaGetErrorString(e));
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return e != cudaSuccess;
}

// The sources: `split` (refused in graphs, by the driver) and `plain`
// (cudaMalloc), filled with a pattern; the destinations: `out`, poisoned
// before every issue. Lists are two flat copies into slots of `out`.
struct Setup {
  static constexpr int64_t kCopy = 64 << 10;  // bytes per copy
  static constexpr int kSlots = 64;           // destination slots of kCopy bytes
  int device = 0;
  cudaStream_t stream = nullptr, upload = nullptr;
  SplitRange split;
  std::byte* plain = nullptr;
  std::byte* out = nullptr;
  std::vector<unsigned char> splitHost, plainHost;

  Setup() {
    TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&upload, cudaStreamNonBlocking));
    TIDE_CUDA_CHECK(cudaMalloc(&plain, static_cast<size_t>(kSlots * kCopy)));
    TIDE_CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(kSlots * kCopy)));
    splitHost.resize(static_cast<size_t>(2 * SplitRange::kHalf));
    plainHost.resize(static_cast<size_t>(kSlots * kCopy));
    uint64_t x = 0x9E3779B97F4A7C15ull;  // any pattern that differs byte to byte and from the poison
    for (auto* v : {&splitHost, &plainHost})
      for (unsigned char& b : *v) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b = static_cast<unsigned char>(x % 255);  // never 0xFF, the poison
      }
    // Each half on its own: a plain copy need not span the two allocations.
    for (int h = 0; h < 2; ++h)
      TIDE_CUDA_CHECK(cudaMemcpy(split.halves[h], splitHost.data() + h * SplitRange::kHalf,
                                 static_cast<size_t>(SplitRange::kHalf), cudaMemcpyHostToDevice));
    TIDE_CUDA_CHECK(cudaMemcpy(plain, plainHost.data(), plainHost.size(), cudaMemcpyHostToDevice));
  }
  ~Setup() {
    cudaFree(plain);
    cudaFree(out);
    cudaStreamDestroy(stream);
    cudaStreamDestroy(upload);
  }
  // Arenas for the engine: both sources and the destinations, so no list is
  // volatile and the volatile-build policy stays out of the counts.
  std::vector<CopyEngine::Window> windows() const {
    return {{split.at(0), 2 * SplitRange::kHalf}, {plain, kSlots * kCopy}, {out, kSlots * kCopy}};
  }
  // List `k` across the split (refused by the driver): its copies' sources
  // straddle the boundary between the two allocations, a different place per k.
  std::vector<CopyOp> splitList(int k) {
    const int64_t from = SplitRange::kHalf - kCopy / 2 - 256 * k;
    return {CopyOp{out + (2 * k) * kCopy, split.at(from), kCopy, 1, 0, 0},
            CopyOp{out + (2 * k + 1) * kCopy, split.at(from - kCopy), kCopy, 1, 0, 0}};
  }
  // List `k` from plain memory (graphs take it).
  std::vector<CopyOp> plainList(int k) {
    return {CopyOp{out + (2 * k) * kCopy, plain + (2 * k + 1) * kCopy, kCopy, 1, 0, 0},
            CopyOp{out + (2 * k + 1) * kCopy, plain + (2 * k) * kCopy, kCopy, 1, 0, 0}};
  }
  // Poisons the list's destinations, issues it, and checks every byte.
  bool issueChecked(CopyEngine& engine, const std::vector<CopyOp>& ops) {
    for (const CopyOp& op : ops) TIDE_CUDA_CHECK(cudaMemsetAsync(op.dst, 0xFF, static_cast<size_t>(op.width), stream));
    engine.issue(stream, ops);
    TIDE_CUDA_CHECK(cudaStreamSynchronize(stream));
    bool ok = true;
    for (const CopyOp& op : ops) {
      std::vector<unsigned char> got(static_cast<size_t>(op.width));
      TIDE_CUDA_CHECK(cudaMemcpy(got.data(), op.dst, got.size(), cudaMemcpyDeviceToHost));
      const auto* src = static_cast<const std::byte*>(op.src);
      const unsigned char* want =
          src >= plain && src < plain + kSlots * kCopy
              ? plainHost.data() + (src - plain)
              : splitHost.data() + (src - split.at(0));
      for (size_t i = 0; i < got.size() && ok; ++i) ok = got[i] == want[i];
    }
    return ok;
  }
};

// One refused list: it goes out as batches from then on (never built again),
// a list built beside it keeps its graph, and graphs stay on.
void oneRefusalDeclinesThatListOnly(Setup& s) {
  CopyEngine engine(s.device, s.windows(), s.upload);
  const auto refused = s.splitList(0), kept = s.plainList(1);
  bool right = true;
  for (int sighting = 0; sighting < 2; ++sighting)  // two sightings each: both wanted
    right = s.issueChecked(engine, refused) && s.issueChecked(engine, kept) && right;
  check(engine.hasWanted(), "both lists wanted after two sightings");
  engine.buildWanted();
  check(engine.graphStats().built == 1, "one graph built (the plain list's), the split one refused: built " +
                                            std::to_string(engine.graphStats().built));
  const int64_t launches = engine.graphStats().launches;
  constexpr int kCalls = 3;
  for (int call = 0; call < kCalls; ++call)
    right = s.issueChecked(engine, refused) && s.issueChecked(engine, kept) && right;
  check(engine.graphStats().launches - launches == kCalls,
        "the kept list launched its graph every call, the refused one never: " +
            std::to_string(engine.graphStats().launches - launches) + " launches in " + std::to_string(kCalls) +
            " calls of each");
  check(!engine.hasWanted(), "the refused list is not wanted again");
  engine.buildWanted();
  check(engine.graphStats().built == 1, "nothing rebuilt");
  // Graphs are still on: a new list gets one.
  const auto later = s.plainList(2);
  for (int sighting = 0; sighting < 2; ++sighting) right = s.issueChecked(engine, later) && right;
  engine.buildWanted();
  check(engine.graphStats().built == 2, "a later list still gets a graph after one refusal");
  check(right, "every byte of every copy right (poisoned destinations, batches and graphs)");
}

// kRefusalsBeforeGraphsOff refusals turn graphs off: before the last one a
// plain list still gets a graph; after it, no list is built or launched.
void refusalsThatKeepComingTurnGraphsOff(Setup& s) {
  CopyEngine engine(s.device, s.windows(), s.upload);
  constexpr int kOff = CopyEngine::kRefusalsBeforeGraphsOff;
  bool right = true;
  auto sightTwice = [&](const std::vector<CopyOp>& ops) {
    for (int sighting = 0; sighting < 2; ++sighting) right = s.issueChecked(engine, ops) && right;
  };
  for (int k = 0; k < kOff - 1; ++k) sightTwice(s.splitList(k));
  engine.buildWanted();
  check(engine.graphStats().built == 0, std::to_string(kOff - 1) + " split lists, none built");
  const auto early = s.plainList(kOff);
  sightTwice(early);
  engine.buildWanted();
  check(engine.graphStats().built == 1, "a plain list is still built after " + std::to_string(kOff - 1) +
                                            " refusals");
  sightTwice(s.splitList(kOff - 1));
  engine.buildWanted();  // the last refusal: graphs off
  const auto late = s.plainList(kOff + 1);
  sightTwice(late);
  check(!engine.hasWanted(), "after " + std::to_string(kOff) + " refusals no list is wanted");
  engine.buildWanted();
  const int64_t launches = engine.graphStats().launches;
  for (int call = 0; call < 3; ++call) right = s.issueChecked(engine, early) && s.issueChecked(engine, late) && right;
  check(engine.graphStats().built == 1 && engine.graphStats().launches == launches,
        "graphs off: nothing built or launched since, not even the graph built before (built " +
            std::to_string(engine.graphStats().built) + ", launches +" +
            std::to_string(engine.graphStats().launches - launches) + ")");
  check(right, "every byte of every copy right (poisoned destinations)");
}

}  // namespace

int runAll() {
  if (const char* v = std::getenv("TIDE_COPY_GRAPHS"); v != nullptr && std::string(v) == "0") {
    std::fprintf(stderr, "TIDE_COPY_GRAPHS=0: copy graphs are off, nothing here to test\n");
    return 1;
  }
  TIDE_CUDA_CHECK(cudaSetDevice(0));
  TIDE_CUDA_CHECK(cudaFree(nullptr));  // the primary context, for the driver API calls
  Setup s;
  const auto probe = s.splitList(0);
  if (!driverRefusesNode(probe[0].dst, probe[0].src, static_cast<size_t>(probe[0].width))) {
    std::printf("FAIL this driver builds a memcpy node across two allocations: no refusal to test with\n");
    return 1;
  }
  {
    CopyEngine batchesOnly(s.device, {}, s.upload);  // one sighting: a batch, never a graph
    check(s.issueChecked(batchesOnly, probe), "a batch copies across the two allocations");
  }
  oneRefusalDeclinesThatListOnly(s);
  refusalsThatKeepComingTurnGraphsOff(s);
  std::printf("%s: %d failed\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}

int main() {
  try {
    return runAll();
  } catch (const std::exception& e) {  // a failed CUDA call: FabricError names it
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
}
