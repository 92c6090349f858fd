// TIDE-AG and TIDE-RS with several ranks on one GPU (co-resident CUDA ranks,
// fabric/cuda/co_resident_ranks.hpp), so multi-rank topologies run their CUDA
// code paths on a machine with a single GPU: counters
// across ranks, copy-engine rails, Level 1 staging and sums, Level 2 landings
// (pull and push), copy graphs into peers' arenas.
//
// For the same plan and inputs, the CUDA ranks' landings and outputs must equal
// the host fabric's bit for bit, and both must match independent references:
// every landing byte is the byte its owner's shard holds, every output element
// the float64 sum (exact for integer inputs, NaN/Inf where a source is one).
// Landings and outputs are poisoned before every call; each rank's gradients
// are overwritten on its own stream once the call's readDone event fires, as
// a caller freeing them would. Each case runs three calls with fresh inputs in
// the same buffers (the third replays cached copy graphs).
//
// Timing means nothing here (the ranks share one GPU's SMs and copy engines).
//
// --processes runs each rank as a process of its own instead (forked; CUDA IPC
// between them, ipc_ranks.hpp): each has a CUDA context, and so hardware queues,
// of its own, which lets eight ranks share one GPU; each checks its own rank.
//
// --faults instead injects faults that end in wrong bytes into rank 0's GPU
// communicator or fabric, one at a time on a topology where each acts, and
// requires the same checks to catch every one (a test that cannot fail tests
// nothing); and the fabric's dropped signal on co-resident ranks.
//
// --caller-streams checks consecutive all-gathers issued on unordered caller
// streams (runCallerStreamsAsProcesses), one process per rank, on one node of 2
// and of 3 ranks or on --topologies; the old signal order must be caught too;
// with --peers-one-stream, only rank 0's calls come on two streams.
//
//   tide_co_resident_test [--topologies 1x2,2x1,2x2,1x4] [--seed S] [--processes | --faults | --caller-streams]
//                         [--peers-one-stream] [--verbose]
#include <cuda_runtime.h>
#include <stdlib.h>  // mkdtemp

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/random_inputs.hpp"
#include "bench/reference.hpp"
#include "caller_queue_per_call.hpp"
#include "check.hpp"
#include "fabric_fault_checks.hpp"
#include "collectives/communicator.hpp"
#include "collectives/counter_ids.hpp"
#include "collectives/faults.hpp"
#include "collectives/scratch_layout.hpp"
#include "fabric/cuda/co_resident_ranks.hpp"
#include "fabric/cuda/cuda_endpoint.hpp"
#include "fabric/cuda/ipc_ranks.hpp"
#include "fabric/host/file_store.hpp"
#include "fabric/host/host_fabric.hpp"
#include "fabric/rank_kinds.hpp"
#include "rank_launcher.hpp"

namespace {

using tide::collectives::Communicator;
using tide::collectives::kCallerQueue;
using tide::collectives::kQueuesNeeded;
using tide::collectives::ScratchLayout;
using tide::fabric::Endpoint;
using tide::bench::drawValue;
using tide::bench::InputKind;
using tide::bench::outputPoison;
using tide::bench::storeValue;
using tide::plan::DType;
namespace plan = tide::plan;
namespace cuda = tide::fabric::cuda;
namespace host = tide::fabric::host;

constexpr int kUserQueue = kQueuesNeeded;  // stands in for the caller's compute stream

bool verbose = false;  // --verbose: every step of every call on stderr (where a hang stops)

void progress(const char* fabric, const std::string& what) {
  if (!verbose) return;
  std::fprintf(stderr, "    [%s] %s\n", fabric, what.c_str());
  std::fflush(stderr);
}

struct Case {
  std::string name;
  DType agDtype = DType::kBF16;
  DType gradDtype = DType::kBF16;
  InputKind inputs = InputKind::kRandomNormal;
  float alpha = 1.0f;
  bool accumulate = false;
  bool inPlaceShard = false;  // one node only: the shard is written into the own landing rows
  bool large = false;         // adds a 1 Mi-element parameter (many CTAs, long copies)
  plan::RsOptions rs;
  bool landingOwnQueue = true;
};

// One call's inputs, drawn on the host (both fabrics get the same bytes).
struct RankInputs {
  std::vector<uint8_t> shard;
  std::vector<std::vector<uint8_t>> grads;  // per parameter
  std::vector<float> out;                   // what the output holds before the call
};

struct RankResults {
  std::vector<uint8_t> landing;
  std::vector<float> out;
};

std::vector<RankInputs> drawInputs(const plan::GroupLayout& g, const Case& c, std::mt19937_64& rng) {
  std::vector<RankInputs> in(static_cast<size_t>(g.topo.ranks()));
  const int bGrad = plan::itemSize(g.gradDtype);
  for (int r = 0; r < g.topo.ranks(); ++r) {
    RankInputs& d = in[static_cast<size_t>(r)];
    d.shard.assign(static_cast<size_t>(g.shardBytes), 0);
    for (size_t p = 0; p < g.params.size(); ++p) {
      const plan::ParamLayout& P = g.params[p];
      for (int64_t i = 0; i < P.validRows(r) * P.rowElems; ++i)  // padding rows stay zero, as FSDP2 pads
        storeValue(d.shard.data() + P.shardOffset, i, g.agDtype, drawValue(rng, c.inputs));
    }
    for (const plan::ParamLayout& P : g.params) {
      std::vector<uint8_t> grad(static_cast<size_t>(P.rows * P.rowElems * bGrad));
      for (int64_t i = 0; i < P.rows * P.rowElems; ++i) storeValue(grad.data(), i, g.gradDtype, drawValue(rng, c.inputs));
      d.grads.push_back(std::move(grad));
    }
    d.out.resize(static_cast<size_t>(g.outElems));
    for (float& v : d.out) v = c.accumulate ? drawValue(rng, InputKind::kInteger) : outputPoison();
  }
  return in;
}

std::vector<int> allRanks(int n) {
  std::vector<int> r(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

// What the two fabrics differ in: where buffers live and how bytes get there.
class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual const char* name() const = 0;
  // The ranks this process drives (all of them, or its own in IPC mode).
  virtual std::vector<int> localRanks() const = 0;
  virtual Endpoint& endpoint(int r) = 0;
  virtual void* alloc(size_t bytes) = 0;  // lives as long as the fabric
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill(void* dst, int byte, size_t bytes) = 0;
  // After uploads and fills: they are complete before any queue reads them.
  virtual void settle() {}
};

class HostFabric final : public Fabric {
 public:
  HostFabric(const plan::Topology& topo, int64_t arenaBytes) : world_(topo, arenaBytes, options()) {}
  const char* name() const override { return "host"; }
  std::vector<int> localRanks() const override { return allRanks(world_.ranks()); }
  Endpoint& endpoint(int r) override { return world_.endpoint(r); }
  void* alloc(size_t bytes) override {
    buffers_.push_back(std::make_unique<std::byte[]>(bytes));
    return buffers_.back().get();
  }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill(void* dst, int byte, size_t bytes) override { std::memset(dst, byte, bytes); }

 private:
  static host::HostOptions options() {
    host::HostOptions o;
    o.queues = kQueuesNeeded + 1;
    o.timeoutSeconds = 30;
    return o;
  }
  // Buffers outlive the world: its queues may still touch them while it stops.
  std::vector<std::unique_ptr<std::byte[]>> buffers_;
  host::HostWorld world_;
};

// Runs f(rank) on one thread per rank (the group's collective steps).
void onEveryRank(int ranks, const std::function<void(int)>& f) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Buffers in the current GPU's memory (both CUDA fabrics).
// Beyond an arena's user bytes: its counters, tag and alignment.
constexpr int64_t kPoisonSlack = int64_t{1} << 20;

class DeviceMemoryFabric : public Fabric {
 protected:
  // Leaves `bytes` of nonzero data in freed memory of `device` before the arenas are made, so
  // they likely come back over it (best effort: the driver picks the pages). An arena must read
  // zero however its memory came (fabric.hpp): the pull landing reads a wave's unused inbox
  // blocks as zeros, at M < L (2x4 below) from the first call on.
  DeviceMemoryFabric(int device, int64_t bytes) {
    int current = 0;
    TCUDA(cudaGetDevice(&current));
    TCUDA(cudaSetDevice(device));
    void* junk = nullptr;
    TCUDA(cudaMalloc(&junk, static_cast<size_t>(bytes)));
    TCUDA(cudaMemset(junk, 0xA5, static_cast<size_t>(bytes)));
    TCUDA(cudaFree(junk));  // (after the memset: a free waits for the device)
    TCUDA(cudaSetDevice(current));
  }

 public:
  ~DeviceMemoryFabric() override {
    for (void* p : buffers_) cudaFree(p);
  }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    TCUDA(cudaMalloc(&p, bytes));
    buffers_.push_back(p);
    return p;
  }
  void upload(void* dst, const void* src, size_t bytes) override {
    TCUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    TCUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void fill(void* dst, int byte, size_t bytes) override { TCUDA(cudaMemset(dst, byte, bytes)); }
  // cudaMemcpy from pageable memory and cudaMemset may return before their
  // bytes land, and the endpoints' non-blocking streams do not order behind
  // the legacy stream they went on.
  void settle() override { TCUDA(cudaStreamSynchronize(cudaStreamLegacy)); }

 private:
  std::vector<void*> buffers_;  // freed after the subclass has torn its endpoints down
};

// `queues`: the collectives' and the caller's compute stream (kUserQueue) by default.
cuda::CudaFabricOptions endpointOptions(const plan::Topology& topo, int rank, int64_t arenaBytes,
                                        int queues = kQueuesNeeded + 1) {
  cuda::CudaFabricOptions o;
  o.topology = topo;
  o.rank = rank;
  o.arenaBytes = arenaBytes;
  o.numQueues = queues;
  o.numCounters = tide::collectives::ids::kEnd;  // as the C API asks
  o.waitTimeoutSeconds = 30;
  return o;
}

// Every rank as a thread of this process on GPU 0.
class CoResidentFabric final : public DeviceMemoryFabric {
 public:
  CoResidentFabric(const plan::Topology& topo, int64_t arenaBytes, int queues = kQueuesNeeded + 1)
      : DeviceMemoryFabric(0, topo.ranks() * (arenaBytes + kPoisonSlack)), group_(topo.ranks(), 0) {
    endpoints_.resize(static_cast<size_t>(topo.ranks()));
    onEveryRank(topo.ranks(), [&](int r) {
      endpoints_[static_cast<size_t>(r)] = std::make_unique<cuda::CudaEndpoint>(endpointOptions(topo, r, arenaBytes, queues),
                                                                                 group_);
    });
  }
  ~CoResidentFabric() override {
    // Collective: each endpoint's teardown ends at the group's barrier.
    onEveryRank(static_cast<int>(endpoints_.size()), [&](int r) { endpoints_[static_cast<size_t>(r)].reset(); });
  }
  const char* name() const override { return "cuda co-resident"; }
  std::vector<int> localRanks() const override { return allRanks(static_cast<int>(endpoints_.size())); }
  Endpoint& endpoint(int r) override { return cudaEndpoint(r); }
  cuda::CudaEndpoint& cudaEndpoint(int r) { return *endpoints_.at(static_cast<size_t>(r)); }

 private:
  cuda::CoResidentGroup group_;
  std::vector<std::unique_ptr<cuda::CudaEndpoint>> endpoints_;
};

// This process's rank, the others in processes of their own (CUDA IPC).
class IpcFabric final : public DeviceMemoryFabric {
 public:
  IpcFabric(const plan::Topology& topo, int64_t arenaBytes, host::KeyValueStore& store, const std::string& prefix,
            int rank, int device, int queues = kQueuesNeeded + 1)
      : DeviceMemoryFabric(device, arenaBytes + kPoisonSlack), group_(store, prefix, rank, topo.ranks(), device),
        rank_(rank),
        endpoint_(std::make_unique<cuda::CudaEndpoint>(endpointOptions(topo, rank, arenaBytes, queues), group_)) {}
  ~IpcFabric() override { endpoint_.reset(); }  // collective: ends at the group's barrier
  const char* name() const override { return "cuda ipc"; }
  std::vector<int> localRanks() const override { return {rank_}; }
  Endpoint& endpoint(int r) override {
    return cudaEndpoint(r);
  }
  cuda::CudaEndpoint& cudaEndpoint(int r) {
    if (r != rank_) throw std::logic_error("IPC fabric: rank " + std::to_string(r) + " is another process");
    return *endpoint_;
  }

 private:
  cuda::IpcGroup group_;
  int rank_;
  std::unique_ptr<cuda::CudaEndpoint> endpoint_;
};

// One fabric's communicators and buffers for one case, across its calls.
class Runner {
 public:
  Runner(Fabric& fabric, const plan::Plan& pl, const ScratchLayout& layout, const Case& c,
         const tide::collectives::FaultConfig& fault = {})
      : f_(fabric), pl_(pl), c_(c), landingOffset_(layout.bytes), local_(fabric.localRanks()) {
    const plan::GroupLayout& g = pl.group;
    const int bGrad = plan::itemSize(g.gradDtype);
    const size_t n = static_cast<size_t>(g.topo.ranks());
    comms_.resize(n);
    shards_.resize(n);
    outs_.resize(n);
    grads_.resize(n);
    for (int r : local_) {
      const size_t i = static_cast<size_t>(r);
      tide::collectives::IssueOptions issue;
      issue.landingOwnQueue = c.landingOwnQueue;
      comms_[i] = std::make_unique<Communicator>(f_.endpoint(r), layout, fault, issue);
      shards_[i] = f_.alloc(static_cast<size_t>(g.shardBytes));
      outs_[i] = static_cast<float*>(f_.alloc(static_cast<size_t>(g.outElems) * sizeof(float)));
      for (const plan::ParamLayout& P : g.params)
        grads_[i].push_back(f_.alloc(static_cast<size_t>(P.rows * P.rowElems * bGrad)));
    }
  }

  std::vector<RankResults> call(const std::vector<RankInputs>& in) {
    const plan::GroupLayout& g = pl_.group;
    std::vector<RankResults> res(static_cast<size_t>(g.topo.ranks()));
    for (int r : local_) {
      const RankInputs& d = in[static_cast<size_t>(r)];
      std::byte* landing = f_.endpoint(r).arena() + landingOffset_;
      f_.upload(shards_[static_cast<size_t>(r)], d.shard.data(), d.shard.size());
      for (size_t p = 0; p < g.params.size(); ++p)
        f_.upload(grads_[static_cast<size_t>(r)][p], d.grads[p].data(), d.grads[p].size());
      f_.upload(outs_[static_cast<size_t>(r)], d.out.data(), d.out.size() * sizeof(float));
      f_.fill(landing, 0xA5, static_cast<size_t>(g.unshardedBytes()));  // an unwritten byte fails
      if (c_.inPlaceShard)
        for (size_t p = 0; p < g.params.size(); ++p) {
          const plan::ParamLayout& P = g.params[p];
          f_.upload(landing + g.landing(static_cast<int>(p), r), d.shard.data() + P.shardOffset,
                    static_cast<size_t>(P.shardBytes));
        }
    }
    f_.settle();
    progress(f_.name(), "inputs written, landings poisoned");
    for (int r : local_)
      comms_[static_cast<size_t>(r)]->allGather(pl_, c_.inPlaceShard ? nullptr : shards_[static_cast<size_t>(r)],
                                                landingOffset_);
    progress(f_.name(), "all-gathers enqueued");
    for (int r : local_) {
      f_.endpoint(r).synchronize(kCallerQueue);
      progress(f_.name(), "rank " + std::to_string(r) + ": all-gather done");
      RankResults& out = res[static_cast<size_t>(r)];
      out.landing.resize(static_cast<size_t>(g.unshardedBytes()));
      f_.download(out.landing.data(), f_.endpoint(r).arena() + landingOffset_, out.landing.size());
    }
    for (int r : local_) f_.endpoint(r).synchronizeAll();
    progress(f_.name(), "all-gathers drained");

    for (int r : local_) {
      const std::vector<void*>& gp = grads_[static_cast<size_t>(r)];
      const std::vector<const void*> grads(gp.begin(), gp.end());
      const tide::collectives::ReduceScatterEvents ev =
          comms_[static_cast<size_t>(r)]->reduceScatter(pl_, grads, outs_[static_cast<size_t>(r)], c_.alpha, c_.accumulate);
      // The caller reuses the gradients' memory once readDone fires.
      Endpoint& ep = f_.endpoint(r);
      ep.waitEvent(kUserQueue, kCallerQueue, ev.readDone);
      for (size_t p = 0; p < gp.size(); ++p)
        ep.zero(kUserQueue, gp[p], static_cast<int64_t>(in[static_cast<size_t>(r)].grads[p].size()));
    }
    progress(f_.name(), "reduce-scatters enqueued");
    for (int r : local_) {
      f_.endpoint(r).synchronize(kCallerQueue);
      progress(f_.name(), "rank " + std::to_string(r) + ": reduce-scatter done");
    }
    for (int r : local_) {
      f_.endpoint(r).synchronizeAll();
      RankResults& out = res[static_cast<size_t>(r)];
      out.out.resize(static_cast<size_t>(g.outElems));
      f_.download(out.out.data(), outs_[static_cast<size_t>(r)], out.out.size() * sizeof(float));
    }
    return res;
  }

  // How often an injected fault acted on this process's ranks (collectives and fabric).
  int64_t faultFirings() {
    int64_t n = 0;
    for (int r : local_) n += comms_[static_cast<size_t>(r)]->faultFirings() + f_.endpoint(r).fabricFaultFirings();
    return n;
  }

 private:
  Fabric& f_;
  const plan::Plan& pl_;
  const Case& c_;
  int64_t landingOffset_;
  std::vector<int> local_;  // the ranks this process drives; the vectors below are by rank
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<void*> shards_;
  std::vector<float*> outs_;
  std::vector<std::vector<void*>> grads_;
};

// Bit for bit, NaN included: every fabric writes a NaN result as the canonical 0x7FFFFFFF (fabric.hpp).
bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Landing bytes that differ from the shards their owners drew.
int64_t wrongLandingBytes(const plan::GroupLayout& g, const std::vector<RankInputs>& in, const RankResults& res) {
  std::vector<const uint8_t*> shards;
  for (const RankInputs& d : in) shards.push_back(d.shard.data());
  return tide::bench::wrongLandingBytes(g, shards, res.landing.data());
}

// Output elements of `rank` that miss the float64 reference.
int64_t wrongOutputs(const plan::GroupLayout& g, const Case& c, const std::vector<RankInputs>& in, int rank,
                     const std::vector<float>& y, double* maxRelErr) {
  std::vector<std::vector<const void*>> grads(static_cast<size_t>(g.topo.ranks()));
  for (int u = 0; u < g.topo.ranks(); ++u)
    for (const auto& gp : in[static_cast<size_t>(u)].grads) grads[static_cast<size_t>(u)].push_back(gp.data());
  const tide::bench::OutputCheck check =
      tide::bench::checkShardOutput(g, grads, rank, c.alpha, c.accumulate ? in[static_cast<size_t>(rank)].out.data() : nullptr,
                                    y.data(), c.inputs == InputKind::kInteger);
  *maxRelErr = std::max(*maxRelErr, check.maxRelErr);
  return check.wrong;
}

// Where one rank's GPU results depart from the host fabric's and from the references.
struct Differences {
  bool landingVsHost = false;
  int64_t wrongLanding = 0;  // landing bytes that are not their owner's shard bytes
  bool outputVsHost = false;
  int64_t wrongOutputs = 0;  // output elements that miss the float64 sum
  bool any() const { return landingVsHost || wrongLanding > 0 || outputVsHost || wrongOutputs > 0; }
};

Differences compare(const plan::GroupLayout& g, const Case& c, const std::vector<RankInputs>& in, int rank,
                    const RankResults& host, const RankResults& gpu, double* maxRelErr) {
  Differences d;
  d.landingVsHost = gpu.landing != host.landing;
  d.wrongLanding = wrongLandingBytes(g, in, gpu);
  d.outputVsHost = !sameBits(gpu.out, host.out);
  d.wrongOutputs = wrongOutputs(g, c, in, rank, gpu.out, maxRelErr);
  return d;
}

std::vector<plan::ParamSpec> drawShapes(std::mt19937_64& rng, const Case& c, int ranks) {
  std::vector<plan::ParamSpec> specs;
  const int params = 2 + static_cast<int>(rng() % 5);
  const int maxRows = 3 * ranks + 5;
  for (int p = 0; p < params; ++p) {
    plan::ParamSpec s;
    s.dtype = c.agDtype;
    const int64_t rows = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(maxRows));
    switch (rng() % 4) {
      case 0: s.shape = {rows}; break;
      case 1: s.shape = {rows, 1 + static_cast<int64_t>(rng() % 7)}; break;
      case 2: s.shape = {rows, 2, 1 + static_cast<int64_t>(rng() % 3)}; break;
      default: s.shape = {rows, 64 + static_cast<int64_t>(rng() % 300)}; break;  // vector-width rows and tails
    }
    specs.push_back(s);
  }
  if (c.large) specs.insert(specs.begin() + 1, plan::ParamSpec{{4096 + 3, 256}, c.agDtype});
  return specs;
}

std::vector<Case> casesFor(const plan::Topology& topo) {
  std::vector<Case> cases;
  auto rs = [](int passes, int slots, plan::Mode mode, int sumCtas, plan::Landing landing) {
    plan::RsOptions o;
    o.passes = passes;
    o.stagingSlots = slots;
    o.mode = mode;
    o.sumCtas = sumCtas;
    o.landing = landing;
    return o;
  };
  Case a;
  a.name = "bf16 normal, pull, landing queue";
  a.rs = rs(1, 2, plan::Mode::kInPlace, 0, plan::Landing::kPull);
  cases.push_back(a);
  Case b;
  b.name = "fp32 integer, accumulate, alpha 1/4, push, landings behind the sends, slot-reuse";
  b.agDtype = DType::kFP32;
  b.gradDtype = DType::kFP32;
  b.inputs = InputKind::kInteger;
  b.alpha = 0.25f;
  b.accumulate = true;
  b.rs = rs(2, 1, plan::Mode::kSlotReuse, 7, plan::Landing::kPush);
  b.landingOwnQueue = false;
  cases.push_back(b);
  Case d;
  d.name = "bf16 params, fp32 gradients, NaN/Inf, alpha 1/2, 3 passes, push";
  d.gradDtype = DType::kFP32;
  d.inputs = InputKind::kNonFinite;
  d.alpha = 0.5f;
  d.rs = rs(3, 3, plan::Mode::kInPlace, 16, plan::Landing::kPush);
  d.inPlaceShard = topo.nodes == 1;
  cases.push_back(d);
  Case e;
  e.name = "bf16 normal, 1 Mi-element parameter, 4 passes, pull, 132 sum CTAs";
  e.large = true;
  e.rs = rs(4, 2, plan::Mode::kSlotReuse, 132, plan::Landing::kPull);
  cases.push_back(e);
  if (topo.nodes > 1 && topo.gpusPerNode == 1) {
    // App. F's rail lane: all-gather rounds put into the landings, gradient
    // rows put from the gradients into the lane inbox and summed there; the
    // host fabric runs the same plan.
    Case f;
    f.name = "rail lane, bf16 normal, 1 Mi-element parameter, 4 passes";
    f.large = true;
    f.rs = rs(4, 2, plan::Mode::kInPlace, 0, plan::Landing::kPull);
    f.rs.railLane = true;
    cases.push_back(f);
    Case g;
    g.name = "rail lane, fp32 gradients, NaN/Inf, accumulate, alpha 1/2, 3 passes, sums behind the sends";
    g.gradDtype = DType::kFP32;
    g.inputs = InputKind::kNonFinite;
    g.alpha = 0.5f;
    g.accumulate = true;
    g.rs = rs(3, 2, plan::Mode::kSlotReuse, 16, plan::Landing::kPull);
    g.rs.railLane = true;
    g.landingOwnQueue = false;
    cases.push_back(g);
  }
  return cases;
}

constexpr int kCallsPerCase = 3;

// TIDE_COPY_GRAPHS as the fabric reads it: anything but "0" leaves graphs on.
bool copyGraphsOn() {
  const char* knob = std::getenv("TIDE_COPY_GRAPHS");
  return knob == nullptr || std::string(knob) != "0";
}

// The CUDA fabric of one case (its index tells the IPC groups of cases apart).
using MakeGpuFabric = std::function<std::unique_ptr<Fabric>(int64_t arenaBytes, int caseIndex)>;

// Runs every case of one topology (failures are counted by TCHECK). `print`:
// this process reports the cases (in IPC mode only rank 0 does; every rank
// reports its failures).
void runTopology(const plan::Topology& topo, uint64_t seed, const MakeGpuFabric& makeGpuFabric, bool print) {
  int caseIndex = 0;
  for (const Case& c : casesFor(topo)) {
    const uint64_t caseSeed = seed ^ std::hash<std::string>{}(c.name) ^ (static_cast<uint64_t>(topo.nodes) << 48) ^
                              (static_cast<uint64_t>(topo.gpusPerNode) << 56);
    std::mt19937_64 rng(caseSeed);
    plan::PlanOptions po;
    po.rs = c.rs;
    po.ag.railLane = c.rs.railLane;  // the lane of both collectives, as the C API's railLane asks
    const plan::Plan pl = plan::makePlan(topo, drawShapes(rng, c, topo.ranks()), c.gradDtype, po);
    const ScratchLayout layout = ScratchLayout::forPlans({&pl});
    const int64_t arenaBytes = layout.bytes + pl.group.unshardedBytes();
    const int before = tide::test::failures();
    if (print)
      std::printf("  M%dL%d %s (%zu params, seed %llu): ", topo.nodes, topo.gpusPerNode, c.name.c_str(),
                  pl.group.params.size(), static_cast<unsigned long long>(caseSeed));
    std::fflush(stdout);
    int64_t graphLaunches = 0;
    size_t localRanks = 0;
    double maxRelErr = 0;
    // Outside the try: on an error the handler fail-stops before any of them is
    // torn down (a blocked stream would make each teardown wait out its deadline).
    std::unique_ptr<HostFabric> hostFabric;
    std::unique_ptr<Fabric> gpuFabric;
    std::unique_ptr<Runner> onHost, onGpu;
    try {
      hostFabric = std::make_unique<HostFabric>(topo, arenaBytes);
      gpuFabric = makeGpuFabric(arenaBytes, caseIndex++);
      onHost = std::make_unique<Runner>(*hostFabric, pl, layout, c);
      onGpu = std::make_unique<Runner>(*gpuFabric, pl, layout, c);
      progress("setup", "endpoints and communicators of both fabrics up");
      for (int call = 0; call < kCallsPerCase; ++call) {
        const std::vector<RankInputs> in = drawInputs(pl.group, c, rng);
        const std::vector<RankResults> want = onHost->call(in);
        const std::vector<RankResults> got = onGpu->call(in);
        for (int r : gpuFabric->localRanks()) {
          const Differences diff = compare(pl.group, c, in, r, want[static_cast<size_t>(r)],
                                           got[static_cast<size_t>(r)], &maxRelErr);
          const std::string where = "call " + std::to_string(call) + ", rank " + std::to_string(r);
          TCHECK(!diff.landingVsHost, where + ": the GPU landing differs from the host fabric's");
          TCHECK(diff.wrongLanding == 0, where + ": " + std::to_string(diff.wrongLanding) + " landing bytes wrong");
          TCHECK(!diff.outputVsHost, where + ": the GPU output differs from the host fabric's");
          TCHECK(diff.wrongOutputs == 0,
                 where + ": " + std::to_string(diff.wrongOutputs) + " output elements miss the float64 sum");
        }
      }
      for (int r : gpuFabric->localRanks()) graphLaunches += gpuFabric->endpoint(r).stats().copyGraphLaunches;
      localRanks = gpuFabric->localRanks().size();
      onGpu.reset();
      onHost.reset();
      gpuFabric.reset();
      hostFabric.reset();
    } catch (const std::exception& e) {
      // A stream may be blocked for good: tearing the endpoints down would wait
      // out every queue's deadline. Fail stop with the message.
      if (print) std::printf("FAIL\n");
      std::fprintf(stderr, "tide_co_resident_test: rank %d: FAIL: M%dL%d %s: %s\n", tide::test::rankForLog(),
                   topo.nodes, topo.gpusPerNode, c.name.c_str(), e.what());
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(1);
    }
    // Lists sighted in the first two calls are built at the third call's start
    // (all ranks idle there), so some must replay (buffers and arenas keep their addresses).
    TCHECK(graphLaunches > 0 || !copyGraphsOn(), "no copy list was replayed as a cached graph");
    if (print)
      std::printf("%s (max rel err %.2e, %lld copy-graph launches on %zu rank(s))\n",
                  tide::test::failures() == before ? "ok" : "FAIL", maxRelErr, static_cast<long long>(graphLaunches),
                  localRanks);
    std::fflush(stdout);
  }
}

// ------------------------------------------------------------------ injected faults (--faults)

// A fault injected into rank 0's GPU communicator (or its fabric) on a topology
// where it acts. Each must be caught by this test's own checks, the ones that
// pass every case above: otherwise those checks could not fail.
struct FaultProbe {
  tide::collectives::Fault fault;
  plan::Topology topo;  // In-Place mode on each (the plan's default)
};

// Only faults that end in wrong bytes: a fault caught by a deadline (a lost
// credit or signal, a stalled peer) makes the CUDA watchdog abort the
// process, which in this test would take every rank with it; the fabric test
// and the host-fabric tests cover those.
std::vector<FaultProbe> faultProbes() {
  using tide::collectives::Fault;
  return {
      {Fault::kWrongLandingOffset, plan::Topology::make(1, 2)},
      {Fault::kSkipCompletionFence, plan::Topology::make(1, 2)},
      {Fault::kReleaseGradsEarly, plan::Topology::make(1, 2)},
      {Fault::kCorruptStagedChunk, plan::Topology::make(2, 2)},
      {Fault::kDuplicatePut, plan::Topology::make(3, 1)},  // copy-engine rails
  };
}

// Runs one probe on co-resident ranks, two calls, the host fabric without the
// fault as the reference: the fault must act and some rank's results must fail
// the checks (or the fabric must raise an error).
void runFaultProbe(const FaultProbe& probe, uint64_t seed) {
  const char* name = tide::collectives::faultName(probe.fault);
  const plan::Topology& topo = probe.topo;
  std::mt19937_64 rng(seed ^ std::hash<std::string>{}(name));
  Case c;
  c.name = std::string("fault ") + name;
  plan::PlanOptions po;
  po.rs = c.rs;
  // Shapes on which every probe's fault acts (as in the host-fabric fault tests).
  const plan::Plan pl =
      plan::makePlan(topo, {{{64, 16}, DType::kBF16}, {{33}, DType::kBF16}}, c.gradDtype, po);
  const ScratchLayout layout = ScratchLayout::forPlans({&pl});
  const int64_t arenaBytes = layout.bytes + pl.group.unshardedBytes();
  std::printf("  M%dL%d %s on rank 0: ", topo.nodes, topo.gpusPerNode, name);
  std::fflush(stdout);
  HostFabric hostFabric(topo, arenaBytes);
  CoResidentFabric gpuFabric(topo, arenaBytes);
  if (probe.fault == tide::collectives::Fault::kDuplicatePut) {
    tide::fabric::FabricFaults ff;
    ff.duplicatePutAfter = 0;  // the first rail put's bytes land again after the next put to that place
    gpuFabric.endpoint(0).setFabricFaults(ff);
  }
  int64_t flagged = 0, wrongLanding = 0, wrongOutputs = 0, firings = 0;
  // The reference first, outside the try below: an error of its own fails the probe instead of
  // counting as the GPU fault's detection.
  Runner onHost(hostFabric, pl, layout, c);
  std::vector<std::vector<RankInputs>> inputs;
  std::vector<std::vector<RankResults>> wants;
  for (int call = 0; call < 2; ++call) {
    inputs.push_back(drawInputs(pl.group, c, rng));
    wants.push_back(onHost.call(inputs.back()));
  }
  std::string error;
  std::unique_ptr<Runner> onGpu;
  try {
    onGpu = std::make_unique<Runner>(gpuFabric, pl, layout, c, tide::collectives::FaultConfig{probe.fault, 0});
    double maxRelErr = 0;
    for (int call = 0; call < 2; ++call) {
      const std::vector<RankInputs>& in = inputs[static_cast<size_t>(call)];
      const std::vector<RankResults>& want = wants[static_cast<size_t>(call)];
      const std::vector<RankResults> got = onGpu->call(in);
      for (int r = 0; r < topo.ranks(); ++r) {
        const Differences d =
            compare(pl.group, c, in, r, want[static_cast<size_t>(r)], got[static_cast<size_t>(r)], &maxRelErr);
        flagged += d.any();
        wrongLanding += d.wrongLanding;
        wrongOutputs += d.wrongOutputs;
      }
    }
  } catch (const std::exception& e) {
    error = e.what();  // an error the GPU fabric raised is a detection too (a range check, say)
  }
  if (onGpu) firings = onGpu->faultFirings();  // counted up to an error too
  const bool detected = flagged > 0 || !error.empty();
  if (error.empty())
    std::printf("acted %lld time(s), %s (%lld results flagged: %lld landing bytes, %lld output elements wrong)\n",
                static_cast<long long>(firings), detected ? "detected" : "NOT DETECTED", static_cast<long long>(flagged),
                static_cast<long long>(wrongLanding), static_cast<long long>(wrongOutputs));
  else
    std::printf("acted %lld time(s), detected by an error: %s\n", static_cast<long long>(firings), error.c_str());
  std::fflush(stdout);
  TCHECK(!error.empty() || firings > 0, std::string(name) + ": the fault never acted, so the probe tests nothing");
  TCHECK(detected, std::string(name) + ": the fault passed every check");
}

// The fabric's dropped signal on co-resident ranks (the fabric test needs two GPUs for it).
void runLostSignalProbe(const plan::Topology& topo) {
  std::printf("  M%dL%d lose-signal (the fabric's own, every rank): ", topo.nodes, topo.gpusPerNode);
  std::fflush(stdout);
  const int before = tide::test::failures();
  CoResidentFabric fabric(topo, 1 << 20);
  onEveryRank(topo.ranks(), [&](int r) { tide::test::checkLostSignal(fabric.cudaEndpoint(r), r, topo.ranks(), 0); });
  std::printf("%s\n", tide::test::failures() == before ? "dropped once per rank, counted, the others arrived" : "FAIL");
  std::fflush(stdout);
}

void runFaultProbes(uint64_t seed) {
  std::printf("injected faults (each must be caught by the checks above):\n");
  runLostSignalProbe(plan::Topology::make(1, 2));
  runLostSignalProbe(plan::Topology::make(2, 1));
  for (const FaultProbe& p : faultProbes()) runFaultProbe(p, seed);
}

// ------------------------------------------------------------------ caller streams (--caller-streams)

// TIDE-AG when consecutive calls come on different, unordered caller streams
// (the C API takes any stream per call; FSDP2 passes its all-gather stream or
// the current one). Rank 0 issues call 1 on stream A behind a delay and a
// poison fill of call 1's landing (its caller still uses that memory up to the
// call), then call 2 on an idle stream B; the other ranks issue both at once
// (callerStreamsRank), one process per rank.
// No peer may write into rank 0's call-1 landing before A reaches call 1, so
// both landings of every rank must hold their owners' shard bytes. With the
// landing-free signals on the caller's queue (`signalsOwnQueue` false: TIDE
// before session 21, rebuilt by a test double that runs the signal queue's
// work on the caller's queue) call 2's signal overtakes call 1's: the probe must then
// find poison or stall (runCallerStreamsAsProcesses), or it could not fail.
// Returns the landing bytes found wrong over both calls and every rank.
// The probe's group, plan and inputs, the same in every process for a seed.
struct CallerStreamsCase {
  CallerStreamsCase(const plan::Topology& topo, uint64_t seed) {
    std::mt19937_64 rng(seed ^ 0x5eedc0de);
    Case c;
    c.name = "caller streams";
    pl = plan::makePlan(topo, drawShapes(rng, c, topo.ranks()), c.gradDtype, plan::PlanOptions{});
    layout = ScratchLayout::forPlans({&pl});
    landing[0] = layout.bytes;
    landing[1] = layout.bytes + pl.group.unshardedBytes();
    in[0] = drawInputs(pl.group, c, rng);
    in[1] = drawInputs(pl.group, c, rng);
  }
  int64_t arenaBytes() const { return layout.bytes + 2 * pl.group.unshardedBytes(); }
  plan::Plan pl;
  ScratchLayout layout;
  int64_t landing[2] = {0, 0};
  std::vector<RankInputs> in[2];  // [call][rank]
};

// Rank r's two calls of the probe on `ep`, its shards at shard[0] and
// shard[1]; returns its two landings. Rank 0 issues call 1 on a stream of its
// own behind a delay, call 2 on another; the other ranks issue both at once,
// on two streams too or (peersOneStream) on one.
std::vector<RankResults> callerStreamsRank(DeviceMemoryFabric& fabric, cuda::CudaEndpoint& ep, int r,
                                           const CallerStreamsCase& pc, void* const* shard, bool signalsOwnQueue,
                                           bool peersOneStream) {
  const int64_t landingBytes = pc.pl.group.unshardedBytes();
  // The issue order before session 21, rebuilt by the test double (the
  // communicator has no switch for it): the signals on the caller's stream.
  tide::test::CallerQueuePerCall issuing(ep);
  if (!signalsOwnQueue) issuing.mergeQueue(tide::collectives::kSignalQueue, kCallerQueue);
  Communicator comm(issuing, pc.layout);
  cudaStream_t streams[2] = {nullptr, nullptr};
  TCUDA(cudaStreamCreateWithFlags(&streams[0], cudaStreamNonBlocking));
  if (r == 0 || !peersOneStream)
    TCUDA(cudaStreamCreateWithFlags(&streams[1], cudaStreamNonBlocking));
  else
    streams[1] = streams[0];
  for (int k = 0; k < 2; ++k) {
    ep.setCallerStream(streams[k]);
    if (r == 0 && k == 0) ep.delay(kCallerQueue, 0.3);  // the slow caller
    TCUDA(cudaMemsetAsync(ep.arena() + pc.landing[k], 0xA5, static_cast<size_t>(landingBytes), streams[k]));
    comm.allGather(pc.pl, shard[k], pc.landing[k]);
  }
  ep.clearCallerStream();
  for (cudaStream_t st : streams) TCUDA(cudaStreamSynchronize(st));
  ep.synchronizeAll();
  std::vector<RankResults> got(2);
  for (int k = 0; k < 2; ++k) {
    got[static_cast<size_t>(k)].landing.resize(static_cast<size_t>(landingBytes));
    fabric.download(got[static_cast<size_t>(k)].landing.data(), ep.arena() + pc.landing[k],
                    static_cast<size_t>(landingBytes));
  }
  TCUDA(cudaStreamDestroy(streams[0]));
  if (streams[1] != streams[0]) TCUDA(cudaStreamDestroy(streams[1]));
  return got;
}

// Uploads rank r's two shards; returns where they are.
std::vector<void*> uploadCallerStreamsShards(DeviceMemoryFabric& fabric, const CallerStreamsCase& pc, int r) {
  std::vector<void*> out;
  for (int k = 0; k < 2; ++k) {
    const std::vector<uint8_t>& bytes = pc.in[k][static_cast<size_t>(r)].shard;
    out.push_back(fabric.alloc(bytes.size()));
    fabric.upload(out.back(), bytes.data(), bytes.size());
  }
  return out;
}

// Whether making an endpoint with `o` in `group` is refused with a message holding `words`.
bool refusedWith(const cuda::CudaFabricOptions& o, cuda::LocalGroup& group, const std::string& words) {
  try {
    cuda::CudaEndpoint ep(o, group);
  } catch (const tide::fabric::FabricError& e) {
    return std::string(e.what()).find(words) != std::string::npos;
  }
  return false;
}

// Misuse is refused with a message, not run.
void refusals() {
  cuda::CoResidentGroup group(2, 0, 5);
  cuda::CudaFabricOptions o;
  o.topology = plan::Topology::make(1, 1);  // one rank, a group of two
  TCHECK(refusedWith(o, group, "a group of 2 ranks for a topology of 1"),
         "a group and topology of different sizes must be refused");
  cuda::CoResidentGroup one(1, 0, 5);
  o.rails = cuda::CudaFabricOptions::Rails::kSendRecv;
  TCHECK(refusedWith(o, one, "copy-engine copies only"), "send/recv rails on co-resident ranks must be refused");
  // A barrier that not every rank reaches ends at its deadline with a message.
  cuda::CoResidentGroup lonely(2, 0, 0.2);
  bool timedOut = false;
  try {
    lonely.barrier(0);
  } catch (const tide::fabric::FabricError& e) {
    timedOut = e.kind() == tide::fabric::FabricError::Kind::kTimeout;
  }
  TCHECK(timedOut, "a barrier one rank never reaches must time out");
}

// The group's host all-gather of words (what the C API's group comparison
// would use): three threads, four gathers back to back, each rank's words of
// that gather in rank order on every rank.
void wordGathers() {
  constexpr int kRanks = 3;
  cuda::CoResidentGroup group(kRanks, 0, 10);
  auto wordsOf = [](int rank, int gather) {
    return std::vector<uint64_t>{uint64_t(rank), uint64_t(gather), ~uint64_t(rank * 7 + gather)};
  };
  std::vector<int> wrong(kRanks, 0);
  onEveryRank(kRanks, [&](int r) {
    for (int gather = 0; gather < 4; ++gather) {
      std::vector<uint64_t> want;
      for (int q = 0; q < kRanks; ++q) {
        const std::vector<uint64_t> w = wordsOf(q, gather);
        want.insert(want.end(), w.begin(), w.end());
      }
      wrong[static_cast<size_t>(r)] += group.gatherWords(r, wordsOf(r, gather)) != want;
    }
  });
  for (int r = 0; r < kRanks; ++r) TCHECK(wrong[static_cast<size_t>(r)] == 0, "a word gather gave other words");
}

std::vector<plan::Topology> parseTopologies(const std::string& list) {
  std::vector<plan::Topology> out;
  size_t at = 0;
  while (at < list.size()) {
    const size_t comma = list.find(',', at);
    const std::string item = list.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    int m = 0, l = 0;
    if (std::sscanf(item.c_str(), "%dx%d", &m, &l) != 2 || m < 1 || l < 1) {
      std::fprintf(stderr, "bad topology '%s' (want MxL, e.g. 2x2)\n", item.c_str());
      std::exit(2);
    }
    out.push_back(plan::Topology::make(m, l));
    at = comma == std::string::npos ? list.size() : comma + 1;
  }
  return out;
}

}  // namespace

// A fresh folder for one launch's file store, removed with this object.
class StoreDir {
 public:
  StoreDir() {
    if (mkdtemp(path_) == nullptr) {
      std::perror("mkdtemp");
      path_[0] = '\0';
    }
  }
  ~StoreDir() {
    std::error_code ignored;
    if (ok()) std::filesystem::remove_all(path_, ignored);
  }
  StoreDir(const StoreDir&) = delete;
  StoreDir& operator=(const StoreDir&) = delete;
  bool ok() const { return path_[0] != '\0'; }
  const char* path() const { return path_; }

 private:
  char path_[32] = "/tmp/tide_ipc_test_XXXXXX";
};

using RankBody = std::function<void(int rank, int device, host::FileStore& store)>;

// What one process of runRanksAsProcesses runs: rank r on GPU r mod count, a
// file store in `dir` for the bootstrap; it fails when `body` throws or
// records a failed check.
std::function<int(int, const ncclUniqueId&)> rankProcess(const char* dir, const RankBody& body) {
  return [dir, &body](int rank, const ncclUniqueId&) {
    tide::test::rankForLog() = rank;
    int devices = 0;
    TCUDA(cudaGetDeviceCount(&devices));
    const int device = rank % devices;
    TCUDA(cudaSetDevice(device));
    host::FileStore store(dir);
    try {
      body(rank, device, store);
    } catch (const std::exception& e) {
      tide::test::fail(__FILE__, __LINE__, std::string("stopped: ") + e.what());
    }
    return tide::test::failures() == 0 ? 0 : 1;
  };
}

// Runs `body(rank, device, store)` in one process per rank of `t` (CUDA IPC
// between them). The parent touches no CUDA: it forks. Returns the ranks that failed.
int runRanksAsProcesses(const plan::Topology& t, double timeoutSeconds, const RankBody& body) {
  StoreDir dir;
  if (!dir.ok()) return t.ranks();
  std::printf("M%dL%d as %d processes (store %s):\n", t.nodes, t.gpusPerNode, t.ranks(), dir.path());
  std::fflush(stdout);  // before the fork, or every child prints it again
  return tide::test::launchRanks(t.ranks(), timeoutSeconds, rankProcess(dir.path(), body));
}

// runRanksAsProcesses, returning how each rank ended, with its stderr.
std::vector<tide::test::ChildOutcome> runRanksAsProcessesCapturing(const plan::Topology& t, double timeoutSeconds,
                                                                   const RankBody& body) {
  StoreDir dir;
  if (!dir.ok()) return std::vector<tide::test::ChildOutcome>(static_cast<size_t>(t.ranks()));
  std::fflush(stdout);
  return tide::test::launchRanksCapturing(t.ranks(), timeoutSeconds, rankProcess(dir.path(), body));
}

// Every topology with one process per rank, each checking its own rank.
int runAsProcesses(const std::vector<plan::Topology>& topologies, uint64_t seed) {
  int failedRanks = 0;
  for (const plan::Topology& t : topologies)
    failedRanks += runRanksAsProcesses(t, 300, [&](int rank, int device, host::FileStore& store) {
      runTopology(
          t, seed,
          [&](int64_t arenaBytes, int caseIndex) -> std::unique_ptr<Fabric> {
            return std::make_unique<IpcFabric>(t, arenaBytes, store, "case" + std::to_string(caseIndex), rank, device);
          },
          rank == 0);
    });
  return failedRanks;
}

// One rank of the caller-streams probe as a process: its landings after both
// calls, wrong bytes counted against the inputs.
int64_t callerStreamsRankProcess(const plan::Topology& t, const CallerStreamsCase& pc, int rank, int device,
                                 host::FileStore& store, bool signalsOwnQueue, bool peersOneStream) {
  IpcFabric fabric(t, pc.arenaBytes(), store, "caller-streams", rank, device, kQueuesNeeded);
  const std::vector<void*> shards = uploadCallerStreamsShards(fabric, pc, rank);
  fabric.settle();
  const std::vector<RankResults> got =
      callerStreamsRank(fabric, fabric.cudaEndpoint(rank), rank, pc, shards.data(), signalsOwnQueue, peersOneStream);
  int64_t wrong = 0;
  for (int k = 0; k < 2; ++k) wrong += wrongLandingBytes(pc.pl.group, pc.in[k], got[static_cast<size_t>(k)]);
  return wrong;
}

// The marker an old-order rank prints once its landings are checked (before
// its fabric's collective teardown, which a peer stopped by its watchdog
// would leave waiting).
constexpr const char* kOldOrderMarker = "old order, landing bytes wrong on this rank: ";
// The CUDA fabric watchdog's fail-stop line for a wait past its deadline.
constexpr const char* kStalledWait = "not satisfied after";

// How the ranks of an old-order launch ended: caught by wrong bytes, by a wait
// the watchdog failed stop (the old order lets a later call's "landing free"
// value be overwritten by an earlier one's, so a peer waiting for the later
// value after that waits for ever), or neither (the probe missed it).
struct OldOrderVerdict {
  int64_t wrongBytes = 0;
  int stalled = 0;
  int unexplained = 0;  // ended otherwise: the test itself broke
  std::vector<std::string> perRank;  // how each rank ended, in words
  bool caught() const { return wrongBytes > 0 || stalled > 0; }
};

OldOrderVerdict judgeOldOrder(const std::vector<tide::test::ChildOutcome>& ranks) {
  OldOrderVerdict v;
  for (const tide::test::ChildOutcome& rank : ranks) {
    const std::string& err = rank.stderrText;
    const size_t at = err.find(kOldOrderMarker);
    if (at != std::string::npos) {
      const int64_t wrong = std::strtoll(err.c_str() + at + std::strlen(kOldOrderMarker), nullptr, 10);
      v.wrongBytes += wrong;
      v.perRank.push_back(std::to_string(wrong) + " landing bytes wrong");
    } else if (rank.signal == SIGABRT && err.find(kStalledWait) != std::string::npos) {
      ++v.stalled;
      v.perRank.emplace_back("stalled");
    } else {
      ++v.unexplained;
      v.perRank.emplace_back("ended neither with a verdict nor stalled: the probe broke");
    }
  }
  return v;
}

// The caller-streams probe with one process per rank (CUDA IPC), each with a
// context and hardware queues of its own, as ranks run in training; every
// rank checks its own landings. Then each topology runs again with the
// signals on the caller's queue (callerStreamsRank's test double, TIDE before
// session 21), which must be caught: the probe can fail. The old order fails
// two ways, by landing bytes overwritten early or by a stall (judgeOldOrder),
// so its ranks run under a short wait deadline in a launch of their own, and
// the launcher tells how each ended. The probe first ran ranks as threads of
// one context and blamed their stalls on it; sessions 27-29 show those
// stalls were this second way of catching the old order (every one of its
// runs has both orders; session 29: processes stall the same way).
int runCallerStreamsAsProcesses(const std::vector<plan::Topology>& topologies, uint64_t seed, bool peersOneStream) {
  int failedRanks = 0;
  for (const plan::Topology& t : topologies) {
    const CallerStreamsCase pc(t, seed);
    const int failed = runRanksAsProcesses(t, 120, [&](int rank, int device, host::FileStore& store) {
      TCHECK(callerStreamsRankProcess(t, pc, rank, device, store, true, peersOneStream) == 0,
             "a peer wrote into a landing before its caller's stream reached the call");
    });
    std::printf("  M%dL%d as %d processes, signals on their own queue: %s\n", t.nodes, t.gpusPerNode, t.ranks(),
                failed == 0 ? "every landing right" : "FAILED");
    std::fflush(stdout);
    failedRanks += failed;

    const OldOrderVerdict old = judgeOldOrder(runRanksAsProcessesCapturing(
        t, 120, [&](int rank, int device, host::FileStore& store) {
          setenv("TIDE_FABRIC_WAIT_TIMEOUT_S", "5", 1);  // a stall is one way of catching it
          const int64_t wrong = callerStreamsRankProcess(t, pc, rank, device, store, false, peersOneStream);
          std::fprintf(stderr, "rank %d: %s%lld\n", rank, kOldOrderMarker, static_cast<long long>(wrong));
        }));
    std::printf("  M%dL%d as %d processes, signals on the caller's stream (before session 21): %s:%s\n", t.nodes,
                t.gpusPerNode, t.ranks(), old.caught() ? "caught" : "NOT CAUGHT",
                tide::fabric::describeRankKinds(old.perRank, [](const std::string& how) { return how; }).c_str());
    std::fflush(stdout);
    if (!old.caught() || old.unexplained > 0) ++failedRanks;
  }
  return failedRanks;
}

int main(int argc, char** argv) {
  // Every rank's eight queues (seven and the user's) get a hardware queue of their own up to 4 ranks
  // (a stream wait sharing a queue with its producer would stall it).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  std::string topologies = "1x2,2x1,2x2,1x4";
  uint64_t seed = std::random_device{}();
  bool processes = false;
  bool faults = false;
  bool callerStreams = false;
  bool topologiesGiven = false;
  bool peersOneStream = false;  // --caller-streams: ranks other than 0 issue both calls on one stream
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--topologies" && i + 1 < argc) {
      topologies = argv[++i];
      topologiesGiven = true;
    }
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--verbose") verbose = true;
    else if (a == "--processes") processes = true;
    else if (a == "--faults") faults = true;
    else if (a == "--caller-streams") callerStreams = true;
    else if (a == "--peers-one-stream") peersOneStream = true;
    else {
      std::fprintf(stderr,
                   "usage: %s [--topologies MxL,...] [--seed S] [--processes | --faults | --caller-streams] "
                   "[--peers-one-stream] [--verbose]\n",
                   argv[0]);
      return 2;
    }
  }
  if (processes && faults) {
    std::fprintf(stderr, "--faults runs co-resident ranks (threads); it excludes --processes\n");
    return 2;
  }
  if (peersOneStream && !callerStreams) {
    std::fprintf(stderr, "--peers-one-stream goes with --caller-streams\n");
    return 2;
  }
  if (callerStreams && (processes || faults)) {
    std::fprintf(stderr, "--caller-streams always runs one process per rank; it excludes --processes and --faults\n");
    return 2;
  }
  if (callerStreams) {
    const std::string callerStreamTopologies = topologiesGiven ? topologies : "1x2,1x3";
    std::printf("tide_co_resident_test: caller streams, one process per rank (CUDA IPC), seed %llu\n",
                static_cast<unsigned long long>(seed));
    std::fflush(stdout);  // before the fork, or every child prints it again
    const int failedRanks =
        runCallerStreamsAsProcesses(parseTopologies(callerStreamTopologies), seed, peersOneStream);
    std::printf("tide_co_resident_test: %s (%d rank(s) failed)\n", failedRanks == 0 ? "PASS" : "FAIL", failedRanks);
    return failedRanks == 0 ? 0 : 1;
  }
  if (processes) {
    std::printf("tide_co_resident_test: topologies %s, one process per rank (CUDA IPC), seed %llu\n",
                topologies.c_str(), static_cast<unsigned long long>(seed));
    std::fflush(stdout);  // before the fork, or every child prints it again
    const int failedRanks = runAsProcesses(parseTopologies(topologies), seed);
    std::printf("tide_co_resident_test: %s (%d rank(s) failed)\n", failedRanks == 0 ? "PASS" : "FAIL", failedRanks);
    return failedRanks == 0 ? 0 : 1;
  }
  int devices = 0;
  TCUDA(cudaGetDeviceCount(&devices));
  TCUDA(cudaSetDevice(0));
  std::printf("tide_co_resident_test: %s on GPU 0 of %d, seed %llu, CUDA_DEVICE_MAX_CONNECTIONS=%s\n",
              faults ? "injected faults" : ("topologies " + topologies).c_str(),
              devices,
              static_cast<unsigned long long>(seed), std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
  try {
    refusals();
    wordGathers();
    if (faults) {
      runFaultProbes(seed);
    } else {
      for (const plan::Topology& t : parseTopologies(topologies))
        runTopology(
            t, seed,
            [&](int64_t arenaBytes, int) -> std::unique_ptr<Fabric> {
              return std::make_unique<CoResidentFabric>(t, arenaBytes);
            },
            true);
    }
  } catch (const std::exception& e) {
    tide::test::fail(__FILE__, __LINE__, std::string("stopped: ") + e.what());
  }
  const bool ok = tide::test::failures() == 0;
  std::printf("tide_co_resident_test: %s (%d failed checks)\n", ok ? "PASS" : "FAIL", tide::test::failures());
  return ok ? 0 : 1;
}
