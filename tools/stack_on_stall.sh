#!/usr/bin/env bash
# Runs a command with its output in LOG; when LOG stops growing for STALL_S
# seconds (a hang that no deadline catches, e.g. a driver call that never
# returns), writes every thread's stack to LOG.stacks with (cuda-)gdb and kills
# the command. Exits with the command's status, or 124 after a stall.
#
#   tools/stack_on_stall.sh LOG STALL_S CMD...
set -uo pipefail
log=${1:?usage: $0 LOG STALL_S CMD...}
stall=${2:?usage: $0 LOG STALL_S CMD...}
shift 2
"$@" >"$log" 2>&1 &
pid=$!
size=-1
quiet=0
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  now=$(stat -c %s "$log" 2>/dev/null || echo 0)
  if [[ $now == "$size" ]]; then quiet=$((quiet + 1)); else quiet=0; size=$now; fi
  if ((quiet >= stall)); then
    gdb=$(command -v gdb || command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)
    echo "[stack_on_stall] no output for ${stall}s: stacks in $log.stacks" >>"$log"
    timeout 90 "$gdb" -p "$pid" -batch -ex "thread apply all bt" >"$log.stacks" 2>&1
    kill -9 "$pid"
    wait "$pid" 2>/dev/null
    exit 124
  fi
done
wait "$pid"
