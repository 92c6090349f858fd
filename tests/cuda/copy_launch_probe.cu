// Host cost of enqueueing N copy-engine copies, four ways: one
// cudaMemcpyAsync per copy, one cudaMemcpyBatchAsync, one cudaGraphLaunch
// of a graph of N memcpy nodes built once for the same addresses, and that
// launch after every node's source was moved (cudaGraphExecMemcpyNodeSetParams1D,
// what a list whose addresses change per call would pay to keep a graph). TIDE-AG
// enqueues one copy per parameter piece and peer, and the 4K-token FSDP2 steps
// are host-bound, so this is what a piece costs the issuing thread. Also
// checks that every way writes every byte (poisoned destination), that the
// graph holds memcpy nodes only, and that its copies finish while a kernel
// holds every SM (so the driver runs them on copy engines, not as kernels).
// Last, what the CUDA fabric's DeviceScope (one per endpoint operation) costs
// when the endpoint's device is already current: a cudaGetDevice.
//
//   tide_copy_launch_probe [--copies N] [--bytes B] [--reps R]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fabric/cuda/device_scope.hpp"

namespace {

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Holds every SM (one CTA per SM with all of its shared memory) for `ns`.
__global__ void occupyAllSms(long long ns) {
  extern __shared__ char smem[];
  long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  long long now = start;
  while (now - start < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  if (threadIdx.x == 0) smem[0] = static_cast<char>(now);
}

struct Copies {
  std::vector<void*> dst;
  std::vector<const void*> src;
  std::vector<size_t> bytes;
};

}  // namespace

int main(int argc, char** argv) {
  int n = 30;
  size_t bytes = 1 << 20;
  int reps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--copies") n = std::atoi(argv[i + 1]);
    else if (k == "--bytes") bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (k == "--reps") reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--copies N] [--bytes B] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // Pieces at scattered offsets, as a parameter's rows in an arena.
  const size_t stride = bytes + 4096;
  char *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, stride * n));
  CHECK(cudaMalloc(&dst, stride * n));
  std::vector<unsigned char> host(stride * n);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  CHECK(cudaMemcpy(src, host.data(), host.size(), cudaMemcpyHostToDevice));
  Copies c;
  for (int i = 0; i < n; ++i) {
    c.dst.push_back(dst + i * stride);
    c.src.push_back(src + i * stride);
    c.bytes.push_back(bytes - 256 * (i % 3));
  }

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  const auto g0 = std::chrono::steady_clock::now();
  CHECK(cudaGraphCreate(&graph, 0));
  for (int i = 0; i < n; ++i) {
    cudaGraphNode_t node;
    CHECK(cudaGraphAddMemcpyNode1D(&node, graph, nullptr, 0, c.dst[i], c.src[i], c.bytes[i], cudaMemcpyDefault));
  }
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double buildUs = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - g0).count();
  size_t nodes = 0;
  CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
  std::vector<cudaGraphNode_t> list(nodes);
  CHECK(cudaGraphGetNodes(graph, list.data(), &nodes));
  int memcpyNodes = 0, kernelNodes = 0;
  for (auto node : list) {
    cudaGraphNodeType t;
    CHECK(cudaGraphNodeGetType(node, &t));
    memcpyNodes += t == cudaGraphNodeTypeMemcpy;
    kernelNodes += t == cudaGraphNodeTypeKernel;
  }

  auto singles = [&] {
    for (int i = 0; i < n; ++i) CHECK(cudaMemcpyAsync(c.dst[i], c.src[i], c.bytes[i], cudaMemcpyDefault, s));
  };
  auto batch = [&] {
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t attrIndex = 0;
#if CUDART_VERSION >= 13000
    CHECK(cudaMemcpyBatchAsync(c.dst.data(), c.src.data(), c.bytes.data(), n, &attr, &attrIndex, 1, s));
#else
    size_t fail = 0;
    CHECK(cudaMemcpyBatchAsync(c.dst.data(), const_cast<void**>(c.src.data()), c.bytes.data(), n, &attr,
                               &attrIndex, 1, &fail, s));
#endif
  };
  auto graphLaunch = [&] { CHECK(cudaGraphLaunch(exec, s)); };

  // A second graph whose nodes' sources alternate between two buffers, updated
  // in the instantiated graph before each launch; the last launch reads `src`.
  char* src2 = nullptr;
  CHECK(cudaMalloc(&src2, stride * n));
  CHECK(cudaMemset(src2, 0x3C, stride * n));
  cudaGraph_t graph2;
  cudaGraphExec_t exec2;
  std::vector<cudaGraphNode_t> nodes2(static_cast<size_t>(n));
  CHECK(cudaGraphCreate(&graph2, 0));
  for (int i = 0; i < n; ++i)
    CHECK(cudaGraphAddMemcpyNode1D(&nodes2[static_cast<size_t>(i)], graph2, nullptr, 0, c.dst[i], c.src[i], c.bytes[i],
                                   cudaMemcpyDefault));
  CHECK(cudaGraphInstantiate(&exec2, graph2, 0));
  int updatesLeft = reps + 10;  // measure()'s calls: odd ones read src2
  auto graphUpdated = [&] {
    const bool alt = --updatesLeft % 2 == 1;
    for (int i = 0; i < n; ++i)
      CHECK(cudaGraphExecMemcpyNodeSetParams1D(exec2, nodes2[static_cast<size_t>(i)], c.dst[i],
                                               alt ? src2 + i * stride : c.src[i], c.bytes[i], cudaMemcpyDefault));
    CHECK(cudaGraphLaunch(exec2, s));
  };

  int bad = 0;
  auto measure = [&](const char* name, auto&& enqueue) {
    std::vector<double> hostUs, devUs;
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int r = 0; r < reps + 10; ++r) {
      CHECK(cudaMemsetAsync(dst, 0xA5 ^ r, stride * n, s));  // poison
      CHECK(cudaEventRecord(a, s));
      const auto t0 = std::chrono::steady_clock::now();
      enqueue();
      const auto t1 = std::chrono::steady_clock::now();
      CHECK(cudaEventRecord(b, s));
      CHECK(cudaStreamSynchronize(s));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      if (r >= 10) {
        hostUs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        devUs.push_back(ms * 1e3);
      }
    }
    std::vector<unsigned char> got(stride * n);
    CHECK(cudaMemcpy(got.data(), dst, got.size(), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < n; ++i)
      wrong += std::memcmp(got.data() + i * stride, host.data() + i * stride, c.bytes[i]) != 0;
    bad += wrong;
    std::printf("%-22s copies %3d  bytes/copy %9zu  host %8.2f us (%6.2f us/copy)  device %9.2f us  #wrong %d\n",
                name, n, bytes, median(hostUs), median(hostUs) / n, median(devUs), wrong);
  };
  measure("cudaMemcpyAsync x N", singles);
  measure("cudaMemcpyBatchAsync", batch);
  measure("cudaGraphLaunch", graphLaunch);
  measure("graph, sources moved", graphUpdated);

  // Copies enqueued while another stream's kernel holds every SM for 20 ms: a
  // copy engine finishes them long before; a copy kernel would wait it out.
  int sms = 0, smemMax = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&smemMax, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CHECK(cudaFuncSetAttribute(occupyAllSms, cudaFuncAttributeMaxDynamicSharedMemorySize, smemMax));
  cudaStream_t busy;
  CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  auto besideFullSms = [&](const char* name, auto&& enqueue) {
    cudaEvent_t occupied, copied;
    CHECK(cudaEventCreateWithFlags(&occupied, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
    CHECK(cudaStreamSynchronize(s));
    occupyAllSms<<<sms, 1024, smemMax, busy>>>(20'000'000);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(occupied, busy));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let it take the SMs
    enqueue();
    CHECK(cudaEventRecord(copied, s));
    while (cudaEventQuery(copied) == cudaErrorNotReady && cudaEventQuery(occupied) == cudaErrorNotReady) {
    }
    const bool copiesFirst = cudaEventQuery(copied) == cudaSuccess && cudaEventQuery(occupied) != cudaSuccess;
    CHECK(cudaDeviceSynchronize());
    std::printf("%-22s beside a kernel on all %d SMs: %s\n", name, sms,
                copiesFirst ? "copies finished first (copy engine)" : "copies waited for the SMs (kernel)");
    return copiesFirst;
  };
  const bool graphOnCopyEngines = besideFullSms("cudaGraphLaunch", graphLaunch);
  besideFullSms("cudaMemcpyBatchAsync", batch);
  if (!graphOnCopyEngines) ++bad;
  std::printf("graph: %d memcpy nodes, %d kernel nodes, built and instantiated in %.1f us\n", memcpyNodes,
              kernelNodes, buildUs);
  {
    constexpr int kScopes = 1'000'000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kScopes; ++i) tide::fabric::cuda::DeviceScope scope(0);
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("DeviceScope on the current device: %.1f ns per scope (%d scopes)\n", ns / kScopes, kScopes);
  }
  std::printf("copy_launch_probe: %s\n", bad == 0 && kernelNodes == 0 ? "PASS" : "FAIL");
  return bad == 0 && kernelNodes == 0 ? 0 : 1;
}
