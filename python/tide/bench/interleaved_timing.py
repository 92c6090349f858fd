"""Timing a benchmark's systems on every rank: calls interleaved in rounds (round_order), each block
of calls separated by a synchronize and a barrier, medians of CUDA-event times; and the reductions
over ranks that turn each rank's numbers into one row (every one a collective: every rank calls it
alike)."""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch
import torch.distributed as dist

from tide.bench.round_order import round_order


def interleaved_schedule(systems: int, iters: int, rounds: int) -> list[list[tuple[int, int]]]:
    """Per round, the (system index, calls) blocks in the order they run: every system gets
    ceil(iters / rounds) calls a round (so at least `iters` in all), in round_order's order: the
    rounds open with different systems, and no system follows the same one in every round."""
    if systems < 1 or iters < 1 or rounds < 1:
        raise ValueError(f"want systems, iters and rounds >= 1, got {systems}, {iters}, {rounds}")
    rounds = min(rounds, iters)
    calls = -(-iters // rounds)
    return [[(i, calls) for i in round_order(systems, r, rounds)] for r in range(rounds)]


def interleaved_medians(fns: list[Callable[[], None]], iters: int, warmup: int, rounds: int,
                        before_block: Callable[[int], None] = lambda i: None) -> list[tuple[float, float]]:
    """Per system: (median device ms per call, host us to enqueue one call), its calls spread
    over interleaved rounds (interleaved_schedule). Within a block the calls run back to back, so
    a call whose host enqueue outlasts its device work shows the host time as device time too;
    the second number tells which bound a row is. Blocks are separated by a synchronize and a
    barrier: no system's calls overlap another's. Each warm-up call ends synchronized: the CUDA
    fabric builds the copy graphs of lists it has seen twice at the start of a call where nothing
    of its waits, so with three warm-ups or more the timed calls replay them and pay no build.
    before_block(i) runs before each block of system i (the caller's hang watchdog)."""
    for i, fn in enumerate(fns):
        before_block(i)
        for _ in range(warmup):
            fn()
            torch.cuda.synchronize()
    dist.barrier()
    times: list[list[float]] = [[] for _ in fns]
    host_s = [0.0] * len(fns)
    for blocks in interleaved_schedule(len(fns), iters, rounds):
        for i, n in blocks:
            before_block(i)
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            t0 = time.perf_counter()
            for s, e in zip(starts, ends):
                s.record()
                fns[i]()
                e.record()
            host_s[i] += time.perf_counter() - t0
            torch.cuda.synchronize()
            times[i].extend(s.elapsed_time(e) for s, e in zip(starts, ends))
            dist.barrier()
    return [(statistics.median(t), host_s[i] * 1e6 / len(t)) for i, t in enumerate(times)]


def _over_ranks(x, dtype: torch.dtype, op):
    """x reduced over every rank with `op` (a collective: every rank calls it alike)."""
    t = torch.tensor([x], dtype=dtype, device="cuda")
    dist.all_reduce(t, op=op)
    return t.item()


def max_over_ranks(x: float) -> float:
    return float(_over_ranks(x, torch.float64, dist.ReduceOp.MAX))


def gather_over_ranks(values: list[float]) -> list[list[float]]:
    """Every rank's `values`, indexed by rank (a collective: every rank calls it alike)."""
    mine = torch.tensor(values, dtype=torch.float64, device="cuda")
    every = torch.empty(dist.get_world_size(), len(values), dtype=torch.float64, device="cuda")
    dist.all_gather_into_tensor(every, mine)
    return every.tolist()


def sum_over_ranks(x: int) -> int:
    return int(_over_ranks(x, torch.int64, dist.ReduceOp.SUM))
