#!/usr/bin/env bash
# Builds NCCL from a source tree for one GPU architecture, with only the
# device kernels TIDE and its GPU checks call (all-gather, broadcast, sum
# all-reduces on rings and trees, send/recv), so that a machine whose NCCL predates host
# RMA (< 2.29; the device image has 2.28.9) can run TIDE's RMA rails: the
# NCCL wheels (344 MB) are far larger than what a device call can carry,
# a source tree is about 8 MB.
#
#   tools/build_nccl.sh SRC_DIR OUT_DIR [ARCH=90]
#
# The library lands in OUT_DIR/lib, the headers in OUT_DIR/include; point
# the TIDE build at it with NCCL_HOME=OUT_DIR. Other collectives are not
# built: a PyTorch process may preload it (LD_PRELOAD) for object
# broadcasts, all-gathers and barriers, not for a training job.
set -euo pipefail
src="${1:?source dir}" out="${2:?output dir}" arch="${3:-90}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$src"
make -j"$(nproc)" src.build BUILDDIR="$out" \
  NVCC_GENCODE="-gencode=arch=compute_${arch},code=sm_${arch}" \
  ONLY_FUNCS="AllGather * *|Broadcast * *|AllReduce Sum * RING *|AllReduce Sum * TREE *|SendRecv"
ls -la "$out/lib"
