#!/usr/bin/env bash
# Compiles the CUDA fabric, libtide with it, and the GPU test programs on a
# machine without a GPU, as tools/build_gpu.sh builds them on the GPU host
# (sm_90a, warnings as errors), so that a change that breaks the device build
# fails here rather than in a GPU session. Nothing runs: there is no GPU.
# tools/run_tests.sh calls it. Needs nvcc (CUDA 13 here). NCCL's headers come
# from nvidia-nccl-cu13 wheels, installed under build/nccl-wheels only (pip
# --target), so that neither `pip install .` nor the CPU build of run_tests.sh
# finds NCCL and builds a libtide with the CUDA fabric for the CPU tests:
#   2.28.9, the GPU machines' NCCL (PyTorch 2.11's wheel): every target, the
#     benchmarks' native NCCL baselines included;
#   2.30.7, the release the device's RMA step builds from source: libtide and
#     the RMA probe, whose host-RMA code (NCCL >= 2.29) 2.28 headers leave out.
# Without nvcc it says so and exits 0 (the CUDA fabric is then not compiled);
# a wheel pip cannot install, or a build that fails, fails the script.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
BUILD_ROOT="${TIDE_CUDA_BUILD_DIR:-build/cuda-compile}"

nvcc=$(command -v nvcc || true)
[[ -n $nvcc || ! -x /usr/local/cuda/bin/nvcc ]] || { nvcc=/usr/local/cuda/bin/nvcc; export PATH="/usr/local/cuda/bin:$PATH"; }
if [[ -z $nvcc ]]; then
  echo "compile_cuda.sh: SKIPPED, the CUDA fabric is not compiled: no nvcc on PATH or in /usr/local/cuda/bin"
  exit 0
fi

# build_against VERSION TARGET...: NCCL VERSION's headers from its wheel, then the targets.
build_against() {
  local version=$1 wheel="build/nccl-wheels/$1"
  shift
  if [[ ! -f $wheel/nvidia/nccl/include/nccl_device.h ]]; then
    rm -rf "$wheel"
    "$PYTHON" -m pip install -q --no-deps --target "$wheel" "nvidia-nccl-cu13==$version"
  fi
  NCCL_HOME="$PWD/$wheel/nvidia/nccl" bash tools/build_gpu.sh . "$BUILD_ROOT/nccl-$version" "$@"
  echo "compile_cuda.sh: compiled against NCCL $version headers: $*"
}

build_against 2.28.9 tide tide_cuda_fabric_test tide_co_resident_test tide_copy_launch_probe tide_copy_graph_refusal_test tide_nccl_rma_probe tide_bench_native
build_against 2.30.7 tide tide_nccl_rma_probe
echo "compile_cuda.sh: the CUDA fabric and the GPU test programs compile ($("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/nvcc \1/p'))"
