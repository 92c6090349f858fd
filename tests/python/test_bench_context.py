"""The collectives benchmark's TIDE context on two ranks (tide.bench.collectives.TideContext),
with host-fabric communicators standing in for the CUDA ones: every topology's communicators,
groups and extra registrations are made, and the systems list names what the two-GPU run
measures. The two-GPU code paths otherwise run only on the device, where a slip costs a run."""

from __future__ import annotations

import os
import traceback

import pytest
from spawned_ranks import run_ranks

pytest.importorskip("torch")


def _rank(rank: int, world: int, store: str, results) -> None:
    try:
        import torch.distributed as dist

        import tide.bench.collectives as bench
        import tide.comm as comm

        dist.init_process_group("gloo", init_method=f"file://{store}/pg", rank=rank, world_size=world)
        made = []

        def host_communicator(topo, arena_bytes):
            where = os.path.join(store, f"comm{len(made)}")
            os.makedirs(where, exist_ok=True)
            made.append(comm.Communicator(nodes=topo[0], gpus_per_node=topo[1], rank=dist.get_rank(), fabric="host",
                                          store_dir=where, arena_bytes=arena_bytes + 64 * bench.MiB, timeout_s=60))
            return made[-1]

        bench.TideContext._communicator = staticmethod(host_communicator)
        comm.has_cuda = lambda: True  # the context checks for the CUDA fabric; the host one stands in
        ctx = bench.TideContext(world)
        solver = ctx.plans[(2, 1)]["llama3.1-8b-layer"]["reduce_scatter"]["sum_ctas"]
        results.put((rank, [s.name for s in bench.tide_systems(ctx)], (solver, dict(ctx.own_node_ctas)), len(made)))
        ctx.close()
        dist.destroy_process_group()
    except Exception:
        results.put((rank, traceback.format_exc(), (None, None), None))


def test_two_rank_context_registers_every_system(tmp_path):
    results, codes = run_ranks(_rank, 2, (2, str(tmp_path)), timeout=180)
    got = {rank: (systems, ctas, comms) for rank, systems, ctas, comms in results}
    assert sorted(got) == [0, 1], got
    for rank, (systems, ctas, comms) in got.items():
        assert isinstance(systems, list), systems  # else the rank's traceback
        # M1L2 and M2L1, the one-node communicator without copy graphs, and M2L1's push and
        # net-landing communicators.
        assert comms == 5, comms
        solver, own_node = ctas
        assert solver >= 1 and own_node == {(2, 1): 2 * solver}  # M / (M - 1) = 2 on M2L1
        for name in ("tide_ag", "tide_ag_in_place", "tide_ag_in_place_nographs", "tide_rs", "tide_rs_ctas66",
                     "tide_ag_M2L1", "tide_rs_M2L1", "tide_rs_M2L1_push", "tide_rs_M2L1_netlanding",
                     f"tide_rs_M2L1_ctas{own_node[(2, 1)]}"):
            assert name in systems, (name, systems)
    assert got[0] == got[1]
    assert codes == [0, 0], codes
