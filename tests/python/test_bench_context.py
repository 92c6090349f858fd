"""The collectives benchmark's TIDE context on two ranks (tide.bench.collectives.TideContext),
with host-fabric communicators standing in for the CUDA ones: every topology's communicators,
groups and extra registrations are made, and the systems list names what the two-GPU run
measures; the rail-lane rows' handle runs one reduce-scatter and one all-gather against the staged
M2L1 handle's; and the ranks agree on which systems every rank prepared. The two-GPU code paths
otherwise run only on the device, where a slip costs a run."""

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
        # The rail-lane row's handle on the host fabric (one-sided rails take the lane): its reduce-scatter
        # against the staged M2L1 handle's on fresh random gradients, bit for bit.
        lane = _lane_against_staged(bench, ctx, rank, world)
        # The driver's agreement on which systems every rank prepared: both ready, rank 1 alone
        # failing, both failing alike, both failing differently.
        agreement = [bench.why_not_prepared_everywhere(why, "cpu") for why in (
            None, None if rank == 0 else "out of memory on rank 1", "no NCCL copy engine here",
            f"reason {rank}")]
        results.put((rank, [s.name for s in bench.tide_systems(ctx)], (solver, dict(ctx.own_node_ctas)), len(made),
                     lane, agreement))
        ctx.close()
        dist.destroy_process_group()
    except Exception:
        results.put((rank, traceback.format_exc(), (None, None), None, None, None))


def _lane_against_staged(bench, ctx, rank: int, world: int) -> dict:
    """One reduce-scatter of the Llama group on M2L1's staged handle and on its rail-lane handle
    (each on its own communicator, CPU memory), from the same fresh random bf16 gradients: the
    outputs must match bit for bit (the lane keeps the staged path's association) and lie within
    fp32 rounding of the float64 sum of every rank's gradients. Then one all-gather of a fresh
    shard on both, landings poisoned first: every byte must be the owning rank's shard byte."""
    import random

    import numpy as np
    import torch
    import torch.distributed as dist
    from landing_rows import landing_view, wrong_landing_bytes

    llama = ctx.groups["llama3.1-8b-layer"]
    plan = ctx.plans[(2, 1)][llama.name]
    seed = torch.tensor([random.SystemRandom().randrange(2**31)])
    dist.broadcast(seed, 0)  # one draw per run, the same on both ranks (each rank's rows differ)

    def draws(r: int) -> torch.Generator:  # rank r's gradients, then its shard, come from this stream
        return torch.Generator().manual_seed(int(seed) + r)

    g = draws(rank)
    grads = [torch.randn(s, generator=g).to(torch.bfloat16) for s in llama.shapes]
    outs = {}
    for key in ((2, 1), (2, 1, "lane")):
        out = torch.full((llama.shard_elems,), float("nan"))  # poisoned
        ctx.comms[key].reduce_scatter(ctx.handles[key][llama.name], [t.data_ptr() for t in grads], out.data_ptr(),
                                      alpha=1.0 / world)
        ctx.comms[key].synchronize()
        outs[key] = out
    del grads
    # The float64 reference, a parameter at a time (the group is some 2 * 10^8 elements): every
    # rank's stream replayed in step, each rank's rows of this rank's shard summed in float64.
    streams = [draws(r) for r in range(world)]
    rel_err = 0.0
    for p, shape in zip(plan["group"]["param_layout"], llama.shapes, strict=True):
        k, total = p["shard_rows"] * p["row_elems"], p["rows"] * p["row_elems"]
        lo, hi = rank * k, min((rank + 1) * k, total)
        ref = torch.zeros(k, dtype=torch.float64)
        for stream in streams:
            rows = torch.randn(shape, generator=stream).to(torch.bfloat16).reshape(-1)[lo:hi]
            ref[: rows.numel()] += rows.double()
        ref /= world
        got = outs[(2, 1)][p["out_offset"]:p["out_offset"] + k].double()
        err = float((got - ref).abs().max()) / max(1.0, float(ref.abs().max()))
        rel_err = max(rel_err, err if bool(torch.isfinite(got).all()) else float("inf"))
    # The all-gather's lane row: each rank's next draw is its shard.
    shards = [torch.randn(llama.shard_elems, generator=stream).to(torch.bfloat16) for stream in streams]
    landings, wrong = {}, {}
    for key in ((2, 1), (2, 1, "lane")):
        offset, ptr = ctx.landing[key]
        view = landing_view(ptr, llama.ranks * llama.shard_elems * 2)
        view[:] = 0xA5
        ctx.comms[key].all_gather(ctx.handles[key][llama.name], shards[rank].data_ptr(), offset)
        ctx.comms[key].synchronize()
        landings[key] = view.copy()
        wrong[key] = wrong_landing_bytes(plan, landings[key], [s.view(torch.uint8).numpy() for s in shards])
    return {"seed": int(seed), "equal": torch.equal(outs[(2, 1)], outs[(2, 1, "lane")]),
            "rs_rel_err": rel_err,
            "ag_equal": bool(np.array_equal(landings[(2, 1)], landings[(2, 1, "lane")])),
            "ag_wrong_bytes": wrong,
            "lane_plan": ctx.lane_plans[(2, 1)]["reduce_scatter"]["rail_lane"],
            "lane_staging": ctx.lane_plans[(2, 1)]["reduce_scatter"]["staging_bytes"],
            "staged_staging": ctx.plans[(2, 1)][llama.name]["reduce_scatter"]["staging_bytes"]}


def test_two_rank_context_registers_every_system(tmp_path):
    results, codes = run_ranks(_rank, 2, (2, str(tmp_path)), timeout=180)
    got = {rank: (systems, ctas, comms) for rank, systems, ctas, comms, _lane, _agreement in results}
    lanes = {rank: lane for rank, _systems, _ctas, _comms, lane, _agreement in results}
    agreements = {rank: agreement for rank, *_rest, agreement in results}
    assert sorted(got) == [0, 1], got
    for rank, (systems, ctas, comms) in got.items():
        assert isinstance(systems, list), systems  # else the rank's traceback
        # M1L2 and M2L1, the one-node communicator without copy graphs, and M2L1's push,
        # net-landing and rail-lane communicators.
        assert comms == 6, comms
        lane = lanes[rank]
        assert lane["lane_plan"] is True and lane["lane_staging"] < lane["staged_staging"], lane
        # Two bf16 terms summed in fp32 and halved: within fp32 rounding of the float64 sum.
        assert lane["rs_rel_err"] <= 1e-6 and lane["equal"], (rank, lane)
        assert lane["ag_wrong_bytes"] == {(2, 1): 0, (2, 1, "lane"): 0} and lane["ag_equal"], (rank, lane)
        solver, own_node = ctas
        assert solver >= 1 and own_node == {(2, 1): 2 * solver}  # M / (M - 1) = 2 on M2L1
        for name in ("tide_ag", "tide_ag_in_place", "tide_ag_in_place_nographs", "tide_rs", "tide_rs_ctas66",
                     "tide_ag_M2L1", "tide_rs_M2L1", "tide_rs_M2L1_push", "tide_rs_M2L1_netlanding",
                     f"tide_rs_M2L1_ctas{own_node[(2, 1)]}", "tide_ag_M2L1_lane", "tide_rs_M2L1_lane"):
            assert name in systems, (name, systems)
        # The rail lane's rows are M2L1's only (one GPU per node).
        assert [s for s in systems if s.endswith("_lane")] == ["tide_ag_M2L1_lane", "tide_rs_M2L1_lane"], systems
    assert got[0] == got[1]
    # A system prepared on one rank only is skipped on both, with the failed rank's reason.
    for rank in (0, 1):
        assert agreements[rank] == [None, "rank 1: out of memory on rank 1", "no NCCL copy engine here",
                                    "rank 0: reason 0; rank 1: reason 1"], (rank, agreements[rank])
    assert codes == [0, 0], codes
