#!/usr/bin/env bash
# Configures and builds TIDE for the GPU host (sm_90a, Release, warnings as errors), the way the
# GPU scripts all build it: tools/build_gpu.sh SOURCE_DIR BUILD_DIR TARGET... ($PYTHON: the
# interpreter whose torch the benchmark helper finds; default python3).
set -euo pipefail
src=${1:?usage: $0 SOURCE_DIR BUILD_DIR TARGET...}
build=${2:?usage: $0 SOURCE_DIR BUILD_DIR TARGET...}
shift 2
(($#)) || { echo "usage: $0 SOURCE_DIR BUILD_DIR TARGET..." >&2; exit 2; }
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIDE_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DPython3_EXECUTABLE="$(command -v "${PYTHON:-python3}")"
cmake --build "$build" --target "$@" -j "$(nproc)"
