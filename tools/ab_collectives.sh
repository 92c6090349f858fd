#!/usr/bin/env bash
# A/B of the collectives benchmark on this GPU host: a base commit against the working tree.
# Builds libtide and the benchmark helper for both (the base in a git worktree under
# $BUILD_ROOT), then runs `python -m tide.bench.collectives --skip-interference` ROUNDS times
# each, alternating base and new (host speed drifts between minutes and machines, and the
# 30- and 60-copy rows are host-bound), and prints per row the medians over rounds of device
# time and host enqueue time, base and new, with their ratio (tools/ab_compare.py). Logs and
# JSON stay in $BUILD_ROOT/runs; with $OUT set they are packed into $OUT/ab-logs.tgz (one file:
# the device tool brings back only a few).
#
#   tools/ab_collectives.sh BASE_COMMIT [ROUNDS]     (ROUNDS default 2)
set -euo pipefail
BASE=${1:?usage: $0 BASE_COMMIT [ROUNDS]}
ROUNDS=${2:-2}
PYTHON=${PYTHON:-python3}
BUILD_ROOT=${BUILD_ROOT:-build/ab}
DEST=$BUILD_ROOT/runs
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
((NGPU >= 1)) || { echo "ab_collectives: no GPU" >&2; exit 1; }
export NCCL_NVLS_ENABLE=0 CUDA_DEVICE_MAX_CONNECTIONS=32

rm -rf "$DEST"
mkdir -p "$BUILD_ROOT" "$DEST"
pack() { [[ -z ${OUT:-} ]] || tar -czf "$OUT/ab-logs.tgz" -C "$DEST" .; }
trap pack EXIT
rm -rf "$BUILD_ROOT/base-src"
git worktree prune
git worktree add --detach "$BUILD_ROOT/base-src" "$BASE" >/dev/null

export PYTHON
build() {  # build(source dir, build dir): the library and the benchmark helper
  bash tools/build_gpu.sh "$1" "$2" tide tide_bench_native >"$2.build.log" 2>&1
}
mkdir -p "$BUILD_ROOT/base" "$BUILD_ROOT/new"
build "$BUILD_ROOT/base-src" "$BUILD_ROOT/base" & base_pid=$!
build . "$BUILD_ROOT/new"
wait "$base_pid"

bench() {  # bench(label, source dir, build dir, round)
  local json="$DEST/ab_$1_round$4.json"
  TIDE_LIBRARY="$3/libtide.so" PYTHONPATH="$2/python" timeout 300 "$PYTHON" -m torch.distributed.run --standalone \
    --nproc_per_node="$NGPU" -m tide.bench.collectives --native "$3/bench/native/libtide_bench_native.so" \
    --json "$json" --skip-interference --deadline-s 240 >"$DEST/ab_$1_round$4.log" 2>&1 ||
    { echo "ab_collectives: the $1 bench failed in round $4 (log: $DEST/ab_$1_round$4.log)" >&2; tail -20 "$DEST/ab_$1_round$4.log" >&2; exit 1; }
}
for ((r = 1; r <= ROUNDS; r++)); do
  bench base "$BUILD_ROOT/base-src" "$BUILD_ROOT/base" "$r"
  bench new . "$BUILD_ROOT/new" "$r"
done
# (The working tree's git state may trail its files: the device copies the files, not the commits.)
echo "A/B: base $(git -C "$BUILD_ROOT/base-src" rev-parse --short HEAD) against this working tree," \
  "$ROUNDS rounds, $NGPU GPU(s)" | tee "$DEST/ab_compare.txt"
"$PYTHON" tools/ab_compare.py "$DEST"/ab_base_round*.json -- "$DEST"/ab_new_round*.json | tee -a "$DEST/ab_compare.txt"
