// What the CUDA copy engine does when the driver refuses a copy list's graph
// (fabric/cuda/copy_engine.hpp): that list goes out as batches from then on,
// other lists keep their graphs, and after kRefusalsBeforeGraphsOff refusals
// graphs go off; every copy writes every byte throughout.
//
// The refusals are the driver's own, not simulated. A list is built from the
// addresses of its sightings, calls later; here its sources' memory goes back
// to the driver in between and only part of it is mapped again while the
// engine builds (a virtual range whose tail is unmapped), then all of it
// before the next call, as a caching allocator that empties its cache and
// grows again may leave a list's addresses. The driver refuses a graph memcpy
// node that runs into unmapped addresses ("invalid argument" as the node is
// added, on an H100 with CUDA 13), so the build fails; the calls, while the
// whole range is mapped, copy every byte as batches. (What the driver refuses
// here is narrow: a node across two mappings of one reserved range, or one
// starting in unmapped addresses, it accepts; one across two cudaMalloc
// allocations it refuses, but so does cudaMemcpyBatchAsync, so no call could
// copy such a list either.) The test first asks the driver whether it refuses
// the torn range's node, and fails if it does not: then it reaches nothing.
// The range is an arena of the engine's there, taken on trust; outside the
// arenas the engine asks both ends of each copy first and declines a torn
// list without a refusal, which the last case checks.
//
//   tide_copy_graph_refusal_test
#include <cuda.h>
#include <cuda_runtime.h>

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

// The driver API's virtual memory calls, through the runtime's entry points
// (no link against libcuda, as the fabric's stream memory operations).
template <typename Fn>
Fn driverEntry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  TIDE_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || fn == nullptr)
    throw std::runtime_error(std::string("the driver has no ") + name);
  return reinterpret_cast<Fn>(fn);
}
#define DRIVER(name) const decltype(&::name) name = driverEntry<decltype(&::name)>(#name)
struct Driver {
  DRIVER(cuMemGetAllocationGranularity);
  DRIVER(cuMemAddressReserve);
  DRIVER(cuMemCreate);
  DRIVER(cuMemMap);
  DRIVER(cuMemSetAccess);
  DRIVER(cuMemUnmap);
  DRIVER(cuMemRelease);
  DRIVER(cuMemAddressFree);
};
#undef DRIVER

// A reserved virtual range [at(0), at(bytes())) of two granules, backed whole
// by one physical allocation (mend) or with only its first granule mapped, to
// another allocation, and the second unmapped (tear). The whole allocation
// keeps its contents while unmapped, so a mended range reads as before.
class TearableRange {
 public:
  explicit TearableRange(int device) {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = device;
    TIDE_CU_CHECK(cu_.cuMemGetAllocationGranularity(&granule_, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    TIDE_CU_CHECK(cu_.cuMemAddressReserve(&base_, 2 * granule_, 0, 0, 0));
    TIDE_CU_CHECK(cu_.cuMemCreate(&whole_, 2 * granule_, &prop_, 0));
    TIDE_CU_CHECK(cu_.cuMemCreate(&head_, granule_, &prop_, 0));
    map(whole_, 2 * granule_);
  }
  ~TearableRange() {
    cu_.cuMemUnmap(base_, mapped_);
    cu_.cuMemRelease(whole_);
    cu_.cuMemRelease(head_);
    cu_.cuMemAddressFree(base_, 2 * granule_);
  }
  TearableRange(const TearableRange&) = delete;
  TearableRange& operator=(const TearableRange&) = delete;

  int64_t bytes() const { return static_cast<int64_t>(2 * granule_); }
  int64_t granule() const { return static_cast<int64_t>(granule_); }
  std::byte* at(int64_t offset) const { return reinterpret_cast<std::byte*>(base_) + offset; }
  // Only the first granule mapped (another allocation's), the rest unmapped.
  // The device is synchronized first: no copy may still read the range.
  void tear() { remap(head_, granule_); }
  // The whole range mapped again, to the allocation that holds its contents.
  void mend() { remap(whole_, 2 * granule_); }

 private:
  void remap(CUmemGenericAllocationHandle handle, size_t size) {
    TIDE_CUDA_CHECK(cudaDeviceSynchronize());
    TIDE_CU_CHECK(cu_.cuMemUnmap(base_, mapped_));
    map(handle, size);
  }
  void map(CUmemGenericAllocationHandle handle, size_t size) {
    TIDE_CU_CHECK(cu_.cuMemMap(base_, size, 0, handle, 0));
    mapped_ = size;
    CUmemAccessDesc access{};
    access.location = prop_.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    TIDE_CU_CHECK(cu_.cuMemSetAccess(base_, size, &access, 1));
  }

  Driver cu_;
  CUmemAllocationProp prop_{};
  size_t granule_ = 0, mapped_ = 0;
  CUdeviceptr base_ = 0;
  CUmemGenericAllocationHandle whole_ = 0, head_ = 0;
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
  std::printf("driver: a memcpy node into unmapped addresses: %s\n", cudaGetErrorString(e));
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return e != cudaSuccess;
}

// The sources: `tearable` (a tearable range, refused in graphs while torn) and
// `plain` (cudaMalloc), filled with a pattern; the destinations: `out`,
// poisoned before every issue. Lists are two flat copies into slots of `out`.
struct Setup {
  static constexpr int64_t kCopy = 64 << 10;  // bytes per copy
  static constexpr int kSlots = 64;           // destination slots of kCopy bytes
  int device = 0;
  cudaStream_t stream = nullptr, upload = nullptr;
  TearableRange tearable{device};  // initialised after `device` (declared before it)
  std::byte* plain = nullptr;
  std::byte* out = nullptr;
  std::vector<unsigned char> tearableHost, plainHost;

  Setup() {
    TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&upload, cudaStreamNonBlocking));
    TIDE_CUDA_CHECK(cudaMalloc(&plain, static_cast<size_t>(kSlots * kCopy)));
    TIDE_CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(kSlots * kCopy)));
    tearableHost.resize(static_cast<size_t>(tearable.bytes()));
    plainHost.resize(static_cast<size_t>(kSlots * kCopy));
    uint64_t x = 0x9E3779B97F4A7C15ull;  // any pattern that differs byte to byte and from the poison
    for (auto* v : {&tearableHost, &plainHost})
      for (unsigned char& b : *v) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b = static_cast<unsigned char>(x % 255);  // never 0xFF, the poison
      }
    TIDE_CUDA_CHECK(cudaMemcpy(tearable.at(0), tearableHost.data(), tearableHost.size(), cudaMemcpyHostToDevice));
    TIDE_CUDA_CHECK(cudaMemcpy(plain, plainHost.data(), plainHost.size(), cudaMemcpyHostToDevice));
  }
  ~Setup() {
    cudaFree(plain);
    cudaFree(out);
    cudaStreamDestroy(stream);
    cudaStreamDestroy(upload);
  }
  // Arenas for the engine: both sources and the destinations, so no list is
  // volatile and the volatile-build policy stays out of the counts; without
  // the tearable range, its lists are volatile.
  std::vector<CopyEngine::Window> windows(bool tearableIsArena = true) const {
    std::vector<CopyEngine::Window> w{{plain, kSlots * kCopy}, {out, kSlots * kCopy}};
    if (tearableIsArena) w.push_back({tearable.at(0), tearable.bytes()});
    return w;
  }
  // List `k` from the tearable range (refused by the driver while torn): its
  // first copy's source straddles the granule boundary, a different place per k.
  std::vector<CopyOp> tearableList(int k) {
    const int64_t from = tearable.granule() - kCopy / 2 - 256 * k;
    return {CopyOp{out + (2 * k) * kCopy, tearable.at(from), kCopy, 1, 0, 0},
            CopyOp{out + (2 * k + 1) * kCopy, tearable.at(from - kCopy), kCopy, 1, 0, 0}};
  }
  // List `k` from plain memory (graphs take it).
  std::vector<CopyOp> plainList(int k) {
    return {CopyOp{out + (2 * k) * kCopy, plain + (2 * k + 1) * kCopy, kCopy, 1, 0, 0},
            CopyOp{out + (2 * k + 1) * kCopy, plain + (2 * k) * kCopy, kCopy, 1, 0, 0}};
  }
  // Builds the engine's wanted lists while the range is torn: the tearable lists'
  // builds are refused, plain lists are built as ever.
  void buildTorn(CopyEngine& engine) {
    tearable.tear();
    engine.buildWanted();
    tearable.mend();
  }
  // Issues the list twice, checked: then it is wanted.
  bool sightTwice(CopyEngine& engine, const std::vector<CopyOp>& ops) {
    const bool first = issueChecked(engine, ops);
    return issueChecked(engine, ops) && first;
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
              : tearableHost.data() + (src - tearable.at(0));
      for (size_t i = 0; i < got.size() && ok; ++i) ok = got[i] == want[i];
    }
    return ok;
  }
};

// One refused list: it goes out as batches from then on (never built again),
// a list built beside it keeps its graph, and graphs stay on.
void oneRefusalDeclinesThatListOnly(Setup& s) {
  CopyEngine engine(s.device, s.windows(), s.upload);
  const auto refused = s.tearableList(0), kept = s.plainList(1);
  bool right = s.sightTwice(engine, refused);
  right = s.sightTwice(engine, kept) && right;  // issued even where the first went wrong
  check(engine.hasWanted(), "both lists wanted after two sightings");
  s.buildTorn(engine);
  check(engine.graphStats().built == 1, "one graph built (the plain list's), the tearable one refused: built " +
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
  s.buildTorn(engine);
  check(engine.graphStats().built == 1, "nothing rebuilt");
  // Graphs are still on: a new list gets one.
  const auto later = s.plainList(2);
  right = s.sightTwice(engine, later) && right;
  s.buildTorn(engine);
  check(engine.graphStats().built == 2, "a later list still gets a graph after one refusal");
  check(right, "every byte of every copy right (poisoned destinations, batches and graphs)");
}

// kRefusalsBeforeGraphsOff refusals turn graphs off: before the last one a
// plain list still gets a graph; after it, no list is built or launched.
void refusalsThatKeepComingTurnGraphsOff(Setup& s) {
  CopyEngine engine(s.device, s.windows(), s.upload);
  constexpr int kOff = CopyEngine::kRefusalsBeforeGraphsOff;
  bool right = true;
  for (int k = 0; k < kOff - 1; ++k) right = s.sightTwice(engine, s.tearableList(k)) && right;
  s.buildTorn(engine);
  check(engine.graphStats().built == 0, std::to_string(kOff - 1) + " tearable lists, none built");
  const auto early = s.plainList(kOff);
  right = s.sightTwice(engine, early) && right;
  s.buildTorn(engine);
  check(engine.graphStats().built == 1, "a plain list is still built after " + std::to_string(kOff - 1) +
                                            " refusals");
  right = s.sightTwice(engine, s.tearableList(kOff - 1)) && right;
  s.buildTorn(engine);  // the last refusal: graphs off
  const auto late = s.plainList(kOff + 1);
  right = s.sightTwice(engine, late) && right;
  check(!engine.hasWanted(), "after " + std::to_string(kOff) + " refusals no list is wanted");
  s.buildTorn(engine);
  const int64_t launches = engine.graphStats().launches;
  for (int call = 0; call < 3; ++call) {
    right = s.issueChecked(engine, early) && right;
    right = s.issueChecked(engine, late) && right;
  }
  check(engine.graphStats().built == 1 && engine.graphStats().launches == launches,
        "graphs off: nothing built or launched since, not even the graph built before (built " +
            std::to_string(engine.graphStats().built) + ", launches +" +
            std::to_string(engine.graphStats().launches - launches) + ")");
  check(right, "every byte of every copy right (poisoned destinations)");
}

// Memory outside the arenas is asked at both ends before a build: a list
// from the torn range, there not an arena, is declined before the driver sees
// it, so kRefusalsBeforeGraphsOff such lists leave graphs on; a list from the
// whole range is built (two ends of one device's memory).
void tornListsOutsideTheArenasAreDeclinedUnasked(Setup& s) {
  CopyEngine engine(s.device, s.windows(/*tearableIsArena=*/false), s.upload);
  constexpr int kOff = CopyEngine::kRefusalsBeforeGraphsOff;
  bool right = true;
  for (int k = 0; k < kOff; ++k) right = s.sightTwice(engine, s.tearableList(k)) && right;
  s.buildTorn(engine);
  check(engine.graphStats().built == 0, std::to_string(kOff) + " torn lists outside the arenas, none built");
  const auto plain = s.plainList(kOff);
  right = s.sightTwice(engine, plain) && right;
  s.buildTorn(engine);
  check(engine.graphStats().built == 1, "graphs still on: the driver was never asked, nothing counted as refused");
  const auto whole = s.tearableList(kOff + 1);
  right = s.sightTwice(engine, whole) && right;
  engine.buildWanted();  // the range mapped whole
  check(engine.graphStats().built == 2, "a list from the whole range outside the arenas is built");
  const int64_t launches = engine.graphStats().launches;
  right = s.issueChecked(engine, whole) && right;
  right = s.issueChecked(engine, s.tearableList(0)) && right;
  check(engine.graphStats().launches - launches == 1, "the whole range's list launched its graph, a torn one none");
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
  const auto probe = s.tearableList(0);
  s.tearable.tear();
  const bool refused = driverRefusesNode(probe[0].dst, probe[0].src, static_cast<size_t>(probe[0].width));
  s.tearable.mend();
  if (!refused) {
    std::printf("FAIL this driver builds a memcpy node into unmapped addresses: no refusal to test with\n");
    return 1;
  }
  {
    CopyEngine batchesOnly(s.device, {}, s.upload);  // one sighting: a batch, never a graph
    check(s.issueChecked(batchesOnly, probe), "a batch copies across the mended range's granule boundary");
  }
  oneRefusalDeclinesThatListOnly(s);
  refusalsThatKeepComingTurnGraphsOff(s);
  tornListsOutsideTheArenasAreDeclinedUnasked(s);
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
