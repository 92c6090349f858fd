"""One spawned process per rank, for the tests that run a job of communicating processes."""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_module


def run_ranks(target, ranks: int, args: tuple, timeout: float) -> tuple[list, list[int | None]]:
    """Runs target(rank, *args, results) in one spawned process per rank and returns everything
    the ranks put on `results`, and their exit codes (None for a rank still running at the
    timeout, which is then terminated)."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(r, *args, results)) for r in range(ranks)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    codes = []
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(10)
            codes.append(None)
        else:
            codes.append(p.exitcode)
    got = []
    while True:
        try:
            got.append(results.get(timeout=0.5))
        except queue_module.Empty:
            return got, codes
