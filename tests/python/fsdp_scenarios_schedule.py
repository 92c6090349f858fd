"""Scenarios: the arena ring and the unshard schedule under FSDP2's variations (reshard after
forward or backward changed, folded last blocks, nested and unused modules, skipped blocks, the
backward prefetch inversion), and unsharded parameters used when they must not be."""

from __future__ import annotations

import logging

import tide.fsdp
import torch
from fsdp_harness import ScenarioSkipped
from fsdp_scenario_kit import (
    ADAM_EPS, Block, FP32, Model, OrderedBlocksModel, assert_all_tide, batches, check_tide_ran, compare, compare_and_step,
    compare_models, gathers_pending_at_post_backward, install, make_pair, mesh_1d, optimizers, stats, step_both, tight, train,
    transformer,
)
from tide.fsdp import guards
from torch import nn
from torch.distributed.fsdp import fully_shard


def reshard_after_forward_changed(ctx):
    """set_reshard_after_forward between steps, on the root (all blocks) and
    on one block: a ring group that now keeps its parameters gets a region of
    its own, a pinned group that reshards again goes back into the ring
    (TIDE is laid out again, with the install's options), and every step
    matches stock; both modes. Inside a forward the change is refused."""
    def regions(m):
        return {g["fqn"]: g["region"] for g in tide.fsdp.report(m, echo=False)["groups"]}

    def passes(m):
        return {g["fqn"]: g["plan"]["rs_passes"] for g in tide.fsdp.report(m, echo=False)["groups"]}

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
        # Non-default options, so that one a new layout dropped would show.
        assert_all_tide(install(mt, ctx, mode=mode, adopt=False, release_grads="with-fsdp-state",
                                plan_options={"sum_ctas": 3}), 5)
        installed_passes = passes(mt)  # a new layout keeps the install's options, and so its plans
        installed_options = tide.fsdp.report(mt, echo=False)["options"]
        opts = optimizers(ms, mt, "adam", 1e-2)
        tol = tight(ctx, FP32)
        step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tol, what=f"{mode} step 0")
        for flip, want in (
                (lambda m: m.set_reshard_after_forward(False),
                 {"blocks.0": "pinned:blocks.0", "blocks.1": "pinned:blocks.1", "blocks.2": "pinned:blocks.2",
                  "blocks.3": "slot0"}),
                (lambda m: m.set_reshard_after_forward(True),
                 {"blocks.0": "slot0", "blocks.1": "slot1", "blocks.2": "slot0", "blocks.3": "slot1"}),
                (lambda m: m.blocks[1].set_reshard_after_forward(False),
                 {"blocks.0": "slot0", "blocks.1": "pinned:blocks.1", "blocks.2": "slot1", "blocks.3": "slot0"})):
            for m in (ms, mt):
                flip(m)
            got = regions(mt)
            assert all(got[k] == v for k, v in want.items()), got
            assert passes(mt) == installed_passes, (passes(mt), installed_passes)
            assert tide.fsdp.report(mt, echo=False)["options"] == installed_options
            for s in range(2):
                step_both(ms, mt, opts, batches(ctx, 1, seed=10 + s), tol=tol, what=f"{mode} after {got}")
        assert tide.fsdp.uninstall(mt)
        assert "set_reshard_after_forward" not in mt.__dict__

    # Changed mid-iteration (inside a forward): refused with a message that says when it can change.
    _, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 5)
    # The hook catches the refusal so the step finishes as usual: torch < 2.13 has no
    # reset_iter_state to recover from a forward aborted mid-flight.
    refusals = []

    def change_layout(*_):
        try:
            mt.blocks[0].set_reshard_after_forward(False)
        except RuntimeError as e:
            refusals.append(str(e))

    before = regions(mt)
    hook = mt.blocks[1].register_forward_pre_hook(change_layout)
    mt(batches(ctx, 1)[0]).float().pow(2).mean().backward()
    hook.remove()
    assert len(refusals) == 1, refusals
    assert "mid-iteration" in refusals[0] and "between steps" in refusals[0], refusals[0]
    assert regions(mt) == before, (regions(mt), before)
    # Refused means not applied: FSDP2 keeps the setting TIDE's layout was made for, and
    # the next step runs (it once kept the new one, and the next all-gather found a conflict).
    assert guards.param_groups(mt.blocks[0]._get_fsdp_state())[0]._reshard_after_forward
    mt(batches(ctx, 1, seed=1)[0]).float().pow(2).mean().backward()
    assert tide.fsdp.uninstall(mt)

    # The last block starting to keep its parameters is a new layout too (folded), though
    # it stays in the ring: a no-grad forward must then reshard it (App. F).
    ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 5)
    for m in (ms, mt):
        m.blocks[3].set_reshard_after_forward(False)
    folded = {g["fqn"]: (g["region"], g["folded"]) for g in tide.fsdp.report(mt, echo=False)["groups"]}
    assert folded["blocks.3"] == ("slot1", True), folded
    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(2):
        step_both(ms, mt, opts, batches(ctx, 1, seed=20 + s), tol=tight(ctx, FP32), what=f"folded later, step {s}")
        with torch.no_grad():
            x = batches(ctx, 1, seed=120 + s)[0]
            compare(ms(x), mt(x), f"folded later, eval {s}", tight(ctx, FP32))
    assert tide.fsdp.uninstall(mt)


def custom_comm_after_install(ctx):
    """A block given its own all-gather comm after install (set_custom_all_gather):
    TIDE is laid out again and that group runs stock on the user's comm, named
    in the report; the others stay on TIDE, and training matches stock. With
    FSDP2's own comm back, the group returns to TIDE."""
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather

    class CountingAllGather(DefaultAllGather):
        calls = 0

        def __call__(self, *args, **kwargs):
            CountingAllGather.calls += 1
            return super().__call__(*args, **kwargs)

    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    if not hasattr(mt.blocks[1], "set_custom_all_gather"):
        raise ScenarioSkipped(f"torch {torch.__version__} has no custom comms (set_custom_all_gather)")
    assert_all_tide(install(mt, ctx), 4)
    opts = optimizers(ms, mt, "adam", 1e-2)
    tol = tight(ctx, FP32)
    step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tol, what="step 0")
    for m in (ms, mt):
        m.blocks[1].set_custom_all_gather(CountingAllGather())
    rep = tide.fsdp.report(mt, echo=False)
    reasons = {g["fqn"]: g["reason"] for g in rep["groups"]}
    assert reasons == {"<root>": None, "blocks.0": None, "blocks.1": "custom_comm", "blocks.2": None}, reasons
    CountingAllGather.calls = 0
    step_both(ms, mt, opts, batches(ctx, 1, seed=1), tol=tol, what="step 1")
    assert CountingAllGather.calls == 4, CountingAllGather.calls  # forward and backward, both models
    # FSDP2's own comm back (process-group allocation toggled off): the group returns to TIDE.
    if hasattr(mt.blocks[1], "set_allocate_memory_from_process_group_for_comm"):
        for m in (ms, mt):
            guards.param_groups(m.blocks[1]._get_fsdp_state())[0]._all_gather_comm = DefaultAllGather()
            m.blocks[1].set_allocate_memory_from_process_group_for_comm(False)
        assert_all_tide(tide.fsdp.report(mt, echo=False), 4)
        step_both(ms, mt, opts, batches(ctx, 1, seed=2), tol=tol, what="step 2")
    tide.fsdp.uninstall(mt)


def reshard_after_forward_false(ctx):
    """Blocks keep their parameters after forward: one pinned region each,
    except the last block, folded into the ring."""
    _, _, rep, _ = train(ctx, transformer, raf=False, expect_groups=4)
    regions = {g["fqn"]: (g["region"], g["folded"]) for g in rep["groups"]}
    assert regions == {"<root>": ("pinned:<root>", False), "blocks.0": ("pinned:blocks.0", False),
                       "blocks.1": ("pinned:blocks.1", False), "blocks.2": ("slot0", True)}, regions


def last_block_folded_with_eval(ctx):
    """reshard_after_forward=False on the last block only: it is folded into
    the ring (App. F), and resharded after a no-grad forward (validation)."""
    ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx), last_raf=False)
    rep = install(mt, ctx)
    assert_all_tide(rep, 5)
    regions = {g["fqn"]: (g["region"], g["folded"]) for g in rep["groups"] if g["fqn"] != "<root>"}
    assert regions == {"blocks.0": ("slot0", False), "blocks.1": ("slot1", False), "blocks.2": ("slot0", False),
                       "blocks.3": ("slot1", True)}, regions
    opts = [torch.optim.Adam(ms.parameters(), lr=1e-2, eps=ADAM_EPS), torch.optim.Adam(mt.parameters(), lr=1e-2, eps=ADAM_EPS)]
    for s in range(3):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"step {s}")
        with torch.no_grad():
            x = batches(ctx, 1, seed=100 + s)[0]
            compare(ms(x), mt(x), f"eval {s}", tight(ctx, FP32))
        assert guards.param_groups(mt.blocks[3]._get_fsdp_state())[0].is_sharded, "folded block not resharded"
    tide.fsdp.uninstall(mt)


def folded_block_forward_without_its_backward(ctx):
    """The folded last block (reshard_after_forward=False) waits for a
    backward that has not come when the next forward needs its ring slot:
    two forwards before one backward, and a forward whose loss is dropped.
    It is resharded and gathered again for its backward, as stock does for
    a block that reshards; gradients and parameters match stock, both modes."""
    loss_fn = lambda y: y.float().pow(2).mean()  # noqa: E731
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx), last_raf=False)
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        opts = optimizers(ms, mt, "adam", 1e-2)
        for s in range(2):
            xs = batches(ctx, 2, seed=30 + s)
            before = stats(mt)
            for m in (ms, mt):
                (loss_fn(m(xs[0])) + loss_fn(m(xs[1]))).backward()
            # TIDE ran the step (a reduce-scatter handed to stock gives stock's bits, so the comparison alone
            # would pass without it).
            check_tide_ran(before, stats(mt), f"{mode} two forwards, step {s}")
            compare_models(ms, mt, f"{mode} two forwards, step {s}", tight(ctx, FP32), grads=True)
            for o in opts:
                o.step()
                o.zero_grad()
        for m in (ms, mt):
            _ = loss_fn(m(batches(ctx, 1, seed=40)[0]))  # a forward with grad, its loss dropped
        step_both(ms, mt, opts, batches(ctx, 1, seed=41), tol=tight(ctx, FP32), what=f"{mode} after a dropped loss")
        assert tide.fsdp.uninstall(mt)


class TwoChildBlock(nn.Module):
    """A block whose attention and MLP are sharded inside it (nested fully_shard)."""

    def __init__(self, d: int = 24, h: int = 37):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.attn = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, d))

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + self.mlp(x)


def _shard_in_order(modules_of):
    """A make_pair shard_fn: fully_shard, with FSDP2's defaults, each of modules_of(model) in
    order (inner modules before the modules that hold them, the root last)."""
    def shard(model, mesh):
        for m in modules_of(model):
            fully_shard(m, mesh=mesh)
        return model
    return shard


def nested_fully_shard(ctx):
    """fully_shard on each block and on two modules inside it: a block stays
    unsharded while its children run, so it gets a region of its own and only
    the innermost groups share the ring; both modes match stock (the ring
    once put a child into its parent's slot: RegionConflict)."""
    shard = _shard_in_order(lambda model: [*(m for b in model.blocks for m in (b.attn, b.mlp, b)), model])

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(lambda: Model([TwoChildBlock() for _ in range(3)]), ctx, mesh_1d(ctx), shard_fn=shard)
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 10)
        regions = {g["fqn"]: g["region"] for g in rep["groups"]}
        assert all(regions[f"blocks.{i}"] == f"pinned:blocks.{i}" for i in range(3)), regions
        assert regions["blocks.0.attn"].startswith("slot") and regions["blocks.2.mlp"].startswith("slot"), regions
        opts = optimizers(ms, mt, "adam", 1e-2)
        for step in range(3):
            step_both(ms, mt, opts, batches(ctx, 1, seed=60 + step), tol=tight(ctx, FP32), what=f"{mode} step {step}")
        assert tide.fsdp.uninstall(mt)


def grouped_modules_at_both_ends(ctx):
    """fully_shard([inp, out]): one group of two modules that run first and
    last (a tied embedding and output head). FSDP2 unshards the group before
    the first runs and reshards it after the last, so it stays unsharded
    while every block runs: the ring pins it, and both modes match stock (the
    ring once put it into a block's slot: RegionConflict)."""
    def shard(model, mesh):
        for b in model.blocks:
            fully_shard(b, mesh=mesh)
        fully_shard([model.inp, model.out], mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(lambda: Model([Block() for _ in range(3)]), ctx, mesh_1d(ctx), shard_fn=shard)
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 5)
        regions = {g["fqn"]: g["region"] for g in rep["groups"]}
        assert regions["inp, out"] == "pinned:inp, out", regions
        assert all(regions[f"blocks.{i}"].startswith("slot") for i in range(3)), regions
        opts = optimizers(ms, mt, "adam", 1e-2)
        for step in range(3):
            step_both(ms, mt, opts, batches(ctx, 1, seed=70 + step), tol=tight(ctx, FP32), what=f"{mode} step {step}")
        assert tide.fsdp.uninstall(mt)


class SharedModuleStack(nn.Module):
    """Runs a module it shares with another stack (T5's encoder and decoder
    share their embedding), then a block of its own."""

    def __init__(self, shared: nn.Module):
        super().__init__()
        self.embed = shared
        self.block = Block()

    def forward(self, x):
        return self.block(self.embed(x))


class SharedModuleModel(nn.Module):
    def __init__(self, d: int = 24, d_in: int = 7, d_out: int = 5):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.shared = Block(d)
        self.encoder = SharedModuleStack(self.shared)
        self.decoder = SharedModuleStack(self.shared)
        self.out = nn.Linear(d, d_out)

    def forward(self, x):
        x = self.inp(x)
        return self.out(self.decoder(x + self.encoder(x)))


def shared_module_of_two_parents(ctx):
    """A module fully_shard-ed on its own and called inside two other groups'
    forwards, reachable under their names too (encoder.embed, decoder.embed):
    the parents are unsharded while it runs, so they stay out of the ring,
    which the module tree's first names alone do not show (the decoder once
    shared a slot with it: RegionConflict at the first forward, where stock
    trains). Both modes match stock."""
    shard = _shard_in_order(lambda model: (model.shared, model.encoder, model.decoder, model))

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(SharedModuleModel, ctx, mesh_1d(ctx), shard_fn=shard)
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 4)
        regions = {g["fqn"]: g["region"] for g in rep["groups"]}
        assert regions["encoder"] == "pinned:encoder" and regions["decoder"] == "pinned:decoder", regions
        assert regions["shared"].startswith("slot"), regions
        opts = optimizers(ms, mt, "adam", 1e-2)
        for step in range(3):
            step_both(ms, mt, opts, batches(ctx, 1, seed=80 + step), tol=tight(ctx, FP32), what=f"{mode} step {step}")
        assert tide.fsdp.uninstall(mt)


class BlockWithHelpers(Block):
    """Calls modules it holds in a plain list, not as submodules: the module
    tree does not show that they run inside its forward."""

    def __init__(self, d: int = 24):
        super().__init__(d)
        self.helpers = []  # a plain attribute: nn.Module registers no list

    def forward(self, x):
        y = super().forward(x)
        for h in self.helpers:
            y = h(y)
        return y


class HiddenCallModel(Model):
    """Three blocks and an `extra` block, fully_shard-ed on its own and
    called only from blocks.1's forward through a plain list (in module
    order the ring would give blocks.1 and extra one slot)."""

    def __init__(self):
        super().__init__([Block(), BlockWithHelpers(), Block()])
        self.extra = Block()
        self.blocks[1].helpers = [self.extra]

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(self.norm(x))


def module_called_through_a_plain_attribute(ctx):
    """A group's forward calls another group's module that it holds outside
    the module tree (a plain list): install sees the reference, keeps the
    holder out of the ring with one logged line, and training matches stock
    in both modes (it once raised RegionConflict at the first forward). With
    ring=False as well."""
    shard = _shard_in_order(lambda model: (*model.blocks, model.extra, model))

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(HiddenCallModel, ctx, mesh_1d(ctx), shard_fn=shard)
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 5)
        regions = {g["fqn"]: g["region"] for g in rep["groups"]}
        assert regions["blocks.1"] == "pinned:blocks.1", regions
        assert all(regions[f].startswith("slot") for f in ("blocks.0", "blocks.2", "extra")), regions
        lines = [m for m in ctx.logs.messages(logging.INFO) if "helpers" in m and "blocks.1" in m]
        assert len(lines) == 1 and "extra" in lines[0], lines
        opts = optimizers(ms, mt, "adam", 1e-2)
        for step in range(3):
            step_both(ms, mt, opts, batches(ctx, 1, seed=110 + step), tol=tight(ctx, FP32), what=f"{mode} step {step}")
        assert tide.fsdp.uninstall(mt)
        ctx.logs.clear()


def block_called_again_on_an_input_without_grad(ctx):
    """A block called a second time outside the model's forward, on an input
    that needs no gradient (an auxiliary loss on one block), both losses in
    one backward. The auxiliary call's backward runs first; FSDP2 runs that
    block's post-backward only once gradients reach the inputs of its other
    call, and keeps it unsharded meanwhile. Its ring-mate's backward comes in
    between: it raised RegionConflict where stock trains. Now the block is
    resharded then (one logged line) and gathered again for its second
    backward; both modes match stock bit for bit on two ranks, with
    optimizer.zero_grad(set_to_none=False) as well."""
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        ring = {g["fqn"]: g["region"] for g in tide.fsdp.report(mt, echo=False)["groups"]}
        assert ring["blocks.1"] == ring["blocks.3"], ring  # the case needs blocks.3 in blocks.1's slot
        pending = gathers_pending_at_post_backward(mt)
        opts = optimizers(ms, mt, "adam", 1e-2)
        tol = tight(ctx, FP32)
        for s in range(4):
            x = batches(ctx, 1, seed=130 + s)[0]
            h = batches(ctx, 1, d_in=24, seed=140 + s)[0]  # the auxiliary input, no gradient
            losses = []
            for m in (ms, mt):
                loss = m(x).float().pow(2).mean() + m.blocks[1](h).float().pow(2).mean()
                loss.backward()
                losses.append(loss.detach())
            assert not pending, f"{mode} step {s}: backward ran before its gather was waited for: {pending}"
            compare_and_step(ms, mt, opts, losses, f"{mode} step {s}", tol, set_to_none=s % 2 == 0)
        assert stats(mt).get("resharded_in_backward", 0) >= 4, stats(mt)
        # Gathered again by FSDP2's backward prefetch before its second backward, which must wait
        # for that gather (it did not: wrong gradients on CUDA, session 31).
        assert stats(mt).get("regather_in_backward_waited", 0) >= 4, stats(mt)
        lines = [m for m in ctx.logs.messages(logging.INFO) if "its post-backward not yet run" in m]
        assert len(lines) == 1 and "'blocks.1'" in lines[0] and "'blocks.3'" in lines[0], lines
        assert tide.fsdp.uninstall(mt)
        ctx.logs.clear()


class UnusedOutputModel(Model):
    """Runs every block, but the outputs of the blocks in `unused` do not reach the loss."""

    unused: tuple[int, ...] = ()

    def forward(self, x):
        x = self.inp(x)
        for i, b in enumerate(self.blocks):
            y = b(x)
            if i not in self.unused:
                x = y
        return self.out(self.norm(x))


def unused_block_output(ctx):
    """A block computed but not in the loss: FSDP2's backward prefetch still
    gathers it and never waits. Stock drops that gather at the end of the
    backward; in the ring it holds a slot an earlier block needs, so it is
    dropped then (it once raised RegionConflict). Both modes match stock,
    for the last block and for a middle one."""
    for mode in ("in-place", "slot-reuse"):
        for unused in ((3,), (1,)):
            ms, mt = make_pair(lambda: UnusedOutputModel([Block() for _ in range(4)]), ctx, mesh_1d(ctx))
            ms.unused = mt.unused = unused
            assert_all_tide(install(mt, ctx, mode=mode), 5)
            opts = optimizers(ms, mt, "adam", 1e-2)
            for step in range(3):
                step_both(ms, mt, opts, batches(ctx, 1, seed=70 + step), tol=tight(ctx, FP32),
                          what=f"{mode} unused {unused}, step {step}")
            if unused == (3,):  # the root's prefetch of the last block is the one dropped
                assert stats(mt).get("stale_prefetch_dropped", 0) >= 3, stats(mt)
            assert tide.fsdp.uninstall(mt)


def skipped_blocks_hold_no_slot(ctx):
    """A block that does not run in a step keeps no ring slot from the blocks
    that do (each case below raised RegionConflict where stock trains):
    (a) explicit forward prefetch one block ahead, a block skipped: its
    prefetch, never waited for, is dropped when the block after it gathers
    into the slot; (b) set_reshard_after_backward(False) on a no-sync
    micro-batch, the block kept unsharded then skipped in the next one: it is
    resharded when a ring-mate needs the slot, as FSDP2 would have after its
    backward. Both modes match stock, step after step.
    Ring-mates of different sizes (blocks 1 and 3 share a slot), so that the
    dropped prefetch of block 1 and block 3's gather write overlapping rows:
    on CUDA block 3's copy-in must wait for the dropped gather. It did not,
    and one sweep draw (gpu_run.sh's fsdp_sweep_found_on_gpu) gave a wrong
    loss on four ranks; these cases did not reproduce that race on one H200
    (session 33), test_region_write_order checks the wait itself."""
    build = lambda: OrderedBlocksModel([Block(h=h) for h in (37, 70, 29, 11)])  # noqa: E731

    def prefetch_next(m):
        blocks = list(m.blocks)
        for a, b in zip(blocks, blocks[1:]):
            a.set_modules_to_forward_prefetch([b])

    tol = tight(ctx, FP32)
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(build, ctx, mesh_1d(ctx))
        prefetch_next(ms)
        prefetch_next(mt)
        # Slot-Reuse without adoption: each gather's copy-in writes the own shard into the
        # slot on FSDP2's copy-in stream, the write that raced a dropped gather on CUDA.
        assert_all_tide(install(mt, ctx, mode=mode, adopt=mode == "in-place"), 5)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        for s, order in enumerate([None, (0, 2, 3), None, (0, 1, 3)]):
            ms.order = mt.order = order
            step_both(ms, mt, opts, batches(ctx, 1, seed=90 + s), tol=tol, what=f"{mode} prefetch, step {s} {order}")
        assert stats(mt).get("stale_prefetch_dropped", 0) >= 2, stats(mt)

        # Block 1 last in the first micro-batch's backward, then skipped after block 0
        # prefetched it: its gather waits for its own gradients' reads in the slot (Slot-Reuse)
        # or for its reshard, long enough to be still writing when block 3 takes the slot over
        # (the sweep draw that found it on a GPU: seed 489778597, draw 3).
        def block_1_first_then_skipped(model, i):
            model.order = ((1, 2, 3), (0, 2, 3))[i]

        dropped = stats(mt).get("stale_prefetch_dropped", 0)
        for s in range(2):
            step_both(ms, mt, opts, batches(ctx, 2, seed=93 + s), tol=tol, micro=2,
                      before_micro=block_1_first_then_skipped, what=f"{mode} prefetch, two micro-batches, step {s}")
        assert stats(mt).get("stale_prefetch_dropped", 0) >= dropped + 2, stats(mt)
        assert tide.fsdp.uninstall(mt)

        ms, mt = make_pair(build, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        def skip_block_1_second(model, i):
            model.order = (None, (0, 2, 3))[i]

        for s in range(2):
            step_both(ms, mt, opts, batches(ctx, 2, seed=95 + s), tol=tol, micro=2, no_sync_first=True,
                      keep_unsharded_first=True, before_micro=skip_block_1_second,
                      what=f"{mode} kept unsharded, step {s}")
        assert tide.fsdp.uninstall(mt)


def inversion_after_the_autograd_pass(ctx):
    """In-Place inverts the backward prefetch at each post_backward; FSDP2's
    final callback runs the root's post_backward after the autograd pass,
    and with the last block's output out of the loss, FSDP2's bookkeeping
    named a block whose backward had run as the next target: it was gathered
    for nothing every backward, and with set_is_last_backward(False) that
    gather stayed pending into the next forward (RegionConflict). Now every
    block gathers as often as the others, and training matches stock."""
    ms, mt = make_pair(lambda: UnusedOutputModel([Block() for _ in range(4)]), ctx, mesh_1d(ctx))
    ms.unused = mt.unused = (3,)
    rep = install(mt, ctx)
    assert_all_tide(rep, 5)
    opts = optimizers(ms, mt, "sgd", 1e-2)
    tol = tight(ctx, FP32)
    for s in range(2):
        step_both(ms, mt, opts, batches(ctx, 2, seed=97 + s), tol=tol, micro=2, what=f"step {s}",
                  before_micro=lambda model, i: model.set_is_last_backward(i == 1))
    gathers = {g["fqn"]: g["stats"].get("all_gathers", 0) for g in tide.fsdp.report(mt, echo=False)["groups"]}
    assert gathers["blocks.2"] == gathers["blocks.1"] == gathers["blocks.0"], gathers
    assert tide.fsdp.uninstall(mt)


def dtype_changed_after_install(ctx):
    """model.to(torch.bfloat16) after training steps (stock FSDP2 cannot go on
    either: its gather buffers stay fp32): the next gather refuses with what
    to do, before touching the new shards (they once went back into the
    arena's fp32 storage, silently); after reset_iter_state, uninstall works."""
    if not hasattr(torch.distributed.fsdp.FSDPModule, "reset_iter_state"):
        raise ScenarioSkipped(f"torch {torch.__version__} cannot reset FSDP2 after a failed forward")
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 4)
    opts = optimizers(ms, mt, "sgd", 1e-2)
    step_both(ms, mt, opts, batches(ctx, 1, seed=80), tol=tight(ctx, FP32), what="before the cast")
    mt.to(torch.bfloat16)
    try:
        mt(batches(ctx, 1, seed=81)[0].to(torch.bfloat16))
    except RuntimeError as e:
        assert "uninstall before changing dtypes" in str(e), e
    else:
        raise AssertionError("a forward after model.to(torch.bfloat16) ran on TIDE's fp32 arena")
    assert all(p.dtype == torch.bfloat16 for p in mt.parameters()), "the new shards were changed back"
    mt.reset_iter_state()
    assert tide.fsdp.uninstall(mt)
    assert not tide.fsdp.report(mt, echo=False)["installed"]


def stale_unsharded_use_fails(ctx):
    """A backward through a graph kept with create_graph=True (a gradient
    penalty) uses blocks' unsharded Parameters after those blocks resharded.
    Stock fails on its freed storage; TIDE's storage is a ring slot another
    block has been gathered into since, and once gave gradients computed with
    that block's weights, silently. It must fail too, and the model must then
    train on as stock does after the same failure."""
    if not hasattr(torch.distributed.fsdp.FSDPModule, "reset_iter_state"):
        raise ScenarioSkipped(f"torch {torch.__version__} cannot reset FSDP2 after a failed backward")

    def penalty_loss(m, x):
        x = x.clone().requires_grad_(True)
        loss = m(x).float().pow(2).mean()
        (g,) = torch.autograd.grad(loss, x, create_graph=True)
        return loss + g.pow(2).sum()

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        x = batches(ctx, 1, seed=50)[0]
        for name, m in (("stock", ms), ("tide", mt)):
            try:
                penalty_loss(m, x).backward()
            except RuntimeError as e:
                if name == "tide":
                    assert "inplace operation" in str(e), e
            else:
                raise AssertionError(f"{mode}: {name}'s backward through resharded blocks did not fail")
            m.reset_iter_state()
            m.zero_grad()
        opts = optimizers(ms, mt, "adam", 1e-2)
        for step in range(2):
            step_both(ms, mt, opts, batches(ctx, 1, seed=51 + step), tol=tight(ctx, FP32),
                      what=f"{mode} after the failed penalty, step {step}")
        assert tide.fsdp.uninstall(mt)


KEPT_REGATHERED = "and its shards have changed since (an optimizer step)"  # (all_gather._warn_regathered_updated)


def _kept_regathered_warnings(ctx, since: int) -> list[str]:
    return [m for m in ctx.logs.messages(logging.WARNING)[since:] if KEPT_REGATHERED in m]


def reshard_after_backward_false(ctx):
    """Gradient accumulation without sync and without resharding after
    backward on the first micro-batches: groups left unsharded in a ring slot
    after their backward are resharded when the slot is needed, and gathered
    again with the same shards (no optimizer step in between): nothing to warn
    of (kept_unsharded_across_a_step)."""
    since = len(ctx.logs.messages(logging.WARNING))
    train(ctx, transformer, micro=3, no_sync_first=True, keep_unsharded_first=True, expect_groups=4)
    train(ctx, transformer, micro=2, no_sync_first=True, keep_unsharded_first=True, mode="slot-reuse",
          expect_groups=4)
    assert not _kept_regathered_warnings(ctx, since), _kept_regathered_warnings(ctx, since)


def kept_unsharded_across_a_step(ctx):
    """set_reshard_after_backward(False) left on through optimizer steps:
    stock FSDP2 goes on computing with the unsharded values it kept (stale
    after a step). In the ring a ring-mate reshards a kept group, which then
    gathers the updated shards: the results differ from stock's, and TIDE
    says so once for that group (a warning naming it, the setter and
    ring=False). With ring=False every step matches stock's, silently."""
    for ring in (True, False):
        ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, ring=ring), 4)
        opts = optimizers(ms, mt, "sgd", 0.1)
        for m in (ms, mt):
            m.set_reshard_after_backward(False)
        since = len(ctx.logs.messages(logging.WARNING))
        for s in range(3):
            xs = batches(ctx, 1, seed=80 + s)
            if ring:  # (no comparison: TIDE gathers updated shards where stock keeps stale ones)
                for m, opt in zip((ms, mt), opts):
                    m(xs[0]).float().pow(2).mean().backward()
                    opt.step()
                    opt.zero_grad()
            else:
                step_both(ms, mt, opts, xs, tol=tight(ctx, FP32), what=f"ring=False step {s}")
        warned = _kept_regathered_warnings(ctx, since)
        if ring:
            assert len(warned) == 1 and "ring=False" in warned[0], warned
            assert stats(mt).get("kept_regathered_after_update", 0) >= 2, stats(mt)
        else:
            assert not warned, warned
        tide.fsdp.uninstall(mt)


def _pipeline_step(m, xs, order):
    """One step as torch.distributed.pipelining drives FSDP2: micro-batches with
    set_is_last_backward/set_reshard_after_backward/set_requires_gradient_sync off, run in
    `order` ("F", i) / ("B", i); then all three on and every group's post_backward called by hand,
    then the root's final callback. Returns the micro-batches' losses."""
    loss_fn = lambda y: y.float().pow(2).mean()  # noqa: E731
    m.set_is_last_backward(False)
    m.set_reshard_after_backward(False)
    m.set_requires_gradient_sync(False)
    losses, total = {}, []
    for op, i in order:
        if op == "F":
            losses[i] = loss_fn(m(xs[i]))
            total.append(losses[i].detach())
        else:
            losses.pop(i).backward()
    m.set_is_last_backward(True)
    m.set_reshard_after_backward(True)
    m.set_requires_gradient_sync(True)
    root = m._get_fsdp_state()
    for state in root._state_ctx.all_states:
        for group in state._fsdp_param_groups:
            group.post_backward()
    root._root_post_backward_final_callback()
    return torch.stack(total)


def pipeline_schedules_without_a_stale_warning(ctx):
    """A pipeline schedule's FSDP2 pattern (1F1B and GPipe orders over three micro-batches): the
    kept groups are resharded by ring-mates during the micro-batches, and the schedule's final
    post_backward, with reshard_after_backward on again, reshards them as stock's does. Results as
    stock's, bit for bit, both modes; and no "gathers the updated shards" warning or
    kept_regathered_after_update count, which once came every step though stock gathers again too."""
    orders = {"1F1B": [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2)],
              "GPipe": [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("B", 1), ("B", 2)]}
    for (name, order), mode in zip(orders.items(), ("in-place", "slot-reuse")):
        ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        since = len(ctx.logs.messages(logging.WARNING))
        for s in range(3):
            xs = batches(ctx, 3, seed=120 + s)
            before = stats(mt)
            losses = [_pipeline_step(m, xs, order) for m in (ms, mt)]
            check_tide_ran(before, stats(mt), f"{name} {mode} step {s}")
            compare_and_step(ms, mt, opts, losses, f"{name} {mode} step {s}", tight(ctx, FP32))
        assert not _kept_regathered_warnings(ctx, since), _kept_regathered_warnings(ctx, since)
        assert stats(mt).get("kept_regathered_after_update", 0) == 0, stats(mt)
        tide.fsdp.uninstall(mt)


def _shard_with_int_raf(rafs: dict[int, int]):
    """shard_fn for make_pair: fully_shard block i with reshard_after_forward=rafs[i] (an int: the
    post-forward mesh's size), the others and the root with FSDP2's defaults."""
    def shard_fn(model, mesh):
        for i, b in enumerate(model.blocks):
            fully_shard(b, mesh=mesh, **({"reshard_after_forward": rafs[i]} if i in rafs else {}))
        fully_shard(model, mesh=mesh)
        return model
    return shard_fn


def reshard_after_forward_as_an_int(ctx):
    """fully_shard(block, reshard_after_forward=<int>) on two ranks: FSDP2
    accepts only 1 and 2 (the factors of the shard group's size) and maps
    them to False (1: every rank keeps the whole parameters after forward)
    and True (2: the whole shard group), with no smaller post-forward mesh;
    the groups are TIDE's as for those bools: the block given 1 pinned, the
    one given 2 in the ring. (A size between, resharding to a real smaller
    mesh, needs four ranks: reshard_to_a_smaller_mesh_stays_stock.) Both
    modes; as stock."""
    assert ctx.world == 2
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx), shard_fn=_shard_with_int_raf({0: 1, 2: 2}))
        # The premise: stock took the ints as those bools, without a post-forward mesh.
        for m in (ms, mt):
            groups = [b._get_fsdp_state()._fsdp_param_group for b in m.blocks]
            assert [g._reshard_after_forward for g in groups] == [False, True, True, True], groups
            assert not any(g._use_post_forward_mesh for g in groups)
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 5)
        regions = {g["fqn"]: g["region"] for g in rep["groups"]}
        assert regions["blocks.0"] == "pinned:blocks.0" and regions["blocks.2"].startswith("slot"), regions
        opts = optimizers(ms, mt, "adam", 1e-2)
        for s in range(3):
            step_both(ms, mt, opts, batches(ctx, 2, seed=95 + s), tol=tight(ctx, FP32), micro=2,
                      no_sync_first=s == 1, what=f"{mode} step {s}")
            with torch.no_grad():
                x = batches(ctx, 1, seed=99)[0]
                compare(ms(x), mt(x), f"{mode} eval after step {s}", tight(ctx, FP32))
        st = stats(mt)
        assert st.get("all_gathers", 0) > 0 and st.get("reduce_scatters", 0) > 0, st
        assert tide.fsdp.uninstall(mt)
