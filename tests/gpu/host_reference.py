"""Runs TIDE-AG and TIDE-RS on the host fabric (one CPU process per rank) for
given inputs, so GPU outputs can be compared with it bit for bit."""

from __future__ import annotations

import multiprocessing as mp
import tempfile
import traceback

import numpy as np


def _rank(rank, nodes, gpus, shapes, store, shards, grads, alpha, out_init, accumulate, results):
    try:
        from tide.comm import Communicator

        with Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=1 << 28, fabric="host",
                          store_dir=store, timeout_s=60) as comm:
            group = comm.register_group(shapes)
            unsharded = group.plan["group"]["unsharded_bytes"]
            off, ptr = comm.alloc(unsharded)
            shard = np.ascontiguousarray(shards[rank])
            g = [np.ascontiguousarray(x) for x in grads[rank]]
            out = np.array(out_init[rank], dtype=np.float32, copy=True)
            comm.all_gather(group, shard.ctypes.data, off)
            comm.reduce_scatter(group, [x.ctypes.data for x in g], out.ctypes.data, alpha=alpha,
                                accumulate=accumulate)
            comm.synchronize()
            landing = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * unsharded).from_address(ptr)).copy()
            results.put((rank, landing, out))
    except Exception:
        results.put((rank, traceback.format_exc(), None))


def host_run(nodes, gpus, shapes, shards, grads, alpha, out_init, accumulate):
    """shards[r]: uint8 array; grads[r][p]: uint16 (bf16 bits) arrays; out_init[r]: float32.
    Returns (landings, outputs) per rank."""
    n = nodes * gpus
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as store:
        procs = [ctx.Process(target=_rank, args=(r, nodes, gpus, shapes, store, shards, grads, alpha, out_init,
                                                 accumulate, results)) for r in range(n)]
        for p in procs:
            p.start()
        got = [results.get(timeout=300) for _ in range(n)]
        for p in procs:
            p.join(60)
    landings, outs = [None] * n, [None] * n
    for rank, landing, out in got:
        if out is None:
            raise RuntimeError(f"host fabric rank {rank} failed:\n{landing}")
        landings[rank], outs[rank] = landing, out
    return landings, outs
