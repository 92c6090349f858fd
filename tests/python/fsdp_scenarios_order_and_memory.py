"""Scenarios on the order of collectives (the backward prefetch ahead of the reduce-scatter's
network phase) and on memory: when gradients are released, and the arena's accounting."""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import weakref

import tide.fsdp
import torch
from fsdp_scenario_kit import (
    Block, FP32, Model, Shard1Block, assert_all_tide, batches, check_tide_ran, compare_models, install, make_pair,
    mesh_1d,
    optimizers, stats, tight, train, transformer,
)
from tide.fsdp import dispatch, guards, registry
from torch import nn
from torch.distributed.tensor import Shard


@contextlib.contextmanager
def collective_trace(*models):
    """Record, in issue order, every all-gather and reduce-scatter that FSDP2
    issues for `models`: ("AG", fqn) when _fsdp_param_group calls
    foreach_all_gather, ("RS", fqn) when foreach_reduce calls its
    reduce-scatter comm (stock or TIDE), which is where the collective goes
    out (TIDE may issue an all-gather inside foreach_reduce, before it)."""
    from tide.fsdp.reduce_scatter import ReduceScatterCall

    it = guards.internals()
    names = {}
    for m in models:
        for module in m.modules():
            state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
            for g in (guards.param_groups(state) if state is not None else []):
                for fp in g.fsdp_params:
                    names[id(fp)] = g._module_fqn or "<root>"
    trace, current = [], []
    pg = it.param_group
    ag, reduce = pg.foreach_all_gather, pg.foreach_reduce
    calls = {cls: cls.__call__ for cls in (it.DefaultReduceScatter, ReduceScatterCall)}

    def traced_ag(fsdp_params, *a, **k):
        trace.append(("AG", names.get(id(fsdp_params[0]), "?")))
        return ag(fsdp_params, *a, **k)

    def traced_reduce(fsdp_params, *a, **k):
        current.append(names.get(id(fsdp_params[0]), "?"))
        try:
            return reduce(fsdp_params, *a, **k)
        finally:
            current.pop()

    def traced_call(cls):
        def call(self, *a, **k):
            trace.append(("RS", current[-1] if current else "?"))
            return calls[cls](self, *a, **k)
        return call

    pg.foreach_all_gather, pg.foreach_reduce = traced_ag, traced_reduce
    for cls in calls:
        cls.__call__ = traced_call(cls)
    try:
        yield trace
    finally:
        pg.foreach_all_gather, pg.foreach_reduce = ag, reduce
        for cls, fn in calls.items():
            cls.__call__ = fn


def prefetch_inversion(ctx):
    """In-Place issues the next backward all-gather ahead of the current
    reduce-scatter (Sec. 5.1): at post_backward(l), the all-gather that FSDP2
    issues at pre_backward(l-1) (for l-2, which takes l's ring slot) goes out
    before l's reduce-scatter. Stock FSDP2, Slot-Reuse and
    invert_prefetch=False keep FSDP2's order; training matches stock either
    way, on a 2-node topology (the reduce-scatter has a network phase)."""
    stock_order = [("AG", "blocks.3"), ("AG", "blocks.2"), ("RS", "blocks.3"), ("AG", "blocks.1"),
                   ("RS", "blocks.2"), ("AG", "blocks.0"), ("RS", "blocks.1"), ("RS", "blocks.0"), ("RS", "<root>")]
    inverted = [("AG", "blocks.3"), ("AG", "blocks.2"), ("AG", "blocks.1"), ("RS", "blocks.3"), ("AG", "blocks.0"),
                ("RS", "blocks.2"), ("RS", "blocks.1"), ("RS", "blocks.0"), ("RS", "<root>")]
    topology = (2, ctx.world // 2)
    for mode, invert, want in (("in-place", True, inverted), ("slot-reuse", True, stock_order),
                               ("in-place", False, stock_order)):
        what = f"{mode}, invert_prefetch={invert}"
        ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
        rep = install(mt, ctx, mode=mode, topology=topology, invert_prefetch=invert)
        assert_all_tide(rep, 5)
        assert (rep["prefetch_inversion"] == "on") == (mode == "in-place" and invert), (what, rep["prefetch_inversion"])
        opts = optimizers(ms, mt, "adam", 1e-2)
        steps = 2 if want is inverted else 1
        for s in range(steps):
            xs = batches(ctx, 2, seed=s)
            before = stats(mt)
            for i, x in enumerate(xs):  # two micro-batches, each reduce-scattered
                orders = []
                for model in (ms, mt):
                    loss = model(x).pow(2).mean()
                    with collective_trace(ms, mt) as trace:
                        loss.backward()
                    orders.append(trace)
                assert orders[0] == stock_order, (what, "stock FSDP2's backward order changed", orders[0])
                assert orders[1] == want, (what, f"step {s} micro-batch {i}", orders[1])
            check_tide_ran(before, stats(mt), f"{what} step {s}")
            compare_models(ms, mt, f"{what} step {s}", tight(ctx, FP32), grads=True)
            for o in opts:
                o.step()
                o.zero_grad()
            compare_models(ms, mt, f"{what} step {s}", tight(ctx, FP32))
        st = stats(mt)
        assert st.get("prefetch_inversions", 0) == (2 * 2 * steps if want is inverted else 0), (what, st)
        out = io.StringIO()
        tide.fsdp.report(mt, file=out)
        assert f"backward prefetch inversion {rep['prefetch_inversion']}" in out.getvalue(), out.getvalue()
        tide.fsdp.uninstall(mt)

    # FSDP2 internals that order backward otherwise: inversion off, with one message; TIDE still runs.

    cls = guards.internals().param_group.FSDPParamGroup
    stock_prefetch = cls.__dict__["_backward_prefetch"]
    cls._backward_prefetch = lambda self: stock_prefetch(self)
    try:
        _, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
        rep = install(mt, ctx, topology=topology)
    finally:
        cls._backward_prefetch = stock_prefetch
    assert_all_tide(rep, 5)
    assert rep["prefetch_inversion"].startswith("off (torch_internals"), rep["prefetch_inversion"]
    lines = [m for m in ctx.logs.messages(logging.WARNING) if "prefetch inversion is off" in m]
    assert len(lines) == 1, lines
    tide.fsdp.uninstall(mt)


def read_done_release(ctx):
    """Reduce-scatter inputs are released at TIDE's read-done point, before
    the network phase ends. check_read_done overwrites them with NaN right
    there, in both modes, on a 2-node topology: training still matches stock.
    The same run against a communicator that reports read-done before it
    reads (test fault release-grads-early) does not."""
    topology = (2, ctx.world // 2)
    for mode in ("in-place", "slot-reuse"):
        _, _, rep, st = train(ctx, transformer, mode=mode, topology=topology, steps=2, micro=2, expect_groups=4,
                              install_kw={"check_read_done": True})
        assert rep["check_read_done"], rep
        assert st.get("rs_inputs_poisoned", 0) == st["reduce_scatters"] > 0, st
        assert st.get(f"rs_{mode.replace('-', '_')}", 0) > 0, st
    os.environ["TIDE_TEST_FAULT"] = "release-grads-early"
    try:
        train(ctx, transformer, topology=topology, steps=1, expect_groups=4, install_kw={"check_read_done": True})
    except AssertionError as e:
        # Step 0's gradient comparison (the losses come before the reduce-scatter), on this rank or
        # another: not some other failure.
        assert str(e).startswith(("step 0 grad ", "the check failed on")), e
    else:
        raise AssertionError("gradients poisoned before TIDE read them went unnoticed")
    finally:
        del os.environ["TIDE_TEST_FAULT"]
        _uninstall_all()


def grads_released_with_fsdp_state(ctx):
    """install(release_grads=...): In-Place gradients read by a reduce-scatter
    are gone when FSDP2's foreach_reduce returns ("read-done": released at the
    call's read-done point, on CUDA through record_stream), or live on with
    FSDP2's reduce-scatter state ("with-fsdp-state") and are gone once
    backward has returned, or ("read-done-polled", CUDA) wait in the
    backend's release queue behind one event per call until a later call
    finds it passed, or go to the allocator at the end of backward (on the
    host fabric: as "read-done"); training matches stock every way, with
    gradient accumulation."""
    from tide.fsdp import reduce_scatter as rs_mod
    orig_take, orig_reduce = rs_mod.ReduceScatterCall.take_grads, dispatch.foreach_reduce
    pending: list = []                  # weak references to the current call's inputs read in place
    seen: list[tuple[str, list]] = []   # per call: release_grads, those references
    box = {"release": None}

    def take_grads(self, unsharded_grads):
        out = orig_take(self, unsharded_grads)
        pending.extend(weakref.ref(t) for t in self.keep)
        return out

    def foreach_reduce(*a, **k):
        out = orig_reduce(*a, **k)
        if pending:  # a TIDE call (stock ones take no gradients here)
            gc.collect()
            alive = sum(r() is not None for r in pending)
            if box["release"] == "read-done" or (box["release"] == "read-done-polled" and not cuda):
                assert alive == 0, f"{alive} of {len(pending)} inputs outlived foreach_reduce ({box['release']})"
            elif box["release"] == "read-done-polled":
                pass  # queued behind the call's read-done event: checked after uninstall below
            else:
                assert alive == len(pending), f"{alive} of {len(pending)} inputs retained with FSDP2's state"
            seen.append((box["release"], list(pending)))
            pending.clear()
        return out

    # install binds dispatch's functions into FSDP2 by their module names.
    foreach_reduce._tide_dispatch = True
    rs_mod.ReduceScatterCall.take_grads = take_grads
    dispatch.foreach_reduce = foreach_reduce
    cuda = torch.device(ctx.device).type == "cuda"
    try:
        for release in ("read-done", "with-fsdp-state", "read-done-polled"):
            box["release"] = release
            _, _, rep, st = train(ctx, transformer, steps=2, micro=2, expect_groups=4,
                                  install_kw={"release_grads": release})
            assert rep["release_grads"] == release, rep
            assert any(rel == release for rel, _ in seen), f"no TIDE reduce-scatter took gradients ({release})"
            retained = st.get("rs_inputs_retained", 0)
            assert (retained == st["reduce_scatters"] > 0) if release == "with-fsdp-state" else retained == 0, st
            # train() has uninstalled: every input is gone, the polled ones included.
            gc.collect()
            left = sum(r() is not None for rel, refs in seen if rel == release for r in refs)
            assert left == 0, f"{left} reduce-scatter inputs outlived uninstall ({release})"
        # FSDP2 drops its last reduce-scatter state at the end of backward: nothing is left
        # for the optimizer step to run beside.
        box["release"] = "with-fsdp-state"
        _, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        install(mt, ctx, release_grads="with-fsdp-state")
        seen.clear()
        mt(batches(ctx, 1, seed=5)[0]).pow(2).mean().backward()
        gc.collect()
        assert len(seen) == 4, f"{len(seen)} TIDE reduce-scatters in one backward"
        left = sum(r() is not None for _, refs in seen for r in refs)
        assert left == 0, f"{left} reduce-scatter inputs outlived backward"
        tide.fsdp.uninstall(mt)
    finally:
        _uninstall_all()  # while the wrapper is still the bound replacement (a failed step leaves models installed)
        rs_mod.ReduceScatterCall.take_grads = orig_take
        dispatch.foreach_reduce = orig_reduce
    if cuda:
        _, mt = make_pair(transformer, ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, release_grads="read-done-polled"), 4)
        backend = registry.installed[mt].contexts[0].backend
        queue = backend.released
        refs: list = []
        orig_add = queue.add
        queue.add = lambda event, tensors: (refs.extend(weakref.ref(t) for t in tensors), orig_add(event, tensors))
        # Polled: a later call drops what an earlier one queued, once its read-done has passed
        # (the hand-over at the end of backward held back for this step).
        hand_over = backend._hand_over_at_backward_end
        backend._hand_over_at_backward_end = lambda: None
        mt(batches(ctx, 1, seed=6)[0]).pow(2).mean().backward()
        backend._hand_over_at_backward_end = hand_over
        queued = queue.queued
        assert queued > 0 and len(queue) > 0, (queued, len(queue))  # the last call's: no call after it yet
        torch.cuda.synchronize()  # every read-done passed: the next step's first all-gather drops them all
        # End of backward: what is still queued goes to the allocator (record_stream), so nothing
        # is held into the optimizer step; once per backward, step after step.
        for seed in (7, 8):
            mt(batches(ctx, 1, seed=seed)[0]).pow(2).mean().backward()
            gc.collect()
            assert len(queue) == 0 and queue.dropped == queue.queued, (queue.queued, queue.dropped)
            assert queue.handed_over > 0 and queue.dropped - queue.handed_over >= queued, \
                (queued, queue.dropped, queue.handed_over)
            left = sum(r() is not None for r in refs)
            assert left == 0, f"{left} of {len(refs)} queued inputs outlived backward"
        handed = queue.handed_over
        tide.fsdp.uninstall(mt)
        assert len(queue) == 0 and queue.handed_over == handed, (queue.queued, queue.dropped, handed)
    try:
        tide.fsdp.install(nn.Linear(2, 2), release_grads="at-once")
    except ValueError as e:
        assert "release_grads" in str(e), e
    else:
        raise AssertionError("an unknown release_grads was accepted")


def arena_accounting(ctx):
    """report() prints, and arena_bytes() returns, what the fabric holds for
    the arena outside torch's allocator (here: the shared-memory segment,
    at least the requested arena); per group the report names the region and
    its slot size, the staging bytes and the plan; stock groups their reason."""
    _, mt = make_pair(lambda: Model([Block(), Shard1Block(), Block(), Block()]), ctx, mesh_1d(ctx),
                       placement=lambda b: (lambda p: Shard(1) if p.ndim == 2 else None)
                       if isinstance(b, Shard1Block) else None)
    assert tide.fsdp.arena_bytes(mt) == 0
    rep = install(mt, ctx)
    (arena,) = rep["arenas"]
    assert arena["reserved_bytes"] >= arena["arena_bytes"] > arena["user_bytes"] > 0, arena
    assert tide.fsdp.arena_bytes(mt) == arena["reserved_bytes"] == rep["arena_bytes"]
    out = io.StringIO()
    tide.fsdp.report(mt, file=out)
    text = out.getvalue()
    assert f"{arena['reserved_bytes']} B held outside torch's allocator" in text, text
    assert f"arena bytes outside torch's allocator, this rank: {arena['reserved_bytes']}" in text, text
    rows = {line.split()[0]: line.split() for line in text.splitlines()[3:]}
    slots = {r["name"]: r["bytes"] for r in arena["regions"]}
    for g in rep["groups"]:
        row = rows[g["fqn"]]
        if g["status"] == "tide":
            assert row[1:6] == ["tide", g["region"], str(slots[g["region"]]), str(g["unsharded_bytes"]),
                                str(g["staging_bytes"])], (row, g)
            assert g["region_bytes"] == slots[g["region"]] >= g["unsharded_bytes"] > 0, g
            assert g["staging_bytes"] >= g["plan"]["rs_staging_bytes"] + g["plan"]["ag_stage_bytes"], g
            assert f"AG rounds {g['plan']['ag_rounds']}" in " ".join(row) and "RS waves" in " ".join(row), row
        else:
            assert row[1] == "stock" and f"{g['reason']}:" in row, (row, g)
    assert {g["fqn"]: g["status"] for g in rep["groups"]} == {
        "<root>": "tide", "blocks.0": "tide", "blocks.1": "stock", "blocks.2": "tide", "blocks.3": "tide"}, rep
    assert "host time inside 0 all-gathers 0.0 ms, 0 reduce-scatters 0.0 ms" in text, text
    # After a step: the fabric's counts, libtide's calls among them, with the host time inside them.
    mt(batches(ctx, 1, seed=3)[0]).pow(2).mean().backward()
    (arena,) = tide.fsdp.report(mt, echo=False)["arenas"]
    st = arena["fabric_stats"]
    assert st["all_gather_calls"] > 0 and st["reduce_scatter_calls"] > 0, st
    out = io.StringIO()
    tide.fsdp.report(mt, file=out)
    text = out.getvalue()
    for kind, label in (("all_gather", "all-gathers"), ("reduce_scatter", "reduce-scatters")):
        want = (f"{st[kind + '_calls']} {label} {st[kind + '_host_ns'] / 1e6:.1f} ms "
                f"({st[kind + '_host_ns'] / 1e3 / st[kind + '_calls']:.0f} us each)")
        assert want in text, (want, text)
    tide.fsdp.uninstall(mt)
    assert tide.fsdp.arena_bytes(mt) == 0


def _uninstall_all():
    for model in list(registry.installed.keys()):
        tide.fsdp.uninstall(model)
