"""Scenarios: the ways a training step reaches FSDP2 other than `loss = f(model(x));
loss.backward(); opt.step(); opt.zero_grad()`: a forward method registered with
register_fsdp_forward_method, a backward run twice through a retained graph, two forwards summed
into one backward, an input gradient taken with torch.autograd.grad between training steps,
gradients zeroed in place (zero_grad(set_to_none=False)), the post-optimizer event
(set_post_optim_event), a no-grad evaluation between micro-batches of gradient accumulation, and
model.zero_grad() between micro-batches. Each against stock FSDP2 built identically, in both modes."""

from __future__ import annotations

import logging

import tide.fsdp
import torch
from fsdp_scenario_kit import (
    BF16, FP32, Block, Model, assert_all_tide, batches, check_tide_ran, checkpointed_transformer, compare,
    compare_and_step, compare_models, device_type,
    fsdp_params_of, gathers_pending_at_post_backward, install, local, make_pair, mesh_1d, optimizers, stats, step_both, tight,
    transformer,
)
from torch.distributed.fsdp import MixedPrecisionPolicy, register_fsdp_forward_method

MODES = ("in-place", "slot-reuse")


def _loss(y):
    return y.float().pow(2).mean()


def _installed_pair(ctx, build, mode: str, groups: int, **make_kw):
    """A stock and a TIDE model built alike (make_pair), TIDE installed in `mode` on all `groups`
    groups, and an Adam optimizer for each."""
    ms, mt = make_pair(build, ctx, mesh_1d(ctx), **make_kw)
    assert_all_tide(install(mt, ctx, mode=mode), groups)
    return ms, mt, optimizers(ms, mt, "adam", 1e-2)


class MethodBlock(Block):
    """A block with a second entry point besides forward: its branch scaled by `s`."""

    def scaled(self, x, s: float):
        return x + s * self.fc2(torch.relu(self.fc1(self.norm(x))))


class MethodModel(Model):
    """Entry points besides forward: `score` runs every parameter, the blocks
    through their `scaled` method; `encode` stops before the root's final norm
    and head, which then get no gradient (the root group reduce-scatters part
    of its parameters)."""

    def score(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b.scaled(x, 0.5)
        return self.out(self.norm(x))

    def encode(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return x


def forward_methods_registered_with_fsdp(ctx):
    """register_fsdp_forward_method on the blocks (before install) and on the
    root (after it): FSDP2 gathers and reshards around those methods as
    around forward. Training steps through score, encode (the root's norm and
    head unused on every rank) and forward in turn, and no-grad evaluations
    through score, match stock in both modes; also with the last block
    keeping its parameters after forward (folded into the ring), which a
    no-grad call of a registered method must reshard as forward's does."""
    build = lambda: MethodModel([MethodBlock() for _ in range(3)])  # noqa: E731
    entry = {"score": lambda m, x: m.score(x), "encode": lambda m, x: m.encode(x), "forward": lambda m, x: m(x)}
    for mode, last_raf in (("in-place", None), ("slot-reuse", None), ("in-place", False)):
        ms, mt = make_pair(build, ctx, mesh_1d(ctx), last_raf=last_raf)
        for m in (ms, mt):
            for b in m.blocks:
                register_fsdp_forward_method(b, "scaled")
        assert_all_tide(install(mt, ctx, mode=mode), 4)
        assert [g["folded"] for g in tide.fsdp.report(mt, echo=False)["groups"]][-1] == (last_raf is False)
        for m in (ms, mt):
            register_fsdp_forward_method(m, "score")
            register_fsdp_forward_method(m, "encode")
        opts = optimizers(ms, mt, "adam", 1e-2)
        tol = tight(ctx, FP32)
        for s, name in enumerate(("score", "encode", "forward", "score", "encode")):
            step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tol, forward=entry[name],
                      what=f"{mode} step {s} through {name}")
            with torch.no_grad():
                x = batches(ctx, 1, seed=100 + s)[0]
                compare(ms.score(x), mt.score(x), f"{mode} no-grad score after step {s}", tol)
        st = stats(mt)
        assert st.get("rs_partial", 0) > 0, st  # encode's steps: the root's head had no gradient
        assert tide.fsdp.uninstall(mt)


def backward_twice_through_a_retained_graph(ctx):
    """loss.backward(retain_graph=True), then loss.backward() again in the
    same step: stock FSDP2 gathers every block again for the second backward
    and reduce-scatters a second time, accumulating into the sharded
    gradients (twice one backward's). TIDE matches it in both modes, with
    activations recomputed under checkpointing as well."""
    for build in (transformer, checkpointed_transformer):
        for mode in MODES:
            ms, mt = make_pair(build, ctx, mesh_1d(ctx))
            assert_all_tide(install(mt, ctx, mode=mode), len(list(ms.blocks)) + 1)
            opts = optimizers(ms, mt, "adam", 1e-2)
            tol = tight(ctx, FP32)
            for s in range(3):
                x = batches(ctx, 1, seed=10 + s)[0]
                once = []
                before = stats(mt)
                for m in (ms, mt):
                    loss = _loss(m(x))
                    loss.backward(retain_graph=True)
                    once.append({n: local(p.grad).clone() for n, p in m.named_parameters()})
                    loss.backward()
                what = f"{build.__name__} {mode} step {s}"
                compare_models(ms, mt, f"{what} after two backwards", tol, grads=True)
                # The scenario's premise: stock's second backward accumulated one more backward's gradients.
                for n, p in ms.named_parameters():
                    compare(local(p.grad), 2 * once[0][n], f"{what} stock {n}: twice one backward", FP32)
                check_tide_ran(before, stats(mt), what)
                for o in opts:
                    o.step()
                    o.zero_grad()
                compare_models(ms, mt, what, tol)
            assert tide.fsdp.uninstall(mt)


def frozen_input_layer_transformer() -> Model:
    """The root's input layer frozen (a frozen embedding): the first block's
    input needs no gradient, so FSDP2 runs that block's post-backward only
    at the end of the backward."""
    m = transformer(4)
    m.inp.requires_grad_(False)
    return m


def two_forwards_one_backward(ctx):
    """The model called twice per step (two inputs, e.g. a pair of views) and
    one backward on the sum of both losses: every block is gathered twice in
    forward and twice in backward, and FSDP2's post-forward order lists each
    twice (what In-Place's prefetch inversion follows). Every group
    reshards after forward (FSDP2's default; the folded last block is
    folded_block_forward_without_its_backward's). Also with activation
    checkpointing, and with a frozen input layer: the first block then waits
    for its post-backward, unsharded, from the second forward's backward to
    the end of the first's, while its ring-mate needs the slot in between
    (that raised RegionConflict where stock trains; now it is resharded and
    gathered again for its second backward). Both modes, as stock."""
    builds = {"plain": lambda: transformer(4), "checkpointed": checkpointed_transformer,
              "frozen input layer": frozen_input_layer_transformer}
    for (label, build), mode in ((b, mode) for b in builds.items() for mode in MODES):
        ms, mt, opts = _installed_pair(ctx, build, mode, 5)
        pending = gathers_pending_at_post_backward(mt)
        tol = tight(ctx, FP32)
        for s in range(3):
            xs = batches(ctx, 2, seed=20 + s)
            what = f"{label} {mode} step {s}"
            losses = []
            before = stats(mt)
            for m in (ms, mt):
                loss = _loss(m(xs[0])) + _loss(m(xs[1]))
                loss.backward()
                losses.append(loss.detach())
            assert not pending, f"{what}: backward ran before its gather was waited for: {pending}"
            check_tide_ran(before, stats(mt), what)
            compare_and_step(ms, mt, opts, losses, what, tol)
        resharded = stats(mt).get("resharded_in_backward", 0)
        assert (resharded > 0) == (build is frozen_input_layer_transformer), stats(mt)
        # FSDP2's backward prefetch gathers the resharded block again before its second
        # backward; that backward must wait for the gather (it did not: wrong gradients on CUDA).
        waited = stats(mt).get("regather_in_backward_waited", 0)
        assert (waited > 0) == (build is frozen_input_layer_transformer), stats(mt)
        # In-Place's prefetch inversion in the second backward, whose groups FSDP2 has in
        # POST_BACKWARD from the first (it never fired before prefetch._backward_ran).
        if mode == "in-place":
            assert stats(mt).get("prefetch_inversions", 0) > 0, stats(mt)
        assert tide.fsdp.uninstall(mt)


def input_gradient_between_steps(ctx):
    """torch.autograd.grad(loss, x) for the input's gradient only (an
    adversarial example, FGSM-style), then a training step on the perturbed
    input: FSDP2 gathers every block for that backward and reshards it, but
    no parameter gets a gradient, so nothing is reduce-scattered. The input
    gradients and the training that follows match stock in both modes.
    (torch.autograd.grad over the parameters is no FSDP2 usage: the sharded
    parameters are not in the graph, and stock raises.)"""
    for mode in MODES:
        ms, mt, opts = _installed_pair(ctx, transformer, mode, 4)
        tol = tight(ctx, FP32)
        for s in range(3):
            x = batches(ctx, 1, seed=30 + s)[0]
            adversarial = []
            for m in (ms, mt):
                xg = x.clone().requires_grad_(True)
                (gx,) = torch.autograd.grad(_loss(m(xg)), xg)
                assert all(p.grad is None for p in m.parameters()), "autograd.grad(loss, x) left parameter gradients"
                adversarial.append((x + 0.1 * gx.sign()).detach())
            compare(adversarial[0], adversarial[1], f"{mode} step {s} adversarial input", tol)
            step_both(ms, mt, opts, [adversarial[0]], tol=tol, what=f"{mode} step {s} on the adversarial input")
        assert tide.fsdp.uninstall(mt)


def gradients_zeroed_in_place(ctx):
    """optimizer.zero_grad(set_to_none=False): the sharded gradients stay as
    zeroed tensors, and FSDP2 adds each reduce-scatter's output to them (not
    assigns); over single steps and two micro-batches per step, reduced
    every micro-batch or only on the last, in fp32 and in bf16 mixed
    precision. The same gradient tensors carry across steps; both modes, as
    stock."""
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    cases = [(mode, micro, no_sync_first, None) for mode in MODES
             for micro, no_sync_first in ((1, False), (2, False), (2, True))]
    # bf16 compute, fp32 gradients: without sync FSDP2 accumulates fp32 unsharded gradients.
    cases += [(mode, 2, True, bf16) for mode in MODES]
    for mode, micro, no_sync_first, mp_policy in cases:
        what = f"{mode} micro={micro} no_sync_first={no_sync_first} bf16={mp_policy is not None}"
        ms, mt, opts = _installed_pair(ctx, transformer, mode, 4, mp_policy=mp_policy)
        tol = tight(ctx, FP32 if mp_policy is None else BF16)
        kept = None
        for s in range(3):
            step_both(ms, mt, opts, batches(ctx, micro, seed=40 + s), tol=tol, micro=micro,
                      no_sync_first=no_sync_first, set_to_none=False, what=f"{what} step {s}")
            grads = [p.grad for p in mt.parameters()]
            assert all(g is not None and not local(g).any() for g in grads), "zero_grad left no zeroed tensors"
            if kept is not None:
                assert all(a is b for a, b in zip(kept, grads)), "the zeroed gradient tensors were replaced"
            kept = grads
        assert tide.fsdp.uninstall(mt)


def post_optimizer_event(ctx):
    """set_post_optim_event after every optimizer step: the root's pre-forward
    makes FSDP2's all-gather streams wait for that event instead of the
    current stream, and TIDE's all-gathers of the shards the optimizer just
    wrote run on those streams. On GPUs the event is recorded after the
    step; on the CPU FSDP2's streams ignore events (and CPU events cannot be
    recorded), so there only the event's use and training are checked."""
    on_cuda = device_type(ctx) == "cuda"
    for mode in MODES:
        ms, mt, opts = _installed_pair(ctx, transformer, mode, 4)
        tol = tight(ctx, FP32)
        for s in range(3):
            step_both(ms, mt, opts, batches(ctx, 1, seed=50 + s), tol=tol, what=f"{mode} step {s}")
            for m in (ms, mt):
                event = torch.Event(device=ctx.device)
                if on_cuda:
                    event.record()
                m.set_post_optim_event(event)
        for m in (ms, mt):  # the next forward waits for the event, then drops it (FSDP2's contract)
            with torch.no_grad():
                m(batches(ctx, 1, seed=59)[0])
            assert m._get_fsdp_state()._state_ctx.post_optim_event is None
        assert tide.fsdp.uninstall(mt)


def eval_between_no_sync_micro_batches(ctx):
    """Gradient accumulation with a no-grad evaluation in the middle: the
    first micro-batch without gradient sync (FSDP2 keeps its unsharded
    gradients, nothing reduce-scattered), then an evaluation forward under
    torch.no_grad (every block gathered and resharded again, the
    accumulated unsharded gradients left as they are), then the last
    micro-batch with sync, which reduce-scatters both micro-batches'
    gradients. Both modes, also with the last block folded into the ring
    (kept after forward) and in bf16 mixed precision (fp32 accumulated
    unsharded gradients); as stock."""
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    cases = [(mode, last_raf, None) for mode in MODES for last_raf in (None, False)]
    cases += [(mode, None, bf16) for mode in MODES]
    for mode, last_raf, mp_policy in cases:
        what = f"{mode} last_raf={last_raf} bf16={mp_policy is not None}"
        ms, mt, opts = _installed_pair(ctx, transformer, mode, 4, last_raf=last_raf, mp_policy=mp_policy)
        tol = tight(ctx, FP32 if mp_policy is None else BF16)
        for s in range(3):
            xs = batches(ctx, 2, seed=60 + s)
            x_eval = batches(ctx, 1, seed=65 + s)[0]
            losses, evals = [], []
            before = stats(mt)
            for m in (ms, mt):
                m.set_requires_gradient_sync(False)
                first = _loss(m(xs[0]))
                first.backward()
                # The premise: nothing reduce-scattered yet, the first micro-batch's gradients kept unsharded.
                assert all(p.grad is None for p in m.parameters()), f"{what}: gradients synced without sync"
                with torch.no_grad():
                    evals.append(m(x_eval))
                m.set_requires_gradient_sync(True)
                last = _loss(m(xs[1]))
                last.backward()
                losses.append(torch.stack([first.detach(), last.detach()]))
            step_what = f"{what} step {s}"
            check_tide_ran(before, stats(mt), step_what)
            compare(evals[0], evals[1], f"{step_what} evaluation", tol)
            compare_and_step(ms, mt, opts, losses, step_what, tol)
        assert tide.fsdp.uninstall(mt)


def _unsharded_grads(model) -> list:
    """FSDP2's unsharded gradients kept for accumulation without sync (fp32 ones under mixed
    precision are held apart, as unsharded_accumulated_grad)."""
    out = []
    for fp in fsdp_params_of(model):
        g = getattr(fp, "unsharded_accumulated_grad", None)
        if g is None and hasattr(fp, "_unsharded_param"):
            g = fp._unsharded_param.grad
        out.append(g)
    return out


def model_zero_grad_mid_accumulation(ctx):
    """model.zero_grad() between two micro-batches. With sync on both, it
    drops the first micro-batch's reduced sharded gradients: the step takes
    the last micro-batch's alone. Without sync on the first, the sharded
    gradients are still None and FSDP2's unsharded gradients are not the
    module's parameters after the reshard, so they survive and the last
    micro-batch reduce-scatters both. Without sync and kept unsharded after
    the first backward (set_reshard_after_backward(False)), the module's
    parameters are the unsharded ones, and zero_grad does drop their
    accumulated gradients (zeroed in place with set_to_none=False) — also
    for the group a ring-mate resharded for its slot in that backward,
    whose modules then hold the sharded parameters (TIDE's zero_grad wrapper
    reaches its unsharded gradients; before it, they survived and the step's
    gradients differed from stock's). Both modes; each premise checked on
    stock; as stock."""
    cases = [(mode, no_sync_first, keep, True) for mode in MODES
             for no_sync_first, keep in ((False, False), (True, False), (True, True))]
    cases += [(mode, True, True, False) for mode in MODES]
    for mode, no_sync_first, keep, set_to_none in cases:
        what = f"{mode} no_sync_first={no_sync_first} keep_unsharded_first={keep} set_to_none={set_to_none}"
        ms, mt, opts = _installed_pair(ctx, transformer, mode, 4)
        tol = tight(ctx, FP32)

        def zero_before_last(model, i):
            if i == 1:
                who = "stock" if model is ms else "TIDE"
                model.zero_grad(set_to_none=set_to_none)
                assert all(p.grad is None or not local(p.grad).any() for p in model.parameters()), \
                    f"{who} {what}: zero_grad left gradients"
                carrying = [g is not None and bool(g.any()) for g in _unsharded_grads(model)]
                # The premise: FSDP2's unsharded gradients survive zero_grad only when resharded.
                want = no_sync_first and not keep
                assert all(carrying) if want else not any(carrying), (who, what, carrying)

        for s in range(3):
            step_both(ms, mt, opts, batches(ctx, 2, seed=70 + s), tol=tol, micro=2, no_sync_first=no_sync_first,
                      keep_unsharded_first=keep, before_micro=zero_before_last, what=f"{what} step {s}")
        if keep:  # the case the wrapper is for: a kept group resharded by a ring-mate
            assert stats(mt).get("kept_resharded_grads_zeroed", 0) > 0, stats(mt)
            said = [m for m in ctx.logs.messages(logging.WARNING) if "does not see the gradients it accumulated" in m]
            assert said, "a kept group resharded by a ring-mate went unsaid"
        assert tide.fsdp.uninstall(mt)
