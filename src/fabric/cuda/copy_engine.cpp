#include "fabric/cuda/copy_engine.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

#include "fabric/byte_range.hpp"

#include "fabric/cuda/cuda_check.hpp"

namespace tide::fabric::cuda {

namespace {

bool contiguous(const CopyOp& op) {
  return op.rows == 1 || (op.srcPitch == op.width && op.dstPitch == op.width);
}

void validate(const CopyOp& op) {
  if (op.width < 0 || op.rows < 1)
    throwUsage("copy with width " + std::to_string(op.width) + " and rows " + std::to_string(op.rows));
  if (op.width > 0 && (op.dst == nullptr || op.src == nullptr)) throwUsage("copy with a null address");
  if (op.rows > 1 && (op.srcPitch < op.width || op.dstPitch < op.width))
    throwUsage("strided copy with a pitch below its width");
}

// What the driver says an address is: "device 0", "host", "managed", "unregistered" or
// "unknown (error)". For messages only.
std::string memoryKind(const void* p) {
  cudaPointerAttributes a{};
  const cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("unknown (") + cudaGetErrorString(e) + ")";
  }
  switch (a.type) {
    case cudaMemoryTypeDevice: return "device " + std::to_string(a.device);
    case cudaMemoryTypeHost: return "host";
    case cudaMemoryTypeManaged: return "managed";
    default: return "unregistered";
  }
}

std::string describe(const CopyOp& op) {
  char text[256];
  std::snprintf(text, sizeof text, "dst %p (%s) pitch %lld, src %p (%s) pitch %lld, %lld B x %lld rows", op.dst,
                memoryKind(op.dst).c_str(), static_cast<long long>(op.dstPitch), op.src, memoryKind(op.src).c_str(),
                static_cast<long long>(op.srcPitch), static_cast<long long>(op.width),
                static_cast<long long>(op.rows));
  return text;
}

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TIDE_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// TIDE_COPY_BATCH=0 enqueues every copy with its own cudaMemcpyAsync instead
// of one cudaMemcpyBatchAsync: a knob to measure the host cost of each per
// copy (the 4K-token FSDP2 steps are host-bound), not a mode to run in.
bool batchCopies() {
  static const bool batch = [] {
    const char* v = std::getenv("TIDE_COPY_BATCH");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return batch;
}

void issueBatch(cudaStream_t stream, std::vector<void*>& dsts, std::vector<const void*>& srcs,
                std::vector<size_t>& sizes) {
  if (dsts.empty()) return;
  // cudaMemcpyBatchAsync refuses the legacy default stream (PyTorch's default
  // stream) and cannot be captured into a graph; one copy needs no batch.
  const bool legacy = stream == nullptr || stream == cudaStreamLegacy;
  if (dsts.size() == 1 || legacy || !batchCopies() || capturing(stream)) {
    for (size_t i = 0; i < dsts.size(); ++i)
      TIDE_CUDA_CHECK(cudaMemcpyAsync(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, stream));
    return;
  }
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  size_t attrIndex = 0;
#if CUDART_VERSION >= 13000
  TIDE_CUDA_CHECK(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(), &attr,
                                       &attrIndex, 1, stream));
#else
  size_t failIndex = 0;
  TIDE_CUDA_CHECK(cudaMemcpyBatchAsync(dsts.data(), const_cast<void**>(srcs.data()), sizes.data(),
                                       dsts.size(), &attr, &attrIndex, 1, &failIndex, stream));
#endif
}

// issueCopies for copies already validated.
int64_t enqueueCopies(cudaStream_t stream, const std::vector<CopyOp>& ops) {
  int64_t total = 0;
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  for (const CopyOp& op : ops) {
    const int64_t bytes = op.width * op.rows;
    if (bytes == 0) continue;
    total += bytes;
    if (contiguous(op)) {
      dsts.push_back(op.dst);
      srcs.push_back(op.src);
      sizes.push_back(static_cast<size_t>(bytes));
    } else {
      TIDE_CUDA_CHECK(cudaMemcpy2DAsync(op.dst, static_cast<size_t>(op.dstPitch), op.src,
                                        static_cast<size_t>(op.srcPitch), static_cast<size_t>(op.width),
                                        static_cast<size_t>(op.rows), cudaMemcpyDefault, stream));
    }
  }
  issueBatch(stream, dsts, srcs, sizes);
  return total;
}

// TIDE_COPY_GRAPHS_TRACE=1: one stderr line per graph built (a diagnostic of
// which lists recur, not a mode to run in).
bool traceGraphBuilds() {
  static const bool trace = [] {
    const char* v = std::getenv("TIDE_COPY_GRAPHS_TRACE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return trace;
}

bool graphsWanted() {
  const char* v = std::getenv("TIDE_COPY_GRAPHS");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// Copy lists an engine remembers, and graphs it keeps (the least recently
// launched goes when a new one would pass the cap). An FSDP2 model needs a few
// per parameter group (all-gather and reduce-scatter, ring slot, queue):
// hundreds; a caching allocator that moves gradients between steps leaves
// graphs behind that are never launched again.
constexpr size_t kMaxLists = 4096;
constexpr size_t kMaxGraphs = 1024;

// A copy in a copy list's key: dst, src, width, rows, srcPitch, dstPitch (pitches 0 when flat).
constexpr size_t kWordsPerCopy = 6;

// Bytes a copy spans on one side.
int64_t extent(const CopyOp& op, int64_t pitch) { return op.rows == 1 ? op.width : (op.rows - 1) * pitch + op.width; }

}  // namespace

CopyEngine::CopyEngine(int device, std::vector<Window> stable, cudaStream_t upload)
    : device_(device), upload_(upload), stable_(std::move(stable)), enabled_(graphsWanted()),
      cache_(kMaxLists, kMaxGraphs) {
  if (!enabled_) std::fprintf(stderr, "[tide cuda fabric] copy graphs off (TIDE_COPY_GRAPHS=0)\n");
  if (traceGraphBuilds())
    for (const Window& w : stable_)
      std::fprintf(stderr, "[tide copy graphs] device %d arena window %p + %lld B\n", device_, w.base,
                   static_cast<long long>(w.bytes));
}

CopyEngine::~CopyEngine() {
  // An executable graph still in flight is freed when it completes.
  cache_.forEachReplay([](cudaGraphExec_t exec) { cudaGraphExecDestroy(exec); });
  for (const auto& [exec, uploaded] : uploads_) cudaEventDestroy(uploaded);
}

CopyEngine::GraphStats CopyEngine::graphStats() const {
  const auto& s = cache_.stats();
  return GraphStats{.launches = s.hits, .built = s.built, .dropped = s.dropped};
}

bool CopyEngine::inStable(const void* p, int64_t bytes) const {
  for (const Window& w : stable_)
    if (liesWithin(p, bytes, w.base, w.bytes)) return true;
  return false;
}

bool CopyEngine::inArenas(const CopyOp& op) const {
  return op.width == 0 || (inStable(op.dst, extent(op, op.dstPitch)) && inStable(op.src, extent(op, op.srcPitch)));
}

bool CopyEngine::graphable(const void* p, int64_t bytes) const {
  if (inStable(p, bytes)) return true;
  // Device memory of this GPU (a caching allocator's block): a graph replays
  // only for these very addresses, and copy engines resolve virtual addresses
  // when they run, so a block freed and handed out again at the same address
  // is copied as the batch would copy it. Host, managed and other GPUs'
  // memory stay out. Both ends are asked: a list is built calls after its
  // sightings, and memory given back since may leave its range's tail
  // unmapped, a node the driver refuses (each refusal counts towards turning
  // graphs off; a list whose memory moved is its own fault, not the graphs').
  const auto onThisDevice = [this](const void* q) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, q) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return a.type == cudaMemoryTypeDevice && a.device == device_;
  };
  return onThisDevice(p) && (bytes <= 1 || onThisDevice(static_cast<const std::byte*>(p) + (bytes - 1)));
}

cudaGraphExec_t CopyEngine::build(const std::vector<CopyOp>& ops) {
  for (const CopyOp& op : ops)
    if (op.width != 0 && (!graphable(op.dst, extent(op, op.dstPitch)) || !graphable(op.src, extent(op, op.srcPitch))))
      return nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t e = cudaGraphCreate(&graph, 0);
  const CopyOp* failed = nullptr;  // the copy whose node the driver refused, for the message
  // No edges: the nodes may run in any order and at once, as a batch's copies.
  for (const CopyOp& op : ops) {
    if (e != cudaSuccess) break;
    if (op.width == 0) continue;
    failed = &op;
    cudaGraphNode_t node = nullptr;
    if (contiguous(op)) {
      e = cudaGraphAddMemcpyNode1D(&node, graph, nullptr, 0, op.dst, op.src, static_cast<size_t>(op.width * op.rows),
                                   cudaMemcpyDefault);
    } else {
      cudaMemcpy3DParms p{};
      p.srcPtr = make_cudaPitchedPtr(const_cast<void*>(op.src), static_cast<size_t>(op.srcPitch),
                                     static_cast<size_t>(op.width), static_cast<size_t>(op.rows));
      p.dstPtr = make_cudaPitchedPtr(op.dst, static_cast<size_t>(op.dstPitch), static_cast<size_t>(op.width),
                                     static_cast<size_t>(op.rows));
      p.extent = make_cudaExtent(static_cast<size_t>(op.width), static_cast<size_t>(op.rows), 1);
      p.kind = cudaMemcpyDefault;
      e = cudaGraphAddMemcpyNode(&node, graph, nullptr, 0, &p);
    }
  }
  const bool nodesAdded = e == cudaSuccess;
  if (nodesAdded) e = cudaGraphInstantiate(&exec, graph, 0);
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    ++refusedBuilds_;
    enabled_ = refusedBuilds_ < kRefusalsBeforeGraphsOff;
    // Which step and which copy, for the first refusal, the one that turns graphs off, and every
    // one when traced: whether the copy's memory has changed since its list's sightings or
    // graphs over this memory fail is for a reader of this line to tell.
    if (refusedBuilds_ == 1 || !enabled_ || traceGraphBuilds()) {
      std::string what = "instantiating it (" + std::to_string(ops.size()) + " copies)";
      if (!nodesAdded && failed != nullptr)
        what = "adding the node of copy " + std::to_string(failed - ops.data()) + " of " +
               std::to_string(ops.size()) + " (" + describe(*failed) + ")";
      const std::string then =
          enabled_ ? "graphs stay on for other lists until " + std::to_string(kRefusalsBeforeGraphsOff) + " refusals"
                   : "copy graphs off after " + std::to_string(refusedBuilds_) + " refusals";
      std::fprintf(stderr, "[tide cuda fabric] copy graph refused (%s) at %s: that list goes out as batches; %s\n",
                   cudaGetErrorString(e), what.c_str(), then.c_str());
    }
    return nullptr;
  }
  return exec;
}

int64_t CopyEngine::issue(cudaStream_t stream, const std::vector<CopyOp>& ops) {
  // A graph launch is stream-ordered like the batch; the legacy default
  // stream and a capture keep the plain path, as the batch does.
  if (!enabled_ || ops.empty() || stream == nullptr || stream == cudaStreamLegacy || capturing(stream))
    return issueCopies(stream, ops);
  // The stream is part of the key: each launch of a graph is ordered behind its
  // previous launch, which on another stream could wait behind that stream's
  // waits (a cross-queue dependency the batch never had). The key holds each
  // copy whole, so buildWanted() rebuilds the list from it.
  CopyListCache<cudaGraphExec_t>::Key key;
  key.words.reserve(1 + ops.size() * kWordsPerCopy);
  key.words.push_back(reinterpret_cast<int64_t>(stream));
  int64_t total = 0;
  for (const CopyOp& op : ops) {
    validate(op);
    total += op.width * op.rows;
    for (int64_t w : {reinterpret_cast<int64_t>(op.dst), reinterpret_cast<int64_t>(op.src), op.width, op.rows,
                      op.rows == 1 ? 0 : op.srcPitch, op.rows == 1 ? 0 : op.dstPitch})
      key.words.push_back(w);
  }
  // A list with memory outside the arenas is volatile (copy_list_cache.hpp); asked at its first sighting only.
  const cudaGraphExec_t exec = cache_.sight(
      std::move(key), [&] { return std::ranges::any_of(ops, [this](const CopyOp& op) { return !inArenas(op); }); });
  if (exec == nullptr) return enqueueCopies(stream, ops);  // validated above
  if (auto up = uploads_.find(exec); up != uploads_.end()) {
    // Its first launch: after its upload (on the owner's idle stream), which
    // the host did not wait for.
    TIDE_CUDA_CHECK(cudaStreamWaitEvent(stream, up->second, 0));
    TIDE_CUDA_CHECK(cudaEventDestroy(up->second));  // released once the wait has passed
    uploads_.erase(up);
  }
  TIDE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  return total;
}

void CopyEngine::buildWanted() {
  if (!hasWanted()) return;
  cache_.buildWanted(
      [this](const CopyListCache<cudaGraphExec_t>::Key& key) -> cudaGraphExec_t {
        if (!enabled_) return nullptr;  // an earlier build failed: graphs are off
        std::vector<CopyOp> ops;
        for (size_t w = 1; w + kWordsPerCopy <= key.words.size(); w += kWordsPerCopy) {
          const int64_t* k = key.words.data() + w;
          ops.push_back(CopyOp{reinterpret_cast<void*>(k[0]), reinterpret_cast<const void*>(k[1]), k[2], k[3], k[4],
                               k[5]});
        }
        const cudaGraphExec_t exec = build(ops);
        if (traceGraphBuilds()) {
          int outside = 0;
          int64_t bytes = 0;
          for (const CopyOp& op : ops) {
            outside += !inArenas(op);
            bytes += op.width * op.rows;
          }
          std::fprintf(stderr,
                       "[tide copy graphs] device %d built=%d stream %p: %zu copies (%d outside the arenas), %lld B, "
                       "first dst %p src %p\n",
                       device_, exec != nullptr, reinterpret_cast<void*>(key.words[0]), ops.size(), outside,
                       static_cast<long long>(bytes), ops.empty() ? nullptr : ops[0].dst,
                       ops.empty() ? nullptr : ops[0].src);
        }
        // Its first launch would upload it; here nothing waits on the upload,
        // and neither does the host: the first launch waits for its event.
        if (exec != nullptr) {
          cudaEvent_t uploaded = nullptr;
          cudaError_t err = cudaGraphUpload(exec, upload_);
          if (err == cudaSuccess) err = cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming);
          if (err == cudaSuccess) err = cudaEventRecord(uploaded, upload_);
          if (err != cudaSuccess) {  // as a failed build: graphs off, logged (the cache never saw this one)
            if (uploaded != nullptr) cudaEventDestroy(uploaded);
            cudaGraphExecDestroy(exec);
            cudaGetLastError();  // not sticky: clear it (a sticky error fails the next copy)
            enabled_ = false;
            std::fprintf(stderr, "[tide cuda fabric] copy graphs off: uploading one failed (%s); copies go out as "
                                 "batches\n", cudaGetErrorString(err));
            return nullptr;
          }
          uploads_.emplace(exec, uploaded);
        }
        return exec;
      },
      [this](cudaGraphExec_t dropped) {
        if (auto up = uploads_.find(dropped); up != uploads_.end()) {
          cudaEventDestroy(up->second);
          uploads_.erase(up);
        }
        cudaGraphExecDestroy(dropped);  // in flight: freed when it completes
      });
  reportVolatilePolicy();
}

void CopyEngine::reportVolatilePolicy() {
  const bool pays = cache_.volatileBuildsPay();
  if (pays == volatileBuildsPay_) return;
  volatileBuildsPay_ = pays;
  const auto& s = cache_.stats();
  if (!pays)
    std::fprintf(stderr,
                 "[tide cuda fabric] copy graphs for lists outside the arenas paused: %lld built, launched %lld "
                 "times (their memory does not come back at the same addresses); those lists go out as "
                 "batches\n",
                 static_cast<long long>(s.volatileBuilt), static_cast<long long>(s.volatileHits));
  else
    std::fprintf(stderr, "[tide cuda fabric] copy graphs for lists outside the arenas resumed (%lld built, %lld "
                         "launches)\n",
                 static_cast<long long>(s.volatileBuilt), static_cast<long long>(s.volatileHits));
}

int64_t issueCopies(cudaStream_t stream, const std::vector<CopyOp>& ops) {
  for (const CopyOp& op : ops) validate(op);  // before any copy is enqueued
  return enqueueCopies(stream, ops);
}

}  // namespace tide::fabric::cuda
