#!/usr/bin/env bash
# The one command for a 1- or 2-GPU H200 machine: builds TIDE with its CUDA
# fabric (cmake + ninja), runs every GPU test, the end-to-end FSDP2 benchmark
# (fsdp_e2e, loss_curve) and the baseline benchmarks,
# keeps logs under $BUILD/logs, packs them after every step into
# $OUT/gpu-logs.tgz with $OUT/summary.txt beside it (the device tool brings
# back only a few files, and a step killed at a time limit must not lose the
# logs of the steps before it), and prints a summary table last. NVLink
# multicast stays off: NCCL_NVLS_ENABLE=0.
#
#   tools/gpu_run.sh [--skip-bench] [--bench-args "..."] [--only step,step,...] [--budget S]
#                    [--skip run,run,...] [--nccl-src DIR]
#
# --budget S (default 570): the whole script ends within S seconds. A step's
# time limit is cut to what is left, and a step with under 45 s left is
# skipped and listed as such, so the summary always prints before the
# device's command limit (600 s) cuts the call.
#
# --skip run,run,... leaves out single runs by the name the summary gives them (e.g.
# fsdp_2ranks_hosts_2of2), so that a step too long for one device call can be split over two;
# a name that no run reached is listed as a warning. An unknown --only step is refused.
#
# A run the budget cut short (its time limit lowered to what was left) is CUT(<given>/<own>s), not
# a failure; one killed by its own limit is TIMEOUT. A cut run is not a pass either: it may have
# hung as well as been slow, so exit 3 means "run it again with its own limit". A failed build
# skips every later step (their binaries would be an earlier build's); a build left out with
# --skip build does not (a warm machine keeps the previous call's build). Exit status: 0 every
# run passed, 1 a run failed, 3 none failed but one was cut.
#
# Steps: build fabric coresident sanitize collectives fsdp fsdpsweep e2e loss memprobe hostprof bench rma (--only
# picks some; build always runs).
#
# rma (needs --nccl-src DIR, an NCCL >= 2.29 source tree, e.g. `git archive` of NVIDIA/nccl
# into build/nccl-src, carried to the device): builds that NCCL (tools/build_nccl.sh, about
# 70 s) and TIDE against it in build/gpu-rma, then runs tide_nccl_rma_probe on every GPU and,
# on 2+ GPUs, the fabric test over RMA rails (virtual nodes); on any GPU count, the collectives
# with two and four ranks on hosts of their own on that NCCL. The machine's own NCCL (2.28.9
# on the device) predates host RMA.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# TIDE blocks streams on stream memory waits; with CUDA's default 8 hardware
# queues, unrelated streams alias onto one FIFO and a wait can hold up its own
# producer (the paper's App. E raises this to 32 for the same reason).
export CUDA_DEVICE_MAX_CONNECTIONS=32
unset TIDE_ENABLE_MULTICAST
export PYTHONUNBUFFERED=1

OUT="${OUT:-$PWD/build/gpu-logs}"
BUILD="${BUILD:-build/gpu}"
PYTHON="${PYTHON:-python3}"
SKIP_BENCH=0
BENCH_ARGS=""
ONLY=""
SKIP_RUNS=""
BUDGET=570
NCCL_SRC=""
while (($#)); do
  case "$1" in
    --skip-bench) SKIP_BENCH=1 ;;
    --bench-args) BENCH_ARGS="$2"; shift ;;
    --only) ONLY=",$2," ; shift ;;
    --budget) BUDGET="$2"; shift ;;
    --skip) SKIP_RUNS=",$2," ; shift ;;
    --nccl-src) NCCL_SRC="$2"; shift ;;
    *) echo "usage: $0 [--skip-bench] [--bench-args \"...\"] [--only step,...] [--budget S] [--skip run,...] [--nccl-src DIR]" >&2; exit 2 ;;
  esac
  shift
done
STEPS="build fabric coresident sanitize collectives fsdp fsdpsweep e2e loss memprobe hostprof bench rma"
for step in ${ONLY//,/ }; do
  # A name the script does not know (e.g. the summary's "fabric_tests") would run the build alone.
  [[ " $STEPS " == *" $step "* ]] || { echo "$0: unknown step '$step' in --only (steps: $STEPS)" >&2; exit 2; }
done
LOGS="$BUILD/logs"
rm -rf "$LOGS"
mkdir -p "$OUT" "$LOGS"
# wanted STEP: true when --only is absent or names STEP.
wanted() { [[ -z $ONLY || $ONLY == *",$1,"* ]]; }
# tar_logs: the logs so far into $OUT/gpu-logs.tgz, through a temporary file of the
# caller's own (the periodic packer below and pack_logs may overlap).
tar_logs() {
  local tmp="$OUT/gpu-logs.tgz.tmp.$BASHPID"
  tar czf "$tmp" -C "$LOGS" . 2>/dev/null && mv -f "$tmp" "$OUT/gpu-logs.tgz"
  rm -f "$tmp"
}
pack_logs() {
  printf '%s\n' "${SUMMARY[@]}" >"$OUT/summary.txt"
  tar_logs
}
# Also every 15 s, so that a step cut by the device's command limit still
# brings back its log so far (a hang's last lines are the ones that matter).
(while sleep 15; do tar_logs; done) &
PACKER=$!
trap 'kill $PACKER 2>/dev/null' EXIT

declare -a SUMMARY=()
FAILED=0
CUT=0           # a step ended by the budget, not by its own time limit: incomplete, not failed
BUILD_FAILED=0  # later steps would run the previous build's binaries: skipped instead
LAST_RUN_SKIPPED=0  # did the last run() skip its command (--skip, a failed build, the budget)?
SKIPS_MATCHED=","
# run NAME TIMEOUT_S CMD...: logs to $LOGS/NAME.log, records PASS/FAIL and seconds.
run() {
  local name="$1" limit="$2"
  shift 2
  local t0=$SECONDS rc left=$((BUDGET - SECONDS - 15)) cut=0 own=$limit
  LAST_RUN_SKIPPED=1
  if [[ $SKIP_RUNS == *",$name,"* ]]; then
    SKIPS_MATCHED+="$name,"
    skip "$name" "in --skip"
    return 1
  fi
  if ((BUILD_FAILED)); then
    skip "$name" "the build failed (its outputs are an earlier build's)"
    return 1
  fi
  if ((left < 45)); then
    skip "$name" "out of --budget ${BUDGET}s"
    return 1
  fi
  ((limit > left)) && limit=$left && cut=1
  LAST_RUN_SKIPPED=0
  printf '\n==> %s (%s): %s\n' "$name" "$(date -u +%T)" "$*"
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  tail -n 25 "$LOGS/$name.log"
  local verdict=PASS took=$((SECONDS - t0))
  # 137 is SIGKILL: timeout's own after --kill-after, or another's (the kernel's OOM killer).
  if ((rc == 124 || (rc == 137 && took >= limit))); then
    if ((cut)); then verdict="CUT(${limit}/${own}s)"; CUT=1; else verdict="TIMEOUT(${limit}s)"; fi
  elif ((rc == 137)); then
    verdict="FAIL(killed)"
  elif ((rc != 0)); then
    verdict="FAIL(rc=$rc)"
  fi
  [[ $verdict == PASS || $verdict == CUT* ]] || FAILED=1
  SUMMARY+=("$(printf '%-34s %-14s %5ss' "$name" "$verdict" $((SECONDS - t0)))")
  pack_logs
  return $rc
}
skip() {
  SUMMARY+=("$(printf '%-34s %-14s %5s' "$1" "SKIP" "-")  $2")
  pack_logs
}
# run_2gpu STEP NAME TIMEOUT_S ARGS...: torchrun ARGS on two GPUs as NAME when
# --only wants STEP and libtide.so is built; a skip that says why otherwise.
run_2gpu() {
  local step="$1" name="$2" limit="$3"
  shift 3
  if ! wanted "$step"; then
    skip "$name" "not in --only"
  elif [[ -f $TIDE_LIBRARY ]] && ((NGPU >= 2)); then
    run "$name" "$limit" "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 "$@"
  else
    skip "$name" "needs 2 GPUs and libtide.so"
  fi
}

# run_rma NAME TIMEOUT_S CMD...: as run, but a build or NCCL library without
# host RMA (older than 2.29) is a SKIP that says so, not a failure.
run_rma() {
  local name="$1" before=$FAILED
  if run "$@"; then return 0; fi
  local why
  why=$(grep -o -m1 'RMA rails requested but [^")]*' "$LOGS/$name.log")
  if [[ -n $why ]]; then
    unset 'SUMMARY[${#SUMMARY[@]}-1]'
    skip "$name" "$why"
    FAILED=$before
  fi
}

NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>&1
  nvidia-smi topo -m 2>&1 | head -8
  nvcc --version 2>&1 | tail -2
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())' 2>&1
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort
} | tee "$LOGS/environment.txt"

# ---- build: the CUDA fabric, its GPU test and the benchmark helper (sm_90a only here)
build() {
  bash tools/build_gpu.sh . "$BUILD" tide tide_cuda_fabric_test tide_co_resident_test tide_copy_launch_probe \
    tide_copy_graph_refusal_test tide_bench_native
}
export -f build
export BUILD PYTHON
run build 240 bash -c build || ((LAST_RUN_SKIPPED)) || BUILD_FAILED=1
TEST="$BUILD/tests/cuda/tide_cuda_fabric_test"
NATIVE="$BUILD/bench/native/libtide_bench_native.so"

# ---- GPU tests of the fabric primitives
if ! wanted fabric; then
  skip fabric_tests "not in --only"
elif [[ -x $TEST ]]; then
  run fabric_1gpu 90 "$TEST" --ranks 1 --nodes 1 --timeout-case --perf
  # The other sum kernels (the default is TMA): the same sum cases and the same --perf sweep.
  run fabric_1gpu_registers 90 env TIDE_SUM_KERNEL=registers "$TEST" --ranks 1 --nodes 1 --perf
  run fabric_1gpu_cp_async 90 env TIDE_SUM_KERNEL=cp-async "$TEST" --ranks 1 --nodes 1 --perf
  # Host time per copy three ways (each copy, batch, cached graph); fails unless every byte is
  # right and the graph's copies run on copy engines beside a kernel holding every SM.
  run copy_launch_probe 60 "$BUILD/tests/cuda/tide_copy_launch_probe" --copies 30 --bytes 1048576
  # Copy graphs the driver refuses (sources across two mappings, as an expandable segment can lay
  # a block out): the refused list goes out as batches, others keep their graphs, 8 refusals turn
  # graphs off; every byte right throughout.
  run copy_graph_refusals 60 "$BUILD/tests/cuda/tide_copy_graph_refusal_test"
  # The multicast rule's refusal, a rank that never joins (TIDE's and the benchmark's NCCL
  # baseline), and a teardown whose peer is gone (two GPUs; and on any GPU count, two ranks on
  # hosts of their own): bounded, aborted.
  run nccl_lifecycle 240 env TIDE_LIBRARY="$PWD/$BUILD/libtide.so" PYTHONPATH="$PWD/python" \
    "$PYTHON" tests/gpu/check_nccl_lifecycle.py --native "$NATIVE"
  if ((NGPU >= 2)); then
    # Every virtual topology of this host's GPUs (M nodes x L GPUs, L <= 8; on
    # 4 GPUs M1L4, M2L2, M4L1), then the send/recv rails on one GPU per node.
    for ((m = 1; m <= NGPU; m++)); do
      ((NGPU % m == 0 && NGPU / m <= 8)) || continue
      perf=()
      ((m == 1)) && perf=(--perf)
      run "fabric_${NGPU}gpu_M${m}xL$((NGPU / m))" 90 "$TEST" --ranks "$NGPU" --nodes "$m" "${perf[@]}"
    done
    run "fabric_${NGPU}gpu_M${NGPU}xL1_sendrecv" 90 "$TEST" --ranks "$NGPU" --nodes "$NGPU" --rails send-recv
    # NCCL host RMA rails (NCCL >= 2.29 at build and run time; a SKIP says which is older).
    run_rma "fabric_${NGPU}gpu_M${NGPU}xL1_rma" 90 "$TEST" --ranks "$NGPU" --nodes "$NGPU" --rails rma
    run "fabric_${NGPU}gpu_M${NGPU}xL1_cp_async" 90 env TIDE_SUM_KERNEL=cp-async "$TEST" --ranks "$NGPU" \
      --nodes "$NGPU"
    run "fabric_${NGPU}gpu_M1xL${NGPU}_registers" 90 env TIDE_SUM_KERNEL=registers "$TEST" --ranks "$NGPU" --nodes 1
  else
    skip fabric_2gpu "one GPU"
  fi
else
  skip fabric_tests "no test binary (build failed or CUDA fabric skipped)"
fi

# ---- TIDE-AG / TIDE-RS with several ranks on one GPU (co-resident ranks, threads of one
# process, or processes through CUDA IPC): every multi-rank topology runs its CUDA code paths (counters
# across ranks, copy-engine rails, Level 1 sums, pull and push landings, copy graphs into
# peers' arenas) bit for bit against the host fabric, on any machine with a GPU. All ranks'
# streams share CUDA_DEVICE_MAX_CONNECTIONS=32 hardware queues, and a stream wait that shares
# one with another stream's work stalls it: four ranks fill them (7 queues each, one shared
# control stream), and a copy graph's parallel nodes take more. So four ranks run without
# copy graphs (with them, M1L4's third call stalled on an H200, a wait's counter already met).
CORESIDENT="$BUILD/tests/cuda/tide_co_resident_test"
if ! wanted coresident; then
  skip co_resident "not in --only"
elif [[ -x $CORESIDENT ]]; then
  run co_resident 240 "$CORESIDENT" --topologies 1x2,2x1,1x3,3x1
  run co_resident_4ranks 240 env TIDE_COPY_GRAPHS=0 "$CORESIDENT" --topologies 2x2,1x4
  run co_resident_registers 240 env TIDE_SUM_KERNEL=registers "$CORESIDENT" --topologies 2x1,1x3
  # Faults that end in wrong bytes, injected one at a time, must fail these same checks (a test
  # that cannot fail tests nothing), and the fabric's dropped signal is counted on co-resident
  # ranks (the fabric test's own case needs two GPUs). The M2L2 probe has four ranks: no copy graphs.
  run co_resident_faults 120 env TIDE_COPY_GRAPHS=0 "$CORESIDENT" --faults
  # Consecutive all-gathers on unordered caller streams, one process per rank; the signals' old
  # queue must fail it, by wrong bytes or by a stall its 5 s deadline ends (a stall there is the
  # old order's counter going back, sessions 27-29, not a fault of the test).
  run co_resident_caller_streams 120 "$CORESIDENT" --caller-streams --topologies 1x2,1x3
  run co_resident_caller_streams_one 120 "$CORESIDENT" --caller-streams --peers-one-stream --topologies 1x2,1x3
  # One process per rank (CUDA IPC; a CUDA context and hardware queues each): every 4- and
  # 8-GPU topology of issue 6 on this host's GPUs (rank r on GPU r mod count), with copy graphs.
  run co_resident_processes 240 "$CORESIDENT" --processes --topologies 2x2,1x4,2x4,4x2,8x1,1x8
else
  skip co_resident "no test binary (build failed or CUDA fabric skipped)"
fi

# ---- compute-sanitizer on the fabric's kernels (one GPU): memory errors, shared-memory races
# (the TMA sum's mbarrier stages), barrier misuse. NCCL's own probes for kernel images of other
# architectures are CUDA API errors by design, so memcheck leaves API errors out. Under memcheck and
# synccheck a copy graph replayed over a freed and reallocated block (what TIDE-RS's graphed gradient
# pushes can meet) crashes the host process inside the tool (signal 11; BENCHMARKS.md, session 10
# run 7 and session 14 run 10), so those two run without that one case (--no-freed-replay); the
# plain runs above and racecheck keep it, and it passes there byte for byte. Nor does memcheck run
# the copy-graph cap case (--no-graph-cap: 1026 lists, each graph built twice, outlast the test's
# 70 s under memcheck; the cap is host-side policy, unit-tested in copy_list_cache_test).
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if ! wanted sanitize; then
  skip sanitize "not in --only"
elif [[ -x $TEST && -x $SANITIZER ]]; then
  run sanitize_memcheck 150 "$SANITIZER" --tool memcheck --report-api-errors no --error-exitcode 1 \
    "$TEST" --ranks 1 --nodes 1 --no-freed-replay --no-graph-cap
  run sanitize_racecheck 150 "$SANITIZER" --tool racecheck --error-exitcode 1 "$TEST" --ranks 1 --nodes 1
  run sanitize_synccheck 150 "$SANITIZER" --tool synccheck --error-exitcode 1 "$TEST" --ranks 1 --nodes 1 \
    --no-freed-replay
else
  skip sanitize "no test binary or no compute-sanitizer"
fi

# The Python package from the tree, over the libtide just built (CUDA fabric included).
export TIDE_LIBRARY="$PWD/$BUILD/libtide.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"

# ---- TIDE-AG / TIDE-RS correctness on the CUDA fabric (bitwise against the host fabric)
if ! wanted collectives; then
  skip collectives "not in --only"
elif [[ -f $TIDE_LIBRARY ]] && ((NGPU >= 1)); then
  run collectives_1gpu 240 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=1 \
    tests/gpu/check_collectives.py
  # The register sum kernel inside the collectives (the default is TMA).
  run collectives_1gpu_registers 240 env TIDE_SUM_KERNEL=registers "$PYTHON" -m torch.distributed.run \
    --standalone --nproc_per_node=1 tests/gpu/check_collectives.py
  # Four ranks on this host's GPUs through the C API and Python (M1L4, M2L2, M4L1): gloo for
  # torch.distributed, the CUDA fabric over CUDA IPC ranks (no NCCL, which refuses two ranks on one GPU).
  run collectives_4ranks_ipc 300 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=4 \
    tests/gpu/check_collectives.py --ipc
  # Two and four ranks, each a host of its own as NCCL and TIDE see it (NCCL_HOSTID per rank), on
  # this host's GPUs: M2L1 and M4L1 over the CUDA fabric's NCCL path, the rails between "hosts"
  # (NCCL send/recv over loopback sockets, chosen by the fabric itself), as across real nodes.
  run collectives_2ranks_hosts 240 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
    tests/gpu/check_collectives.py --host-per-rank
  run collectives_4ranks_hosts 300 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=4 \
    tests/gpu/check_collectives.py --host-per-rank
  # The same with every call compared across the ranks first (TIDE_CHECK_CALLS=1: the C API's host
  # exchange at each collective, through NCCL here), which must change no result.
  run collectives_2ranks_hosts_checked 240 env TIDE_CHECK_CALLS=1 "$PYTHON" -m torch.distributed.run --standalone \
    --nproc_per_node=2 tests/gpu/check_collectives.py --host-per-rank
  if ((NGPU >= 2)); then
    run collectives_2gpu_registers 300 env TIDE_SUM_KERNEL=registers "$PYTHON" -m torch.distributed.run \
      --standalone --nproc_per_node=2 tests/gpu/check_collectives.py
    run collectives_2gpu 300 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
      tests/gpu/check_collectives.py
    # The same checks across the two virtual nodes over NCCL send/recv rails
    # (two-sided: the path across real nodes).
    run collectives_2gpu_sendrecv 240 env TIDE_FABRIC_RAILS=send-recv "$PYTHON" -m torch.distributed.run \
      --standalone --nproc_per_node=2 tests/gpu/check_collectives.py --multi-node-only
    # And over NCCL host RMA rails (one-sided puts with counted signals and credits).
    run_rma collectives_2gpu_rma 240 env TIDE_FABRIC_RAILS=rma "$PYTHON" -m torch.distributed.run \
      --standalone --nproc_per_node=2 tests/gpu/check_collectives.py --multi-node-only
  fi
  if ((NGPU > 2)); then
    # Every virtual topology of all this host's GPUs (4: M1L4, M2L2, M4L1; 8: M1L8 ... M8L1).
    run "collectives_${NGPU}gpu" 420 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$NGPU" \
      tests/gpu/check_collectives.py
    run "collectives_${NGPU}gpu_sendrecv" 300 env TIDE_FABRIC_RAILS=send-recv "$PYTHON" -m torch.distributed.run \
      --standalone --nproc_per_node="$NGPU" tests/gpu/check_collectives.py --multi-node-only
  fi
else
  skip collectives "no libtide.so or no GPU"
fi

# ---- the FSDP2 adapter on GPUs: TIDE beside stock FSDP2 in the same processes
if wanted fsdp && [[ -f $TIDE_LIBRARY ]] && ((NGPU >= 1)); then
  # One GPU: a shard group of one rank stays stock (world_size_1) and trains as stock.
  run fsdp_1gpu 120 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=1 tests/python/fsdp_cuda_smoke.py
  # More ranks than GPUs: stock FSDP2 on gloo, TIDE on the CUDA fabric over CUDA IPC ranks (fabric
  # "cuda-ipc"), several ranks per GPU. Two ranks where fsdp_2gpu cannot run; four (HSDP 2 x 2, two
  # nodes of two) where fsdp_4gpu cannot.
  if ((NGPU < 2)); then
    run fsdp_2ranks_ipc 330 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
      tests/python/fsdp_cuda_smoke.py --ipc
  fi
  # Two ranks on hosts of their own (NCCL_HOSTID per rank) on any GPU count: TIDE on the CUDA fabric's
  # NCCL path with one node per rank, rails by NCCL send/recv over loopback sockets, as across real nodes.
  # In two halves of the scenario list: the whole took 480 s in session 40, the step's old limit; the
  # halves took 236 and 275 s in session 44, before session 45 added reduce_scatter_against_float64.
  for half in 1 2; do
    run "fsdp_2ranks_hosts_${half}of2" 400 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
      tests/python/fsdp_cuda_smoke.py --host-per-rank --part "$half/2"
  done
  if ((NGPU < 4)); then
    run fsdp_4ranks_ipc 300 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=4 \
      tests/python/fsdp_cuda_smoke.py --ipc
  fi
  # Every collective compared across the ranks first (TIDE_CHECK_CALLS=1), on the IPC path and the NCCL
  # path (whose host exchanges go through NCCL): the scenarios whose call sequence depends on per-rank
  # state (fsdp_scenarios.CHECKED_CALLS).
  run fsdp_2ranks_ipc_checked 180 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
    tests/python/fsdp_cuda_smoke.py --ipc --checked-calls
  run fsdp_2ranks_hosts_checked 240 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
    tests/python/fsdp_cuda_smoke.py --host-per-rank --checked-calls
  run fsdp_4ranks_ipc_checked 180 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=4 \
    tests/python/fsdp_cuda_smoke.py --ipc --checked-calls
fi
# Two GPUs, one rank each, NCCL: in two halves of the scenario list, as across "hosts" (the list grew
# from 44 scenarios in session 9, when it took 218 s, to 84; its halves have not run on two GPUs yet: the 210 and
# 235 s of session 46 were fsdp_2ranks_hosts' halves, one GPU over NCCL's sockets).
for half in 1 2; do
  run_2gpu fsdp "fsdp_2gpu_${half}of2" 400 tests/python/fsdp_cuda_smoke.py --part "$half/2"
done
if wanted fsdp && [[ -f $TIDE_LIBRARY ]] && ((NGPU >= 4)); then
  # Four GPUs: the CPU suite's four-rank scenarios (2 x 2 nodes, HSDP 2 x 2, push landing) on CUDA.
  run fsdp_4gpu 300 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=4 tests/python/fsdp_cuda_smoke.py
fi
if wanted fsdp && [[ -f $TIDE_LIBRARY ]] && ((NGPU >= 8)); then
  # Eight GPUs: the FSDP2 reduce-scatter against float64 on every topology of the 8-GPU validation (1x8, 2x4,
  # 4x2, 8x1), both modes, three precisions (fsdp_scenarios.EIGHT_RANKS).
  run fsdp_8gpu 300 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=8 tests/python/fsdp_cuda_smoke.py
fi

# ---- random configurations of the adapter against stock FSDP2 (tests/python/fsdp_random_configs.py: model,
# mode, topology, install flags, plan options, precision, reshard and accumulation drawn together), on CUDA:
# four IPC ranks (HSDP among the draws), two ranks on GPUs of their own or, on one GPU, as IPC ranks, and
# two ranks on hosts of their own (a node per rank, NCCL send/recv rails).
# FSDP_SWEEP_DRAWS draws per step (default 12); TIDE_FSDP_SWEEP_SEED repeats a printed seed.
# A step's time limit grows with its draws (one H200, session 33: about 1.5 s a draw on four IPC ranks, 1 s on
# two, 4 s on two hosts; the limits allow three times that besides the start).
SWEEP_DRAWS="${FSDP_SWEEP_DRAWS:-12}"
if wanted fsdpsweep && [[ -f $TIDE_LIBRARY ]] && ((NGPU >= 1)); then
  run fsdp_sweep_4ranks_ipc $((120 + 5 * SWEEP_DRAWS)) "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=4 \
    tests/python/fsdp_cuda_smoke.py --ipc --sweep "$SWEEP_DRAWS"
  if ((NGPU >= 2)); then
    run fsdp_sweep_2gpu $((120 + 3 * SWEEP_DRAWS)) "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
      tests/python/fsdp_cuda_smoke.py --sweep "$SWEEP_DRAWS"
  else
    run fsdp_sweep_2ranks_ipc $((120 + 3 * SWEEP_DRAWS)) "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
      tests/python/fsdp_cuda_smoke.py --ipc --sweep "$SWEEP_DRAWS"
  fi
  run fsdp_sweep_2ranks_hosts $((120 + 12 * SWEEP_DRAWS)) "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
    tests/python/fsdp_cuda_smoke.py --host-per-rank --sweep "$SWEEP_DRAWS"
  # Draws that failed on a GPU once, each run again by its seed and index: seed 489778597 draw 3
  # (four IPC ranks, session 33) failed every time without 79560b0's wait for a dropped gather.
  # (TIDE_FSDP_SWEEP_STREAMS=4: without the options drawn since, as it was drawn then.)
  run fsdp_sweep_found_on_gpu 120 env TIDE_FSDP_SWEEP_SEED=489778597 TIDE_FSDP_SWEEP_ONLY=3 TIDE_FSDP_SWEEP_STREAMS=4 \
    "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=4 tests/python/fsdp_cuda_smoke.py --ipc --sweep 4
else
  skip fsdp_sweep "not in --only, or no libtide.so or GPU"
fi

# ---- end-to-end FSDP2 training steps (tide.bench.fsdp_steps): stock, process-group allocation
# and TIDE (both modes), paired and interleaved, >= 30 timed steps each, on the Llama-like and
# Qwen3-MoE-like models of ANCHORS.md; then a 200-step loss curve (a half-depth Llama-like model:
# stock twice on two data orders for the spread, TIDE on the first). On two H200s: about 190 s
# for both models at 4K and 16K tokens per GPU (FSDP_E2E_TOKENS=4096: about 80 s), 75 s for the
# loss curve.
# FSDP_E2E_ARGS adds driver options (e.g. --memory-intervals: which layer interval sets each
# system's allocator peak).
# 16K tokens per GPU needs an H200's memory: every system stays alive through the timing phase, and
# the MoE-like model's stock step alone peaked at 66 GiB of the device at 16K (two H200s, session 3, `41f437f`),
# so on 80 GB cards (H100) the default is 4K only, as logged; FSDP_E2E_TOKENS overrides it.
# The one-GPU step's two ranks share the card, each holding every system's sharded model and AdamW
# state: the Llama-like model's five systems need about 2 x 40 GiB, which an H200 holds and an 80 GB
# H100 does not (session 56: out of memory on one rank in the fifth system's optimizer step), so on
# cards under 100 GiB that step trains three systems (both modes and the copy graphs off).
E2E_TOKENS_DEFAULT="4096 16384"
E2E_IPC_SYSTEMS_DEFAULT="tide-in-place tide-record-stream tide-late-free tide-slot-reuse tide-no-copy-graphs"
GPU_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | sort -n | head -1)
if [[ $GPU_MIB =~ ^[0-9]+$ ]] && ((GPU_MIB < 100 * 1024)); then
  if [[ -z ${FSDP_E2E_TOKENS:-} ]]; then
    E2E_TOKENS_DEFAULT="4096"
    wanted e2e && echo "e2e: ${GPU_MIB} MiB per GPU (under 100 GiB): 4K tokens per GPU only (FSDP_E2E_TOKENS overrides)"
  fi
  E2E_IPC_SYSTEMS_DEFAULT="tide-in-place tide-slot-reuse tide-no-copy-graphs"
  wanted e2e && ((NGPU == 1)) && [[ -z ${FSDP_E2E_IPC_SYSTEMS:-} ]] &&
    echo "e2e: ${GPU_MIB} MiB per GPU (under 100 GiB): the one-GPU step trains $E2E_IPC_SYSTEMS_DEFAULT only (FSDP_E2E_IPC_SYSTEMS overrides)"
fi
E2E_TOKENS="${FSDP_E2E_TOKENS:-$E2E_TOKENS_DEFAULT}"
E2E_ARGS="${FSDP_E2E_ARGS:-}"
# FSDP_E2E_LIMIT (seconds) overrides the step's limit, e.g. for more systems than the default four.
E2E_LIMIT="${FSDP_E2E_LIMIT:-$((150 * $(wc -w <<<"$E2E_TOKENS")))}"
# The GPUs' clocks, power and temperature once a second beside it: stock's own step time drifts
# by tens of percent between rounds, and this log tells a throttled device from a busy host.
DMON_PID=
if wanted e2e && command -v nvidia-smi >/dev/null; then
  nvidia-smi dmon -s pc -d 1 -o T >"$LOGS/fsdp_e2e_dmon.log" 2>&1 &
  DMON_PID=$!
fi
# Rounds of one step per system: the 4K steps are host-bound and the host's speed drifts between
# rounds (BENCHMARKS.md, session 5), so each system's step sits next to stock's.
# shellcheck disable=SC2086
run_2gpu e2e fsdp_e2e "$E2E_LIMIT" -m tide.bench.fsdp_steps --model llama moe --tokens $E2E_TOKENS \
  --steps 30 --warmup 5 --round-steps 1 --json "$LOGS/fsdp_e2e.json" $E2E_ARGS
if wanted e2e && [[ -f $TIDE_LIBRARY ]] && ((NGPU == 1)); then
  # One GPU: two TIDE ranks sharing it (--ipc). Stock would reduce through gloo, so it is no
  # baseline here: the TIDE systems train side by side, paired against In-Place (--reference),
  # their losses compared step by step. The two processes time-slice the GPU, which makes these
  # steps device-bound at any token count (BENCHMARKS.md, session 16): the times compare the
  # systems on a shared GPU, not the host time they save on two GPUs.
  # FSDP_E2E_IPC_TOKENS / FSDP_E2E_IPC_SYSTEMS override the defaults below (a --systems in
  # FSDP_E2E_ARGS, meant for the two-GPU step, does not: stock through gloo would take minutes).
  # shellcheck disable=SC2086
  run fsdp_e2e_ipc "$E2E_LIMIT" "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
    -m tide.bench.fsdp_steps --ipc --reference tide-in-place --memory-steps 0 --model moe llama \
    --tokens ${FSDP_E2E_IPC_TOKENS:-1024} --steps 30 --warmup 5 --round-steps 1 --json "$LOGS/fsdp_e2e_ipc.json" \
    $E2E_ARGS \
    --systems ${FSDP_E2E_IPC_SYSTEMS:-$E2E_IPC_SYSTEMS_DEFAULT}
fi
[[ -n $DMON_PID ]] && { kill "$DMON_PID" 2>/dev/null; wait "$DMON_PID" 2>/dev/null || true; }
# The tables of the steps' logs, if they ran ($LOGS starts empty).
rm -f "$BUILD/fsdp_e2e_table.txt"
for e2e in fsdp_e2e fsdp_e2e_ipc; do
  [[ -f $LOGS/$e2e.log ]] && { grep -E '^ *(#  model |# vs_ref,|llama |moe )' "$LOGS/$e2e.log" >>"$BUILD/fsdp_e2e_table.txt" || true; }
done
run_2gpu loss loss_curve 150 -m tide.bench.fsdp_steps --model llama --set layers=8 --tokens 4096 \
  --loss-curve 200 --systems stock tide-in-place tide-slot-reuse --json "$LOGS/loss_curve.json"
if wanted loss && [[ -f $TIDE_LIBRARY ]] && ((NGPU == 1)); then
  # One GPU: the same 200-step check against stock's own spread, with two ranks sharing the GPU
  # (--ipc: TIDE on the cuda-ipc fabric, stock's collectives through gloo over loopback TCP, which
  # is why the Llama-like model is cut to 20 M parameters: 4 layers of width 512, a 4096-word
  # vocabulary, 1K tokens per rank; at 0.128 B parameters the 200 steps did not end in 305 s,
  # session 30 run 5). A progress line every 20 steps says how far a cut run came.
  run loss_curve_ipc 240 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
    -m tide.bench.fsdp_steps --ipc --model llama \
    --set layers=4 hidden=512 intermediate=2048 heads=4 kv_heads=2 vocab=4096 \
    --tokens 1024 --loss-curve 200 --systems stock tide-in-place tide-slot-reuse --json "$LOGS/loss_curve_ipc.json"
fi
# Device memory of one communicator, step by step, with NCCL's own allocations logged.
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC run_2gpu memprobe comm_memory 90 tools/probe_comm_memory.py

# Host time per FSDP2 phase and per operator in a 4K-token step of each model (the 4K steps are
# host-bound: what a system saves on the host is what it saves), about 30 s per model.
# HOSTPROF_ARGS adds options (--python: Python functions by inclusive host time too). Eight
# warm-up steps: the CUDA fabric builds its copy graphs in the first steps (BENCHMARKS.md, session 13).
# shellcheck disable=SC2086
run_2gpu hostprof host_profile_moe 150 -m tide.bench.host_profile --model moe --tokens 4096 --warmup 8 \
  --systems stock tide-in-place tide-slot-reuse ${HOSTPROF_ARGS:-}
# shellcheck disable=SC2086
run_2gpu hostprof host_profile_llama 150 -m tide.bench.host_profile --model llama --tokens 4096 --warmup 8 \
  --systems stock tide-in-place tide-slot-reuse ${HOSTPROF_ARGS:-}
if wanted hostprof && [[ -f $TIDE_LIBRARY ]] && ((NGPU == 1)); then
  # One GPU: two TIDE ranks sharing it (--ipc; no stock, whose collectives would go through gloo):
  # the fabric's graph launches and builds per step, and the FSDP2 phases' host time.
  # shellcheck disable=SC2086
  run host_profile_moe_ipc 180 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2 \
    -m tide.bench.host_profile --ipc --model moe --tokens 4096 --warmup 8 --steps 5 \
    --systems tide-in-place tide-record-stream tide-no-copy-graphs tide-slot-reuse ${HOSTPROF_ARGS:-}
fi

# ---- NCCL host RMA rails on an NCCL built from source (--nccl-src)
if ! wanted rma; then
  skip rma "not in --only"
elif [[ -z $NCCL_SRC ]] || ((NGPU < 1)); then
  skip rma "needs --nccl-src DIR (NCCL >= 2.29 source) and a GPU"
else
  build_rma() {
    bash tools/build_nccl.sh "$NCCL_SRC" build/nccl 90 &&
      NCCL_HOME="$PWD/build/nccl" cmake -S . -B build/gpu-rma -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIDE_WERROR=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90a -DPython3_EXECUTABLE="$(command -v "$PYTHON")" &&
      cmake --build build/gpu-rma --target tide tide_cuda_fabric_test tide_nccl_rma_probe -j "$(nproc)"
  }
  export -f build_rma
  export NCCL_SRC
  if run rma_build 300 bash -c build_rma; then
    run "rma_probe_${NGPU}gpu" 90 env LD_LIBRARY_PATH="$PWD/build/nccl/lib" build/gpu-rma/tests/cuda/tide_nccl_rma_probe \
      --ranks "$NGPU"
    # TIDE-AG and TIDE-RS over RMA rails against the host fabric, bit for bit (PyTorch runs on
    # the preloaded NCCL for its object broadcasts and all-gathers).
    ON_BUILT_NCCL=(env LD_PRELOAD="$PWD/build/nccl/lib/libnccl.so.2" TIDE_LIBRARY="$PWD/build/gpu-rma/libtide.so")
    RMA_PY=("${ON_BUILT_NCCL[@]}" TIDE_FABRIC_RAILS=rma "$PYTHON" -m torch.distributed.run --standalone
      --nproc_per_node="$NGPU" tests/gpu/check_collectives.py)
    # Ranks on hosts of their own (one per rank, sockets over loopback) on this NCCL: the rails
    # the fabric chooses by itself (RMA where NCCL grants host RMA across hosts, else send/recv,
    # with the reason), and the arena's window on each host's own communicator.
    for ranks in 2 4; do
      run "collectives_${ranks}ranks_hosts_built_nccl" 240 "${ON_BUILT_NCCL[@]}" "$PYTHON" -m torch.distributed.run \
        --standalone --nproc_per_node="$ranks" tests/gpu/check_collectives.py --host-per-rank
    done
    if ((NGPU >= 2)); then
      # As the other two-GPU RMA steps: a NCCL that grants no host RMA between the GPUs is a SKIP with its reason.
      run_rma "fabric_${NGPU}gpu_M${NGPU}xL1_rma_built" 90 env LD_LIBRARY_PATH="$PWD/build/nccl/lib" \
        build/gpu-rma/tests/cuda/tide_cuda_fabric_test --ranks "$NGPU" --nodes "$NGPU" --rails rma
      run_rma "collectives_${NGPU}gpu_rma_built" 240 "${RMA_PY[@]}" --multi-node-only
    else
      run rma_collectives_1gpu 240 "${RMA_PY[@]}"
      run rma_fabric_1gpu 90 env LD_LIBRARY_PATH="$PWD/build/nccl/lib" build/gpu-rma/tests/cuda/tide_cuda_fabric_test \
        --ranks 1 --nodes 1 --rails rma
    fi
  fi
fi

# ---- baselines and TIDE (torchrun, one process per GPU)
if ((SKIP_BENCH)) || ! wanted bench; then
  skip baselines "--skip-bench or not in --only"
elif ((NGPU >= 1)); then
  # The driver stops starting measurements early enough to write its JSON and
  # tables within what the budget leaves (--bench-args may override).
  BENCH_DEADLINE=$((BUDGET - SECONDS - 15 - 90))
  ((BENCH_DEADLINE > 330)) && BENCH_DEADLINE=330
  if ((BENCH_DEADLINE < 60)); then
    skip baselines "out of --budget ${BUDGET}s (${BENCH_DEADLINE}s of measuring left)"
  else
    # shellcheck disable=SC2086
    run baselines 420 "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$NGPU" \
      -m tide.bench.collectives --native "$NATIVE" --json "$LOGS/baselines.json" \
      --deadline-s "$BENCH_DEADLINE" $BENCH_ARGS
    grep -E '^ *(#|ag |rs )' "$LOGS/baselines.log" >"$BUILD/baselines_table.txt" || true
  fi
fi
for name in ${SKIP_RUNS//,/ }; do
  [[ $SKIPS_MATCHED == *",$name,"* ]] || skip "$name" "WARNING: named in --skip, but no run of that name was reached"
done

printf '\n==================== summary (%d GPU(s), logs in %s, packed in %s)\n' "$NGPU" "$LOGS" "$OUT/gpu-logs.tgz"
[[ -s $BUILD/baselines_table.txt ]] && cat "$BUILD/baselines_table.txt"
[[ -s $BUILD/fsdp_e2e_table.txt ]] && cat "$BUILD/fsdp_e2e_table.txt"
printf '%-34s %-14s %6s\n' step result time
printf '%s\n' "${SUMMARY[@]}"
# The periodic packer stops first: its last tar must not rename over the final one.
kill $PACKER 2>/dev/null
wait $PACKER 2>/dev/null
rm -f "$OUT"/gpu-logs.tgz.tmp.*
pack_logs
# 0: every step that ran passed; 1: one failed; 3: none failed, but the budget cut one short.
((FAILED)) && exit 1
((CUT)) && exit 3
exit 0
