"""GEMM interference: how much a bf16 GEMM slows down while a collective loops beside it on a side
stream, against the same GEMM alone before and after, and the GEMM's launch shape (a one-wave
GEMM needs a second wave as soon as a concurrent kernel holds any SM)."""

from __future__ import annotations

import math
import statistics
from typing import Callable

import torch
import torch.distributed as dist

from tide.bench.kernel_footprint import kernel_trace_events, launch_shapes


def nan_as_inf(x: float) -> float:
    """NaN (no valid median on this rank) as +inf, so that a max over ranks keeps it."""
    return math.inf if math.isnan(x) else x


def interference_row(name: str, gname: str, per_rank: list[list[float]]) -> dict:
    """One interference row from every rank's (GEMM alone before, alone after, during, overlapped):
    the times, baseline and slowdown of the rank that slowed most (a rank without a valid median,
    NaN, counts as the worst; ties go to the lowest rank), and the fewest GEMMs that overlapped the
    collective on any rank."""
    def slowdown(rank: int) -> float:
        before, after, during, _ = per_rank[rank]
        return nan_as_inf(during / ((before + after) / 2.0) - 1.0)

    worst = max(range(len(per_rank)), key=lambda r: (slowdown(r), -r))
    before, after, during, _ = per_rank[worst]
    return {"system": name, "group": gname, "times_of_rank": worst, "gemm_alone_us": (before + after) / 2.0,
            "gemm_alone_before_us": before, "gemm_alone_after_us": after, "gemm_during_us": during,
            "slowdown_pct": 100 * slowdown(worst), "overlapped": int(min(r[3] for r in per_rank))}


GEMM_SHAPE = (256, 8192, 8192)


def gemm_launch_profile() -> list[dict]:
    """Launch shape of the interference GEMM's kernels (grid, block, registers, shared memory)
    and the SM count: a GEMM whose grid is one full wave of SMs needs a second wave as soon as
    a concurrent kernel holds any SM, which is what its slowdown under an SM-using collective shows."""
    m, k, n = GEMM_SHAPE
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    events = kernel_trace_events(lambda: torch.mm(a, b), calls=1)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return launch_shapes(events, sms) if events is not None else []


def gemm_interference(run: Callable[[], None] | None, coll_ms: float, gemms: int) -> dict:
    """GEMM times alone (run None) or while a collective's `run` loops on a side stream."""
    m, k, n = GEMM_SHAPE
    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(m, k, generator=g, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, generator=g, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        torch.mm(a, b)
    torch.cuda.synchronize()
    dist.barrier()
    main = torch.cuda.current_stream()
    base = torch.cuda.Event(enable_timing=True)
    c0, c1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(gemms)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(gemms)]
    base.record(main)
    if run is not None:
        # Enough calls to cover every GEMM even at 3x its time alone, plus the launch backlog.
        loops = min(4000, 4 + math.ceil((gemms * 0.06 * 3 + 2.0) / max(coll_ms, 0.01)))
        side = torch.cuda.Stream()
        side.wait_event(base)
        with torch.cuda.stream(side):
            c0.record(side)
            for _ in range(loops):
                run()
            c1.record(side)
    for s, e in zip(starts, ends):
        s.record(main)
        torch.mm(a, b)
        e.record(main)
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    if run is None:
        return {"gemm_us": statistics.median(times), "overlapped": len(times)}
    t0, t1 = base.elapsed_time(c0), base.elapsed_time(c1)
    inside = [t * 1.0 for t, s, e in zip(times, starts, ends)
              if base.elapsed_time(s) >= t0 and base.elapsed_time(e) <= t1]
    return {"gemm_us": statistics.median(inside) if inside else float("nan"), "overlapped": len(inside)}
