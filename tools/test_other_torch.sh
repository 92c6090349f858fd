#!/usr/bin/env bash
# Runs the Python tests (CPU: gloo and the host fabric) under another PyTorch
# version, in a virtual environment of its own, against the libtide.so of
# build/cpp (tools/run_tests.sh builds it). The GPU machines run PyTorch 2.11
# while CI runs 2.13, and FSDP2's internals differ between them (session 9: a
# scenario used FSDPModule.reset_iter_state, which 2.11 lacks); this finds such
# differences without device time.
#
#   [PYTHON=/path/to/python3.12] tools/test_other_torch.sh [VERSION=2.11.0] [pytest args...]   (default args: tests/python)
#
# PYTHON picks the venv's interpreter (the GPU machines run Python 3.12; CI 3.11).
#
# The venv lands in build/venv-torch-VERSION-pyXY (about 3 GB with NVIDIA's CUDA
# wheels, which a non-"+cpu" torch imports even on a CPU-only machine).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="${1:-2.11.0}"
shift || true
python="${PYTHON:-python3}"
venv="build/venv-torch-$version-$("$python" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')"
lib="$PWD/build/cpp/libtide.so"
[[ -f $lib ]] || { echo "test_other_torch.sh: $lib missing: run tools/run_tests.sh first" >&2; exit 1; }
if [[ ! -x $venv/bin/python ]]; then
  "$python" -m venv "$venv"
  "$venv/bin/pip" install -q "torch==$version" pytest pytest-timeout numpy matplotlib
fi
"$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'
TIDE_LIBRARY="$lib" PYTHONPATH="$PWD/python" exec "$venv/bin/python" -m pytest -q -rf --timeout 400 "${@:-tests/python}"
