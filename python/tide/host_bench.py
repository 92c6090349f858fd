"""TIDE-AG and TIDE-RS on CPU ranks (the host fabric), checked against
independent references inside the library; the engine of `tide bench
--fabric host`."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from tide import _capi
from tide.plan import INT32, UINT64, build_plan_config, c_integer, c_real

INPUT_KINDS = {"normal": 0, "integer": 1, "nonfinite": 2}
RAILS = ("one-sided", "two-sided", "rma")  # tideHostRunOptions_t.rails: 0, 1, 2


def run_host(
    shapes: Sequence[Sequence[int] | Mapping[str, Any]],
    *,
    nodes: int,
    gpus_per_node: int,
    iters: int = 5,
    seed: int | None = None,
    inputs: str = "normal",
    timeout_s: float = 10.0,
    fault: str | None = None,
    fault_rank: int = 0,
    rails: str = "one-sided",
    **plan_options: Any,
) -> dict:
    """Run both collectives `iters` times on fresh random inputs.

    Returns the report: `all_gather.check` / `reduce_scatter.check` are "ok"
    only when every output matched, "failed" when one did not, and "error" when
    the run stopped first (then the `wrong_*` counts are what was found until
    then, and `reduce_scatter.max_rel_err` is left out); `error` holds a fabric
    failure (deadline, peer failure), empty if none; `fault_firings` how often an injected fault
    acted (0: this run gave it nothing to act on). rails: "one-sided" (puts and signals, as
    copy engines between reachable peers) or "two-sided" (every transfer is
    received by its peer, as NCCL send/recv across nodes) or "rma" (one-sided puts with counted
    signals and receiver credits, as NCCL's host RMA across nodes). plan_options are
    make_plan's options.
    """
    if inputs not in INPUT_KINDS:
        raise ValueError(f"inputs must be one of {sorted(INPUT_KINDS)}")
    if rails not in RAILS:
        raise ValueError(f"rails must be one of {RAILS}")
    config, _keepalive = build_plan_config(shapes, nodes=nodes, gpus_per_node=gpus_per_node, **plan_options)
    options = _capi.HostRunOptions(
        iters=c_integer(iters, "iters", *INT32),
        seed=c_integer(seed, "seed", *UINT64) if seed is not None else int.from_bytes(os.urandom(8), "little"),
        inputKind=INPUT_KINDS[inputs],
        timeoutSeconds=c_real(timeout_s, "timeout_s"),
        fault=fault.encode() if fault else None,
        faultRank=c_integer(fault_rank, "fault rank", *INT32),
        rails=RAILS.index(rails),
    )
    _, report = _capi.host_run(config, options)
    result = json.loads(report)
    result["seed"] = options.seed
    # Whether each collective ran on App. F's rail lane (rail_lane asked for, and L = 1 across nodes).
    handle = _capi.plan_create(config)
    try:
        plan = json.loads(_capi.plan_get_json(handle))
    finally:
        _capi.plan_destroy(handle)
    for op in ("all_gather", "reduce_scatter"):
        result[op]["rail_lane"] = plan[op]["rail_lane"]
    return result


def fault_names() -> list[str]:
    return _capi.fault_names()


def bandwidths(size_bytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """nccl-tests' (algbw, busbw) in GB/s for an all-gather or a reduce-scatter whose size is
    every rank's output: algbw = size / time, busbw = algbw (n - 1) / n."""
    if seconds <= 0:
        return 0.0, 0.0
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * (ranks - 1) / ranks


def format_report(report: dict, title: str) -> str:
    """nccl-tests-style rows, one per collective (size as nccl-tests counts it: every rank's
    output, the bf16 or fp32 landing for the all-gather and the fp32 shards for the
    reduce-scatter; time is the median call; #wrong landing bytes or output elements), then
    what the fabric moved and the plan's shape."""
    topo = report["topology"]
    lines = [
        f"{title}: host fabric, {topo['nodes']} nodes x {topo['gpus_per_node']} ranks, "
        f"{report.get('rails', 'one-sided')} rails"
        f"{', both collectives on the rail lane' if report['reduce_scatter'].get('rail_lane') else ''} "
        f"({topo['ranks']} CPU ranks), seed {report['seed']}",
        f"{'collective':<15}{'size(B)':>12}{'time(us)':>11}{'algbw':>8}{'busbw':>8}{'#wrong':>8}{'check':>7}"
        f"{'copy MiB':>10}{'rail MiB':>10}{'descs':>7}{'rounds':>7}{'waves':>6}{'staging MiB':>12}",
    ]
    mib = 1 / (1 << 20)
    for name, key, wrong in (("all_gather", "all_gather", "wrong_bytes"),
                             ("reduce_scatter", "reduce_scatter", "wrong_elems")):
        c = report[key]
        t = c["traffic"]
        descs = c.get("descriptors", c.get("level1_descriptors", 0))
        algbw, busbw = bandwidths(c["bytes"], c["seconds"], topo["ranks"])
        lines.append(
            f"{name:<15}{c['bytes']:>12}{c['seconds'] * 1e6:>11.1f}{algbw:>8.2f}{busbw:>8.2f}{c[wrong]:>8}"
            f"{c['check']:>7}{t['copy_bytes'] * mib:>10.2f}{t['rail_bytes'] * mib:>10.2f}{descs:>7}{c['rounds']:>7}"
            f"{c.get('waves', 0):>6}{c.get('staging_bytes', 0) * mib:>12.2f}"
        )
    if "max_rel_err" in report["reduce_scatter"]:
        err = report["reduce_scatter"]["max_rel_err"]  # JSON null: infinite (a NaN where a number belongs)
        lines.append(f"reduce_scatter max rel err vs float64: {float('inf') if err is None else err:.3g}")
    if report.get("fault", "none") != "none":
        lines.append(f"fault {report['fault']}: acted {report['fault_firings']} time(s)")
    if report.get("error"):
        lines.append(f"error: {report['error']}")
    return "\n".join(lines)
