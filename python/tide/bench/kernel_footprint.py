"""The SM footprint of a collective call, read from a PyTorch profiler's Chrome trace: how many
kernels a call launches (its own, and those the CUDA driver runs for copies or memsets), their device
time, CTA-time and SM-time, each kernel's launch shape, and the call's device work per stream. Every
number comes from the trace's device events after the ranks' alignment barrier, so a call is not
charged for the time its peer took to start profiling, and a missing field never reads as zero."""

from __future__ import annotations

import json
import math
from typing import Callable

import torch
import torch.distributed as dist


def _kernel_grids(trace_events: list[dict]) -> list[tuple[int, float]] | None:
    """(CTAs = grid x * y * z, duration in us) of every kernel event of a profiler's Chrome trace;
    None when one carries no grid (this torch's trace lacks it), so a missing field never reads
    as zero."""
    out = []
    for e in trace_events:
        if e.get("cat") != "kernel":
            continue
        grid = e.get("args", {}).get("grid")
        if not isinstance(grid, (list, tuple)) or not grid:
            return None
        out.append((math.prod(int(g) for g in grid), float(e.get("dur", 0.0))))
    return out


def cta_time_us(trace_events: list[dict]) -> float | None:
    """Sum over kernel events of CTAs x duration (us); None where a kernel carries no grid. A
    kernel whose grid needs several waves counts every CTA for the whole kernel: read it beside
    sm_time_us, which caps a kernel's CTAs at the SM count."""
    grids = _kernel_grids(trace_events)
    return None if grids is None else sum(ctas * dur for ctas, dur in grids)


def sm_time_us(trace_events: list[dict], sms: int) -> float | None:
    """Sum over kernel events of min(CTAs, SMs) x duration (us): the SMs a call's kernels hold, at
    most one per CTA and never more than the device has (a many-wave kernel holds every SM, not
    its CTA count); None where a kernel carries no grid."""
    grids = _kernel_grids(trace_events)
    return None if grids is None else sum(min(ctas, sms) * dur for ctas, dur in grids)


# Kernels the CUDA driver runs for a copy or a memset (a device-local copy may run on the SMs):
# no kernel of the collective's own, but SM work all the same, so counted apart and in the times.
DRIVER_COPY_KERNEL_PREFIXES = ("Memcpy", "Memset", "memcpy", "memset")
# The kernel of the barrier that lines the ranks up inside the profiled window (all_reduce).
ALIGNMENT_KERNEL_MARK = "AllReduce"


def after_alignment(trace_events: list[dict]) -> list[dict]:
    """The trace's events from the end of the ranks' alignment barrier on: its all-reduce kernel
    and everything the device ran before it (the profiler's own start, a rank waiting for the
    other) are left out. Where no such kernel is in the trace, all events."""
    ends = [float(e["ts"]) + float(e.get("dur", 0.0)) for e in trace_events
            if e.get("cat") == "kernel" and ALIGNMENT_KERNEL_MARK in e.get("name", "") and "ts" in e]
    if not ends:
        return list(trace_events)
    cut = max(ends)
    return [e for e in trace_events if "ts" not in e or float(e["ts"]) >= cut]


def footprint_from_trace(trace_events: list[dict], calls: int, sms: int) -> dict:
    """Per call of `calls` profiled ones: kernels of the collective's own (`kernels`), kernels the
    driver ran for copies or memsets (`driver_copy_kernels`), and the device time, CTA- and
    SM-time and names of all of them. One source (the trace's kernel events) for every number,
    so a count of 0 and a non-zero time cannot both be printed."""
    if calls < 1 or sms < 1:
        raise ValueError(f"want calls and sms >= 1, got {calls}, {sms}")
    events = after_alignment(trace_events)
    kernels = [e for e in events if e.get("cat") == "kernel"]
    own = [e for e in kernels if not e.get("name", "").startswith(DRIVER_COPY_KERNEL_PREFIXES)]
    cta, sm = cta_time_us(kernels), sm_time_us(kernels, sms)
    return {"kernels": len(own) / calls, "driver_copy_kernels": (len(kernels) - len(own)) / calls,
            "kernel_us": sum(float(e.get("dur", 0.0)) for e in kernels) / calls,
            "cta_us": None if cta is None else cta / calls, "sm_us": None if sm is None else sm / calls,
            "names": sorted({e.get("name", "")[:60] for e in kernels})[:6], "calls": calls}


DEVICE_EVENT_KINDS = {"kernel": None, "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def _short_kernel_name(name: str) -> str:
    """'void ns::(anonymous namespace)::landKernel<2, true>(...)' -> 'landKernel'."""
    head = name.replace("(anonymous namespace)::", "")
    head = head.removeprefix("void ").split("(", 1)[0].split("<", 1)[0]
    return head.rsplit("::", 1)[-1] or name[:24]


def stream_timeline(trace_events: list[dict]) -> dict[str, list[tuple[str, float, float]]]:
    """The device work of one profiled call, per stream, in start order: (what, start in us after
    the call's first device event, duration in us), what = the kernel's short name, 'memcpy' or
    'memset'. Shows which of a call's queues overlap and which wait for another."""
    device = [e for e in trace_events if e.get("cat") in DEVICE_EVENT_KINDS and "ts" in e]
    if not device:
        return {}
    t0 = min(float(e["ts"]) for e in device)
    timeline: dict[str, list[tuple[str, float, float]]] = {}
    for e in sorted(device, key=lambda e: float(e["ts"])):
        stream = str(e.get("args", {}).get("stream", e.get("tid", "?")))
        what = DEVICE_EVENT_KINDS[e["cat"]] or _short_kernel_name(e.get("name", ""))
        timeline.setdefault(stream, []).append((what, float(e["ts"]) - t0, float(e.get("dur", 0.0))))
    return timeline


def format_timeline(timeline: dict[str, list[tuple[str, float, float]]], limit: int = 24) -> list[str]:
    """One line per stream: 'stream 7: sumKernel 0+204, memcpy 210+275, ...' (start+duration, us)."""
    lines = []
    for stream, items in sorted(timeline.items(), key=lambda kv: kv[1][0][1]):
        shown = ", ".join(f"{what} {start:.0f}+{dur:.0f}" for what, start, dur in items[:limit])
        more = f", ... {len(items) - limit} more" if len(items) > limit else ""
        busy = sum(dur for _, _, dur in items)
        lines.append(f"stream {stream} ({len(items)} ops, {busy:.0f} us busy): {shown}{more}")
    return lines


FOOTPRINT_CALLS = 20


def kernel_trace_events(fn: Callable[[], None], calls: int = FOOTPRINT_CALLS) -> list[dict] | None:
    """The Chrome trace events of `calls` profiled calls of fn, after one unprofiled call; inside
    the profiled window the ranks first meet in a barrier (its all-reduce kernel is cut off again
    by after_alignment), so a collective's kernel does not count the time its peer took to start
    profiling as its own. None when the trace cannot be read."""
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        if dist.is_initialized():
            dist.barrier()
        torch.cuda.synchronize()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        try:
            prof.export_chrome_trace(f.name)
            with open(f.name) as trace:
                return json.load(trace).get("traceEvents", [])
        except (OSError, ValueError):  # an unreadable trace: no number rather than a wrong one
            return None


def launch_shapes(trace_events: list[dict], sms: int) -> list[dict]:
    """Each kernel's launch shape from a profiled call's trace, the alignment barrier's left out."""
    out = []
    for e in after_alignment(trace_events):
        if e.get("cat") == "kernel":
            args = e.get("args", {})
            out.append({"name": e.get("name", "")[:80], "grid": args.get("grid"), "block": args.get("block"),
                        "registers_per_thread": args.get("registers per thread"),
                        "shared_memory": args.get("shared memory"), "blocks_per_sm": args.get("blocks per SM"),
                        "dur_us": e.get("dur"), "sms": sms})
    return out


def footprint_line(fp: dict) -> str:
    """'0 kernels (+2 driver copy kernels), 0.0 us of kernels, 5400 CTA*us, 5400 SM*us per call [names]'."""
    if fp["kernels"] is None:
        return f"no readable profiler trace ({fp['calls']} calls)"

    def num(v, fmt):
        return "n/a" if v is None else format(v, fmt)

    copies = f" (+{fp['driver_copy_kernels']:g} driver copy kernels)" if fp["driver_copy_kernels"] else ""
    return (f"{fp['kernels']:g} kernels{copies}, {fp['kernel_us']:.1f} us of kernels, {num(fp['cta_us'], '.0f')} "
            f"CTA*us, {num(fp['sm_us'], '.0f')} SM*us per call of {fp['calls']} {fp['names']}")


def kernel_footprint(run: Callable[[], None], timeline: bool = False) -> dict:
    """Per call of `run`, over FOOTPRINT_CALLS aligned calls (footprint_from_trace): the kernels it
    launches, the driver's copy kernels, their device time, CTA- and SM-time; with `timeline`,
    also one more aligned call's device work per stream (stream_timeline). Without a readable
    trace every number is None."""
    events = kernel_trace_events(run)
    # Before any early return: every rank profiles as often (each profile meets the peers in a
    # barrier and runs the collective), whether or not its own trace could be read.
    one = kernel_trace_events(run, calls=1) if timeline else None
    if events is None:
        return {"kernels": None, "driver_copy_kernels": None, "kernel_us": None, "cta_us": None,
                "sm_us": None, "names": [], "calls": FOOTPRINT_CALLS, "timeline": {}}
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    fp = footprint_from_trace(events, FOOTPRINT_CALLS, sms)
    fp["timeline"] = stream_timeline(after_alignment(one)) if one is not None else {}
    return fp
