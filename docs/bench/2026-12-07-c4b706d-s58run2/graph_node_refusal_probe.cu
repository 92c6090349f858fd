// Throwaway probe: which memcpy graph nodes does the driver refuse? Nodes are built and instantiated, never run.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { auto r_ = (x); if (r_ != 0) { std::printf("call failed %s: %d\n", #x, (int)r_); return 1; } } while (0)

static const char* tryNode(void* dst, const void* src, size_t bytes) {
  cudaGraph_t g; cudaGraphCreate(&g, 0);
  cudaGraphNode_t n; cudaGraphExec_t ex = nullptr;
  cudaError_t e = cudaGraphAddMemcpyNode1D(&n, g, nullptr, 0, dst, src, bytes, cudaMemcpyDefault);
  const char* where = "node";
  if (e == cudaSuccess) { where = "instantiate"; e = cudaGraphInstantiate(&ex, g, 0); }
  cudaGetLastError();
  if (ex) cudaGraphExecDestroy(ex);
  cudaGraphDestroy(g);
  static char buf[256];
  std::snprintf(buf, sizeof buf, "%s (%s)", cudaGetErrorString(e), e == cudaSuccess ? "accepted" : where);
  return buf;
}

int main() {
  CK(cudaSetDevice(0)); CK(cudaFree(nullptr));
  void* out; CK(cudaMalloc(&out, 64 << 20));
  CUmemAllocationProp prop{}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
  size_t gran; CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemAccessDesc acc{}; acc.location = prop.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::printf("granule %zu\n", gran);
  // (a) tail in reserved, unmapped VA
  {
    CUdeviceptr base; CK(cuMemAddressReserve(&base, 2 * gran, 0, 0, 0));
    CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, gran, &prop, 0));
    CK(cuMemMap(base, gran, 0, h, 0)); CK(cuMemSetAccess(base, gran, &acc, 1));
    std::printf("(a) src tail in unmapped VA: %s\n", tryNode(out, (void*)(base + gran - 4096), 8192));
    std::printf("(a') dst tail in unmapped VA: %s\n", tryNode((void*)(base + gran - 4096), out, 8192));
    std::printf("(a'') src wholly in unmapped VA of a reservation: %s\n", tryNode(out, (void*)(base + gran + 4096), 8192));
    CK(cuMemUnmap(base, gran)); CK(cuMemRelease(h));
    std::printf("(a''') src in a reservation with nothing mapped: %s\n", tryNode(out, (void*)(base + 4096), 8192));
    CK(cuMemAddressFree(base, 2 * gran));
  }
  // (b) mapped, no access granted
  {
    CUdeviceptr base; CK(cuMemAddressReserve(&base, gran, 0, 0, 0));
    CUmemGenericAllocationHandle h; CK(cuMemCreate(&h, gran, &prop, 0));
    CK(cuMemMap(base, gran, 0, h, 0));
    std::printf("(b) src mapped without access: %s\n", tryNode(out, (void*)(base), 8192));
    CK(cuMemUnmap(base, gran)); CK(cuMemRelease(h)); CK(cuMemAddressFree(base, gran));
  }
  // (c) two cudaMalloc allocations back to back
  {
    std::vector<char*> ps;
    for (int i = 0; i < 64; ++i) { void* p; CK(cudaMalloc(&p, 2 << 20)); ps.push_back((char*)p); }
    std::vector<char*> s = ps; std::sort(s.begin(), s.end());
    bool found = false;
    for (size_t i = 0; i + 1 < s.size() && !found; ++i)
      if (s[i] + (2 << 20) == s[i + 1]) {
        found = true;
        std::printf("(c) src across two adjacent cudaMallocs: %s\n", tryNode(out, s[i + 1] - 4096, 8192));
        std::printf("(c') dst across two adjacent cudaMallocs: %s\n", tryNode(s[i + 1] - 4096, out, 8192));
      }
    if (!found) std::printf("(c) no adjacent cudaMalloc pair\n");
    // (d) the end of a freed allocation (VA back to the driver)
    char* last = s.back();
    for (char* p : ps) cudaFree(p);
    std::printf("(d) src in a freed cudaMalloc: %s\n", tryNode(out, last, 8192));
  }
  // (e) past the end of one cudaMalloc, whatever follows
  {
    void* p; CK(cudaMalloc(&p, 1 << 30));
    std::printf("(e) src past the end of a 1 GiB cudaMalloc: %s\n", tryNode(out, (char*)p + (1 << 30) - 4096, 8192));
    cudaFree(p);
  }
  // (f) cudaMallocAsync pool block across two pool allocations
  {
    cudaStream_t st; CK(cudaStreamCreate(&st));
    void *p, *q; CK(cudaMallocAsync(&p, 1 << 20, st)); CK(cudaMallocAsync(&q, 1 << 20, st)); CK(cudaStreamSynchronize(st));
    std::printf("(f) pool p=%p q=%p\n", p, q);
    char* lo = (char*)std::min(p, q); char* hi = (char*)std::max(p, q);
    if (lo + (1 << 20) == hi) std::printf("(f) src across two adjacent pool blocks: %s\n", tryNode(out, hi - 4096, 8192));
    std::printf("(f') src past the first pool block's size: %s\n", tryNode(out, (char*)hi + (1 << 20) - 4096, 1 << 24));
  }
  std::printf("probe done\n");
  return 0;
}
