// TIDE-AG and TIDE-RS with several ranks on one GPU (co-resident CUDA ranks,
// fabric/cuda/co_resident_ranks.hpp), so every multi-rank topology of a few
// ranks runs its CUDA code paths on a machine with a single GPU: counters
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
//   tide_co_resident_test [--topologies 1x2,2x1,2x2,1x4] [--seed S] [--verbose]
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/reference.hpp"
#include "check.hpp"
#include "collectives/communicator.hpp"
#include "collectives/counter_ids.hpp"
#include "collectives/scratch_layout.hpp"
#include "fabric/cuda/co_resident_ranks.hpp"
#include "fabric/cuda/cuda_endpoint.hpp"
#include "fabric/host/host_fabric.hpp"
#include "test_data.hpp"

namespace {

using tide::collectives::Communicator;
using tide::collectives::kCallerQueue;
using tide::collectives::kQueuesNeeded;
using tide::collectives::ScratchLayout;
using tide::fabric::Endpoint;
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

enum class Inputs { kNormal, kInteger, kNonFinite };

struct Case {
  std::string name;
  DType agDtype = DType::kBF16;
  DType gradDtype = DType::kBF16;
  Inputs inputs = Inputs::kNormal;
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

float drawValue(std::mt19937_64& rng, Inputs kind) {
  if (kind == Inputs::kInteger) return static_cast<float>(static_cast<int>(rng() % 17) - 8);
  if (kind == Inputs::kNonFinite) {
    const uint64_t r = rng() % 64;
    if (r == 0) return std::numeric_limits<float>::quiet_NaN();
    if (r == 1) return std::numeric_limits<float>::infinity();
    if (r == 2) return -std::numeric_limits<float>::infinity();
  }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  return nd(rng);
}

void storeValue(uint8_t* base, int64_t i, DType t, float v) {
  if (t == DType::kBF16) {
    const uint16_t b = tide::test::floatToBf16(v);
    std::memcpy(base + i * 2, &b, 2);
  } else {
    std::memcpy(base + i * 4, &v, 4);
  }
}

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
    for (float& v : d.out) v = c.accumulate ? drawValue(rng, Inputs::kInteger) : std::nanf("");
  }
  return in;
}

// What the two fabrics differ in: where buffers live and how bytes get there.
class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual const char* name() const = 0;
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

class CoResidentFabric final : public Fabric {
 public:
  CoResidentFabric(const plan::Topology& topo, int64_t arenaBytes) : group_(topo.ranks(), 0) {
    endpoints_.resize(static_cast<size_t>(topo.ranks()));
    onEveryRank(topo.ranks(), [&](int r) {
      cuda::CudaFabricOptions o;
      o.topology = topo;
      o.rank = r;
      o.arenaBytes = arenaBytes;
      o.numQueues = kQueuesNeeded + 1;
      o.numCounters = tide::collectives::ids::kEnd;  // as the C API asks
      o.waitTimeoutSeconds = 30;
      endpoints_[static_cast<size_t>(r)] = std::make_unique<cuda::CudaEndpoint>(o, group_);
    });
  }
  ~CoResidentFabric() override {
    // Collective: each endpoint's teardown ends at the group's barrier.
    onEveryRank(static_cast<int>(endpoints_.size()), [&](int r) { endpoints_[static_cast<size_t>(r)].reset(); });
    for (void* p : buffers_) cudaFree(p);
  }
  const char* name() const override { return "cuda co-resident"; }
  Endpoint& endpoint(int r) override { return *endpoints_.at(static_cast<size_t>(r)); }
  cuda::CudaEndpoint& cudaEndpoint(int r) { return *endpoints_.at(static_cast<size_t>(r)); }
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
  cuda::CoResidentGroup group_;
  std::vector<std::unique_ptr<cuda::CudaEndpoint>> endpoints_;
  std::vector<void*> buffers_;
};

// One fabric's communicators and buffers for one case, across its calls.
class Runner {
 public:
  Runner(Fabric& fabric, const plan::Plan& pl, const ScratchLayout& layout, const Case& c)
      : f_(fabric), pl_(pl), c_(c), landingOffset_(layout.bytes) {
    const plan::GroupLayout& g = pl.group;
    const int bGrad = plan::itemSize(g.gradDtype);
    for (int r = 0; r < g.topo.ranks(); ++r) {
      tide::collectives::IssueOptions issue;
      issue.landingOwnQueue = c.landingOwnQueue;
      comms_.push_back(std::make_unique<Communicator>(f_.endpoint(r), layout, tide::collectives::FaultConfig{}, issue));
      shards_.push_back(f_.alloc(static_cast<size_t>(g.shardBytes)));
      outs_.push_back(static_cast<float*>(f_.alloc(static_cast<size_t>(g.outElems) * sizeof(float))));
      std::vector<void*> grads;
      for (const plan::ParamLayout& P : g.params) grads.push_back(f_.alloc(static_cast<size_t>(P.rows * P.rowElems * bGrad)));
      grads_.push_back(grads);
    }
  }

  std::vector<RankResults> call(const std::vector<RankInputs>& in) {
    const plan::GroupLayout& g = pl_.group;
    const int n = g.topo.ranks();
    std::vector<RankResults> res(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
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
    for (int r = 0; r < n; ++r)
      comms_[static_cast<size_t>(r)]->allGather(pl_, c_.inPlaceShard ? nullptr : shards_[static_cast<size_t>(r)],
                                                landingOffset_);
    progress(f_.name(), "all-gathers enqueued");
    for (int r = 0; r < n; ++r) {
      f_.endpoint(r).synchronize(kCallerQueue);
      progress(f_.name(), "rank " + std::to_string(r) + ": all-gather done");
      RankResults& out = res[static_cast<size_t>(r)];
      out.landing.resize(static_cast<size_t>(g.unshardedBytes()));
      f_.download(out.landing.data(), f_.endpoint(r).arena() + landingOffset_, out.landing.size());
    }
    for (int r = 0; r < n; ++r) f_.endpoint(r).synchronizeAll();
    progress(f_.name(), "all-gathers drained");

    for (int r = 0; r < n; ++r) {
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
    for (int r = 0; r < n; ++r) {
      f_.endpoint(r).synchronize(kCallerQueue);
      progress(f_.name(), "rank " + std::to_string(r) + ": reduce-scatter done");
    }
    for (int r = 0; r < n; ++r) {
      f_.endpoint(r).synchronizeAll();
      RankResults& out = res[static_cast<size_t>(r)];
      out.out.resize(static_cast<size_t>(g.outElems));
      f_.download(out.out.data(), outs_[static_cast<size_t>(r)], out.out.size() * sizeof(float));
    }
    return res;
  }

 private:
  Fabric& f_;
  const plan::Plan& pl_;
  const Case& c_;
  int64_t landingOffset_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<void*> shards_;
  std::vector<float*> outs_;
  std::vector<std::vector<void*>> grads_;
};

// Bit for bit, every NaN equal to every NaN (CPU and GPU NaN payloads differ).
bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

// Landing bytes that differ from the shards their owners drew.
int64_t wrongLandingBytes(const plan::GroupLayout& g, const std::vector<RankInputs>& in, const RankResults& res) {
  int64_t wrong = 0;
  for (size_t p = 0; p < g.params.size(); ++p) {
    const plan::ParamLayout& P = g.params[p];
    for (int src = 0; src < g.topo.ranks(); ++src) {
      const uint8_t* want = in[static_cast<size_t>(src)].shard.data() + P.shardOffset;
      const uint8_t* got = res.landing.data() + g.landing(static_cast<int>(p), src);
      for (int64_t b = 0; b < P.shardBytes; ++b) wrong += want[b] != got[b] ? 1 : 0;
    }
  }
  return wrong;
}

// Output elements of `rank` that miss the float64 reference.
int64_t wrongOutputs(const plan::GroupLayout& g, const Case& c, const std::vector<RankInputs>& in, int rank,
                     const std::vector<float>& y, double* maxRelErr) {
  std::vector<std::vector<const void*>> grads(static_cast<size_t>(g.topo.ranks()));
  for (int u = 0; u < g.topo.ranks(); ++u)
    for (const auto& gp : in[static_cast<size_t>(u)].grads) grads[static_cast<size_t>(u)].push_back(gp.data());
  std::vector<double> ref = tide::bench::referenceShardSums(g, grads, rank);
  double refMax = 0;
  for (size_t x = 0; x < ref.size(); ++x) {
    ref[x] *= double{c.alpha};
    if (c.accumulate) ref[x] += in[static_cast<size_t>(rank)].out[x];
    if (std::isfinite(ref[x])) refMax = std::max(refMax, std::fabs(ref[x]));
  }
  const double scale = std::max(1.0, refMax);
  int64_t wrong = 0;
  for (size_t x = 0; x < ref.size(); ++x) {
    const double want = ref[x], got = y[x];
    bool match;
    if (std::isnan(want)) match = std::isnan(got);
    else if (std::isinf(want)) match = got == want;
    else if (c.inputs == Inputs::kInteger) match = got == want;
    else {
      const double err = std::fabs(got - want) / scale;
      match = !std::isnan(got) && err <= 1e-5;
      if (match) *maxRelErr = std::max(*maxRelErr, err);
    }
    wrong += match ? 0 : 1;
  }
  return wrong;
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
  b.inputs = Inputs::kInteger;
  b.alpha = 0.25f;
  b.accumulate = true;
  b.rs = rs(2, 1, plan::Mode::kSlotReuse, 7, plan::Landing::kPush);
  b.landingOwnQueue = false;
  cases.push_back(b);
  Case d;
  d.name = "bf16 params, fp32 gradients, NaN/Inf, alpha 1/2, 3 passes, push";
  d.gradDtype = DType::kFP32;
  d.inputs = Inputs::kNonFinite;
  d.alpha = 0.5f;
  d.rs = rs(3, 3, plan::Mode::kInPlace, 16, plan::Landing::kPush);
  d.inPlaceShard = topo.nodes == 1;
  cases.push_back(d);
  Case e;
  e.name = "bf16 normal, 1 Mi-element parameter, 4 passes, pull, 132 sum CTAs";
  e.large = true;
  e.rs = rs(4, 2, plan::Mode::kSlotReuse, 132, plan::Landing::kPull);
  cases.push_back(e);
  return cases;
}

constexpr int kCallsPerCase = 3;

// TIDE_COPY_GRAPHS as the fabric reads it: anything but "0" leaves graphs on.
bool copyGraphsOn() {
  const char* knob = std::getenv("TIDE_COPY_GRAPHS");
  return knob == nullptr || std::string(knob) != "0";
}

// Runs every case of one topology (failures are counted by TCHECK).
void runTopology(const plan::Topology& topo, uint64_t seed) {
  for (const Case& c : casesFor(topo)) {
    const uint64_t caseSeed = seed ^ std::hash<std::string>{}(c.name) ^ (static_cast<uint64_t>(topo.nodes) << 48) ^
                              (static_cast<uint64_t>(topo.gpusPerNode) << 56);
    std::mt19937_64 rng(caseSeed);
    plan::PlanOptions po;
    po.rs = c.rs;
    const plan::Plan pl = plan::makePlan(topo, drawShapes(rng, c, topo.ranks()), c.gradDtype, po);
    const ScratchLayout layout = ScratchLayout::forPlans({&pl});
    const int64_t arenaBytes = layout.bytes + pl.group.unshardedBytes();
    const int before = tide::test::failures();
    std::printf("  M%dL%d %s (%zu params, seed %llu): ", topo.nodes, topo.gpusPerNode, c.name.c_str(),
                pl.group.params.size(), static_cast<unsigned long long>(caseSeed));
    std::fflush(stdout);
    int64_t graphLaunches = 0;
    double maxRelErr = 0;
    // Outside the try: on an error the handler fail-stops before any of them is
    // torn down (a blocked stream would make each teardown wait out its deadline).
    std::unique_ptr<HostFabric> hostFabric;
    std::unique_ptr<CoResidentFabric> gpuFabric;
    std::unique_ptr<Runner> onHost, onGpu;
    try {
      hostFabric = std::make_unique<HostFabric>(topo, arenaBytes);
      gpuFabric = std::make_unique<CoResidentFabric>(topo, arenaBytes);
      onHost = std::make_unique<Runner>(*hostFabric, pl, layout, c);
      onGpu = std::make_unique<Runner>(*gpuFabric, pl, layout, c);
      progress("setup", "endpoints and communicators of both fabrics up");
      for (int call = 0; call < kCallsPerCase; ++call) {
        const std::vector<RankInputs> in = drawInputs(pl.group, c, rng);
        const std::vector<RankResults> want = onHost->call(in);
        const std::vector<RankResults> got = onGpu->call(in);
        for (int r = 0; r < topo.ranks(); ++r) {
          const RankResults& h = want[static_cast<size_t>(r)];
          const RankResults& d = got[static_cast<size_t>(r)];
          const std::string where = "call " + std::to_string(call) + ", rank " + std::to_string(r);
          TCHECK(d.landing == h.landing, where + ": the GPU landing differs from the host fabric's");
          const int64_t badLanding = wrongLandingBytes(pl.group, in, d);
          TCHECK(badLanding == 0, where + ": " + std::to_string(badLanding) + " landing bytes wrong");
          TCHECK(sameBits(d.out, h.out),
                 where + ": the GPU output differs from the host fabric's");
          const int64_t badOut = wrongOutputs(pl.group, c, in, r, d.out, &maxRelErr);
          TCHECK(badOut == 0, where + ": " + std::to_string(badOut) + " output elements miss the float64 sum");
        }
      }
      for (int r = 0; r < topo.ranks(); ++r) graphLaunches += gpuFabric->endpoint(r).stats().copyGraphLaunches;
      onGpu.reset();
      onHost.reset();
      gpuFabric.reset();
      hostFabric.reset();
    } catch (const std::exception& e) {
      // A stream may be blocked for good: tearing the endpoints down would wait
      // out every queue's deadline. Fail stop with the message.
      std::printf("FAIL\n");
      std::fprintf(stderr, "tide_co_resident_test: FAIL: M%dL%d %s: %s\n", topo.nodes, topo.gpusPerNode,
                   c.name.c_str(), e.what());
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(1);
    }
    // Lists sighted in the first two calls are built at the third call's start
    // (all ranks idle there), so some must replay (buffers and arenas keep their addresses).
    TCHECK(graphLaunches > 0 || !copyGraphsOn(), "no copy list was replayed as a cached graph");
    std::printf("%s (max rel err %.2e, %lld copy-graph launches)\n", tide::test::failures() == before ? "ok" : "FAIL",
                maxRelErr, static_cast<long long>(graphLaunches));
    std::fflush(stdout);
  }
}

// Misuse is refused with a message, not run.
void refusals() {
  cuda::CoResidentGroup group(2, 0, 5);
  cuda::CudaFabricOptions o;
  o.topology = plan::Topology::make(1, 1);  // one rank, a group of two
  bool refused = false;
  try {
    cuda::CudaEndpoint ep(o, group);
  } catch (const tide::fabric::FabricError& e) {
    refused = std::string(e.what()).find("a group of 2 ranks for a topology of 1") != std::string::npos;
  }
  TCHECK(refused, "a group and topology of different sizes must be refused");
  cuda::CoResidentGroup one(1, 0, 5);
  o.rails = cuda::CudaFabricOptions::Rails::kSendRecv;
  refused = false;
  try {
    cuda::CudaEndpoint ep(o, one);
  } catch (const tide::fabric::FabricError& e) {
    refused = std::string(e.what()).find("copy-engine copies only") != std::string::npos;
  }
  TCHECK(refused, "send/recv rails on co-resident ranks must be refused");
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

int main(int argc, char** argv) {
  // Every rank's seven queues get a hardware queue of their own up to 4 ranks
  // (a stream wait sharing a queue with its producer would stall it).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  std::string topologies = "1x2,2x1,2x2,1x4";
  uint64_t seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--topologies" && i + 1 < argc) topologies = argv[++i];
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--verbose") verbose = true;
    else {
      std::fprintf(stderr, "usage: %s [--topologies MxL,...] [--seed S] [--verbose]\n", argv[0]);
      return 2;
    }
  }
  int devices = 0;
  TCUDA(cudaGetDeviceCount(&devices));
  TCUDA(cudaSetDevice(0));
  std::printf("tide_co_resident_test: topologies %s on GPU 0 of %d, seed %llu, CUDA_DEVICE_MAX_CONNECTIONS=%s\n",
              topologies.c_str(), devices, static_cast<unsigned long long>(seed), std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
  try {
    refusals();
    for (const plan::Topology& t : parseTopologies(topologies)) runTopology(t, seed);
  } catch (const std::exception& e) {
    tide::test::fail(__FILE__, __LINE__, std::string("stopped: ") + e.what());
  }
  const bool ok = tide::test::failures() == 0;
  std::printf("tide_co_resident_test: %s (%d failed checks)\n", ok ? "PASS" : "FAIL", tide::test::failures());
  return ok ? 0 : 1;
}
