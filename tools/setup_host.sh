# Sourced by tools/run_main.sh and tools/run_tests.sh: what a fresh Debian
# bookworm machine lacks to build and install TIDE. Installs the missing
# system packages (apt) and, where python3 is Debian's own, lets pip install
# into it (PEP 668 marks it externally managed; the README's commands are for
# a machine set up for this project, not a shared system Python).
# Expects PYTHON, step and set -euo pipefail from the caller.

missing=()
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
"$PYTHON" -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
for pkg in ${TIDE_SETUP_EXTRA_APT:-}; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
  step "apt-get install ${missing[*]}"
  sudo=()
  [[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" apt-get install -y -q "${missing[@]}"
fi

# Debian's python3 outside a virtual environment: pip refuses it without this (PEP 668).
if "$PYTHON" - <<'PY'
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if managed and sys.prefix == sys.base_prefix else 1)
PY
then
  export PIP_BREAK_SYSTEM_PACKAGES=1
fi
