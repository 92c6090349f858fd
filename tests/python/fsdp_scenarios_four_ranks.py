"""Scenarios that need four ranks: two nodes of two, HSDP on a 2 x 2 mesh, experts on a
sub-mesh, and the scratch estimate."""

from __future__ import annotations

import tide.fsdp
import torch
import torch.distributed as dist
from fsdp_harness import ScenarioSkipped
from fsdp_scenario_kit import (
    BF16, FP32, LinearModel, TIMEOUT_S, assert_all_tide, batches, check_tide_ran, compare_models, device_type, install,
    int_loss, make_pair, mesh_1d, mesh_hsdp, optimizers, stats, step_both, sum_reduction, tide_groups, train,
    transformer,
)
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy
from torch.distributed.tensor import Shard


def fsdp4_two_by_two_in_place(ctx):
    train(ctx, transformer, topology=(2, 2), expect_groups=4, micro=2)


def fsdp4_push_landing(ctx):
    """The Level 2 push landing (plan_options landing="push") on 2 nodes x 2: integer gradients
    bit for bit as stock, in both modes, and float training within tolerance."""
    for mode in ("in-place", "slot-reuse"):
        _ms, _mt, rep, _st = train(ctx, LinearModel, integer=True, tol=None, opt="sign", loss_fn=int_loss,
                                   configure=sum_reduction, topology=(2, 2), expect_groups=3, mode=mode,
                                   install_kw={"plan_options": {"landing": "push", "passes": 2}})
        for g in tide_groups(rep):
            assert g["plan"]["rs_landing"] == "push", g["plan"]
    train(ctx, transformer, topology=(2, 2), expect_groups=4, micro=2,
          install_kw={"plan_options": {"landing": "push"}})


def fsdp4_slot_reuse_bf16(ctx):
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    train(ctx, transformer, mode="slot-reuse", mp_policy=mp_policy, tol=BF16, expect_groups=4)


def fsdp4_integer_exact(ctx):
    train(ctx, LinearModel, integer=True, tol=None, opt="sign", loss_fn=int_loss,
          configure=sum_reduction, topology=(2, 2), expect_groups=3)


class ExpertBlock(nn.Module):
    """A dense layer and a stack of experts: integer-exact, linear only."""

    def __init__(self, d: int = 4, experts: int = 4):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.experts = nn.Parameter(torch.zeros(experts, d, d))

    def forward(self, x):
        return x + self.fc(x) + torch.einsum("rd,edh->rh", x, self.experts)


class ExpertModel(nn.Module):
    def __init__(self, d: int = 4, n_blocks: int = 2):
        super().__init__()
        self.inp = nn.Linear(5, d)
        self.blocks = nn.ModuleList([ExpertBlock(d) for _ in range(n_blocks)])
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


def _experts_on_a_sub_mesh_pair(ctx):
    """A stock and a TIDE ExpertModel, expert tensors sharded on 2-rank sub-meshes
    (shard_placement_fn returning a ShardPlacementResult, torch >= 2.13), the rest on all
    four ranks; integer weights, SUM reduction."""
    try:
        from torch.distributed.fsdp._fully_shard._fsdp_common import FSDPMeshInfo, ShardPlacementResult
    except ImportError:
        raise ScenarioSkipped(f"torch {torch.__version__} has one mesh per module (no ShardPlacementResult)")
    sub = init_device_mesh(device_type(ctx), (2, ctx.world // 2), mesh_dim_names=("ep", "efsdp"))["efsdp"]
    experts_mesh = FSDPMeshInfo(mesh=sub, shard_mesh_dim=0)

    def placement(p):
        return ShardPlacementResult(Shard(0), experts_mesh) if p.dim() == 3 else None

    ms, mt = make_pair(ExpertModel, ctx, mesh_1d(ctx), integer=True, placement=lambda _block: placement)
    for m in (ms, mt):
        sum_reduction(m)
    return ms, mt


def fsdp4_experts_on_a_sub_mesh(ctx):
    """Expert tensors sharded on a 2-rank sub-mesh (shard_placement_fn
    returning a ShardPlacementResult, torch >= 2.13), the rest on all four
    ranks: two parameter groups per block, on two process groups, each with
    its own communicator. Integer data and weights, SUM: bit for bit, both
    modes."""
    for mode in ("in-place", "slot-reuse"):
        ms, mt = _experts_on_a_sub_mesh_pair(ctx)
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 5)
        ranks = sorted(g["plan"]["topology"][0] * g["plan"]["topology"][1] for g in rep["groups"])
        assert ranks == [2, 2, 4, 4, 4], ranks  # the experts' groups gather over the sub-mesh
        # Install's refusals: the sub-mesh lists only this rank's slice, but the four-rank group
        # spans every rank, so one pass reaches them all.
        partitions, spread = _refusal_spread(mt)
        assert [[0, 1, 2, 3]] in partitions and spread == (1, True), (partitions, spread)
        opts = optimizers(ms, mt, "sign", 1e-2)
        for s in range(3):
            xs = batches(ctx, 1, d_in=5, integer=True, seed=s)
            step_both(ms, mt, opts, xs, tol=None, loss_fn=int_loss, what=f"{mode} step {s}")
        tide.fsdp.uninstall(mt)


def _refusal_spread(model):
    """The model's groups as install's refusals spread over them: the mesh rows of each group
    (shard groups, then replicas), and (passes, whether they reach every rank)."""
    from tide.fsdp import agreement, guards, model_consensus

    partitions = model_consensus.model_process_groups(model, guards.internals())[2]
    return partitions, agreement.refusal_passes(partitions, dist.get_world_size())


def hsdp_in_place(ctx):
    """2x2 mesh: TIDE reduce-scatters in each shard group, FSDP2 all-reduces
    across replicas (gloo). Install's refusals spread over the mesh's rows in one pass."""
    _, mt, rep, _ = train(ctx, transformer, mesh=mesh_hsdp(ctx), expect_groups=4, micro=2)
    assert rep["arenas"][0]["ranks"] == 2, rep["arenas"]
    half = ctx.world // 2
    rows = ([list(range(r * half, (r + 1) * half)) for r in range(2)],  # shard: the mesh's rows
            [[r, r + half] for r in range(half)])                      # replicate: its columns
    assert _refusal_spread(mt) == (list(rows), (1, True)), _refusal_spread(mt)


def hsdp_slot_reuse_partial_all_reduce(ctx):
    """HSDP, Slot-Reuse, accumulation that reduce-scatters every micro-batch
    but all-reduces only on the last (partial reduce output)."""
    train(ctx, transformer, mesh=mesh_hsdp(ctx), mode="slot-reuse", expect_groups=4, micro=3, hsdp_ar_last=True)


def hsdp_integer_exact(ctx):
    train(ctx, LinearModel, mesh=mesh_hsdp(ctx), integer=True, tol=None, opt="sign",
          loss_fn=int_loss, configure=sum_reduction, expect_groups=3)


def entry_points_on_hsdp_and_two_nodes(ctx):
    """fsdp_scenarios_entry_points' ways of driving a step where the reduction
    has more to it than two ranks: on HSDP (2 x 2; FSDP2 all-reduces the
    reduce-scattered shards across replicas, accumulating into gradients kept
    by zero_grad(set_to_none=False)) and on two nodes of two (TIDE's Level 2
    reduce-scatter). Per step: a backward through a retained graph run
    twice, two forwards into one backward, or two micro-batches without sync
    on the first; gradients zeroed in place. Both modes, as stock."""
    def retained_twice(m, xs):
        loss = m(xs[0]).float().pow(2).mean()
        loss.backward(retain_graph=True)
        loss.backward()

    def two_forwards(m, xs):
        (m(xs[0]).float().pow(2).mean() + m(xs[1]).float().pow(2).mean()).backward()

    def no_sync_then_sync(m, xs):
        for i, x in enumerate(xs):
            m.set_requires_gradient_sync(i == 1)
            m(x).float().pow(2).mean().backward()

    drives = (retained_twice, two_forwards, no_sync_then_sync)
    for mesh, topology in ((mesh_hsdp(ctx), None), (mesh_1d(ctx), (2, ctx.world // 2))):
        for mode in ("in-place", "slot-reuse"):
            ms, mt = make_pair(lambda: transformer(4), ctx, mesh)
            assert_all_tide(install(mt, ctx, mode=mode, topology=topology), 5)
            opts = optimizers(ms, mt, "adam", 1e-2)
            for s, drive in enumerate(drives):
                what = f"{mode} topology={topology} hsdp={topology is None} {drive.__name__}"
                xs = batches(ctx, 2, seed=s)
                before = stats(mt)
                for m in (ms, mt):
                    drive(m, xs)
                check_tide_ran(before, stats(mt), what)
                compare_models(ms, mt, what, FP32, grads=True)
                for o in opts:
                    o.step()
                    o.zero_grad(set_to_none=False)
                compare_models(ms, mt, what, FP32)
            tide.fsdp.uninstall(mt)


def scratch_estimate_is_enough(ctx):
    """An arena of exactly user memory + tide.plan.scratch_bytes (what the
    adapter sizes with) is enough: the library refuses the first collective
    when the scratch does not fit. Several topologies and both modes; every
    collective's result is checked (fresh random shards and gradients,
    poisoned landings and outputs): landings byte for byte against every
    rank's shard, reduce-scatter outputs against float64 sums."""
    import random

    import numpy as np
    from landing_rows import landing_view, wrong_landing_bytes
    from rs_reference import bf16_bits, rs_rel_errors

    from tide.fsdp.arena import align
    from tide.fsdp.backend import HostBackend
    from tide.plan import make_plan, scratch_bytes

    box = [random.SystemRandom().randrange(1 << 31)]
    dist.broadcast_object_list(box, src=0)  # one fresh draw per run, the same on every rank
    seed = box[0]
    shapes = [[37, 5], [3], [64, 2, 3], [9, 7]]
    for (m, l), mode in (((2, 2), "in-place"), ((2, 2), "slot-reuse"), ((4, 1), "slot-reuse"), ((1, 4), "in-place")):
        sets = [shapes[:2], shapes]
        plans = [make_plan(s, nodes=m, gpus_per_node=l, dtype="bf16", mode=mode) for s in sets]
        user = sum(align(p["group"]["unsharded_bytes"]) for p in plans)
        args = [dict(shapes=s, nodes=m, gpus_per_node=l, dtype="bf16", mode=mode) for s in sets]
        comm = HostBackend(torch.device("cpu")).create_comm(dist.group.WORLD, m, l, user + scratch_bytes(args),
                                                             TIMEOUT_S)
        try:
            groups = [comm.register_group(s, dtype="bf16", mode=mode) for s in sets]
            landings = [comm.alloc(p["group"]["unsharded_bytes"]) for p in plans]
            for i, (s, g, p, (off, ptr)) in enumerate(zip(sets, groups, plans, landings, strict=True)):
                what = f"M{m}L{l} {mode} group {i}"
                draw = [seed, m, l, int(mode == "in-place"), i]
                shards = [np.random.default_rng([*draw, r]).integers(0, 256, p["group"]["shard_bytes"], dtype=np.uint8)
                          for r in range(ctx.world)]
                grads = [[bf16_bits(np.random.default_rng([*draw, r, j]).standard_normal(int(np.prod(shape))))
                          for j, shape in enumerate(s)] for r in range(ctx.world)]
                landing = landing_view(ptr, p["group"]["unsharded_bytes"])
                landing[:] = 0xA5
                comm.all_gather(g, shards[ctx.rank].ctypes.data, off)
                out = np.full(p["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)
                comm.reduce_scatter(g, [t.ctypes.data for t in grads[ctx.rank]], out.ctypes.data, alpha=0.25)
                comm.synchronize()
                assert wrong_landing_bytes(p, landing, shards) == 0, (what, seed)
                # Four bf16 terms summed in fp32: within a few fp32 ulps of the float64 sum.
                errors = rs_rel_errors(p, out, grads, ctx.rank, 0.25)
                assert max(errors) <= 1e-5, (what, seed, errors)
        finally:
            comm.close()


def reshard_to_a_smaller_mesh_stays_stock(ctx):
    """fully_shard(block, reshard_after_forward=2) on four ranks: after
    forward FSDP2 reshards that block to a post-forward mesh of two (each
    pair of ranks holding halves), and its backward all-gathers over that
    smaller mesh. TIDE's layouts are the shard group's alone, so install
    leaves that group on stock, with one logged line naming it and the
    reason; the other groups are TIDE's. Both modes; training as stock."""
    import logging

    from fsdp_scenarios_schedule import _shard_with_int_raf
    for mode in ("in-place", "slot-reuse"):
        ctx.logs.clear()
        ms, mt = make_pair(lambda: transformer(3), ctx, mesh_1d(ctx), shard_fn=_shard_with_int_raf({1: 2}))
        # The premise: stock reshards that block to a smaller mesh after forward.
        assert mt.blocks[1]._get_fsdp_state()._fsdp_param_group._use_post_forward_mesh
        rep = install(mt, ctx, mode=mode)
        status = {g["fqn"]: (g["status"], g["reason"]) for g in rep["groups"]}
        assert status == {"<root>": ("tide", None), "blocks.0": ("tide", None),
                          "blocks.1": ("stock", "reshard_to_smaller_mesh"), "blocks.2": ("tide", None)}, status
        lines = [m for m in ctx.logs.messages(logging.WARNING) if "stays on stock FSDP2" in m]
        assert len(lines) == 1 and "'blocks.1'" in lines[0] and "reshard_to_smaller_mesh" in lines[0], lines
        opts = optimizers(ms, mt, "adam", 1e-2)
        for s in range(3):
            step_both(ms, mt, opts, batches(ctx, 2, seed=s), tol=FP32, micro=2, no_sync_first=s == 1,
                      what=f"{mode} step {s}")
        assert tide.fsdp.uninstall(mt)


def installs_that_differ_by_sub_mesh_stay_in_step(ctx):
    """Experts on 2-rank sub-meshes {0, 1} and {2, 3}, the rest on all four ranks, rank 3 handed
    another topology: the dense groups and the experts of {2, 3} stay stock (their ranks disagree),
    the experts of {0, 1} run TIDE. What each rank then decides alone must still be decided by all
    (found by review: each hung, in a collective one rank group never joined):
    - install again: returns as installed on every rank (the stock ranks installed again alone);
    - a layout setter: lays out again on every rank, or on none (ranks with nothing moved skipped
      the install their peers ran);
    - uninstall and a setter with a forward's graph kept on rank 1 only: refused on every rank (the
      refusal was agreed over TIDE's communicators only, which ranks 2 and 3 have none of).
    Training matches stock throughout (integer data and weights, SUM: bit for bit)."""
    ms, mt = _experts_on_a_sub_mesh_pair(ctx)
    opts = optimizers(ms, mt, "sign", 1e-2)
    topology = (2, 1) if ctx.rank == 3 else (1, 2)
    rep = install(mt, ctx, topology=topology)
    want = 2 if ctx.rank < 2 else 0  # the two expert groups of {0, 1}
    assert len(tide_groups(rep)) == want, [(g["fqn"], g["status"], g["reason"]) for g in rep["groups"]]
    rep = install(mt, ctx, topology=topology)
    assert len(tide_groups(rep)) == want, "install again changed the installation"

    def step(s, what):
        xs = batches(ctx, 1, d_in=5, integer=True, seed=s)
        step_both(ms, mt, opts, xs, tol=None, loss_fn=int_loss, what=what)

    step(0, "after the installs")
    for m in (ms, mt):
        m.set_reshard_after_forward(False)  # the experts of {0, 1} move out of the ring
    rep = tide.fsdp.report(mt, echo=False)
    regions = sorted(g["region"] for g in tide_groups(rep))  # laid out again: blocks.0 out of the ring
    assert regions == (["pinned:blocks.0", "slot0"] if want else []), rep["groups"]
    step(1, "after the setter")
    x = batches(ctx, 1, d_in=5, integer=True, seed=2)[0]
    out = mt(x)
    kept = out if ctx.rank == 1 else None  # a graph only rank 1 keeps (its experts run TIDE; 2 and 3 have none)
    del out
    refused = []
    for attempt in (lambda: tide.fsdp.uninstall(mt), lambda: mt.set_reshard_after_forward(True)):
        try:
            attempt()
        except RuntimeError as e:
            refused.append(str(e))
    assert len(refused) == 2 and all("backward has not run" in r for r in refused), refused
    del kept
    assert tide.fsdp.uninstall(mt)
    step(3, "after uninstall")
