#!/usr/bin/env bash
# Compiles the CUDA fabric, libtide with it, and the GPU test programs on a
# machine without a GPU, as tools/build_gpu.sh builds them on the GPU host
# (sm_90a, warnings as errors), so that a change that breaks the device build
# fails here rather than in a GPU session. Nothing runs: there is no GPU.
# tools/run_tests.sh calls it. Needs nvcc (CUDA 13 here); NCCL's headers come
# from the nvidia-nccl-cu13 wheel, installed into build/nccl-wheel only (pip
# --target), so that neither `pip install .` nor the CPU build of run_tests.sh
# finds NCCL and builds a libtide with the CUDA fabric for the CPU tests.
# Without nvcc, or without the wheel, it says why and exits 0: the CUDA fabric
# is then not compiled, and the line says so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
BUILD_DIR="${TIDE_CUDA_BUILD_DIR:-build/cuda-compile}"
WHEEL_DIR=build/nccl-wheel

nvcc=$(command -v nvcc || true)
[[ -n $nvcc || ! -x /usr/local/cuda/bin/nvcc ]] || { nvcc=/usr/local/cuda/bin/nvcc; export PATH="/usr/local/cuda/bin:$PATH"; }
if [[ -z $nvcc ]]; then
  echo "compile_cuda.sh: SKIPPED, the CUDA fabric is not compiled: no nvcc on PATH or in /usr/local/cuda/bin"
  exit 0
fi
if [[ ! -f $WHEEL_DIR/nvidia/nccl/include/nccl_device.h ]]; then
  rm -rf "$WHEEL_DIR"
  if ! "$PYTHON" -m pip install -q --no-deps --target "$WHEEL_DIR" nvidia-nccl-cu13; then
    echo "compile_cuda.sh: SKIPPED, the CUDA fabric is not compiled: pip could not install nvidia-nccl-cu13 (NCCL's headers)"
    exit 0
  fi
fi
export NCCL_HOME="$PWD/$WHEEL_DIR/nvidia/nccl"
bash tools/build_gpu.sh . "$BUILD_DIR" tide tide_cuda_fabric_test tide_co_resident_test tide_copy_launch_probe \
  tide_nccl_rma_probe
echo "compile_cuda.sh: the CUDA fabric and the GPU test programs compile ($("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/nvcc \1/p'), NCCL headers from $NCCL_HOME)"
