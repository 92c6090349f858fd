"""Scenarios that hold TIDE's reduce-scatter inside FSDP2 to a float64 reference rather than to
stock FSDP2: the unsharded gradients FSDP2 hands to foreach_reduce are captured on every rank, the
ranks' captures are gathered, and each sharded gradient FSDP2 keeps after the step must be their
float64 mean (summed over the step's reductions) within a bound on fp32 rounding.

Why not stock: on more than two ranks gloo sums in another order, and for bf16 reductions it
rounds every partial sum in bf16, so a comparison with stock needs float tolerances (and on bf16
one of 2e-2) that a lost contribution can pass. This reference needs none of that: the bound is a
few fp32 roundings of the magnitudes summed (and one bf16 rounding of the result where the
reduction is bf16)."""

from __future__ import annotations

import contextlib

import tide.fsdp
import torch
import torch.distributed as dist
from fsdp_scenario_kit import (
    agree, assert_all_tide, batches, check_tide_ran, fsdp_params_of, install, local, make_pair, mesh_1d, mesh_hsdp, stats,
    transformer,
)
from tide.bench.topologies import node_splits
from tide.fsdp import guards
from torch.distributed.fsdp import MixedPrecisionPolicy

FP32_ROUNDING = 2.0 ** -24  # unit roundoff: round to nearest errs by at most this, relative
BF16_ROUNDING = 2.0 ** -8


@contextlib.contextmanager
def captured_reduce_inputs(model):
    """While inside: every foreach_reduce call FSDP2 makes for `model`'s groups, as (its FSDPParams,
    clones of the unsharded gradients it was handed). Clones: Slot-Reuse frees the gradients'
    storage once TIDE has read them."""
    pg = guards.internals().param_group
    mine = {id(fp) for fp in fsdp_params_of(model)}
    calls: list[tuple[list, list[torch.Tensor]]] = []
    reduce = pg.foreach_reduce  # TIDE's dispatch while installed: captured in front of it

    def capture(fsdp_params, unsharded_grads, *args, **kwargs):
        if fsdp_params and id(fsdp_params[0]) in mine:
            calls.append((list(fsdp_params), [g.detach().clone() for g in unsharded_grads]))
        return reduce(fsdp_params, unsharded_grads, *args, **kwargs)

    pg.foreach_reduce = capture
    try:
        yield calls
    finally:
        pg.foreach_reduce = reduce


def _my_rows(full: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """This rank's rows of `full` under FSDP2's Shard(0) (torch.chunk; none past the last chunk)."""
    chunks = torch.chunk(full, world, dim=0)
    return chunks[rank] if rank < len(chunks) else full.new_empty((0, *full.shape[1:]))


def worst_against_float64(ctx, model, calls, bf16_result: bool) -> tuple[float, int]:
    """(the worst |sharded grad - float64 mean| over its bound, parameters checked). The mean is
    over every rank of the job (on HSDP the replicas' all-reduce joins the shard group's
    reduce-scatter), this rank's rows those of its place in its shard group. Collective: every
    rank gathers every call's gradients in the same order."""
    world = ctx.world
    want: dict[int, torch.Tensor] = {}   # id(FSDPParam) -> float64 reference rows, summed over calls
    bound: dict[int, torch.Tensor] = {}  # the rounding bound per element
    params = {}
    for fsdp_params, grads in calls:
        for fp, g in zip(fsdp_params, grads, strict=True):
            every = [torch.empty_like(g, dtype=torch.float32) for _ in range(world)]
            dist.all_gather(every, g.float().contiguous())  # bf16 -> fp32 is exact
            total = sum(x.double() for x in every) / world
            magnitude = sum(x.double().abs() for x in every) / world
            place, shards = fp.mesh_info.shard_mesh_rank, fp.mesh_info.shard_mesh_size
            rows, scale = _my_rows(total, place, shards), _my_rows(magnitude, place, shards)
            key = id(fp)
            params[key] = fp
            want[key] = want.get(key, 0) + rows
            # world fp32 additions (and the division by a power of two, exact), a margin of 4; a bf16
            # result is rounded once per reduction, then (HSDP) once more in FSDP2's bf16 all-reduce
            # of the replicas' partial sums, each at most `scale`, and added to the sharded gradient.
            bound[key] = bound.get(key, 0) + 4 * world * FP32_ROUNDING * scale
            if bf16_result:
                bound[key] = bound[key] + 2 * BF16_ROUNDING * (scale + rows.abs())
    worst = 0.0
    for key, fp in params.items():
        got = local(fp.sharded_param.grad)
        if got is None or got.shape != want[key].shape:
            return float("inf"), len(params)  # no gradient, or another shape: fails the caller's check
        # A bf16 accumulation rounds the sum once more.
        limit = bound[key] + (2 * BF16_ROUNDING * want[key].abs() if bf16_result else 0) + 1e-30
        excess = ((got.double() - want[key]).abs() / limit).max().item() if got.numel() else 0.0
        worst = max(worst, excess)
    return worst, len(params)


def reduce_scatter_against_float64(ctx):
    """fp32, bf16 compute with fp32 reduction, and bf16 parameters (a bf16 reduction); both modes;
    one node and every split into several; one and two micro-batches per step (the second accumulates into the first's
    sharded gradients); on four ranks also HSDP on a 2 x 2 mesh (TIDE's reduce-scatter over each
    shard group of two, then FSDP2's all-reduce across the replicas). Every parameter of every
    group checked every step. Up to four ranks a third step of one micro-batch follows the accumulating
    one; eight ranks (their topologies are what they add) leave it out, and four and eight CPU ranks
    run two of the six (precision, mode) pairs per layout, to keep CI within its time on two cores."""
    bf16_compute = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    precisions = {"fp32": ({}, False), "bf16 compute": ({"mp_policy": bf16_compute}, False),
                  "bf16 params": ({"dtype": torch.bfloat16}, True)}
    # One node (the default topology), then every virtual topology of several nodes the ranks split into
    # (two ranks: 2x1; four: 2x2 and 4x1; eight: 2x4, 4x2 and 8x1, the 8-GPU validation's).
    layouts = ([("1-D", None)] + [("1-D", split) for split in node_splits(ctx.world) if split[0] > 1]
               + ([("HSDP 2x2", None)] if ctx.world == 4 else []))
    runs = [(p, m, t) for p in precisions.items() for m in tide.fsdp.MODES for t in layouts]
    if ctx.world >= 4 and ctx.device == "cpu":
        # Four and eight CPU ranks share CI's two cores (the full 24 runs took 104 s on eight, 37 s on
        # four): layout i runs precision i In-Place and precision i + 1 Slot-Reuse (mod 3), so the
        # first three layouts cover all six pairs and every layout both modes. On two ranks, and on
        # GPUs, every pair runs on every layout.
        order = list(precisions.items())
        runs = [(order[(i + shift) % len(order)], mode, layout) for i, layout in enumerate(layouts)
                for shift, mode in enumerate(tide.fsdp.MODES)]
    for (label, (kw, bf16_result)), mode, (mesh_kind, topology) in runs:
        dtype = kw.get("dtype")
        shard_kw = {k: v for k, v in kw.items() if k != "dtype"}
        mesh = mesh_hsdp(ctx) if mesh_kind.startswith("HSDP") else mesh_1d(ctx)
        _, mt = make_pair(transformer, ctx, mesh, dtype=dtype, **shard_kw)
        assert_all_tide(install(mt, ctx, mode=mode, topology=topology), 4)
        opt = torch.optim.SGD(mt.parameters(), lr=0.05)
        n = len(fsdp_params_of(mt))
        for step, micro in enumerate((1, 2, 1) if ctx.world <= 4 else (1, 2)):
            what = f"{label} {mode} {mesh_kind} topology={topology} step {step} micro={micro}"
            before = stats(mt)
            with captured_reduce_inputs(mt) as calls:
                for x in batches(ctx, micro, dtype=dtype or torch.float32, seed=300 + step):
                    mt(x).float().pow(2).mean().backward()
            check_tide_ran(before, stats(mt), what)
            worst, checked = worst_against_float64(ctx, mt, calls, bf16_result)

            def check():  # on every rank, raised on every rank if any fails (a lone raise would hang the peers)
                assert checked == n, f"{what}: {checked} of {n} parameters reduced"
                assert worst <= 1.0, \
                    f"{what}: a sharded gradient is {worst:.3g} times its rounding bound off the float64 mean"
            agree(check)
            opt.step()
            opt.zero_grad()
        assert tide.fsdp.uninstall(mt)
