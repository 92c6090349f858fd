"""Scenarios: a model with TIDE installed trains like stock FSDP2 (losses, gradients, parameters),
across precisions, modes, accumulation, checkpointing, compilation and model shapes; and the
cross-rank agreement the comparisons rely on."""

from __future__ import annotations

import gc
import logging
import weakref

import tide.fsdp
import torch
import torch.distributed as dist
from fsdp_harness import ScenarioSkipped
from fsdp_scenario_kit import (
    ADAM_EPS, BF16, Block, FP32, FP32_LOOSE, LinearModel, Model, OrderedBlocksModel, TIMEOUT_S, TinyParamBlock, agree,
    assert_all_tide, batches, data_generator, checkpoint_wrapped_transformer, checkpointed_transformer, compare, compare_models,
    compare_and_step, collective_device, device_type, fsdp_modules, fsdp_params_of, install, int_loss, local,
    make_pair, mesh_1d, optimizers, shard, stats, step_both, sum_reduction, tide_groups, tight, train, transformer,
)
from tide.fsdp import dispatch, guards, registry
from tide.fsdp.all_gather import RegionConflict
from torch import nn
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor


def a_check_failing_on_one_rank_fails_every_rank(ctx):
    """compare (through agree): a comparison that fails on the last rank only raises on every rank, that rank
    with its own message and the others saying another rank failed, and the ranks stay in
    step (a collective right after it still pairs up)."""
    device = torch.device(ctx.device)
    last = ctx.world - 1
    got = torch.tensor([float(ctx.rank == last)], device=device)
    try:
        compare(got, torch.zeros(1, device=device), "probe", None)
    except AssertionError as e:
        want = "probe: not bit-identical" if ctx.rank == last else "failed on 1 other rank(s)"
        assert want in str(e), (ctx.rank, str(e))
    else:
        raise AssertionError(f"rank {ctx.rank}: the failure on rank {last} went unreported here")
    agree(lambda: None)  # all pass: nothing raised
    ranks = torch.tensor([float(ctx.rank)], device=device)
    dist.all_reduce(ranks)
    assert ranks.item() == ctx.world * (ctx.world - 1) / 2, ranks


# ------------------------------------------------------------------ scenarios (any world size)

def transformer_fp32_in_place(ctx):
    """All groups on TIDE, ring slots + pinned root, no copy-out, no chunk_cat."""
    calls = {"copy_out": 0, "copy_in": 0}
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    rep = install(mt, ctx, mode="in-place")
    assert_all_tide(rep, 4)
    regions = {g["fqn"]: g["region"] for g in rep["groups"]}
    assert regions == {"<root>": "pinned:<root>", "blocks.0": "slot0", "blocks.1": "slot1", "blocks.2": "slot0"}, \
        regions
    orig_copy_out = dispatch._originals["foreach_all_gather_copy_out"]
    orig_copy_in = dispatch._originals["foreach_reduce_scatter_copy_in"]

    def count(key, fn):
        def wrapped(*a, **k):
            calls[key] += 1
            return fn(*a, **k)
        return wrapped

    dispatch._originals["foreach_all_gather_copy_out"] = count("copy_out", orig_copy_out)
    dispatch._originals["foreach_reduce_scatter_copy_in"] = count("copy_in", orig_copy_in)
    try:
        opts = optimizers(ms, mt, "adam", 1e-2)
        for s in range(3):
            x = batches(ctx, 1, seed=s)[0]
            before = dict(calls)
            ls = ms(x).pow(2).mean()
            ls.backward()
            assert calls["copy_in"] > before["copy_in"], "the stock model did not go through stock copy-in"
            before = dict(calls)
            lt = mt(x).pow(2).mean()
            lt.backward()
            assert calls == before, f"stock copy-out / chunk_cat ran for TIDE groups: {calls}"
            compare(ls, lt, f"step {s} loss", tight(ctx, FP32))
            compare_models(ms, mt, f"step {s}", tight(ctx, FP32), grads=True)
            for o in opts:
                o.step()
                o.zero_grad()
            compare_models(ms, mt, f"step {s}", tight(ctx, FP32))
    finally:
        dispatch._originals["foreach_all_gather_copy_out"] = orig_copy_out
        dispatch._originals["foreach_reduce_scatter_copy_in"] = orig_copy_in
    for fp in fsdp_params_of(mt):
        assert fp._unsharded_param.storage_offset() == 0
    st = stats(mt)
    assert st["rs_in_place"] > 0 and st["ag_resident"] > 0 and "rs_stock" not in st, st
    owner = weakref.ref(registry.installed[mt].contexts[0].owner)
    tide.fsdp.uninstall(mt)
    assert not dispatch.active(), "the last uninstall must restore FSDP2's functions"
    # Back on stock: one more step, then the arena (communicator) goes once nothing views it.
    step_both(ms, mt, opts, batches(ctx, 1, seed=9), tol=tight(ctx, FP32), what="stock step")
    del ms, mt, opts, ls, lt
    gc.collect()
    assert owner() is None, "the arena outlived its model"


def transformer_fp32_slot_reuse(ctx):
    _, _, _, st = train(ctx, transformer, mode="slot-reuse", expect_groups=4)
    assert st.get("rs_slot_reuse", 0) > 0 and not st.get("rs_in_place"), st


def transformer_bf16_mixed_precision(ctx):
    """fp32 master weights, bf16 compute, fp32 reduction: the cast stays."""
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    def check_across_nodes(rep, st):
        # The rails send one contiguous shard, cast into the shared buffer.
        assert not any(g["shard_in_place"] for g in tide_groups(rep)), rep
        assert st.get("ag_copied", 0) > 0 and not st.get("ag_in_place"), st
        assert rep["arenas"][0]["shard_buffer_bytes"] > 0, rep["arenas"]

    _, _, rep, st = train(ctx, transformer, mp_policy=mp_policy, tol=BF16, expect_groups=4)
    assert {g["shard_source"] for g in tide_groups(rep)} == {"cast"}, rep
    assert all(g["dtype"] == "bf16" for g in tide_groups(rep))
    if rep["arenas"][0]["topology"][0] == 1:
        # One node: the cast writes straight into the own landing rows, the all-gather runs in place.
        assert all(g["shard_in_place"] for g in tide_groups(rep)), rep
        assert st.get("ag_in_place", 0) > 0 and not st.get("ag_copied"), st
        assert rep["arenas"][0]["shard_buffer_bytes"] == 0, rep["arenas"]
        # The fabric's run-time choice of rails, with its reason (one node: copies or the host's puts).
        assert rep["arenas"][0]["rails"].split(" ")[0] in ("host-puts", "copy-engine"), rep["arenas"]
    else:  # the default topology has a node per rank (ranks on hosts of their own: the CUDA smoke's --host-per-rank)
        check_across_nodes(rep, st)
    # Virtual nodes.
    _, _, rep, st = train(ctx, transformer, mp_policy=mp_policy, tol=BF16, expect_groups=4,
                          topology=(ctx.world, 1))
    check_across_nodes(rep, st)


def bf16_params_slot_reuse(ctx):
    """bf16 parameters without a policy: shards adopted in place, bf16
    reduce dtype (TIDE sums in fp32 and casts back)."""
    _, _, rep, st = train(ctx, transformer, dtype=torch.bfloat16, mode="slot-reuse", tol=BF16, expect_groups=4,
                          opt="sgd", lr=0.05)
    assert {g["shard_source"] for g in tide_groups(rep)} == {"resident"}, rep
    assert st.get("ag_resident", 0) > 0, st


def integer_exact(ctx):
    """Integer data and weights, SUM reduction: gradients bit for bit."""
    train(ctx, LinearModel, integer=True, tol=None, opt="sign", loss_fn=int_loss,
          configure=sum_reduction, steps=3, expect_groups=3)


def integer_exact_slot_reuse_two_nodes(ctx):
    """Same, on a virtual 2-node topology (Level 2 waves) in Slot-Reuse."""
    train(ctx, LinearModel, integer=True, tol=None, opt="sign", loss_fn=int_loss,
          configure=sum_reduction, steps=3, mode="slot-reuse", topology=(2, ctx.world // 2), expect_groups=3)


def integer_exact_plan_options(ctx):
    """install(plan_options=...) reaches every group's plan: four passes and one-CTA budgets on
    the 2-node topology give the same gradients bit for bit, and the report shows that plan.
    Options the adapter owns are refused."""
    options = {"passes": 4, "sum_ctas": 1, "landing_ctas": 1}
    _ms, _mt, rep, _st = train(ctx, LinearModel, integer=True, tol=None, opt="sign", loss_fn=int_loss,
                               configure=sum_reduction, steps=2, topology=(2, ctx.world // 2), expect_groups=3,
                               install_kw={"plan_options": options})
    for g in tide_groups(rep):
        assert (g["plan"]["rs_passes"], g["plan"]["sum_ctas"], g["plan"]["landing_ctas"]) == (4, 1, 1), g["plan"]
    _ms2, mt2 = make_pair(LinearModel, ctx, mesh_1d(ctx))
    try:
        tide.fsdp.install(mt2, timeout_s=TIMEOUT_S, plan_options={"mode": "slot-reuse"})
    except ValueError as e:
        assert "mode" in str(e), e
    else:
        raise AssertionError("plan_options={'mode': ...} was accepted")


def rail_lane_plan_option(ctx):
    """install(plan_options={"rail_lane": True}) on one rank per node (topology (N, 1)) reaches every
    group's plan: the report says each group is on the rail lane (App. F) and stages less than the
    staged path. Gradients on fresh random inputs (a seed drawn per run) match the same model on the
    staged path bit for bit, and stock FSDP2's within the float tolerance (bit for bit on two CPU
    ranks), in fp32 and in bf16 with fp32 reduction. A rail_lane that is not a bool is refused."""
    import io
    import random

    seed = torch.tensor([random.SystemRandom().randrange(2**31)], device=collective_device())
    dist.broadcast(seed, 0)
    seed = int(seed.item())
    print(f"rail_lane_plan_option: rank {ctx.rank} input seed {seed}", flush=True)
    topology = (ctx.world, 1)
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for mp_policy, tol in ((None, FP32), (bf16, BF16)):
        shard_kw = {} if mp_policy is None else {"mp_policy": mp_policy}
        stock, lane = make_pair(transformer, ctx, mesh_1d(ctx), **shard_kw)
        staged = make_pair(transformer, ctx, mesh_1d(ctx), **shard_kw)[1]
        rep_lane = install(lane, ctx, topology=topology, plan_options={"rail_lane": True})
        rep_staged = install(staged, ctx, topology=topology)
        assert_all_tide(rep_lane, 4)
        assert_all_tide(rep_staged, 4)
        for g_lane, g_staged in zip(tide_groups(rep_lane), tide_groups(rep_staged)):
            assert g_lane["fqn"] == g_staged["fqn"]
            assert g_lane["plan"]["rs_rail_lane"] is True and g_staged["plan"]["rs_rail_lane"] is False, \
                (g_lane["plan"], g_staged["plan"])
            assert g_lane["plan"]["rs_landing"] == "none", g_lane["plan"]  # no Level 2 landing on the lane
            assert g_lane["plan"]["rs_staging_bytes"] < g_staged["plan"]["rs_staging_bytes"], \
                (g_lane["fqn"], g_lane["plan"], g_staged["plan"])
        models = (stock, lane, staged)
        opts = [torch.optim.Adam(m.parameters(), lr=1e-2, eps=ADAM_EPS) for m in models]
        g = torch.Generator().manual_seed(seed + 7919 * ctx.rank + (0 if mp_policy is None else 1))
        for s in range(3):
            x = torch.randn(6, 7, generator=g).to(ctx.device)
            losses = []
            for m in models:
                loss = m(x).float().pow(2).mean()
                loss.backward()
                losses.append(loss.detach())
            what = f"{'bf16' if mp_policy else 'fp32'} step {s}"
            compare(losses[1], losses[2], f"{what} loss, lane against staged", None)
            compare_models(staged, lane, f"{what}, lane against staged", None, grads=True)
            compare(losses[0], losses[1], f"{what} loss, lane against stock", tight(ctx, tol))
            compare_models(stock, lane, f"{what}, lane against stock", tight(ctx, tol), grads=True)
            for o in opts:
                o.step()
                o.zero_grad(set_to_none=True)
        compare_models(staged, lane, "parameters, lane against staged", None)
        assert stats(lane).get("reduce_scatters", 0) > 0, stats(lane)
        # The registered groups ran on the lane (the plan summary is the Python side's): the lane
        # sums from its inbox, so the fabric landed nothing, where the staged path lands every row.
        landed = [[a["fabric_stats"]["land_elems"] for a in tide.fsdp.report(m, echo=False)["arenas"]]
                  for m in (lane, staged)]
        assert all(n == 0 for n in landed[0]) and all(n > 0 for n in landed[1]), landed
        printed = [io.StringIO(), io.StringIO()]
        tide.fsdp.report(lane, file=printed[0])
        tide.fsdp.report(staged, file=printed[1])
        assert printed[0].getvalue().count("RS waves") == printed[0].getvalue().count(" on the rail lane") == 4, \
            printed[0].getvalue()
        assert " on the rail lane" not in printed[1].getvalue(), printed[1].getvalue()
        tide.fsdp.uninstall(lane)
        tide.fsdp.uninstall(staged)
    _stock, mt = make_pair(LinearModel, ctx, mesh_1d(ctx))
    try:
        tide.fsdp.install(mt, timeout_s=TIMEOUT_S, topology=topology, plan_options={"rail_lane": "true"})
    except ValueError as e:
        assert "rail_lane" in str(e), e
    else:
        raise AssertionError("plan_options={'rail_lane': 'true'} was accepted")


def passes_fit_the_scratch(ctx):
    """With no passes in plan_options, each group takes the fewest reduce-scatter passes whose
    scratch fits in what the largest group needs at DEFAULT_PASSES (fewer stream operations per
    call, on host-bound steps): here the small blocks and the root run fewer passes than the wide
    block (the widest takes the most), the arena is exactly as large as with DEFAULT_PASSES everywhere, and training matches
    the reference with either plan."""
    from tide.fsdp.install import DEFAULT_PASSES

    def build():
        return Model([Block(), Block(h=160), Block()])

    _ms, _mt, rep, _st = train(ctx, build, expect_groups=4)
    passes = {g["fqn"]: g["plan"]["rs_passes"] for g in tide_groups(rep)}
    # (Staging rounds to whole chunks, so even the wide block may fit in fewer passes.)
    assert passes["blocks.1"] == max(passes.values()) and passes["blocks.0"] < passes["blocks.1"], passes
    assert passes["<root>"] < DEFAULT_PASSES, passes
    _ms, _mt, fixed, _st = train(ctx, build, expect_groups=4, install_kw={"plan_options": {"passes": DEFAULT_PASSES}})
    assert all(g["plan"]["rs_passes"] == DEFAULT_PASSES for g in tide_groups(fixed)), fixed
    assert [a["arena_bytes"] for a in rep["arenas"]] == [a["arena_bytes"] for a in fixed["arenas"]], \
        (rep["arenas"], fixed["arenas"])


def integer_exact_bf16(ctx):
    """bf16 parameters, integer values: exact in bf16 too (AVG by 2 or 4)."""
    train(ctx, LinearModel, integer=True, dtype=torch.bfloat16, tol=None, opt="sign",
          loss_fn=int_loss, steps=2, expect_groups=3)


def gradient_accumulation(ctx):
    """Three micro-batches per step: reduce every micro-batch (accumulating
    into the sharded gradients), then with sync only on the last one."""
    train(ctx, transformer, micro=3, expect_groups=4)
    train(ctx, transformer, micro=3, no_sync_first=True, mode="slot-reuse", expect_groups=4)


def gradient_accumulation_bf16_no_sync(ctx):
    """bf16 compute, fp32 reduce dtype, no sync on the first micro-batches:
    FSDP2 accumulates fp32 unsharded gradients, which TIDE reduce-scatters
    with the group's second (fp32-gradient) plan, in place even in
    Slot-Reuse (they do not fit the bf16 landing)."""
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    _, _, rep, st = train(ctx, transformer, micro=2, no_sync_first=True, mp_policy=mp_policy, tol=BF16,
                          expect_groups=4, mode="slot-reuse")
    assert all(g["grad_dtypes"] == ["bfloat16", "float32"] for g in tide_groups(rep)), rep
    assert st.get("rs_in_place", 0) > 0 and not st.get("rs_stock"), st
    # The fp32 plan takes twice the passes: its staging is the bf16 plan's (up to chunk rounding), not twice it.
    for g in tide_groups(rep):
        (extra,) = g["plan"]["extra_rs_staging_bytes"]
        assert extra < 2 * g["plan"]["rs_staging_bytes"], g["plan"]


class AuxHeadModel(Model):
    """An auxiliary head (an FSDP group of its own) beside the output, run on
    every rank (its gather is collective), whose loss counts where `aux_used`
    says (set per micro-batch and rank)."""

    aux_used = True

    def __init__(self):
        super().__init__([Block() for _ in range(2)])
        self.aux = nn.Linear(24, 3)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        loss, aux = self.out(self.norm(x)).float().pow(2).mean(), self.aux(x).float().pow(2).mean()
        return loss + aux if self.aux_used else loss


def gradient_dtypes_differ_between_ranks(ctx):
    """bf16 compute, fp32 reduce dtype, sync off on the first micro-batch,
    whose auxiliary loss counts on rank 0 only: FSDP2 then holds fp32
    accumulated gradients for the head on rank 0 and bf16 ones elsewhere.
    Stock casts both into one fp32 reduce-scatter; TIDE once chose its plan
    from each rank's own gradient dtype (the fp32 plan on rank 0, the bf16
    plan elsewhere: a timeout, or wrong gradients where the plans' passes
    matched). Every rank now takes the fp32 plan, upcasting bf16 gradients;
    also when TIDE is installed again between the micro-batches (uninstall
    and install, or a setter that lays it out again), whose new groups find
    those gradients already there. (A rank whose group mixes the two dtypes
    fails in stock FSDP2 itself.)"""
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)

    def shard_head_apart(m, mesh):
        for module in (*m.blocks, m.aux):
            fully_shard(module, mesh=mesh, mp_policy=mp)
        return fully_shard(m, mesh=mesh, mp_policy=mp)

    def reinstall(m, options):
        assert tide.fsdp.uninstall(m)
        install(m, ctx, **options)

    def relayout(m, options):
        m.blocks[1].set_reshard_after_forward(False)  # (out of the ring: TIDE lays out again)

    cases = [("in-place", None, None), ("slot-reuse", 64, None),  # 64: both plans take the same passes
             ("in-place", None, reinstall), ("slot-reuse", None, relayout)]
    for mode, passes, between in cases:
        ms, mt = make_pair(AuxHeadModel, ctx, mesh_1d(ctx), shard_fn=shard_head_apart)
        options = dict(mode=mode, timeout_s=30.0, **({} if passes is None else {"plan_options": {"passes": passes}}))
        assert_all_tide(install(mt, ctx, **options), 4)
        opts = optimizers(ms, mt, "sgd", 0.05)
        for step in range(2):
            xs = batches(ctx, 2, seed=60 + step)
            losses = []
            for m in (ms, mt):
                total = []
                for micro, x in enumerate(xs):
                    last = micro == len(xs) - 1
                    if last and between is not None:
                        if m is mt:
                            between(m, options)
                        elif between is relayout:  # (stock takes the same setting)
                            relayout(m, options)
                    m.set_requires_gradient_sync(last)
                    m.aux_used = last or ctx.rank == 0
                    loss = m(x)
                    loss.backward()
                    total.append(loss.detach())
                losses.append(torch.stack(total))
            compare_and_step(ms, mt, opts, losses, f"{mode} step {step}", tight(ctx, BF16))
        if between is relayout:
            assert any("laying TIDE out again" in m for m in ctx.logs.messages(logging.WARNING)), "no relayout"
        if ctx.rank != 0:  # (the head had no gradient in the no-sync backward here)
            assert stats(mt).get("rs_grads_widened", 0) > 0, stats(mt)
        assert not stats(mt).get("rs_stock"), stats(mt)
        assert tide.fsdp.uninstall(mt)


def frozen_parameters(ctx):
    """A frozen parameter in a TIDE group: FSDP2 reduce-scatters only the
    others; TIDE feeds zeros for it and packs the rest as FSDP2 does."""
    def build():
        m = transformer()
        m.blocks[1].norm.weight.requires_grad_(False)
        m.blocks[1].fc1.bias.requires_grad_(False)
        return m
    for mode in ("in-place", "slot-reuse"):
        _, mt, _, st = train(ctx, build, expect_groups=4, mode=mode)
        assert st.get("rs_partial", 0) > 0, st
        # Missing on every rank by construction: no host wait checks them per call.
        assert not st.get("rs_unused_checks"), st
        assert mt.blocks[1].norm.weight.grad is None


class NormOnSomeRanks(Model):
    """The root's final norm runs on the ranks in `norm_ranks` only (None: on
    every rank), so its parameters get gradients there only."""

    norm_ranks: set[int] | None = None

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        if self.norm_ranks is None or dist.get_rank() in self.norm_ranks:
            x = self.norm(x)
        return self.out(x)


def ranks_disagree_on_unused_params(ctx):
    """Parameters with gradients on some ranks only, without
    set_reduce_scatter_unused_params(True). Stock FSDP2 then reduce-scatters
    lists of different sizes and fails; TIDE's reduce-scatter has the
    group's fixed layout and completes, and FSDP2 would drop the reduced
    shard on the ranks without the gradient (their parameters drifting from
    the others' silently), so such a rank raises, naming the parameters and
    the setter. Unused on every rank (the same lists everywhere) trains as
    stock, as it does with the setter. (Torch 2.11 has neither the setter nor
    reset_iter_state, without which FSDP2 cannot go on after the failed
    backward: those parts are skipped there.)"""
    build = lambda: NormOnSomeRanks([Block() for _ in range(2)])  # noqa: E731
    last = ctx.world - 1
    has_setter = hasattr(FSDPModule, "set_reduce_scatter_unused_params")
    for unused_params in (True, False) if has_setter else (False,):
        ms, mt = make_pair(build, ctx, mesh_1d(ctx))
        if unused_params:
            for m in (ms, mt):
                m.set_reduce_scatter_unused_params(True)
        assert_all_tide(install(mt, ctx), 3)
        opts = optimizers(ms, mt, "adam", 1e-2)
        tol = tight(ctx, FP32)
        ms.norm_ranks = mt.norm_ranks = set()  # unused on every rank
        step_both(ms, mt, opts, batches(ctx, 1, seed=70), tol=tol, what=f"unused everywhere ({unused_params})")
        assert (stats(mt).get("rs_partial", 0) > 0) != unused_params, stats(mt)
        ms.norm_ranks = mt.norm_ranks = set(range(last))  # unused on the last rank only
        if unused_params:  # zeros from the last rank, as stock
            step_both(ms, mt, opts, batches(ctx, 1, seed=71), tol=tol, what="unused on one rank, with the setter")
        else:  # (stock would fail in gloo: TIDE alone)
            if not hasattr(mt, "reset_iter_state"):
                tide.fsdp.uninstall(mt)
                raise ScenarioSkipped(f"torch {torch.__version__} cannot reset FSDP2 after a failed backward")
            raised = None
            try:
                mt(batches(ctx, 1, seed=71)[0]).float().pow(2).mean().backward()
            except RuntimeError as e:
                raised = str(e)

            def check():
                if ctx.rank != last:
                    assert raised is None, raised
                    return
                assert raised is not None, "the rank without the norm's gradients did not raise"
                for want in ("'norm.weight'", "'norm.bias'", "set_reduce_scatter_unused_params(True)"):
                    assert want in raised, raised
            agree(check)
            mt.reset_iter_state()  # FSDP2's recovery after a failed step (torch 2.13)
            for m, opt in zip((ms, mt), opts):
                opt.zero_grad(set_to_none=True)
                m.norm_ranks = None
            step_both(ms, mt, opts, batches(ctx, 1, seed=72), tol=tol, what="after the failure")
        tide.fsdp.uninstall(mt)


def activation_checkpointing(ctx):
    """Activations recomputed in backward: each block's forward runs a second
    time between its pre-backward all-gather and its reduce-scatter, reading
    the ring slot its parameters were gathered into; with the checkpoint
    inside the model's forward and with checkpoint_wrapper modules, both
    modes, fp32 and bf16 mixed precision; results as stock's."""
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for build in (checkpointed_transformer, checkpoint_wrapped_transformer):
        for mode in ("in-place", "slot-reuse"):
            _, _, rep, st = train(ctx, build, expect_groups=5, mode=mode)
            assert st["all_gathers"] >= 3 * 9, st  # forward and backward gathers of 4 blocks, 3 steps
        train(ctx, build, expect_groups=5, mp_policy=mp_policy, tol=BF16)


class _RegionCheckpointedModel(Model):
    """Model whose first `span` blocks run as one activation-checkpointed region (non-reentrant
    torch.utils.checkpoint around a function calling them), the rest as usual."""
    span = 3

    def _region(self, x):
        for b in list(self.blocks)[:self.span]:
            x = b(x)
        return x

    def forward(self, x):
        x = torch.utils.checkpoint.checkpoint(self._region, self.inp(x), use_reentrant=False)
        for b in list(self.blocks)[self.span:]:
            x = b(x)
        return self.out(self.norm(x))


def checkpointed_region_of_several_blocks(ctx):
    """One checkpointed region over several FSDP blocks: in backward FSDP2 gathers the region's
    last block, then the recompute runs every block of it, keeping all unsharded until their
    backward. Two blocks fit the ring's two slots and train as stock; three cannot, and the first
    backward stops with a RegionConflict that names the recompute and the way out (it once blamed
    the module order); install(ring=False) trains that model as stock, bit for bit."""
    if not hasattr(FSDPModule, "reset_iter_state"):
        raise ScenarioSkipped(f"torch {torch.__version__} cannot reset FSDP2 after a failed backward")

    def build(span):
        def make():
            m = _RegionCheckpointedModel([Block() for _ in range(4)])
            m.span = span
            return m
        return make
    for span, ring in ((2, True), (3, False)):
        ms, mt = make_pair(build(span), ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, ring=ring), 5)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        for s in range(2):
            step_both(ms, mt, opts, batches(ctx, 1, seed=130 + s), tol=tight(ctx, FP32),
                      what=f"region of {span} blocks, ring={ring}, step {s}")
        tide.fsdp.uninstall(mt)
    _, mt = make_pair(build(3), ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 5)
    loss = mt(batches(ctx, 1, seed=140)[0]).float().pow(2).mean()
    try:
        loss.backward()
    except RegionConflict as e:
        assert "recomputed inside the backward" in str(e) and "ring=False" in str(e), e
    else:
        raise AssertionError("a checkpointed region of three blocks fit the ring's two slots")
    del loss
    mt.reset_iter_state()
    tide.fsdp.uninstall(mt)


def compiled_blocks(ctx):
    """Blocks compiled with torch.compile before fully_shard (torchtitan's
    way): FSDP2's hooks run around the compiled forwards, TIDE gathers into
    the parameters the compiled graphs read. aot_eager on CPU (dynamo and
    AOTAutograd, no C++ toolchain needed), inductor on GPUs; both modes.
    Then the whole model compiled after install."""
    backend = "aot_eager" if device_type(ctx) == "cpu" else "inductor"

    def build():
        m = transformer(3)
        for b in m.blocks:
            b.compile(backend=backend)
        return m
    for mode in ("in-place", "slot-reuse"):
        train(ctx, build, expect_groups=4, mode=mode, tol=FP32_LOOSE)

    # The whole model compiled after install (dynamo runs FSDP2's hooks outside its graphs).
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 4)
    cs, ct = torch.compile(ms, backend=backend), torch.compile(mt, backend=backend)
    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(3):
        step_both(cs, ct, opts, batches(ctx, 1, seed=s), tol=FP32, what=f"compiled model step {s}")
    assert stats(mt)["reduce_scatters"] > 0
    tide.fsdp.uninstall(mt)


def root_only(ctx):
    """fully_shard on the root alone: one group with every parameter, in a
    region of its own; both modes."""
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx), shard_fn=lambda m, mesh: fully_shard(m, mesh=mesh))
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 1)
        assert rep["groups"][0]["region"] == "pinned:<root>", rep["groups"]
        # SGD, not Adam: on GPUs cuBLAS may sum a near-zero gradient in another order for
        # parameters at other addresses, and Adam's first step turns a last-bit difference
        # there into a visible one (2 H200s, session 9: 1 of 432 elements off by 4e-5).
        opts = optimizers(ms, mt, "sgd", 0.05)
        for s in range(3):
            step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"{mode} step {s}")
        tide.fsdp.uninstall(mt)


def explicit_forward_prefetch(ctx):
    """set_modules_to_forward_prefetch one block ahead (FSDP2's documented
    pattern): block i's pre-forward gathers block i+1 into the other ring
    slot while block i still uses its own; as stock, both modes."""
    def prefetch_next(m):
        blocks = list(m.blocks)
        for a, b in zip(blocks, blocks[1:]):
            a.set_modules_to_forward_prefetch([b])
    for mode in ("in-place", "slot-reuse"):
        train(ctx, lambda: transformer(4), expect_groups=5, mode=mode, configure=prefetch_next)


def user_unshard_for_eval(ctx):
    """The user gathers the whole model for a no-grad evaluation
    (model.unshard(), then reshard()) between training steps: the root's
    unshard gathers only the root group; the blocks gather in their forward.
    Then a forward under inference_mode in eval mode, and training goes on."""
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 4)
    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(2):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"step {s}")
        x = batches(ctx, 1, seed=50 + s)[0]
        ys = []
        for m in (ms, mt):
            m.unshard()
            with torch.no_grad():
                ys.append(m(x))
            m.reshard()
        compare(ys[0], ys[1], f"eval {s}", tight(ctx, FP32))
        ys = []
        for m in (ms, mt):  # and under inference_mode, in eval mode
            m.eval()
            with torch.inference_mode():
                ys.append(m(x).clone())
            m.train()
        compare(ys[0], ys[1], f"inference {s}", tight(ctx, FP32))
    step_both(ms, mt, opts, batches(ctx, 1, seed=9), tol=tight(ctx, FP32), what="step after inference")
    assert stats(mt)["all_gathers"] > 0
    tide.fsdp.uninstall(mt)


def unshard_every_module(ctx):
    """The user unshards every FSDP module at once (FSDPModule.unshard(),
    e.g. to read the full weights), waits, then reshards. With one region per
    group (ring=False) TIDE holds them all, as stock does. In the ring a slot
    holds one group at a time: the second group of a slot raises
    RegionConflict naming unshard(), both with the first one's gather pending
    (async) and with it done (before, a pending gather of the user's was
    dropped as a stale prefetch and its parameters silently stayed sharded).
    After resharding every module, training goes on as stock's."""
    for ring in (False, True):
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, ring=ring), 4)
        opts = optimizers(ms, mt, "adam", 1e-2)
        tol = tight(ctx, FP32)
        step_both(ms, mt, opts, batches(ctx, 1, seed=60), tol=tol, what=f"ring={ring} step 0")
        for async_op in (True, False):
            full = []
            for name, m in (("stock", ms), ("tide", mt)):
                try:
                    handles = [mod.unshard(async_op=async_op) for mod in fsdp_modules(m)]
                    for h in handles:
                        if h is not None:
                            h.wait()
                    full.append({n: p.detach().clone() for n, p in m.named_parameters()})
                except RegionConflict as e:
                    assert name == "tide" and ring, (name, ring, e)
                    assert "FSDPModule.unshard()" in str(e) and "ring=False" in str(e), e
                    full.append(None)
                for mod in fsdp_modules(m):
                    mod.reshard()
            what = f"ring={ring} async_op={async_op}"
            if ring:
                assert full[1] is None, f"{what}: every group unsharded in a two-slot ring"
            else:
                assert sorted(full[0]) == sorted(full[1]), what
                for n in full[0]:
                    assert not isinstance(full[1][n], DTensor), f"{what}: '{n}' stayed sharded"
                    compare(full[0][n], full[1][n], f"{what}: {n}", tol)
        step_both(ms, mt, opts, batches(ctx, 1, seed=61), tol=tol, what=f"ring={ring} after the unshards")
        tide.fsdp.uninstall(mt)


def gradient_clipping(ctx):
    """clip_grad_norm_ over the sharded gradients TIDE wrote (a norm all-reduce
    of DTensor shards) before each step: the same total norm and clipped
    gradients as stock."""
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 4)
    opts = optimizers(ms, mt, "adam", 1e-2)
    tol = tight(ctx, FP32)
    for s in range(3):
        x = batches(ctx, 1, seed=s)[0]
        norms = []
        for m in (ms, mt):
            m(x).pow(2).mean().backward()
            norms.append(torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=0.05).full_tensor())
        assert norms[0].item() > 0.05, norms  # the clip acts
        compare(norms[0], norms[1], f"step {s} total norm", tol)
        # The clipped gradients themselves: Adam's update hardly depends on a uniform scale, so
        # the parameters after the step alone would not show a clip that missed TIDE's gradients.
        compare_models(ms, mt, f"step {s} clipped", tol, grads=True)
        for o in opts:
            o.step()
            o.zero_grad()
        compare_models(ms, mt, f"step {s}", tol)
    st = stats(mt)  # TIDE reduced the gradients that were clipped (a stock call would match as well)
    assert st.get("reduce_scatters", 0) > 0 and not st.get("rs_stock"), st
    tide.fsdp.uninstall(mt)


def params_smaller_than_world(ctx):
    """Parameters with fewer elements than ranks (a gate of 2, a scale of 1):
    empty shards on some ranks, zero-byte copies; both modes, and bf16 mixed
    precision."""
    build = lambda: Model([TinyParamBlock() for _ in range(3)])  # noqa: E731
    for mode in ("in-place", "slot-reuse"):
        train(ctx, build, expect_groups=4, mode=mode)
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    train(ctx, build, expect_groups=4, mp_policy=mp_policy, tol=BF16)


def conditional_execution(ctx):
    """Blocks out of module order: one skipped in some steps, one run twice,
    all reversed or shuffled, and ring-mates (blocks 0 and 2, 1 and 3) run in
    turn. Groups that share a ring slot then run back to back, and FSDP2's
    backward prefetch asks for one while the other still holds the slot.
    The prefetch is deferred (the group gathers at its own unshard) and
    every step matches stock, in both modes. Uninstalling gives FSDP2 its
    own _prefetch_unshard back. (The orders after the first six were a
    session-43 probe's, which found them exact; now they stay so.)"""
    build = lambda: OrderedBlocksModel([Block() for _ in range(4)])  # noqa: E731
    orders = [None, (0, 2, 3), None, (0, 1, 3), (1, 2, 3), (0, 1, 2, 1, 3),
              (3, 2, 1, 0), (2, 0, 3, 1), (0, 2, 0), (3, 1, 3, 1), None]
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(build, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        opts = optimizers(ms, mt, "adam", 1e-2)
        for s, order in enumerate(orders):
            ms.order = mt.order = order
            step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"{mode} step {s} {order}")
        assert stats(mt).get("prefetch_deferred", 0) >= 3, stats(mt)
        assert tide.fsdp.uninstall(mt)
    cls = guards.internals().param_group.FSDPParamGroup
    assert not getattr(cls.__dict__["_prefetch_unshard"].__func__, "_tide_dispatch", False)


def two_models(ctx):
    """Two FSDP2 models with TIDE in one process (a student In-Place, a
    teacher Slot-Reuse), trained in turn, the teacher also run without
    grad between the student's steps; uninstalling one leaves the other on
    TIDE."""
    ms1, mt1 = make_pair(transformer, ctx, mesh_1d(ctx))
    ms2, mt2 = make_pair(lambda: transformer(2), ctx, mesh_1d(ctx))
    assert_all_tide(install(mt1, ctx), 4)
    assert_all_tide(install(mt2, ctx, mode="slot-reuse"), 3)
    o1, o2 = optimizers(ms1, mt1, "adam", 1e-2), optimizers(ms2, mt2, "adam", 1e-2)
    tol = tight(ctx, FP32)
    for s in range(3):
        step_both(ms1, mt1, o1, batches(ctx, 1, seed=s), tol=tol, what=f"student step {s}")
        step_both(ms2, mt2, o2, batches(ctx, 1, seed=10 + s), tol=tol, what=f"teacher step {s}")
        with torch.no_grad():
            x = batches(ctx, 1, seed=20 + s)[0]
            compare(ms2(x), mt2(x), f"teacher forward {s}", tol)
    assert tide.fsdp.uninstall(mt1)
    before = stats(mt2)["reduce_scatters"]
    step_both(ms2, mt2, o2, batches(ctx, 1, seed=30), tol=tol, what="teacher after the student's uninstall")
    assert stats(mt2)["reduce_scatters"] > before
    tide.fsdp.uninstall(mt2)


class TokenLM(nn.Module):
    """Token embedding, blocks, output projection; with `tie`, the projection
    is the embedding's weight (tie_word_embeddings): one parameter used
    twice, in the root group."""

    def __init__(self, vocab: int = 11, d: int = 24, n_blocks: int = 3, tie: bool = False):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(n_blocks)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=not tie)
        if tie:
            self.head.weight = self.emb.weight

    def forward(self, tokens):
        x = self.emb(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def token_batch(ctx, step: int, vocab: int = 11) -> torch.Tensor:
    g = data_generator(ctx, 100 * step)
    return torch.randint(0, vocab, (6, 5), generator=g).to(ctx.device)


def embedding_not_unsharded_in_backward(ctx):
    """The embedding in its own group with set_unshard_in_backward(False)
    (its backward needs no weights): the group is gathered in forward only,
    and its gradient is reduce-scattered from where autograd left it; both
    modes, as stock."""
    def shard_with_embedding_group(m, mesh):
        fully_shard(m.emb, mesh=mesh)
        m.emb.set_unshard_in_backward(False)
        return shard(m, mesh)

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(TokenLM, ctx, mesh_1d(ctx), shard_fn=shard_with_embedding_group)
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        opts = optimizers(ms, mt, "adam", 1e-2)
        for s in range(3):
            step_both(ms, mt, opts, [token_batch(ctx, s)], tol=tight(ctx, FP32), what=f"{mode} step {s}")
        tide.fsdp.uninstall(mt)


def tied_embeddings(ctx):
    """A tied embedding / output weight in the root group: its gradient sums
    both uses before the reduce-scatter, as stock; both modes."""
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(lambda: TokenLM(tie=True), ctx, mesh_1d(ctx))
        assert mt.head.weight is mt.emb.weight
        assert_all_tide(install(mt, ctx, mode=mode), 4)
        opts = optimizers(ms, mt, "adam", 1e-2)
        for s in range(3):
            step_both(ms, mt, opts, [token_batch(ctx, s)], tol=tight(ctx, FP32), what=f"{mode} step {s}",
                      loss_fn=lambda y: nn.functional.cross_entropy(y.flatten(0, 1).float(),
                                                                    torch.arange(y.shape[0] * y.shape[1],
                                                                                 device=y.device) % 11))
        assert mt.head.weight is mt.emb.weight
        tide.fsdp.uninstall(mt)


def autocast_forward_without_mixed_precision(ctx):
    """torch.autocast(bf16) around the forward of an fp32 model with no
    MixedPrecisionPolicy (the AMP way, not FSDP2's): the gathered
    parameters stay fp32 and autocast casts them per op inside the blocks,
    so the gradients are fp32 and reduce-scattered as fp32. Both modes, and
    a no-grad evaluation under autocast after each step; as stock."""
    dev = device_type(ctx)

    def autocast_forward(model, x):
        with torch.autocast(dev, dtype=torch.bfloat16):
            return model(x)

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, mode=mode), 4)
        opts = optimizers(ms, mt, "adam", 1e-2)
        tol = tight(ctx, BF16)
        # The premise: autocast does engage (bf16 outputs of the fp32 model).
        x = batches(ctx, 1, seed=80)[0]
        with torch.no_grad():
            assert autocast_forward(ms, x).dtype == torch.bfloat16
        for s in range(3):
            step_both(ms, mt, opts, batches(ctx, 1, seed=81 + s), tol=tol, forward=autocast_forward,
                      what=f"{mode} step {s}")
            assert all(local(p.grad if p.grad is not None else p).dtype == torch.float32 for p in mt.parameters())
            with torch.no_grad():
                x = batches(ctx, 1, seed=90 + s)[0]
                compare(autocast_forward(ms, x), autocast_forward(mt, x), f"{mode} eval after step {s}", tol)
        st = stats(mt)
        assert st.get("all_gathers", 0) > 0 and st.get("reduce_scatters", 0) > 0, st
        assert tide.fsdp.uninstall(mt)


class ReentrantCheckpointedModel(Model):
    """Every block under torch.utils.checkpoint(use_reentrant=True): the
    block's forward runs under no_grad (FSDP2's pre-forward sees grad
    disabled), and again, with grad, inside the checkpoint's backward, where
    FSDP2 gathers the block again and registers its hooks on the recomputed
    graph."""

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=True)
        return self.out(self.norm(x))


def activation_checkpointing_reentrant(ctx):
    """Reentrant activation checkpointing (activation_checkpointing covers
    the non-reentrant kind): both modes, fp32 and bf16 mixed precision; as
    stock."""
    build = lambda: ReentrantCheckpointedModel([Block() for _ in range(4)])  # noqa: E731
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for mode in ("in-place", "slot-reuse"):
        _, _, _, st = train(ctx, build, expect_groups=5, mode=mode)
        assert st["all_gathers"] >= 3 * 9, st  # forward and recompute gathers of 4 blocks, 3 steps
    train(ctx, build, expect_groups=5, mp_policy=mp_policy, tol=BF16)


def frozen_middle_block(ctx):
    """Every parameter of a middle block frozen (a frozen adapter or layer):
    FSDP2 still gathers it in forward and backward (its input's gradient
    flows through it) but reduce-scatters nothing for it. Both modes, with
    and without gradient accumulation without sync; as stock, whose frozen
    block keeps no gradient (gradients zeroed in place after each step, so
    the others' stay as tensors and the frozen ones' None can be seen)."""
    def build():
        m = transformer(4)
        m.blocks[1].requires_grad_(False)
        return m
    for mode in ("in-place", "slot-reuse"):
        for micro, no_sync_first in ((1, False), (2, True)):
            what = f"{mode} micro={micro} no_sync_first={no_sync_first}"
            ms, mt = make_pair(build, ctx, mesh_1d(ctx))
            assert_all_tide(install(mt, ctx, mode=mode), 5)
            opts = optimizers(ms, mt, "adam", 1e-2)
            for s in range(3):
                step_both(ms, mt, opts, batches(ctx, micro, seed=85 + s), tol=tight(ctx, FP32), micro=micro,
                          no_sync_first=no_sync_first, set_to_none=False, what=f"{what} step {s}")
                for m in (ms, mt):
                    assert all(p.grad is None for p in m.blocks[1].parameters()), f"{what}: the frozen block got gradients"
                    assert all(p.grad is not None for p in m.blocks[0].parameters()), f"{what}: none reached blocks.0"
            st = stats(mt)
            assert st.get("all_gathers", 0) > 0 and st.get("reduce_scatters", 0) > 0, st
            assert tide.fsdp.uninstall(mt)
