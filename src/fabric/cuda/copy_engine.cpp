#include "fabric/cuda/copy_engine.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

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

}  // namespace

int64_t issueCopies(cudaStream_t stream, const std::vector<CopyOp>& ops) {
  int64_t total = 0;
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  for (const CopyOp& op : ops) {
    validate(op);
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

}  // namespace tide::fabric::cuda
