"""Scenarios: what install takes over and what it leaves stock, with the reason (fallbacks,
guards, refusals), FSDP2's semantics kept (reduce dtypes, divide factors, hooks, state dicts and
checkpoints), and the install life cycle (uninstall, overlapping installs, other wrappers, a
failed forward)."""

from __future__ import annotations

import copy
import dataclasses
import gc
import logging
import os
import weakref

import numpy as np
import tide.fsdp
import torch
import torch.distributed.checkpoint as dcp
from fsdp_harness import ScenarioSkipped
from fsdp_scenario_kit import (
    ADAM_EPS, BF16, Block, FP32, ManyBlock, MixedBlock, Model, OrderedBlocksModel, Shard1Block, TIMEOUT_S, TinyParamBlock, agree, assert_all_tide, check_tide_ran,
    batches, compare, compare_and_step, compare_models, device_type, fsdp_modules, fsdp_params_of, install, local, make_pair, mesh_1d, mesh_hsdp,
    optimizers, shard, stats, prefetch_wrapper_refused, step_both, tide_groups, tight, train, transformer,
)
from tide.fsdp import dispatch, groups, guards, registry
from tide.fsdp.backend import default_topology
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard


def fallbacks(ctx):
    """A Shard(1) group, a mixed-dtype group and a 257-parameter group stay
    stock, each with one logged line naming its reason; training matches."""
    def build():
        return Model([Block(), Shard1Block(), MixedBlock(), ManyBlock(), Block()])

    def placement(block):
        if isinstance(block, Shard1Block):
            return lambda p: Shard(1) if p.ndim == 2 else None
        return None

    ms, mt = make_pair(build, ctx, mesh_1d(ctx), placement=placement)
    rep = install(mt, ctx)
    status = {g["fqn"]: (g["status"], g["reason"]) for g in rep["groups"]}
    assert status == {"<root>": ("tide", None), "blocks.0": ("tide", None), "blocks.1": ("stock", "shard_dim_1"),
                      "blocks.2": ("stock", "mixed_dtypes"), "blocks.3": ("stock", "too_many_params"),
                      "blocks.4": ("tide", None)}, status
    lines = [m for m in ctx.logs.messages(logging.WARNING) if "stays on stock FSDP2" in m]
    for fqn, reason in (("blocks.1", "shard_dim_1"), ("blocks.2", "mixed_dtypes"), ("blocks.3", "too_many_params")):
        mine = [m for m in lines if f"'{fqn}'" in m]
        assert len(mine) == 1 and reason in mine[0], (fqn, lines)
    # Installed before the first forward, the parameters are named from their own module.
    assert "parameter 'blocks.1.fc1.weight' is Shard(1)" in " ".join(lines), lines
    assert len(lines) == 3, lines
    opts = [torch.optim.Adam(ms.parameters(), lr=1e-2, eps=ADAM_EPS), torch.optim.Adam(mt.parameters(), lr=1e-2, eps=ADAM_EPS)]
    for s in range(3):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"step {s}")
    assert stats(mt)["reduce_scatters"] > 0
    tide.fsdp.uninstall(mt)


def reduce_dtype_choices(ctx):
    """A bf16 reduce dtype for fp32 gradients stays stock, one logged line per
    group (stock rounds every gradient to bf16 and reduces in bf16, TIDE
    would reduce in fp32: other bits), and trains as stock. bf16 compute with
    fp32 reduction and many passes: the fp32 gradients accumulated without
    sync get a plan within the plan's bound on passes (twice the option once
    asked for more), and training matches stock."""
    narrow = MixedPrecisionPolicy(reduce_dtype=torch.bfloat16)
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx), mp_policy=narrow)
    rep = install(mt, ctx)
    assert {(g["status"], g["reason"]) for g in rep["groups"]} == {("stock", "reduce_dtype_narrower")}, rep["groups"]
    lines = [m for m in ctx.logs.messages(logging.WARNING) if "stays on stock FSDP2" in m]
    assert len(lines) == len(rep["groups"]) and all("reduce_dtype_narrower" in m for m in lines), lines
    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(2):
        step_both(ms, mt, opts, batches(ctx, 2, seed=s), tol=tight(ctx, FP32), micro=2, no_sync_first=True,
                  what=f"bf16 reduce, step {s}")
    tide.fsdp.uninstall(mt)

    mixed = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    _, _, rep, st = train(ctx, transformer, mp_policy=mixed, tol=BF16, expect_groups=4, micro=2, no_sync_first=True,
                          install_kw={"plan_options": {"passes": 40}})
    for g in tide_groups(rep):
        assert g["grad_dtypes"] == ["bfloat16", "float32"], g
    assert st.get("rs_stock", 0) == 0, st


def state_dict_and_checkpoint(ctx):
    """get_model_state_dict, its deepcopy, a DCP save/load round trip, and
    install/uninstall/install, with training matching stock throughout."""
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    install(mt, ctx)
    opts = [torch.optim.Adam(ms.parameters(), lr=1e-2, eps=ADAM_EPS), torch.optim.Adam(mt.parameters(), lr=1e-2, eps=ADAM_EPS)]
    step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tight(ctx, FP32), what="step 0")
    unsharded_ids = [id(fp._unsharded_param) for fp in fsdp_params_of(mt)]

    sd = get_model_state_dict(mt)
    sd_copy = copy.deepcopy(sd)
    for k in sd:
        compare(sd[k], sd_copy[k], f"deepcopy {k}", None)
        assert local(sd_copy[k]).data_ptr() != local(sd[k]).data_ptr()
    path = os.path.join(ctx.tmp, "ckpt")
    dcp.save(sd, checkpoint_id=path)
    with torch.no_grad():
        for p in mt.parameters():
            p.zero_()
    loaded = get_model_state_dict(mt)
    dcp.load(loaded, checkpoint_id=path)
    set_model_state_dict(mt, loaded)
    compare_models(ms, mt, "after DCP load", None)
    step_both(ms, mt, opts, batches(ctx, 1, seed=1), tol=tight(ctx, FP32), what="step 1")

    # load_state_dict(assign=True) swaps in new sharded Parameters: TIDE adopts their data again.
    for m in (ms, mt):
        m.load_state_dict(copy.deepcopy(get_model_state_dict(m)), assign=True)
    opts = optimizers(ms, mt, "adam", 1e-2)
    before = stats(mt).get("readopted", 0)
    step_both(ms, mt, opts, batches(ctx, 1, seed=5), tol=tight(ctx, FP32), what="step after assign")
    assert stats(mt).get("readopted", 0) > before, stats(mt)
    unsharded_ids = [id(fp._unsharded_param) for fp in fsdp_params_of(mt)]

    # install / uninstall / install
    rep = install(mt, ctx)  # already installed: no-op
    assert_all_tide(rep, 4)
    assert tide.fsdp.uninstall(mt)
    assert not tide.fsdp.report(mt, echo=False)["installed"]
    step_both(ms, mt, opts, batches(ctx, 1, seed=2), tol=tight(ctx, FP32), what="step 2 (stock)")
    assert_all_tide(install(mt, ctx, mode="slot-reuse"), 4)
    step_both(ms, mt, opts, batches(ctx, 1, seed=3), tol=tight(ctx, FP32), what="step 3 (reinstalled)")
    assert [id(fp._unsharded_param) for fp in fsdp_params_of(mt)] == unsharded_ids, "unsharded Parameters re-created"
    copy.deepcopy(get_model_state_dict(mt))
    tide.fsdp.uninstall(mt)
    step_both(ms, mt, opts, batches(ctx, 1, seed=4), tol=tight(ctx, FP32), what="step 4 (stock again)")


def divide_factors(ctx):
    """Custom divide factors (PREMUL_SUM in FSDP2; gloo cannot run it, so the
    reference is stock with sum reduction and a post-divide), and sum
    reduction itself, against stock."""
    for factor, tol in ((4.0, tight(ctx, FP32)), (3.0, FP32)):
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        ms.set_gradient_divide_factor(factor)
        ms.set_force_sum_reduction_for_comms(True)
        mt.set_gradient_divide_factor(factor)
        assert_all_tide(install(mt, ctx), 4)
        opts = [torch.optim.SGD(ms.parameters(), lr=0.05), torch.optim.SGD(mt.parameters(), lr=0.05)]
        for s in range(2):
            step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tol, what=f"factor {factor} step {s}")
        tide.fsdp.uninstall(mt)
    train(ctx, transformer, configure=lambda m: (m.set_gradient_divide_factor(2.0 * ctx.world),
                                                 m.set_force_sum_reduction_for_comms(True)), steps=2)


def hooks(ctx):
    """The all-reduce hook (1-D FSDP: runs on the reduce-scatter output) and
    post-accumulate-grad hooks on sharded parameters behave as stock."""
    counts = [0, 0]

    def make_hook(i):
        def hook(output):
            counts[i] += 1
            output.mul_(0.5)
        return hook

    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    for i, m in enumerate((ms, mt)):
        for module in m.modules():
            if hasattr(module, "set_all_reduce_hook"):
                module.set_all_reduce_hook(make_hook(i))
    seen = [[], []]
    for i, m in enumerate((ms, mt)):
        m.blocks[1].fc1.weight.register_post_accumulate_grad_hook(lambda p, i=i: seen[i].append(local(p.grad).sum()))
    assert_all_tide(install(mt, ctx), 4)
    opts = [torch.optim.Adam(ms.parameters(), lr=1e-2, eps=ADAM_EPS), torch.optim.Adam(mt.parameters(), lr=1e-2, eps=ADAM_EPS)]
    for s in range(2):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"step {s}")
    assert counts[0] == counts[1] > 0, counts
    assert len(seen[0]) == len(seen[1]) == 2, seen
    for a, b in zip(*seen):
        compare(a, b, "post-accumulate hook", tight(ctx, FP32))
    tide.fsdp.uninstall(mt)


def guard_mismatch(ctx):
    """A torch whose internals differ (here: foreach_reduce_scatter_copy_in
    with another signature) leaves FSDP2 stock with one message, no crash."""
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives

    orig = _fsdp_collectives.foreach_reduce_scatter_copy_in

    def other(unsharded_grads, reduce_scatter_input, world_size, extra=None):
        return orig(unsharded_grads, reduce_scatter_input, world_size)

    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    _fsdp_collectives.foreach_reduce_scatter_copy_in = other
    try:
        rep = install(mt, ctx)
        opts = [torch.optim.Adam(ms.parameters(), lr=1e-2, eps=ADAM_EPS), torch.optim.Adam(mt.parameters(), lr=1e-2, eps=ADAM_EPS)]
        step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=None, what="stock step")
    finally:
        _fsdp_collectives.foreach_reduce_scatter_copy_in = orig
    assert not rep["installed"] and rep["reason"] == "torch_internals", rep
    lines = [m for m in ctx.logs.messages(logging.WARNING) if "stays stock" in m]
    assert len(lines) == 1 and "foreach_reduce_scatter_copy_in" in lines[0], lines
    assert not dispatch.active()
    assert not tide.fsdp.uninstall(mt)


def no_ring_no_adopt_explicit_prefetch(ctx):
    """Explicit backward prefetch of two blocks would keep three blocks
    unsharded at once. With the two-slot ring, the prefetch into a slot that
    is still held is deferred to the group's own unshard (one warning naming
    both groups), and training matches stock. An unshard that is not a
    prefetch, into a slot another group holds, raises RegionConflict before
    anything is written. ring=False (one region per group) honours the
    prefetch; adopt=False copies the shards into a buffer each all-gather."""
    from tide.fsdp.all_gather import RegionConflict

    def prefetch_two(m):
        m.blocks[2].set_modules_to_backward_prefetch([m.blocks[1], m.blocks[0]])

    _, _, _, st = train(ctx, transformer, configure=prefetch_two, expect_groups=4, micro=2)
    assert st.get("prefetch_deferred", 0) > 0, st
    lines = [m for m in ctx.logs.messages(logging.WARNING) if "is deferred" in m]
    assert lines and "'blocks.0'" in lines[0] and "'blocks.2' holds the slot" in lines[0], lines

    # The user gathers two groups of one slot at once.
    ms, m1 = make_pair(transformer, ctx, mesh_1d(ctx))
    assert_all_tide(install(m1, ctx), 4)
    step_both(ms, m1, optimizers(ms, m1, "sgd", 1e-2), batches(ctx, 1), tol=tight(ctx, FP32), what="step")
    m1.blocks[0].unshard()
    try:
        m1.blocks[2].unshard()
        raise AssertionError("expected a ring slot conflict")
    except RegionConflict as e:
        assert "'blocks.2' needs it while 'blocks.0'" in str(e) and "ring=False" in str(e), e
    m1.blocks[0].reshard()
    assert tide.fsdp.uninstall(m1)

    _, _, rep, st = train(ctx, transformer, configure=prefetch_two, expect_groups=4, ring=False, adopt=False,
                          micro=2)
    assert all(g["region"].startswith("pinned:") and g["shard_source"] == "copy" for g in rep["groups"]), rep
    assert st.get("ag_in_place", 0) > 0 and not st.get("ag_resident"), st  # one node: copied in place


class _StackBlock(Block):
    """Three parameters summed through torch.stack: autograd hands all three one gradient storage."""

    def __init__(self, d=24):
        super().__init__(d)
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(d) * 0.1) for _ in range(3)])

    def forward(self, x):
        return super().forward(x) + torch.stack(list(self.ps)).sum(0)


def premul_on_shared_gradient_storage(ctx):
    """A gradient divide factor whose inverse is no power of two, on every FSDP module: fp32
    gradients are pre-multiplied, which once ran in place and scaled a storage shared by three
    parameters three times (1/9 of stock's gradient for factor 3, silently). Stock reference:
    force-sum with the post-divide (gloo has no PREMUL_SUM); factor 4 folds into alpha."""
    for factor in (3.0, 6.0, 4.0):
        for mode in ("in-place", "slot-reuse"):
            ms, mt = make_pair(lambda: Model([_StackBlock() for _ in range(2)]), ctx, mesh_1d(ctx))
            for m in fsdp_modules(ms):
                m.set_gradient_divide_factor(factor)
                m.set_force_sum_reduction_for_comms(True)
            for m in fsdp_modules(mt):
                m.set_gradient_divide_factor(factor)
            assert_all_tide(install(mt, ctx, mode=mode), 3)
            step_both(ms, mt, optimizers(ms, mt, "sgd", 0.05), batches(ctx, 1, seed=3), tol=FP32,
                      what=f"factor {factor} {mode}")
            assert tide.fsdp.uninstall(mt)


def prefetches_unmarked(ctx):
    """A torch whose FSDPParamGroup._prefetch_unshard the dispatch cannot wrap
    (guards.check_prefetch_unshard refuses it; here by pretence): prefetches
    are not told from other gathers by the wrapper, and install logs that
    prefetches into a held ring slot raise RegionConflict. FSDP2's default
    prefetch never meets a held slot: both modes train as stock over
    micro-batches, and with the model called twice into one backward after a
    frozen input layer (a prefetch then reshards the first block, which waits
    for its post-backward to the end of the backward). An explicit backward
    prefetch two blocks deep is told from the blocks' own gathers by the
    group whose pre_backward ran last: it
    raises RegionConflict naming both groups (before, it resharded the block
    whose backward was about to run, and autograd failed on an in-place
    modification it did not explain); after reset_iter_state, training without
    it matches stock again."""
    from tide.fsdp import all_gather as _ag
    from tide.fsdp.all_gather import RegionConflict

    def prefetch_two(m):
        m.blocks[2].set_modules_to_backward_prefetch([m.blocks[1], m.blocks[0]])

    with prefetch_wrapper_refused("pretend"):
        for mode in ("in-place", "slot-reuse"):
            _, _, _, st = train(ctx, transformer, mode=mode, expect_groups=4, micro=2)
            assert not st.get("prefetch_deferred"), st
        lines = [m for m in ctx.logs.messages(logging.INFO) if "will raise RegionConflict, not be deferred" in m]
        assert lines and "(pretend)" in lines[-1], lines

        # Two forwards into one backward after a frozen input layer: the first block waits for its
        # post-backward to the end of the backward, while the other call's backward prefetches its
        # ring-mate. It is resharded for that prefetch as for the ring-mate's own gather (the
        # prefetch raised RegionConflict: FSDP sweep seed 2059397194, draw 1, four ranks).
        def frozen_input():
            m = transformer(4)
            m.inp.requires_grad_(False)
            return m

        for mode in ("in-place", "slot-reuse"):
            _, _, _, st = train(ctx, frozen_input, mode=mode, expect_groups=5,
                                forward=lambda model, x: model(x) + model(0.5 * x))
            assert st.get("resharded_in_backward", 0) >= 1, (mode, st)
        if not hasattr(torch.distributed.fsdp.FSDPModule, "reset_iter_state"):
            raise ScenarioSkipped(f"torch {torch.__version__} cannot reset FSDP2 after a failed backward "
                                  "(the default prefetch part passed)")
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx), 4)
        assert not _ag.prefetches_marked
        opts = optimizers(ms, mt, "sgd", 1e-2)
        tol = tight(ctx, FP32)
        step_both(ms, mt, opts, batches(ctx, 1, seed=70), tol=tol, what="before the explicit prefetch")
        prefetch_two(mt)
        try:
            # A zero loss: the gradients autograd accumulated before the failure, which FSDP2
            # keeps on the unsharded parameters past reset_iter_state, add nothing later.
            (mt(batches(ctx, 1, seed=71)[0]).float().pow(2).mean() * 0).backward()
        except RegionConflict as e:
            text = str(e)
            assert "'blocks.0' needs it while 'blocks.2' holds it" in text and "backward prefetch" in text, text
        else:
            raise AssertionError("a backward prefetch into the slot of the block about to run its backward "
                                 "did not raise")
        mt.reset_iter_state()
        mt.zero_grad()
        mt.blocks[2].set_modules_to_backward_prefetch([])
        for step in range(2):
            step_both(ms, mt, opts, batches(ctx, 1, seed=72 + step), tol=tol,
                      what=f"after the refused prefetch and the reset, step {step}")
        assert tide.fsdp.uninstall(mt)


def ignored_params_left_alone(ctx):
    """fully_shard(..., ignored_params=...): FSDP2 neither shards those
    parameters nor reduces their gradients (the user does; here an
    all-reduce average, as DDP would). Ignored: every parameter of each
    block's norm (a module FSDP2 then leaves out entirely) and the root's
    output bias (a module it still manages). install leaves them alone too:
    the groups hold only the managed parameters, the ignored ones keep
    their own storage (not the arena), and training matches stock in both
    modes."""
    import torch.distributed as dist

    def shard_ignoring(m, mesh):
        for b in m.blocks:
            fully_shard(b, mesh=mesh, ignored_params={b.norm.weight, b.norm.bias})
        fully_shard(m, mesh=mesh, ignored_params={m.out.bias})
        return m

    def ignored(m):
        return [m.out.bias] + [p for b in m.blocks for p in b.norm.parameters()]

    def average_ignored_grads(m):
        for p in ignored(m):
            dist.all_reduce(p.grad)
            p.grad.div_(ctx.world)

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx), shard_fn=shard_ignoring)
        storage = [p.untyped_storage().data_ptr() for p in ignored(mt)]
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 4)
        assert {g["fqn"]: g["params"] for g in rep["groups"]} == \
            {"<root>": 5, "blocks.0": 4, "blocks.1": 4, "blocks.2": 4}, rep["groups"]
        # Per-parameter Adam: its fused multi-tensor form refuses plain tensors beside DTensors in one
        # call (on CUDA, where it is the default), for stock alike.
        opts = [torch.optim.Adam(m.parameters(), lr=1e-2, eps=ADAM_EPS, foreach=False) for m in (ms, mt)]
        tol = tight(ctx, FP32)
        for s in range(3):
            x = batches(ctx, 1, seed=s)[0]
            before = stats(mt)
            for m in (ms, mt):
                m(x).float().pow(2).mean().backward()
                average_ignored_grads(m)
            check_tide_ran(before, stats(mt), f"{mode} step {s}")
            compare_models(ms, mt, f"{mode} step {s}", tol, grads=True)
            for o in opts:
                o.step()
                o.zero_grad()
            compare_models(ms, mt, f"{mode} step {s}", tol)
            assert not any(isinstance(p, DTensor) for p in ignored(mt)), "an ignored parameter was sharded"
            assert [p.untyped_storage().data_ptr() for p in ignored(mt)] == storage, "an ignored parameter moved"
        assert tide.fsdp.uninstall(mt)


def shard_group_of_one(ctx):
    """HSDP with shard groups of one rank: nothing to gather or scatter, every
    group stays stock (world_size_1), training as stock."""
    mesh = init_device_mesh(device_type(ctx), (ctx.world, 1), mesh_dim_names=("replicate", "shard"))
    ms, mt = make_pair(transformer, ctx, mesh)
    rep = install(mt, ctx)
    assert not rep["installed"] and {g["reason"] for g in rep["groups"]} == {"world_size_1"}, rep
    lines = [m for m in ctx.logs.messages(logging.WARNING) if "world_size_1" in m]
    assert len(lines) == 4, lines
    opts = optimizers(ms, mt, "adam", 1e-2)
    step_both(ms, mt, opts, batches(ctx, 1), tol=None, what="stock step")
    assert tide.fsdp.uninstall(mt) and not dispatch.active()


def one_rank_stays_stock(ctx):
    """FSDP2 on a single rank (nothing to gather or scatter): every group stays
    stock with reason world_size_1, one warning each, and trains bit for bit as
    stock; uninstall restores nothing and is safe."""
    assert ctx.world == 1, "a one-rank scenario"
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    rep = install(mt, ctx)
    assert not rep["installed"] and {g["reason"] for g in rep["groups"]} == {"world_size_1"}, rep
    assert len([m for m in ctx.logs.messages(logging.WARNING) if "world_size_1" in m]) == 4
    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(2):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=None, what=f"stock step {s}")
    assert tide.fsdp.uninstall(mt) and not dispatch.active()


def wrapped_by_another_tool(ctx):
    """A tool (a profiler, a tracer) wraps FSDP2's foreach_reduce after
    install, so around TIDE's replacement: uninstall leaves that binding to
    it with a warning, and its calls keep reaching FSDP2's original, in
    training that matches stock. Installing again while the tool's binding
    stays is refused (foreign_patch); with FSDP2's own back it works."""
    it = guards.internals()
    torch_original = it.collectives.foreach_reduce
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 4)
    inner = it.param_group.foreach_reduce
    calls = []

    def traced(*a, **k):
        calls.append(1)
        return inner(*a, **k)

    it.param_group.foreach_reduce = traced
    try:
        opts = optimizers(ms, mt, "adam", 1e-2)
        step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tight(ctx, FP32), what="wrapped, TIDE")
        assert tide.fsdp.uninstall(mt) and not dispatch.active()
        rebound = [m for m in ctx.logs.messages(logging.WARNING) if "rebound by someone else" in m]
        assert len(rebound) == 1 and "foreach_reduce" in rebound[0], rebound
        before = len(calls)
        step_both(ms, mt, opts, batches(ctx, 1, seed=1), tol=tight(ctx, FP32), what="wrapped, after uninstall")
        assert len(calls) > before, "the tool's wrapper was bypassed"
        rep = install(mt, ctx)
        assert not rep["installed"] and rep["reason"] == "foreign_patch", rep
        step_both(ms, mt, opts, batches(ctx, 1, seed=2), tol=tight(ctx, FP32), what="wrapped, install refused")
    finally:
        it.param_group.foreach_reduce = torch_original
    assert_all_tide(install(mt, ctx), 4)
    step_both(ms, mt, opts, batches(ctx, 1, seed=3), tol=tight(ctx, FP32), what="installed again")
    assert tide.fsdp.uninstall(mt)


def old_parameters_after_assign_keep_their_storage(ctx):
    """load_state_dict(assign=True) gives FSDP2 new sharded Parameters; the old
    ones, still held (an optimizer built before, a user's list), keep their
    own storage in stock. Adopted, they viewed the resident shard, so the next
    gather copied the new values into them, a write through them reached the
    model, and after uninstall they kept the whole arena alive. Now they get a
    copy of their values when the new shard is adopted (and at uninstall).
    A 1-element parameter leaves some ranks an empty local tensor, which
    still views the arena (it once escaped the copy: 4 ranks on CUDA)."""
    build = lambda: Model([Block(), TinyParamBlock(), Block()])  # noqa: E731
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(build, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, mode=mode), 4)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        step_both(ms, mt, opts, batches(ctx, 1, seed=90), tol=tight(ctx, FP32), what=f"{mode}: before the load")
        old, snapshot = {}, {}
        for name, m in (("stock", ms), ("tide", mt)):
            old[name] = list(m.parameters())
            snapshot[name] = [local(p).clone() for p in old[name]]
            halved = copy.deepcopy(get_model_state_dict(m))
            with torch.no_grad():
                for v in halved.values():
                    local(v).mul_(0.5)
            m.load_state_dict(halved, assign=True)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        step_both(ms, mt, opts, batches(ctx, 1, seed=92), tol=tight(ctx, FP32), what=f"{mode}: after the load")
        assert stats(mt).get("adoptions_detached", 0) > 0, stats(mt)

        def unmoved():
            for name in ("stock", "tide"):
                moved = [i for i, (p, s) in enumerate(zip(old[name], snapshot[name])) if not torch.equal(local(p), s)]
                assert not moved, f"{mode}: {name}'s old Parameters {moved} changed after the load and a step"
        agree(unmoved)
        with torch.no_grad():  # a write through the old Parameters must not reach either model
            for name in ("stock", "tide"):
                for p in old[name]:
                    local(p).zero_()
        compare_models(ms, mt, f"{mode}: after writing through the old Parameters", tight(ctx, FP32))
        step_both(ms, mt, opts, batches(ctx, 1, seed=93), tol=tight(ctx, FP32), what=f"{mode}: a step after the write")
        owner = weakref.ref(registry.installed[mt].contexts[0].owner)
        assert tide.fsdp.uninstall(mt)
        gc.collect()

        def arena_freed():
            assert owner() is None, f"{mode}: the old Parameters kept the arena alive after uninstall"
        agree(arena_freed)
        step_both(ms, mt, opts, batches(ctx, 1, seed=94), tol=tight(ctx, FP32), what=f"{mode}: stock after uninstall")


def assign_of_a_remapped_state_dict(ctx):
    """load_state_dict(assign=True) of a state dict taken while installed,
    its keys remapped (blocks shifted across groups; two parameters of a
    group swapped, also with keep_vars): its tensors view other parameters'
    resident shards, which adopting the new Parameters one by one overwrote
    before they were read (a block got the values of the one two before it;
    swapped parameters both got one value). Compared after a forward, before
    any step (stock's new Parameters then alias the storage they were loaded
    from, which the arena cannot do)."""
    names = ("norm.weight", "norm.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    swap = [("blocks.1.norm.weight", "blocks.1.norm.bias"), ("blocks.1.norm.bias", "blocks.1.norm.weight")]
    cases = [("blocks shifted", [(f"blocks.{i}.{n}", f"blocks.{i - 1}.{n}") for i in (2, 1) for n in names], False),
             ("swapped", swap, False), ("swapped, keep_vars", swap, True)]
    for what, remap, keep_vars in cases:
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx), 4)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        step_both(ms, mt, opts, batches(ctx, 1, seed=95), tol=tight(ctx, FP32), what=f"{what}: before the load")
        for m in (ms, mt):
            sd = m.state_dict(keep_vars=keep_vars)
            m.load_state_dict({**sd, **{dst: sd[src] for dst, src in remap}}, assign=True)
        with torch.no_grad():  # a gather: adopts the new shards
            ms(batches(ctx, 1, seed=96)[0]), mt(batches(ctx, 1, seed=96)[0])
        compare_models(ms, mt, f"{what}: after the load and a forward", tight(ctx, FP32))
        assert stats(mt).get("sources_copied_from_residents", 0) > 0, stats(mt)
        assert tide.fsdp.uninstall(mt)
        # The state dict viewed the arena at uninstall: a CUDA arena is kept until here, so that
        # the three cases do not hold three communicators (and their streams) at once.
        del sd, ms, mt, opts
        tide.fsdp.release_kept_arenas()


def dropped_without_uninstall(ctx):
    """A model dropped while installed is collected like a stock one, with its
    arena (host fabric: the communicator closes with its last view), FSDP2's
    functions come back, and one warning says uninstall was skipped. One
    collection frees it even when none ran during its step: a reference cycle
    the step left holding autograd nodes (which hold the unsharded Parameters)
    would free it only at a second one."""
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 4)
    opts = optimizers(ms, mt, "adam", 1e-2)
    gc.collect()
    gc.disable()
    try:
        step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tight(ctx, FP32), what="before the drop")
        owner = weakref.ref(registry.installed[mt].contexts[0].owner)
        model = weakref.ref(mt)
        del mt, opts
        gc.collect()
    finally:
        gc.enable()
    assert model() is None, "the installed model outlived its last reference and one collection"
    assert owner() is None, "the arena outlived the model"
    assert not dispatch.active(), "FSDP2's functions were not restored"
    dropped = [m for m in ctx.logs.messages(logging.WARNING) if "without tide.fsdp.uninstall" in m]
    assert len(dropped) == 1, dropped
    try:
        copy.deepcopy(registry.Installation("in-place", True))
    except TypeError as e:
        assert "uninstall" in str(e), e
    else:
        raise AssertionError("an installation was deep-copied")


def waits_last_the_process_groups_timeout(ctx):
    """install() without timeout_s gives the communicator the shard group's own timeout (a
    sub-group made with a timeout of its own, drawn per run), which stock FSDP2's collectives
    wait too; timeout_s=0 keeps the fabric's default and a number is taken as given. Training
    matches stock with each."""
    import datetime

    from torch.distributed.device_mesh import DeviceMesh

    group_seconds = 60 + ctx.seed % 120  # well inside run_job's limit, should a wait hang
    pg = torch.distributed.new_group(list(range(ctx.world)), timeout=datetime.timedelta(seconds=group_seconds))
    mesh = DeviceMesh.from_group(pg, device_type(ctx))
    for given, want in (({}, group_seconds), ({"timeout_s": 0}, 0), ({"timeout_s": 45.5}, 45.5)):
        ms, mt = make_pair(lambda: Model([Block() for _ in range(2)]), ctx, mesh)
        rep = tide.fsdp.install(mt, **given)
        assert_all_tide(rep, 3)
        assert [a["timeout_s"] for a in rep["arenas"]] == [want], (given, rep["arenas"])
        step_both(ms, mt, optimizers(ms, mt, "sgd", 1e-2), batches(ctx, 1, seed=5), tol=tight(ctx, FP32),
                  what=f"install({given})")
        assert tide.fsdp.uninstall(mt)


def kept_arenas_close_once_let_go(ctx):
    """An arena whose communicator closes collectively (CUDA; here the host fabric made to
    close so) is kept, not closed, when uninstall finds a tensor still viewing it or when
    its model is collected without uninstall; tide.fsdp.release_kept_arenas(), called on
    every rank, closes exactly those that every rank of the group let go of and none views.
    Before, such an arena stayed allocated to the process's exit."""
    import importlib

    from tide.fsdp import arena_lifetime
    from tide.fsdp.backend import HostBackend

    saved = HostBackend.closes_collectively
    if ctx.device == "cpu":
        HostBackend.closes_collectively = True
    try:
        tide.fsdp.release_kept_arenas()  # what earlier scenarios kept and no longer view
        base = arena_lifetime.kept_count()  # still viewed from elsewhere (none expected; not this test's)

        def installed_model():
            ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
            assert_all_tide(install(mt, ctx), 4)
            step_both(ms, mt, optimizers(ms, mt, "sgd", 1e-2), batches(ctx, 1, seed=3), tol=tight(ctx, FP32),
                      what="before letting go")
            # Held weakly: a collection that closed it would show as a dead reference or a closed handle.
            return mt, weakref.ref(registry.installed[mt].contexts[0].comm)

        def is_open(comm) -> bool:
            return comm() is not None and bool(comm().handle)

        def check(ok: bool, why) -> None:
            assert ok, why

        # Uninstall while a tensor views the arena: kept, and closed only once the view is gone.
        mt, comm = installed_model()
        view = registry.installed[mt].tide_groups[0].ag_outputs[0]
        ctx.logs.clear()
        assert tide.fsdp.uninstall(mt)
        said = [m for m in ctx.logs.messages(logging.WARNING) if "release_kept_arenas" in m]
        # Each check on every rank (agree): a rank that failed alone would leave its peer in the
        # next release's collective.
        agree(lambda: check(len(said) == 1, ctx.logs.messages()))
        agree(lambda: check(is_open(comm) and arena_lifetime.kept_count() == base + 1, "not kept at uninstall"))
        closed = tide.fsdp.release_kept_arenas()
        agree(lambda: check(closed == 0 and is_open(comm), "closed an arena a tensor still views"))
        del view
        closed = tide.fsdp.release_kept_arenas()
        agree(lambda: check(closed == 1 and not is_open(comm) and arena_lifetime.kept_count() == base,
                            "not closed once its last view went"))

        # A model collected while installed: its communicator is kept, not closed at the collection.
        mt, comm = installed_model()
        del mt
        gc.collect()
        agree(lambda: check(is_open(comm) and arena_lifetime.kept_count() == base + 1,
                            "a collection closed a communicator that closes collectively, or did not keep it"))
        # A second model that rank 0 lets go of first: nothing of it closes until every rank has.
        mt, comm_late = installed_model()
        if ctx.rank == 0:
            del mt
            gc.collect()
        closed = tide.fsdp.release_kept_arenas()
        agree(lambda: check(closed == 1 and not is_open(comm) and is_open(comm_late),
                            "closed what one rank still holds, or not what every rank let go of"))
        if ctx.rank != 0:
            del mt
            gc.collect()
        closed = tide.fsdp.release_kept_arenas()
        agree(lambda: check(closed == 1 and not is_open(comm_late) and arena_lifetime.kept_count() == base,
                            "not closed once every rank let go of it"))

        # An install that fails once its communicator is made keeps it too, for the release.
        install_module = importlib.import_module("tide.fsdp.install")  # tide.fsdp.install is the function
        lay_out = install_module._lay_out_arena

        def failing_lay_out(*args, **kwargs):
            raise RuntimeError("injected: laying out the arena failed")

        install_module._lay_out_arena = failing_lay_out
        raised = None
        try:
            ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
            install(mt, ctx)
        except RuntimeError as e:
            raised = str(e)  # not the exception: its traceback holds the failed install's frames
        finally:
            install_module._lay_out_arena = lay_out
        agree(lambda: check(raised is not None and "injected" in raised
                            and arena_lifetime.kept_count() == base + 1, f"failed install: {raised!r}"))
        del ms, mt
        closed = tide.fsdp.release_kept_arenas()
        agree(lambda: check(closed == 1 and arena_lifetime.kept_count() == base, "a failed install's arena"))

        # An uninstall whose collective release raises at its first communicator keeps the ones
        # after it (the model's finalizer, which would have kept them, is gone by then). Two
        # communicators: the blocks shard over one process group, the root over another of
        # the same ranks.
        from torch.distributed.device_mesh import DeviceMesh

        other_mesh = DeviceMesh.from_group(torch.distributed.new_group(list(range(ctx.world))), device_type(ctx))

        def two_groups(model, mesh):
            for block in model.blocks:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=other_mesh)
            return model

        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx), shard_fn=two_groups)
        assert_all_tide(install(mt, ctx), 4)
        step_both(ms, mt, optimizers(ms, mt, "sgd", 1e-2), batches(ctx, 1, seed=4), tol=tight(ctx, FP32),
                  what="two communicators")
        contexts = list(registry.installed[mt].contexts)
        agree(lambda: check(len(contexts) == 2, f"{len(contexts)} communicators, not one per process group"))
        comms = [weakref.ref(c.comm) for c in contexts]
        release = arena_lifetime.release_collectively

        def first_release_fails(c):
            raise RuntimeError("injected: a collective release failed")

        arena_lifetime.release_collectively = first_release_fails
        raised = None
        try:
            tide.fsdp.uninstall(mt)
        except RuntimeError as e:
            raised = str(e)
        finally:
            arena_lifetime.release_collectively = release
        agree(lambda: check(raised is not None and "injected" in raised and mt not in registry.installed
                            and arena_lifetime.kept_count() == base + 1 and is_open(comms[1]),
                            f"uninstall's failed release: {raised!r}, {arena_lifetime.kept_count() - base} kept"))
        agree(lambda: check(release(contexts[0]), "the first communicator, its release done by hand"))
        del ms, mt, contexts
        closed = tide.fsdp.release_kept_arenas()
        agree(lambda: check(closed == 1 and not any(is_open(c) for c in comms)
                            and arena_lifetime.kept_count() == base, "the communicator kept at the failed release"))
    finally:
        HostBackend.closes_collectively = saved


def users_own_instance_methods_kept(ctx):
    """install wraps zero_grad and the layout setters on module instances. A
    module's own per-instance zero_grad or set_reshard_after_forward (set by
    the user before install) still runs inside TIDE's wrapper, and uninstall
    gives it back; one the user sets after install is theirs, and uninstall
    leaves it with one line saying so. Before, uninstall dropped both: the
    module fell back to the class's method."""
    ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
    calls = {"zero_grad": 0, "set_reshard_after_forward": 0}

    def own_zero_grad(module):
        def zero_grad(set_to_none=True):
            calls["zero_grad"] += 1
            type(module).zero_grad(module, set_to_none)
        return zero_grad

    def own_setter(module):
        def set_reshard_after_forward(*args, **kwargs):
            calls["set_reshard_after_forward"] += 1
            return type(module).set_reshard_after_forward(module, *args, **kwargs)
        return set_reshard_after_forward

    zero_grad_before, setter_before = own_zero_grad(mt.blocks[1]), own_setter(mt.blocks[0])
    mt.blocks[1].zero_grad, mt.blocks[0].set_reshard_after_forward = zero_grad_before, setter_before
    assert_all_tide(install(mt, ctx), 5)
    assert mt.blocks[1].zero_grad is not zero_grad_before, "install did not wrap the instance's zero_grad"
    opts = optimizers(ms, mt, "adam", 1e-2)
    tol = tight(ctx, FP32)
    step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tol, what="step 0")
    for m in (ms, mt):
        m.blocks[1].zero_grad()
        m.blocks[0].set_reshard_after_forward(False)  # TIDE lays out again: block 0 pinned
    assert calls == {"zero_grad": 1, "set_reshard_after_forward": 1}, calls
    step_both(ms, mt, opts, batches(ctx, 1, seed=1), tol=tol, what="step 1, block 0 kept unsharded")
    zero_grad_after = own_zero_grad(mt.blocks[2])
    mt.blocks[2].zero_grad = zero_grad_after
    ctx.logs.clear()
    assert tide.fsdp.uninstall(mt)
    assert mt.blocks[1].__dict__.get("zero_grad") is zero_grad_before, "uninstall dropped the user's zero_grad"
    assert mt.blocks[0].__dict__.get("set_reshard_after_forward") is setter_before, \
        "uninstall dropped the user's set_reshard_after_forward"
    assert mt.blocks[2].__dict__.get("zero_grad") is zero_grad_after, "uninstall dropped a zero_grad set after install"
    assert "zero_grad" not in mt.blocks[3].__dict__ and "zero_grad" not in mt.__dict__, "a wrapper outlived uninstall"
    replaced = [m for m in ctx.logs.messages() if "replaced after install" in m]
    assert len(replaced) == 1 and "zero_grad" in replaced[0], replaced
    step_both(ms, mt, opts, batches(ctx, 1, seed=2), tol=tol, what="stock after uninstall")
    mt.blocks[2].zero_grad()
    assert calls["zero_grad"] == 2, calls


def refusals(ctx):
    """install on a non-root module, a plain module or a model still on the
    meta device changes nothing, says why, and does not raise; bad arguments
    (types, ranges, plan options out of the library's range, a model that is no
    module) raise, naming the argument, before any work but the ranks' first
    exchange (bad_arguments_on_one_rank); a second install with
    other options says they were not applied."""
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    opts = optimizers(ms, mt, "adam", 1e-2)
    step_both(ms, mt, opts, batches(ctx, 1), tol=None, what="stock step")  # FSDP2 picks its root
    rep = tide.fsdp.install(mt.blocks[0], timeout_s=TIMEOUT_S)
    assert not rep["installed"] and rep["reason"] == "not_root", rep
    rep = tide.fsdp.install(nn.Linear(2, 2), timeout_s=TIMEOUT_S)
    assert not rep["installed"] and rep["reason"] == "not_fsdp", rep
    assert len([m for m in ctx.logs.messages(logging.WARNING) if "stays stock" in m]) == 2
    step_both(ms, mt, opts, batches(ctx, 1, seed=1), tol=None, what="stock step 2")
    # A fabric for the other device type: every group stays stock and says so; the next
    # install then goes ahead (it once found the model "already installed" and did nothing).
    wrong = "host" if torch.device(ctx.device).type == "cuda" else "cuda-ipc"
    rep = tide.fsdp.install(mt, fabric=wrong, timeout_s=TIMEOUT_S)
    assert rep["groups"] and all(g["reason"] == "fabric_mismatch" for g in rep["groups"]), rep
    # numpy integers are integers (they were refused as "not two positive ints"): this one reaches the plan stage.
    rep = tide.fsdp.install(mt, topology=(np.int64(1), np.int32(3 * ctx.world)), timeout_s=TIMEOUT_S)
    assert rep["groups"] and all(g["reason"] == "bad_topology" for g in rep["groups"]), rep
    assert_all_tide(install(mt, ctx), 4)
    tide.fsdp.uninstall(mt)
    for bad, word in (({"topology": (3,)}, "topology"), ({"topology": "ab"}, "topology"),
                      ({"plan_options": {"bogus": 1}}, "bogus"),
                      # A bad value's name or type is refused up front, whatever groups are eligible.
                      ({"plan_options": {"landing": "sideways"}}, "unknown landing 'sideways'"),
                      ({"plan_options": {"rail_lane": "yes"}}, "rail_lane must be True or False"),
                      ({"timeout_s": -1}, "timeout_s"), ({"timeout_s": float("nan")}, "timeout_s"),
                      ({"timeout_s": float("inf")}, "timeout_s"), ({"timeout_s": 10**400}, "timeout_s"),
                      # Out of range for the plan library: raised, not every group left stock.
                      ({"plan_options": {"passes": 1000}}, "passes"), ({"plan_options": {"sum_ctas": -1}}, "sum_ctas"),
                      # Refused by make_plan's own input checks (PlanInputError), also after the ranks compared.
                      ({"plan_options": {"calibration": "fast"}}, "calibration must be a mapping")):
        try:
            tide.fsdp.install(mt, **{"timeout_s": TIMEOUT_S, **bad})
            raise AssertionError(f"install accepted {bad}")
        except ValueError as e:
            assert word in str(e), (bad, e)
    for bad, word in (({"ring": "no"}, "ring"), ({"check_read_done": "false"}, "check_read_done"),
                      ({"adopt": None}, "adopt"), ({"invert_prefetch": 1}, "invert_prefetch"),
                      ({"plan_options": "passes"}, "plan_options"), ({"timeout_s": "x"}, "timeout_s"),
                      ({"plan_options": {1: 2, "passes": 3}}, "plan_options keys")):
        try:
            tide.fsdp.install(mt, **{"timeout_s": TIMEOUT_S, **bad})
            raise AssertionError(f"install accepted {bad}")
        except TypeError as e:
            assert word in str(e), (bad, e)
    for call in (lambda: tide.fsdp.install(None), lambda: tide.fsdp.install(torch.zeros(2)),
                 lambda: tide.fsdp.report(None), lambda: tide.fsdp.uninstall("model"),
                 lambda: tide.fsdp.arena_bytes("model")):
        try:
            call()
            raise AssertionError("a model that is not a module was accepted")
        except TypeError as e:
            assert "torch.nn.Module" in str(e), e
    assert tide.fsdp.report(mt, echo=False)["installed"] is False
    try:  # "no" is truthy: it printed the table
        tide.fsdp.report(mt, echo="no")
        raise AssertionError("report accepted echo='no'")
    except TypeError as e:
        assert "echo must be True or False" in str(e), e
    try:  # print's file: a stream; a path string raised AttributeError from inside print
        tide.fsdp.report(mt, file="report.txt")
        raise AssertionError("report accepted a file name for its stream")
    except TypeError as e:
        assert "write()" in str(e), e
    try:
        tide.fsdp.install(mt, fabric="nvlink", timeout_s=TIMEOUT_S)
        raise AssertionError("install accepted fabric 'nvlink'")
    except ValueError as e:
        assert "cuda-ipc" in str(e), e
    assert_all_tide(install(mt, ctx), 4)  # on the root, after training started: fine
    # Installed already: the same options again say nothing; other options are not applied, and say so.
    since = len(ctx.logs.messages(logging.WARNING))
    install(mt, ctx)
    # The same choice spelled otherwise (empty plan_options for None) says nothing either.
    install(mt, ctx, plan_options={})
    assert not [m for m in ctx.logs.messages(logging.WARNING)[since:] if "already installed" in m]
    rep = install(mt, ctx, mode="slot-reuse", ring=False)
    assert rep["mode"] == "in-place", rep["mode"]
    said = [m for m in ctx.logs.messages(logging.WARNING)[since:] if "already installed" in m]
    assert len(said) == 1 and "not applied" in said[0] and "slot-reuse" in said[0] and "'ring': False" in said[0], said
    step_both(ms, mt, opts, batches(ctx, 1, seed=2), tol=tight(ctx, FP32), what="tide step")
    tide.fsdp.uninstall(mt)

    # Deferred initialization: sharded on the meta device, installed too early.
    with torch.device("meta"):
        mm = transformer()
    shard(mm, mesh_1d(ctx))
    rep = tide.fsdp.install(mm, timeout_s=TIMEOUT_S)
    assert not rep["installed"] and rep["reason"] == "meta_device", rep
    assert "to_empty" in rep["message"], rep
    mm.to_empty(device=ctx.device)
    set_model_state_dict(mm, get_model_state_dict(ms))
    assert_all_tide(install(mm, ctx), 4)  # once the weights exist: fine
    opts = optimizers(ms, mm, "adam", 1e-2)
    step_both(ms, mm, opts, batches(ctx, 1, seed=3), tol=tight(ctx, FP32), what="tide step after meta init")


def installs_that_overlap(ctx):
    """install() on a block before the first forward (FSDP2 names its root
    only then, so the block is not refused as not_root), then on the root:
    the block's group runs through the first install and the root's keeps it
    stock with reason installed_elsewhere (it once got a second arena, and an
    uninstall then failed the next forward). Uninstalls in either order leave
    the model training as stock does."""
    for first_out in ("block", "root"):
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        rep_block = tide.fsdp.install(mt.blocks[1], timeout_s=TIMEOUT_S)
        assert rep_block["installed"], rep_block
        rep = install(mt, ctx)
        reasons = {g["fqn"]: g["reason"] for g in rep["groups"]}
        assert reasons["blocks.1"] == "installed_elsewhere", reasons
        assert [f for f, r in reasons.items() if r is None] == ["<root>", "blocks.0", "blocks.2"], reasons
        opts = optimizers(ms, mt, "sgd", 1e-2)
        tol = tight(ctx, FP32)
        step_both(ms, mt, opts, batches(ctx, 1, seed=60), tol=tol, what=f"both installed ({first_out} out first)")
        order = (mt.blocks[1], mt) if first_out == "block" else (mt, mt.blocks[1])
        for s, module in enumerate(order):
            assert tide.fsdp.uninstall(module)
            step_both(ms, mt, opts, batches(ctx, 1, seed=61 + s), tol=tol, what=f"after uninstall {s}")


def _four_blocks_after_a_step(ctx, mode: str, seed: int):
    """A stock and a TIDE (installed in `mode`) four-block transformer, SGD, one step of each
    compared: (ms, mt, optimizers, tolerance)."""
    ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx, mode=mode), 5)
    opts = optimizers(ms, mt, "sgd", 1e-2)
    tol = tight(ctx, FP32)
    step_both(ms, mt, opts, batches(ctx, 1, seed=seed), tol=tol, what=f"{mode} step before")
    return ms, mt, opts, tol


def forward_that_raised(ctx):
    """An exception inside a block's forward, caught by the training loop,
    which then follows FSDP2's recovery contract (torch 2.13: reset_iter_state
    on the root, then the next iteration as usual). The block whose forward
    raised held its ring slot; after the reset both models train alike. (Without
    the reset stock FSDP2 itself keeps the failed forward's trackers, e.g. the
    block's post-forward never runs again, and TIDE's ring then meets the
    stale holder: RegionConflict, whose message says to reset.)"""
    if not hasattr(torch.distributed.fsdp.FSDPModule, "reset_iter_state"):
        raise ScenarioSkipped(f"torch {torch.__version__} cannot reset FSDP2 after a failed forward")
    for mode in ("in-place", "slot-reuse"):
        ms, mt, opts, tol = _four_blocks_after_a_step(ctx, mode, seed=90)
        x = batches(ctx, 1, seed=91)[0]
        for name, m in (("stock", ms), ("tide", mt)):
            armed = [True]

            def fail_once(module, args, armed=armed):
                if armed[0]:
                    armed[0] = False
                    raise RuntimeError("injected failure inside a block's forward")

            # Inside blocks.2 (ring slot 0, after blocks.0): past FSDP2's pre-forward, so unsharded.
            handle = m.blocks[2].fc2.register_forward_pre_hook(fail_once)
            try:
                m(x).float().pow(2).mean().backward()
            except RuntimeError as e:
                assert "injected failure" in str(e), e
            else:
                raise AssertionError(f"{mode}: {name}'s forward did not raise")
            finally:
                handle.remove()
            if name == "tide":
                # Without the reset the next forward's first ring-mate meets the stale holder.
                try:
                    m(x)
                except tide.fsdp.all_gather.RegionConflict as e:
                    assert "reset_iter_state" in str(e), e
                else:
                    raise AssertionError(f"{mode}: a ring slot held by a failed forward went unnoticed")
            m.reset_iter_state()
            m.zero_grad()
        for step in range(2):
            step_both(ms, mt, opts, batches(ctx, 1, seed=92 + step), tol=tol,
                      what=f"{mode} after the forward that raised and the reset, step {step}")
        assert tide.fsdp.uninstall(mt)


def uninstall_or_relayout_between_forward_and_backward(ctx):
    """Between a forward and its backward, every group is IDLE, yet the autograd graph saved
    views of the ring slots, which only TIDE's next gathers fill again: an uninstall, or a
    setter that lays TIDE out again, there once went through and the backward silently read
    other groups' weights (review, session 36). Both are refused, saying why, while that graph
    lives, and the step then matches stock's; once the backward ran, or its outputs were
    dropped, both go through. Past the refusal (white box: the check bypassed), the backward
    fails loudly instead of reading wrong weights."""
    from tide.fsdp import model_consensus

    def loss_of(m, x):
        return m(x).float().pow(2).mean()

    for mode in ("in-place", "slot-reuse"):
        ms, mt, opts, tol = _four_blocks_after_a_step(ctx, mode, seed=0)
        x = batches(ctx, 1, seed=1)[0]
        losses = [loss_of(m, x) for m in (ms, mt)]
        refused = []
        for attempt in (lambda: tide.fsdp.uninstall(mt), lambda: mt.blocks[1].set_reshard_after_forward(False)):
            try:
                attempt()
                refused.append(None)
            except RuntimeError as e:
                refused.append(str(e))
        assert all(r is not None and "a forward whose backward has not run yet" in r for r in refused), refused
        assert mt.blocks[1]._get_fsdp_state()._fsdp_param_group._reshard_after_forward, "the refused setter stuck"
        for loss in losses:
            loss.backward()
        compare_and_step(ms, mt, opts, [loss.detach() for loss in losses], f"{mode} step 1 (refused mid-step)", tol)
        # Its backward ran: the graph (still held by `losses`) no longer stops anything.
        mt.blocks[1].set_reshard_after_forward(False)
        mt.blocks[1].set_reshard_after_forward(True)
        # A forward whose outputs were dropped without a backward stops nothing either, nor one
        # whose outputs only a reference cycle holds (automatic collection off: the check collects).
        loss_of(mt, x)
        gc.disable()
        try:
            cycle = [loss_of(mt, x)]
            cycle.append(cycle)
            del cycle
            assert tide.fsdp.uninstall(mt)
        finally:
            gc.enable()
        del losses

        # White box: with the check bypassed, the uninstall goes through and the backward fails.
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        loss = loss_of(mt, x)
        check = model_consensus.first_awaiting_backward
        model_consensus.first_awaiting_backward = lambda tide_groups: None
        try:
            assert tide.fsdp.uninstall(mt)
        finally:
            model_consensus.first_awaiting_backward = check
        try:
            loss.backward()
            raise AssertionError(f"{mode}: a backward through ring slots after uninstall ran")
        except RuntimeError as e:
            assert "modified by an inplace operation" in str(e), e
        for m in (ms, mt):
            m.zero_grad(set_to_none=True)


@dataclasses.dataclass
class _BlockOutput:
    h: torch.Tensor


class _DataclassBlock(Block):
    """Returns its activations in a dataclass (FSDP2 finds tensors there for its hooks)."""

    def forward(self, x):
        return _BlockOutput(super().forward(x.h if isinstance(x, _BlockOutput) else x))


class _DataclassModel(Model):
    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return _BlockOutput(self.out(self.norm(x.h)))


def pending_backward_refusals_agree(ctx):
    """The refusals of uninstall_or_relayout_between_forward_and_backward in the cases a review
    found (session 36): whether a forward's graph lives is a rank's own (a loss only rank 0 keeps),
    and a rank that refused while its peers went on left them in collectives it never joined, so
    the ranks agree; a second forward whose backward comes after the first's, and outputs in a
    dataclass, are seen; after a failed backward and reset_iter_state, the loss dropped, nothing waits."""
    import torch.distributed as dist

    def outcome(call) -> str:
        try:
            call()
            return "went through"
        except RuntimeError as e:
            return "refused" if "backward has not run yet" in str(e) else f"raised: {e}"

    def on_every_rank(what: str, want: str, call) -> None:
        mine = outcome(call)
        every = [None] * ctx.world
        dist.all_gather_object(every, mine)
        assert every == [want] * ctx.world, f"{what}: {every}"

    def loss_of(m, x):
        return m(x).float().pow(2).mean()

    ms, mt, opts, tol = _four_blocks_after_a_step(ctx, "in-place", seed=0)
    validation = loss_of(mt, batches(ctx, 1, seed=5)[0])
    kept = [validation] if ctx.rank == 0 else []  # a validation loss rank 0 keeps for its logging
    del validation
    loss_of(mt, batches(ctx, 1, seed=6)[0])  # the same, dropped on every rank
    on_every_rank("uninstall with rank 0's loss kept", "refused", lambda: tide.fsdp.uninstall(mt))
    on_every_rank("setter with rank 0's loss kept", "refused", lambda: mt.blocks[1].set_reshard_after_forward(False))
    kept.clear()
    # Two forwards, then their backwards one after the other: between them the second one waits.
    xa, xb = batches(ctx, 2, seed=7)
    la, lb = [[loss_of(m, x) for m in (ms, mt)] for x in (xa, xb)]
    for loss in la:
        loss.backward()
    on_every_rank("uninstall between two backwards", "refused", lambda: tide.fsdp.uninstall(mt))
    for loss in lb:
        loss.backward()
    compare_and_step(ms, mt, opts, [a.detach() + b.detach() for a, b in zip(la, lb)], "two forwards' step", tol)
    on_every_rank("uninstall after both backwards", "went through", lambda: tide.fsdp.uninstall(mt))

    # Outputs in a dataclass, where stock FSDP2 backs through them (torch 2.11's does not: its
    # backward finds the block's unsharded storage freed).
    ms, mt = make_pair(lambda: _DataclassModel([_DataclassBlock() for _ in range(3)]), ctx, mesh_1d(ctx))
    x = batches(ctx, 1, seed=8)[0]
    try:
        ms(x).h.float().pow(2).mean().backward()
        stock_backs_through_dataclasses = True
    except RuntimeError:
        stock_backs_through_dataclasses = False
    if stock_backs_through_dataclasses:
        assert_all_tide(install(mt, ctx), 4)
        loss = mt(x).h.float().pow(2).mean()
        on_every_rank("uninstall with a dataclass output's graph alive", "refused", lambda: tide.fsdp.uninstall(mt))
        loss.backward()
        on_every_rank("uninstall after its backward", "went through", lambda: tide.fsdp.uninstall(mt))

    # A backward that raised, then FSDP2's reset_iter_state (torch >= 2.13): the failed iteration's
    # graph waits until its loss is dropped (TIDE does not wrap reset_iter_state: README).
    if hasattr(torch.distributed.fsdp.FSDPModule, "reset_iter_state"):
        ms, mt, opts, tol = _four_blocks_after_a_step(ctx, "in-place", seed=9)
        y = mt(batches(ctx, 1, seed=10)[0])

        def fail(grad):
            raise ValueError("a hook that fails")

        y.register_hook(fail)
        loss = y.float().pow(2).mean()
        try:
            loss.backward()
        except ValueError:
            pass
        mt.reset_iter_state()
        mt.zero_grad()
        on_every_rank("uninstall after reset_iter_state, the loss kept", "refused", lambda: tide.fsdp.uninstall(mt))
        del loss, y
        on_every_rank("uninstall after reset_iter_state, the loss dropped", "went through",
                      lambda: tide.fsdp.uninstall(mt))


@dataclasses.dataclass
class _OutputWithInitFalse:
    h: torch.Tensor
    note: str = dataclasses.field(init=False, default="block")


class _PairOutput(tuple):
    """A tuple subclass with its own __new__: rebuilding it from one iterable fails."""

    def __new__(cls, a, b):
        return super().__new__(cls, (a, b))


class _UnusualOutputBlock(Block):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        h = super().forward(x)
        return _OutputWithInitFalse(h) if self.kind == "dataclass" else _PairOutput(h, h * 0.5)


class _UnusualOutputModel(Model):
    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            out = b(x)
            x = out.h if isinstance(out, _OutputWithInitFalse) else out[0] + out[1]
        return self.out(self.norm(x))


def block_outputs_of_unusual_types(ctx):
    """Blocks returning a dataclass with an init=False field, or a tuple subclass with its own
    __new__: TIDE finds a forward's outputs for the pending-backward refusal as FSDP2 finds them,
    read only. It once walked them with torch's _apply_to_tensors, which rebuilds each container
    and raised in every such forward (review, session 37), where stock trains. Where stock FSDP2
    backs through these types (torch 2.11's does not find tensors in them), a step of each
    matches and uninstall is refused between a forward and its backward."""
    import torch.distributed as dist

    ran = []
    for kind in ("dataclass", "tuple subclass"):
        ms, mt = make_pair(lambda: _UnusualOutputModel([_UnusualOutputBlock(kind) for _ in range(3)]), ctx,
                           mesh_1d(ctx))
        x = batches(ctx, 1, seed=21)[0]
        try:
            ms(x).float().pow(2).mean().backward()
            stock_ran = True
        except RuntimeError:
            stock_ran = False
        every = [None] * ctx.world
        dist.all_gather_object(every, stock_ran)
        assert len(set(every)) == 1, f"{kind}: stock's backward ran on some ranks only: {every}"
        if not stock_ran:
            continue
        ran.append(kind)
        ms.zero_grad(set_to_none=True)
        assert_all_tide(install(mt, ctx), 4)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        tol = tight(ctx, FP32)
        for step in range(2):
            step_both(ms, mt, opts, batches(ctx, 1, seed=22 + step), tol=tol, what=f"{kind} step {step}")
        loss = mt(x).float().pow(2).mean()
        try:
            tide.fsdp.uninstall(mt)
            raise AssertionError(f"{kind}: uninstall went through between a forward and its backward")
        except RuntimeError as e:
            assert "backward has not run yet" in str(e), e
        loss.backward()
        mt.zero_grad(set_to_none=True)
        assert tide.fsdp.uninstall(mt)
    if not ran:  # (reported as skipped, not as passed with nothing checked)
        raise ScenarioSkipped(f"torch {torch.__version__}'s FSDP2 backs through neither output type")


def _installs_that_differ(ctx, mesh, cases, odd_ranks: set[int]):
    """Runs `cases` in turn on a 3-block model: (what, install kwargs on the odd ranks, on the
    others). Each install must leave every group stock on every rank, naming `what` and an odd
    rank (the odd ranks may keep reasons of their own), with one warning per group, and train
    as stock; uninstall must return on every rank (none waits in a collective another never
    joins). Two cases have no kwargs of their own: what "group ..." names is refused on the odd
    ranks by the layout check, and "lazy_init" makes FSDP2's lazy init of blocks.1 fail there,
    a refusal of the whole model. Afterwards the same install everywhere runs every group."""
    odd = ctx.rank in odd_ranks
    ms, mt = make_pair(lambda: Model([Block() for _ in range(3)]), ctx, mesh)
    opts = optimizers(ms, mt, "adam", 1e-2)
    real_check_layout = groups.check_layout

    def refuse_blocks_1_here(info, plan):
        info = real_check_layout(info, plan)
        if info.fqn == "blocks.1" and info.reason is None:
            info.reason, info.detail = "layout_mismatch", "made to differ on this rank by the test"
        return info

    def lazy_init_fails():
        raise RuntimeError("CUDA out of memory (made up by the test)")

    blocks_1 = guards.param_groups(mt.blocks[1]._get_fsdp_state())[0]
    for step, (what, odd_kw, other_kw) in enumerate(cases):
        ctx.logs.clear()
        if odd and what.startswith("group"):
            groups.check_layout = refuse_blocks_1_here
        if odd and what == "lazy_init":
            blocks_1.lazy_init = lazy_init_fails
        try:
            rep = install(mt, ctx, **(odd_kw if odd else other_kw))
        finally:
            groups.check_layout = real_check_layout
            vars(blocks_1).pop("lazy_init", None)
        if what == "lazy_init":  # the whole model stays stock, on every rank
            assert not rep["installed"], rep
            if odd:
                assert rep["reason"] == "lazy_init" and "made up by the test" in rep["message"], rep
            else:
                assert rep["reason"] == "ranks_disagree", rep
                assert "lazy_init" in rep["message"] and any(f"rank {r} refused" in rep["message"]
                                                            for r in odd_ranks), rep["message"]
            lines = [m for m in ctx.logs.messages(logging.WARNING) if "FSDP2 stays stock" in m]
            assert len(lines) == 1, lines
        else:
            reasons = {g["fqn"]: g["reason"] for g in rep["groups"]}
            assert len(rep["groups"]) == 4 and not tide_groups(rep), (what, reasons)
            disagree = [g for g in rep["groups"] if g["reason"] == "ranks_disagree"]
            if not odd:  # the odd ranks keep their own reasons where they had one
                assert len(disagree) == 4, (what, reasons)
            for g in disagree:
                assert what in g["detail"] and any(f"rank {r} " in g["detail"] for r in odd_ranks), \
                    (what, g["detail"])
            lines = [m for m in ctx.logs.messages(logging.WARNING) if "stays on stock FSDP2" in m]
            assert len(lines) == 4, (what, lines)
        step_both(ms, mt, opts, batches(ctx, 1, seed=step), tol=None, what=f"stock step after {what}")
        assert not stats(mt).get("all_gathers"), what
        tide.fsdp.uninstall(mt)
    assert_all_tide(install(mt, ctx), 4)
    step_both(ms, mt, opts, batches(ctx, 1, seed=len(cases)), tol=tight(ctx, FP32), what="TIDE step")
    assert stats(mt)["reduce_scatters"] > 0
    assert tide.fsdp.uninstall(mt)


def ranks_install_differently(ctx):
    """Ranks of one shard group that reach different install decisions (another
    topology, mode or plan_options on one rank, a group that is stock on one rank
    only, or a whole-model refusal on one rank: its FSDP2 lazy init failed) keep
    every group stock on every rank, each with one warning naming what differs,
    and train as stock. Before, the other ranks waited in the communicator's
    bootstrap (or the refusal's peers in the comparison) for a rank that never
    came, until the process group's timeout."""
    world = ctx.world
    # Another topology than the one the other ranks resolve by default: (world, 1), unless
    # that is the default (ranks on hosts of their own, LOCAL_WORLD_SIZE=1, on GPUs), where
    # (1, world) differs (and is refused there: the ranks share no node). On GPUs this
    # case first ran on hosts of their own in session 39, and the odd rank's (world, 1) was
    # the others' default: every rank installed TIDE.
    default = default_topology(world, "host" if str(ctx.device) == "cpu" else "cuda")
    another = (world, 1) if default != (world, 1) else (1, world)
    _installs_that_differ(ctx, mesh_1d(ctx), [
        ("topology", {"topology": (1, 2 * world)}, {}),  # bad_topology there
        ("topology", {"topology": another}, {}),         # another than the default
        ("mode", {"mode": "slot-reuse"}, {}),
        ("plan_options", {"plan_options": {"passes": 1}}, {"plan_options": {"passes": 2}}),
        ("group 2 ('blocks.1')", {}, {}),
        ("lazy_init", {}, {}),
    ], odd_ranks={world - 1})


def bad_arguments_on_one_rank(ctx):
    """An install() argument refused on one rank only (a timeout_s, plan_options or mode that
    rank computed on its own) raises there, naming the argument, and every other rank stays
    stock, naming that rank and the argument, whether the model was installed before or not;
    training goes on and matches stock (or TIDE's run, where it was installed). Before, the
    rank raised before the ranks' first exchange, and its peers waited in it until the
    process group's timeout."""
    odd_rank = ctx.world - 1
    odd = ctx.rank == odd_rank
    ms, mt = make_pair(lambda: Model([Block() for _ in range(3)]), ctx, mesh_1d(ctx))
    opts = optimizers(ms, mt, "adam", 1e-2)
    cases = [({"timeout_s": -1}, ValueError, "timeout_s"), ({"plan_options": {"bogus": 1}}, ValueError, "bogus"),
             ({"mode": "in_place"}, ValueError, "mode"), ({"ring": "yes"}, TypeError, "ring")]

    def install_refuses(bad, kind, word):
        try:
            install(mt, ctx, **bad)
        except kind as e:
            assert word in str(e), (bad, e)
        else:
            raise AssertionError(f"install accepted {bad}")

    for step, (bad, kind, word) in enumerate(cases):
        ctx.logs.clear()
        if odd:
            install_refuses(bad, kind, word)
            assert not tide.fsdp.report(mt, echo=False)["installed"]
        else:
            rep = install(mt, ctx)
            assert not rep["installed"] and rep["reason"] == "ranks_disagree", rep
            assert f"rank {odd_rank} refused" in rep["message"] and "bad_arguments" in rep["message"] \
                and word in rep["message"], rep["message"]
            lines = [m for m in ctx.logs.messages(logging.WARNING) if "FSDP2 stays stock" in m]
            assert len(lines) == 1 and word in lines[0], lines
        step_both(ms, mt, opts, batches(ctx, 1, seed=step), tol=None, what=f"stock step after {bad}")
        assert not stats(mt).get("all_gathers"), bad
    # Installed everywhere, then a second install with a bad argument on one rank: it raises
    # there, the others keep TIDE (the already-installed answer), and TIDE trains on.
    assert_all_tide(install(mt, ctx), 4)
    step_both(ms, mt, opts, batches(ctx, 1, seed=len(cases)), tol=tight(ctx, FP32), what="TIDE step")
    for bad, kind, word in cases:
        if odd:
            install_refuses(bad, kind, word)
        else:
            assert_all_tide(install(mt, ctx), 4)
    step_both(ms, mt, opts, batches(ctx, 1, seed=len(cases) + 1), tol=tight(ctx, FP32), what="TIDE step after")
    assert stats(mt)["reduce_scatters"] > 0
    assert tide.fsdp.uninstall(mt)


def hsdp_one_replica_installs_differently(ctx):
    """HSDP (2 x 2: shard groups {0, 1} and {2, 3}, replica groups {0, 2} and {1, 3}):
    a replica whose ranks agree among themselves but not with the other replica (another
    topology), a replica whose shard group disagrees (another mode on rank 1 only), and a
    whole-model refusal on rank 3 all leave every group stock on all four ranks. Before, the
    replica that agreed ran TIDE beside a stock one, and uninstall hung in its agreement
    across replicas (a MAX over each replica group that the stock replica never joined)."""
    mesh = mesh_hsdp(ctx)
    _installs_that_differ(ctx, mesh, [("topology", {"topology": (2, 1)}, {})], odd_ranks={2, 3})
    _installs_that_differ(ctx, mesh, [("mode", {"mode": "slot-reuse"}, {})], odd_ranks={1})
    _installs_that_differ(ctx, mesh, [("lazy_init", {}, {})], odd_ranks={3})


def unconsumed_prefetch_between_steps(ctx):
    """An explicit forward prefetch of a block that then does not run, in a no-grad forward
    (an evaluation with layer drop): FSDP2 leaves that block's all-gather pending, with no
    backward to clear it (its end of backward drops such an unshard). Between steps, install
    and uninstall take the model as it is: the pending gather is waited for and dropped, as
    FSDP2's end of backward would, with one logged line (install refused, "mid-iteration",
    before), and training matches stock after each. The user's own FSDPModule.unshard() left
    pending is no prefetch: uninstall still refuses it."""
    build = lambda: OrderedBlocksModel([Block(h=h) for h in (21, 40, 13)])  # noqa: E731
    tol = tight(ctx, FP32)

    def prefetch_next(m):
        for a, b in zip(m.blocks, list(m.blocks)[1:]):
            a.set_modules_to_forward_prefetch([b])

    def evaluate_without_block_1(ms, mt, what):
        x = batches(ctx, 1, seed=40)[0]
        ys = []
        for m in (ms, mt):
            m.order = (0, 2)  # block 0 prefetches block 1, which does not run
            with torch.no_grad():
                ys.append(m(x))
            m.order = None
        compare(ys[0], ys[1], f"{what}: evaluation", tol)
        pending = [m.blocks[1]._get_fsdp_state()._fsdp_param_group._all_gather_result is not None for m in (ms, mt)]
        assert pending[0], f"{what}: the premise: stock's prefetch of blocks.1 is pending"
        return pending[1]

    def said(when):
        return [m for m in ctx.logs.messages(logging.INFO) if "'blocks.1'" in m and f"dropped before {when}" in m]

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(build, ctx, mesh_1d(ctx))
        prefetch_next(ms)
        prefetch_next(mt)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        step_both(ms, mt, opts, batches(ctx, 1, seed=41), tol=tol, what=f"{mode} stock step")
        evaluate_without_block_1(ms, mt, f"{mode} before install")
        ctx.logs.clear()
        assert_all_tide(install(mt, ctx, mode=mode), 4)
        assert len(said("install")) == 1, ctx.logs.messages(logging.INFO)
        for s in range(2):
            step_both(ms, mt, opts, batches(ctx, 1, seed=42 + s), tol=tol, what=f"{mode} step {s} after install")
        # The user's own unshard is no prefetch: uninstall refuses it pending, as before.
        handle = mt.blocks[1].unshard(async_op=True)
        try:
            tide.fsdp.uninstall(mt)
        except RuntimeError as e:
            assert "mid-iteration" in str(e), e
        else:
            raise AssertionError(f"{mode}: uninstall dropped the user's own pending unshard of blocks.1")
        handle.wait()
        assert mt.blocks[1]._get_fsdp_state()._fsdp_param_group.is_unsharded, f"{mode}: the user's unshard"
        mt.blocks[1].reshard()
        ctx.logs.clear()
        assert evaluate_without_block_1(ms, mt, f"{mode} before uninstall"), \
            f"{mode}: the premise: TIDE's prefetch of blocks.1 is pending too"
        assert tide.fsdp.uninstall(mt)
        assert len(said("uninstall")) == 1, ctx.logs.messages(logging.INFO)
        step_both(ms, mt, opts, batches(ctx, 1, seed=45), tol=tol, what=f"{mode} step after uninstall")
