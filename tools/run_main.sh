#!/usr/bin/env bash
# The README's first command: installs what a fresh Debian bookworm machine
# lacks (tools/setup_host.sh), installs the package (pip builds libtide with
# CMake), then runs the main job: TIDE-AG and TIDE-RS on CPU ranks of the
# host fabric (2 nodes x 4), every output checked against its reference.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
step() { printf '\n==> %s\n' "$*"; }

source tools/setup_host.sh
step "pip install ."
"$PYTHON" -m pip install -q .
step "tide bench --fabric host --nodes 2 --gpus-per-node 4 --preset llama-tiny"
# Through the interpreter: pip may put the console script where PATH does not look (--user).
exec "$PYTHON" -m tide.cli bench --fabric host --nodes 2 --gpus-per-node 4 --preset llama-tiny "$@"
