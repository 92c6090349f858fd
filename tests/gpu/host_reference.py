"""Runs TIDE-AG and TIDE-RS on the host fabric (one CPU process per rank) for
given inputs, so GPU outputs can be compared with it bit for bit.

The rank processes start once per topology and serve every call after it:
starting them (spawn, imports) took about 7 s per call, 170 s of a 2-GPU
check_collectives.py run on H200s (session 9, run 1)."""

from __future__ import annotations

import multiprocessing as mp
import queue
import tempfile
import traceback

import numpy as np

# A call's rank that does not answer within this fails the reference, never hangs it.
CALL_TIMEOUT_S = 300


def _serve(rank, nodes, gpus, shapes, store, tasks, results):
    """One host-fabric rank: a communicator and the group, then one all-gather and one
    reduce-scatter per task until None."""
    try:
        from tide.comm import Communicator

        with Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=1 << 28, fabric="host",
                          store_dir=store, timeout_s=60) as comm:
            group = comm.register_group(shapes)
            unsharded = group.plan["group"]["unsharded_bytes"]
            off, ptr = comm.alloc(unsharded)
            landing_view = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * unsharded).from_address(ptr))
            while (task := tasks.get()) is not None:
                shard, grads, alpha, out_init, accumulate = task
                shard = np.ascontiguousarray(shard)
                g = [np.ascontiguousarray(x) for x in grads]
                out = np.array(out_init, dtype=np.float32, copy=True)
                landing_view.fill(0xA5)  # poisoned: a byte this call leaves unwritten shows
                comm.all_gather(group, shard.ctypes.data, off)
                comm.reduce_scatter(group, [x.ctypes.data for x in g], out.ctypes.data, alpha=alpha,
                                    accumulate=accumulate)
                comm.synchronize()
                results.put((rank, landing_view.copy(), out))
    except Exception:
        results.put((rank, traceback.format_exc(), None))


class HostReference:
    """The host fabric on nodes x gpus rank processes, started once, reused by run()."""

    def __init__(self, nodes: int, gpus: int, shapes):
        self.topology = (nodes, gpus)
        self.n = nodes * gpus
        ctx = mp.get_context("spawn")
        self._store = tempfile.TemporaryDirectory()
        self._results = ctx.Queue()
        self._tasks = [ctx.Queue() for _ in range(self.n)]
        self._procs = [ctx.Process(target=_serve, args=(r, nodes, gpus, shapes, self._store.name, self._tasks[r],
                                                        self._results), daemon=True) for r in range(self.n)]
        for p in self._procs:
            p.start()

    def run(self, shards, grads, alpha, out_init, accumulate):
        """shards[r]: uint8 array; grads[r][p]: uint16 (bf16 bits) arrays; out_init[r]: float32.
        Returns (landings, outputs) per rank."""
        for r in range(self.n):
            self._tasks[r].put((shards[r], grads[r], alpha, out_init[r], accumulate))
        landings, outs = [None] * self.n, [None] * self.n
        try:
            for _ in range(self.n):
                rank, landing, out = self._results.get(timeout=CALL_TIMEOUT_S)
                if out is None:
                    raise RuntimeError(f"host fabric rank {rank} failed:\n{landing}")
                landings[rank], outs[rank] = landing, out
        except queue.Empty:
            raise RuntimeError(f"host fabric ranks did not answer within {CALL_TIMEOUT_S} s") from None
        return landings, outs

    def close(self) -> None:
        for q in self._tasks:
            q.put(None)
        for p in self._procs:
            p.join(60)
            if p.is_alive():
                p.terminate()
        self._store.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

