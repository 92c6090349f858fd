#!/usr/bin/env bash
# The one command that runs every test: installs what a fresh Debian bookworm
# machine with Python 3.11 lacks, installs the package, builds the C++ tree
# with warnings as errors, then runs ctest and pytest. Fails if either runs
# no test at all.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
BUILD_DIR="${TIDE_CPP_BUILD_DIR:-build/cpp}"

# Each step's start time: the log then shows where CI's 30 minutes go.
step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%T)"; }
die() { printf 'run_tests.sh: %s\n' "$*" >&2; exit 1; }

# ---- system packages (compiler, CMake, Ninja, pip; GoogleTest for the C++ tests)
TIDE_SETUP_EXTRA_APT=libgtest-dev
source tools/setup_host.sh

# ---- Python packages and the package itself
step "pip install torch==2.13.0 pytest numpy matplotlib"
"$PYTHON" -m pip install -q torch==2.13.0 pytest numpy matplotlib
step "pip install ."
"$PYTHON" -m pip install .

# ---- C++ tests
step "build C++ ($BUILD_DIR)"
# Tests on explicitly: a cache configured without them must not hide them.
cmake -S . -B "$BUILD_DIR" -G Ninja -DTIDE_WERROR=ON -DTIDE_BUILD_TESTS=ON
cmake --build "$BUILD_DIR"
cpp_tests="$(ctest --test-dir "$BUILD_DIR" -N | sed -n 's/^Total Tests: *\([0-9]*\).*/\1/p')"
[[ "${cpp_tests:-0}" -gt 0 ]] || die "ctest found no tests in $BUILD_DIR"
# Run both suites even when the first fails, so one run reports every failure.
status=0
step "ctest ($cpp_tests tests)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" || status=1

# ---- Python tests, against the installed package (pytest exits 5 when it collects none)
step "pytest"
# --durations: the slowest tests in every CI log, since the suite's time is held to CI's 30 minutes.
"$PYTHON" -m pytest -q --durations=20 || status=1

# ---- the CUDA fabric compiles (no GPU here: nothing runs; skipped with the reason without nvcc)
step "compile the CUDA fabric and GPU test programs"
bash tools/compile_cuda.sh || status=1

((status == 0)) || die "tests failed"
echo "run_tests.sh: all tests passed ($(date -u +%T))"
