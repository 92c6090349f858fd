#!/usr/bin/env bash
# The C++ suite under GCC's sanitizers, on the CPU (no CUDA fabric):
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (leaks included)
#   tsan  ThreadSanitizer
# Usage: bash tools/run_sanitizers.sh [asan|tsan|both] [extra ctest arguments, e.g. -R HostCollectives]
# (under TSan the script passes its own -E: give -R, not -E, there)
# Builds into build/san-asan and build/san-tsan; needs what tools/run_tests.sh
# installs (its first run sets the machine up). Not part of CI: on 2 cores the
# ASan suite takes about 10 minutes and the TSan one about 17, besides the builds.
# A test that fails or a sanitizer report (which fails its test) ends in a non-zero exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

which="${1:-both}"
[[ $# -gt 0 ]] && shift
case "$which" in asan | tsan | both) ;; *) echo "usage: $0 [asan|tsan|both] [ctest args...]" >&2; exit 2 ;; esac

# Left out under TSan, each for a reason of its own:
# - these fault kinds remove an ordering on purpose (a completion fence, the
#   right landing offset, the wait before gradients are released), so their
#   copies race by design; the test asserts that the job detects the fault.
#   Their checked twins (Kinds/CheckedFaults) keep running: there the
#   protocol checker stops the job before the racing copy. LaneFaults runs
#   every kind on the rail lane, these three among them, and
#   RailLane.AllGatherLaneFaultsAreDetected the first two.
# - the old signal order of ConsecutiveCalls, rebuilt on purpose to be refused.
# - HostCollectives.LargeNodeCountTinyTensors: 512 rank threads, past its
#   deadline under TSan's slowdown on 2 cores (it passes under ASan).
TSAN_LEFT_OUT='Kinds/Faults\.AreDetected/(skip_completion_fence|wrong_landing_offset|release_grads_early)$'
TSAN_LEFT_OUT+='|ConsecutiveCalls\.(PeersOnOneCallerQueueAndRankZeroOnTwoOldOrderRefused|LandingFreeSignalsOnTheCallerQueueRefused)$'
TSAN_LEFT_OUT+='|HostCollectives\.LargeNodeCountTinyTensors$'
TSAN_LEFT_OUT+='|LaneFaults\.(EveryKindIsDetectedOrHasNothingToActOn|OverRmaRailsEveryKindIsDetectedOrHasNothingToActOn)$|RailLane\.AllGatherLaneFaultsAreDetected$'

run_one() {
  local kind=$1 sanitize compile dir="build/san-$1"
  shift
  case "$kind" in
    asan) sanitize="-fsanitize=address,undefined" compile="-fno-sanitize-recover=undefined" ;;
    tsan) sanitize="-fsanitize=thread" compile="" ;;
  esac
  printf '\n==> %s: build (%s)\n' "$kind" "$dir"
  # Warnings are not errors here: GCC's sanitizer instrumentation raises
  # -Wmaybe-uninitialized where the plain build (run_tests.sh, -Werror) has none.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIDE_BUILD_CUDA=OFF -DTIDE_BUILD_TESTS=ON \
    -DTIDE_WERROR=OFF -DCMAKE_CXX_FLAGS="$sanitize $compile -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="$sanitize" -DCMAKE_SHARED_LINKER_FLAGS="$sanitize" >/dev/null || return 1
  # (set -e does not act inside a function called from `||`: each step returns on failure.)
  cmake --build "$dir" || return 1
  local exclude=()
  [[ $kind == tsan ]] && exclude=(-E "$TSAN_LEFT_OUT")
  printf '\n==> %s: ctest\n' "$kind"
  ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1" \
    ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "${exclude[@]}" "$@"
}

status=0
for kind in asan tsan; do
  [[ $which == both || $which == "$kind" ]] || continue
  run_one "$kind" "$@" || status=1
done
((status == 0)) && echo "run_sanitizers.sh: clean" || { echo "run_sanitizers.sh: failures above" >&2; exit 1; }
