"""Where the host's time goes in one FSDP2 training step, per system.

At 4K tokens per GPU the end-to-end steps are host-bound: fsdp_steps' host_ms (the time until the
step's Python returned) is within a few percent of the step's wall time, so a system is faster
exactly by the host work it saves. This profiles the host (torch.profiler, CPU activity only) over
a few steps of each system, after warm-up, and prints per step:
  - the inclusive host time of each FSDP2 phase (FSDP2's record_function labels, summed over
    groups), side by side for every system;
  - the operators with the most self host time, per system;
  - with --sync-debug, the operations that made the host wait for the GPU, per step, by the
    Python line that issued them (torch.cuda.set_sync_debug_mode("warn") over a few more steps;
    backward's appear at the line that called backward).

  python -m torch.distributed.run --standalone --nproc_per_node=2 -m tide.bench.host_profile \
      --model moe --tokens 4096
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import tempfile
import time
import warnings
from collections import Counter, defaultdict

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from tide.bench import fsdp_steps
from tide.bench.fsdp_systems import SYSTEMS, build_running
from tide.comm import host_us_per_call


def phase_of(key: str) -> str | None:
    """FSDP2's labels carry the group's module name, e.g. 'FSDP::all_gather (layers.3)'."""
    if not key.startswith("FSDP::"):
        return None
    key = re.sub(r" \(.*\)$", "", key)
    return re.sub(r"_prefetch for .*$", "_prefetch", key)


ADAPTER_FUNCS = re.compile(r"(tide/fsdp/|tide/comm|_fsdp_collectives|_fsdp_param_group)")
PY_FUNCS = re.compile(r"(tide/|_fully_shard/|torch/autograd/|torch/optim/|torch/nn/utils/clip)")


LIBRARY_CALLS = re.compile(r"tide/comm\.py\(\d+\): (all_gather|reduce_scatter|wait_inputs_read)$")
CUDA_API_CATS = ("cuda_runtime", "cuda_driver")


def _chrome_trace(prof) -> dict:
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def python_functions(trace: dict, steps: int) -> list[tuple[float, float, str]]:
    """Inclusive host time per step of the Python functions the profiler's Python tracer saw
    (with_stack=True): (ms, calls, 'file(line): name') for the adapter, FSDP2, autograd and the
    optimizer, from the Chrome trace."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") != "python_function" or not PY_FUNCS.search(ev.get("name", "")):
            continue
        name = re.sub(r"^.*?/(tide|torch)/", r"\1/", ev["name"])
        acc[name][0] += ev.get("dur", 0) / 1e3 / steps
        acc[name][1] += 1 / steps
    return sorted(((ms, calls, name) for name, (ms, calls) in acc.items()), reverse=True)


def library_api_calls(trace: dict, steps: int) -> dict[str, dict]:
    """What the host does inside each TIDE library call (tide.comm's all_gather,
    reduce_scatter, wait_inputs_read): per call kind, its host ms and calls per
    step, and the CUDA runtime and driver calls made within its span on the
    same thread ({api: [ms, calls]} per step). The rest of a call's time is
    libtide's own C++ (and ctypes)."""
    events = trace.get("traceEvents", [])
    spans = defaultdict(list)   # tid -> [(start, end, kind)]
    api = defaultdict(list)     # tid -> [(start, dur, name)]
    for ev in events:
        if ev.get("ph") != "X":
            continue
        if ev.get("cat") == "python_function":
            m = LIBRARY_CALLS.search(ev.get("name", ""))
            if m:
                spans[ev["tid"]].append((ev["ts"], ev["ts"] + ev.get("dur", 0), m.group(1)))
        elif ev.get("cat") in CUDA_API_CATS:
            api[ev["tid"]].append((ev["ts"], ev.get("dur", 0), ev.get("name", "?")))
    out: dict[str, dict] = {}
    for tid, calls in spans.items():
        inner = sorted(api.get(tid, []))
        starts = [a[0] for a in inner]
        for start, end, kind in calls:
            k = out.setdefault(kind, {"ms": 0.0, "calls": 0.0, "api": defaultdict(lambda: [0.0, 0.0])})
            k["ms"] += (end - start) / 1e3 / steps
            k["calls"] += 1 / steps
            i = bisect.bisect_left(starts, start)
            while i < len(inner) and inner[i][0] < end:
                _, dur, name = inner[i]
                k["api"][name][0] += dur / 1e3 / steps
                k["api"][name][1] += 1 / steps
                i += 1
    for k in out.values():
        k["api"] = dict(k["api"])
    return out


FABRIC_COUNTS = ("copy_descriptors", "copy_graph_launches", "copy_graphs_built", "all_gather_calls",
                 "all_gather_host_ns", "reduce_scatter_calls", "reduce_scatter_host_ns")


def fabric_counts(system) -> dict[str, int]:
    """This rank's fabric counts summed over the system's communicators (none for stock)."""
    if system.tide_report is None or not system.tide_report.get("installed"):
        return {}
    import tide.fsdp

    arenas = tide.fsdp.report(system.model, echo=False).get("arenas", [])
    return {k: sum((a.get("fabric_stats") or {}).get(k, 0) for a in arenas) for k in FABRIC_COUNTS}


def profile_system(system, batches, steps: int, env, with_python: bool, warmup: int = 3) -> dict:
    for b in batches[:warmup]:
        system.step(*b)
    env.sync()
    env.barrier()
    before = fabric_counts(system)
    with profile(activities=[ProfilerActivity.CPU], with_stack=with_python) as prof:
        t0 = time.perf_counter()
        for b in batches[warmup:warmup + steps]:
            system.step(*b)
        host = (time.perf_counter() - t0) * 1e3 / steps
        env.sync()
    after = fabric_counts(system)
    fabric = {k: (after[k] - before[k]) / steps for k in after}
    phases: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    ops = []
    for e in prof.key_averages():
        p = phase_of(e.key)
        if p is not None:
            phases[p][0] += e.cpu_time_total / 1e3 / steps
            phases[p][1] += e.count / steps
        else:
            ops.append((e.self_cpu_time_total / 1e3 / steps, e.count / steps, e.key))
    ops.sort(reverse=True)
    trace = _chrome_trace(prof) if with_python else {}
    funcs = python_functions(trace, steps) if with_python else []
    library = library_api_calls(trace, steps) if with_python else {}
    return {"host_ms": host, "phases": dict(phases), "ops": ops, "functions": funcs, "library": library,
            "fabric": fabric}


SYNC_WARNING = re.compile(r"synchroniz", re.IGNORECASE)


def count_sync_warnings(caught: list, steps: int) -> list[tuple[float, str]]:
    """(syncs per step, 'file:line') from the warnings that torch's sync debug mode raised,
    most frequent first; other warnings are ignored."""
    counts: Counter = Counter()
    for w in caught:
        if SYNC_WARNING.search(str(w.message)):
            where = re.sub(r"^.*?/(tide|torch)/", r"\1/", str(w.filename))
            counts[f"{where}:{w.lineno}"] += 1
    return sorted(((n / steps, where) for where, n in counts.items()), key=lambda x: (-x[0], x[1]))


def host_syncs(system, batches, env) -> list[tuple[float, str]]:
    """The synchronizing CUDA operations of `len(batches)` training steps (none on CPU)."""
    if not env.cuda or not batches:
        return []
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for b in batches:
                system.step(*b)
            env.sync()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return count_sync_warnings(caught, len(batches))


def main(argv: list[str] | None = None) -> dict:
    """Profiles every system of --systems; prints the tables on rank 0 and returns
    {system: {"host_ms", "phases": {phase: [ms, calls]}, "ops", "functions", "syncs"}} (per step)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="moe", choices=["llama", "moe"])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--steps", type=int, default=3, help="profiled steps per system (after the warm-up steps)")
    p.add_argument("--warmup", type=int, default=3,
                   help="warm-up steps per system (default 3; the CUDA fabric builds its copy graphs in the first "
                        "steps, so more shows the steady state)")
    p.add_argument("--systems", nargs="+", choices=SYSTEMS, default=["stock", "tide-in-place"])
    p.add_argument("--top", type=int, default=25, help="operators listed per system")
    p.add_argument("--tiny", action="store_true", help="the CPU test model (as fsdp_steps --tiny)")
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    p.add_argument("--python", action="store_true",
                   help="also trace Python calls (with_stack) and list the adapter's, FSDP2's, autograd's and "
                        "the optimizer's functions by inclusive host time (the tracer slows every call)")
    p.add_argument("--sync-debug", action="store_true",
                   help="also run 2 steps under torch.cuda.set_sync_debug_mode('warn') and list the operations "
                        "that made the host wait for the GPU, by Python line (CUDA only)")
    p.add_argument("--ipc", action="store_true",
                   help="ranks may share GPUs: gloo and TIDE on the cuda-ipc fabric (as fsdp_steps --ipc): TIDE's "
                        "host time with fewer GPUs than ranks; stock's collectives then go through gloo")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.tokens < 1:
        p.error("--steps and --tokens must be at least 1, --warmup at least 0")
    fargs = fsdp_steps.parse_args(["--model", args.model, "--tokens", str(args.tokens), "--device", args.device]
                                  + (["--tiny"] if args.tiny else []) + (["--ipc"] if args.ipc else []))
    env, _ = fsdp_steps.setup(fargs)
    cfg = fsdp_steps.model_config(args.model, fargs)
    train = fsdp_steps.train_config(fargs)
    sync_steps = 2 if args.sync_debug else 0
    batches = fsdp_steps.synthetic_batches(env, cfg, fargs, args.tokens, args.warmup + args.steps + sync_steps)
    results = {}
    for name in args.systems:
        system, why = build_running(name, cfg, env, train, seed=fargs.seed)
        if system is None:
            print(f"# {name}: skipped: {why}", flush=True)
            continue
        results[name] = profile_system(system, batches, args.steps, env, args.python, args.warmup)
        results[name]["syncs"] = host_syncs(system, batches[args.warmup + args.steps:], env)
        system.close(env)
        del system
        if env.cuda:
            torch.cuda.empty_cache()
    if env.rank != 0:
        return results
    names = list(results)
    print(f"# host time per step (ms), {args.model} at {args.tokens} tokens per GPU, rank 0, "
          f"{args.steps} profiled steps (the profiler adds a little to each operator)")
    print(f"{'phase':<40}" + "".join(f"{n:>22}" for n in names))
    print(f"{'whole step (wall, host side)':<40}" + "".join(f"{results[n]['host_ms']:>22.2f}" for n in names))
    for ph in sorted({k for r in results.values() for k in r["phases"]}):
        cells = []
        for n in names:
            ms, calls = results[n]["phases"].get(ph, [0.0, 0])
            cells.append(f"{ms:>12.2f} ({calls:>4.0f} x)")
        print(f"{ph:<40}" + "".join(f"{c:>22}" for c in cells))
    for n in names:
        if results[n]["fabric"]:  # after the warm-up steps, so builds here are graphs that keep being rebuilt
            f = results[n]["fabric"]
            print(f"# {n}: fabric per profiled step: {f['copy_descriptors']:.0f} copies, "
                  f"{f['copy_graph_launches']:.1f} lists as graph launches, {f['copy_graphs_built']:.1f} graphs built")
            ag, rs = (host_us_per_call(f, k) for k in ("all_gather", "reduce_scatter"))
            print(f"# {n}: libtide's host time per call: all-gather {ag:.1f} us, reduce-scatter {rs:.1f} us "
                  "(the profiler adds to its CUDA calls)")
    for n in names:
        print(f"\n# {n}: operators by self host time per step")
        print(f"{'self_ms':>9} {'calls':>7}  operator")
        for ms, calls, key in results[n]["ops"][:args.top]:
            print(f"{ms:>9.2f} {calls:>7.0f}  {key[:100]}")
    for n in names:
        if results[n]["functions"]:
            print(f"\n# {n}: Python functions by inclusive host time per step (with the tracer's overhead)")
            print(f"{'incl_ms':>9} {'calls':>7}  function")
            for ms, calls, key in results[n]["functions"][:args.top]:
                print(f"{ms:>9.2f} {calls:>7.0f}  {key[:110]}")
            print(f"# {n}: the adapter's and FSDP2's collective functions")
            for ms, calls, key in results[n]["functions"]:
                if ADAPTER_FUNCS.search(key) and ms >= 0.01:
                    print(f"{ms:>9.2f} {calls:>7.0f}  {key[:110]}")
    for n in names:
        for kind, k in sorted(results[n].get("library", {}).items()):
            api_ms = sum(ms for ms, _ in k["api"].values())
            per = k["ms"] / max(k["calls"], 1e-9) * 1e3
            print(f"\n# {n}: inside tide.comm.{kind}: {k['ms']:.2f} ms in {k['calls']:.0f} calls per step "
                  f"({per:.0f} us each), of which CUDA API {api_ms:.2f} ms; the rest is libtide's C++ and ctypes")
            for name, (ms, calls) in sorted(k["api"].items(), key=lambda x: -x[1][0])[:args.top]:
                print(f"{ms:>9.2f} {calls:>7.1f}  {name[:100]}")
    for n in names:
        if args.sync_debug:
            syncs = results[n]["syncs"]
            print(f"\n# {n}: host waits for the GPU per step (sync debug mode): {sum(x for x, _ in syncs):.0f}")
            for per_step, where in syncs[:args.top]:
                print(f"{per_step:>9.1f}  {where}")
    return results


if __name__ == "__main__":
    main()
    if dist.is_initialized():
        dist.destroy_process_group()
