"""Scenarios run inside every rank of a gloo job (see fsdp_harness): each
trains a stock FSDP2 model and a TIDE one built identically, on the same
per-rank data, and compares losses, gradients and parameters.

`ctx.device` (default "cpu") places models, meshes and data: the CUDA smoke
(fsdp_cuda_smoke.py) runs the same scenarios on GPUs under NCCL."""

from __future__ import annotations

import contextlib
import copy
import gc
import importlib
import io
import logging
import os
import weakref

import tide.fsdp
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.utils.checkpoint
from fsdp_harness import ScenarioSkipped
from tide.fsdp import dispatch, guards
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Shard

TIMEOUT_S = 60.0
FP32 = {"rtol": 1e-5, "atol": 1e-6}
BF16 = {"rtol": 2e-2, "atol": 2e-2}
FP32_LOOSE = {"rtol": 1e-5, "atol": 1e-6}  # float tolerance even on two ranks


def tight(ctx, tol):
    """On two ranks a sum has one order, so TIDE and gloo agree bit for bit
    (AVG halves exactly); on more ranks the summation order differs. On GPUs
    the float tolerance holds (NCCL's AVG and reduction kernels are not
    gloo's)."""
    return None if ctx.world == 2 and device_type(ctx) == "cpu" else tol


def device_type(ctx) -> str:
    return torch.device(ctx.device).type


# ------------------------------------------------------------------ models

class Block(nn.Module):
    """Pre-norm MLP block with a residual; odd sizes so shards get padded."""

    def __init__(self, d: int = 24, h: int = 37):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class TinyParamBlock(Block):
    """With a 2-element and a 1-element parameter: on four ranks some hold
    no element of them (empty shards, padding only)."""

    def __init__(self, d: int = 24):
        super().__init__(d)
        self.gate = nn.Parameter(torch.randn(2) * 0.1)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        # Per-feature shifts and a scaled branch: the final LayerNorm cancels
        # neither, so both get real gradients (a uniform shift or scale would
        # get exactly zero, and Adam would amplify rounding noise).
        h = self.fc2(torch.relu(self.fc1(self.norm(x))))
        return x + self.scale * h + self.gate.repeat(x.shape[-1] // 2)


class Shard1Block(nn.Module):
    """Matrices sharded on dim 1 (shard_placement_fn); dims divisible by 4."""

    def __init__(self, d: int = 24, h: int = 32):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class MixedBlock(Block):
    """An fp32 block with a frozen bf16 parameter: one group, two dtypes."""

    def __init__(self, d: int = 24):
        super().__init__(d)
        self.frozen = nn.Parameter(torch.randn(d, dtype=torch.bfloat16) * 0.1, requires_grad=False)

    def forward(self, x):
        return super().forward(x) + self.frozen.float()


class ManyBlock(nn.Module):
    """257 parameters in one group."""

    def __init__(self, d: int = 24, n: int = 257):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(d) * 0.01) for _ in range(n)])

    def forward(self, x):
        return x + torch.stack(list(self.ps)).sum(0)


class Model(nn.Module):
    def __init__(self, blocks: list[nn.Module], d: int = 24, d_in: int = 7, d_out: int = 5):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, d_out)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(self.norm(x))


class LinearModel(nn.Module):
    """Linear layers only, for integer-exact gradients. Small enough that
    every activation and gradient stays an integer below 2**24 for weights
    within +-4 and inputs within +-1."""

    def __init__(self, d: int = 4, n: int = 2):
        super().__init__()
        self.inp = nn.Linear(5, d)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(d, 2 * d + 1), nn.ReLU(), nn.Linear(2 * d + 1, d))
                                     for _ in range(n)])
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = x + b(x)
        return self.out(x)


def transformer(n_blocks: int = 3) -> Model:
    return Model([Block() for _ in range(n_blocks)])


class CheckpointedModel(Model):
    """Every block's activations recomputed in backward (torch.utils.checkpoint,
    non-reentrant), as most large-model training runs: a block's forward runs
    again inside backward, over the parameters its pre-backward all-gather
    brought back into the arena."""

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
        return self.out(self.norm(x))


def checkpointed_transformer(n_blocks: int = 4) -> Model:
    return CheckpointedModel([Block() for _ in range(n_blocks)])


def checkpoint_wrapped_transformer(n_blocks: int = 4) -> Model:
    """Blocks wrapped by checkpoint_wrapper before fully_shard (torchtitan's
    way): FSDP2 shards the wrappers."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    m = transformer(n_blocks)
    m.blocks = nn.ModuleList([checkpoint_wrapper(b) for b in m.blocks])
    return m


# ------------------------------------------------------------------ helpers

def mesh_1d(ctx):
    return init_device_mesh(device_type(ctx), (ctx.world,))


def mesh_hsdp(ctx):
    return init_device_mesh(device_type(ctx), (2, ctx.world // 2), mesh_dim_names=("replicate", "shard"))


def shard(model: nn.Module, mesh, *, mp_policy=None, raf=None, placement=None, last_raf=None):
    """fully_shard every block, then the root. raf: reshard_after_forward for
    the blocks (None: FSDP2's default); last_raf: for the last block only."""
    kw = {"mesh": mesh}
    if mp_policy is not None:
        kw["mp_policy"] = mp_policy
    blocks = list(model.blocks)
    for i, b in enumerate(blocks):
        bkw = dict(kw)
        if raf is not None:
            bkw["reshard_after_forward"] = raf
        if last_raf is not None and i == len(blocks) - 1:
            bkw["reshard_after_forward"] = last_raf
        if placement is not None and placement(b) is not None:
            bkw["shard_placement_fn"] = placement(b)
        fully_shard(b, **bkw)
    fully_shard(model, **kw)
    return model


def make_pair(build, ctx, mesh, *, dtype=None, integer=False, shard_fn=None, **shard_kw):
    """Two models of the same weights (stock, then the one TIDE goes on), built on the CPU
    and sharded on `mesh` by `shard` (shard_kw), or by shard_fn(model, mesh)."""
    out = []
    for _ in range(2):
        torch.manual_seed(1234)
        m = build()  # on the CPU, so both devices draw the same weights
        if integer:
            with torch.no_grad():
                for p in m.parameters():
                    p.copy_(torch.randint(-1, 2, p.shape, dtype=p.dtype))
        if dtype is not None:
            m = m.to(dtype)
        m = m.to(ctx.device)
        out.append(shard_fn(m, mesh) if shard_fn is not None else shard(m, mesh, **shard_kw))
    return out


def batches(ctx, n: int, *, d_in: int = 7, rows: int = 6, integer=False, dtype=torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(1000 * seed + ctx.rank)
    device = ctx.device
    if integer:
        return [torch.randint(-1, 2, (rows, d_in), generator=g).to(device, dtype) for _ in range(n)]
    return [torch.randn(rows, d_in, generator=g).to(device, dtype) for _ in range(n)]


def local(t):
    return t._local_tensor if hasattr(t, "_local_tensor") else t


def _check_close(a, b, what: str, tol: dict | None) -> None:
    """This rank's comparison (its own shards); raises here only."""
    a, b = local(a).detach(), local(b).detach()
    if tol is None:
        if not torch.equal(a, b):
            diff = (a.float() - b.float()).abs().max().item() if a.numel() else 0.0
            raise AssertionError(f"{what}: not bit-identical (max |diff| {diff})")
    else:
        torch.testing.assert_close(a, b, **tol, msg=lambda m: f"{what}: {m}")


def compare(a, b, what: str, tol: dict | None) -> None:
    """a against b on every rank (tol None: bit for bit); raises on every rank if any differs."""
    agree(lambda: _check_close(a, b, what, tol))


def compare_models(ms, mt, what: str, tol: dict | None, grads: bool = False) -> None:
    """Parameters (or gradients) of both models, on every rank; raises on every rank if any differs."""
    def check():
        for (name, ps), pt in zip(ms.named_parameters(), mt.parameters()):
            if grads:
                if (ps.grad is None) != (pt.grad is None):
                    raise AssertionError(f"{what} {name}: grad presence differs")
                if ps.grad is not None:
                    _check_close(ps.grad, pt.grad, f"{what} grad {name}", tol)
            else:
                _check_close(ps, pt, f"{what} param {name}", tol)
    agree(check)


def collective_device() -> str:
    """The default group's device: NCCL reduces CUDA tensors only, gloo CPU ones."""
    return f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cpu"


def agree(check) -> None:
    """check() on every rank; if it failed on any rank, raise on every rank. Each rank compares
    its own shards, so one may fail alone; a rank that left its scenario early would leave its
    peers blocked in their next collective (on GPUs until the fabric's watchdog stopped the
    process, and every scenario after it with it: session 9, run 2)."""
    failure = None
    try:
        check()
    except AssertionError as e:
        failure = e
    failed = torch.tensor([int(failure is not None)], device=collective_device())
    dist.all_reduce(failed)
    if failure is not None:
        raise failure
    if failed.item():
        raise AssertionError(f"the check failed on {int(failed.item())} other rank(s); their reports say how")


def step_both(ms, mt, opts, xs, *, loss_fn=None, tol, micro=1, no_sync_first=False, what="step", hsdp_ar_last=False,
              keep_unsharded_first=False, before_micro=None):
    """One optimizer step of both models over `micro` micro-batches; compares
    losses, accumulated gradients, and parameters after the step.
    before_micro(model, i): anything else to set before micro-batch i."""
    loss_fn = loss_fn or (lambda y: y.float().pow(2).mean())
    losses = []
    for model in (ms, mt):
        total = []
        for i, x in enumerate(xs[:micro]):
            last = i == micro - 1
            if no_sync_first:
                model.set_requires_gradient_sync(last)
            if hsdp_ar_last:
                model.set_requires_all_reduce(last)
            if keep_unsharded_first:
                model.set_reshard_after_backward(last)
            if before_micro is not None:
                before_micro(model, i)
            loss = loss_fn(model(x))
            loss.backward()
            total.append(loss.detach())
        losses.append(torch.stack(total))
    compare(losses[0], losses[1], f"{what} losses", tol)
    compare_models(ms, mt, what, tol, grads=True)
    for o in opts:
        o.step()
        o.zero_grad()
    compare_models(ms, mt, what, tol)


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


class SignSGD(torch.optim.Optimizer):
    """p -= sign(grad): integer weights stay integers."""

    def __init__(self, params):
        super().__init__(params, {})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.sub_(torch.sign(p.grad))


def optimizers(ms, mt, opt: str, lr: float):
    if opt == "adam":
        return [torch.optim.Adam(ms.parameters(), lr=lr), torch.optim.Adam(mt.parameters(), lr=lr)]
    if opt == "sign":
        return [SignSGD(ms.parameters()), SignSGD(mt.parameters())]
    return [torch.optim.SGD(ms.parameters(), lr=lr), torch.optim.SGD(mt.parameters(), lr=lr)]


def install(model, ctx, **kw):
    kw.setdefault("timeout_s", TIMEOUT_S)
    rep = tide.fsdp.install(model, **kw)
    return rep


def tide_groups(rep):
    return [g for g in rep["groups"] if g["status"] == "tide"]


def assert_all_tide(rep, n: int):
    got = tide_groups(rep)
    assert rep["installed"] and len(got) == n, \
        f"expected {n} TIDE groups: {[(g['fqn'], g['status'], g['reason']) for g in rep['groups']]}"


def stats(model) -> dict:
    total: dict[str, int] = {}
    for g in tide.fsdp.report(model, echo=False)["groups"]:
        for k, v in g.get("stats", {}).items():
            total[k] = total.get(k, 0) + v
    return total


def train(ctx, build, *, steps=3, tol=FP32, mode="in-place", mesh=None, dtype=None, mp_policy=None, integer=False,
          micro=1, no_sync_first=False, opt="adam", lr=1e-2, topology=None, expect_groups=None, loss_fn=None,
          configure=None, hsdp_ar_last=False, keep_unsharded_first=False, ring=True, adopt=True, install_kw=None,
          after_step=None, before_micro=None, **shard_kw):
    """Trains a stock and a TIDE model side by side (make_pair, step_both). after_step(mt, s), if
    given, runs between step s and the next (e.g. to uninstall and install TIDE again);
    before_micro(model, s, i) before micro-batch i of step s, on both models."""
    mesh = mesh if mesh is not None else mesh_1d(ctx)
    tol = tight(ctx, tol) if tol is not FP32_LOOSE else FP32
    if mp_policy is not None:
        shard_kw["mp_policy"] = mp_policy
    ms, mt = make_pair(build, ctx, mesh, dtype=dtype, integer=integer, **shard_kw)
    if configure is not None:
        configure(ms)
        configure(mt)
    rep = install(mt, ctx, mode=mode, topology=topology, ring=ring, adopt=adopt, **(install_kw or {}))
    if expect_groups is not None:
        assert_all_tide(rep, expect_groups)
    opts = optimizers(ms, mt, opt, lr)
    d_in = ms.inp.in_features
    in_dtype = dtype or torch.float32
    for s in range(steps):
        xs = batches(ctx, micro, d_in=d_in, integer=integer, dtype=in_dtype, seed=s)
        per_micro = None if before_micro is None else (lambda model, i, s=s: before_micro(model, s, i))
        step_both(ms, mt, opts, xs, tol=tol, micro=micro, no_sync_first=no_sync_first, what=f"step {s}",
                  loss_fn=loss_fn, hsdp_ar_last=hsdp_ar_last, keep_unsharded_first=keep_unsharded_first,
                  before_micro=per_micro)
        if after_step is not None and s + 1 < steps:
            after_step(mt, s)
    st = stats(mt)
    assert st.get("all_gathers", 0) > 0 and st.get("reduce_scatters", 0) > 0, f"TIDE did not run: {st}"
    tide.fsdp.uninstall(mt)
    return ms, mt, rep, st


def int_loss(y):
    return y.sum()  # SUM: integer gradients


def sum_reduction(model):
    """SUM on every FSDP module's groups (FSDPModule's setters do not recurse)."""
    for module in model.modules():
        if isinstance(module, torch.distributed.fsdp.FSDPModule):
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)


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
    for fp in _fsdp_params(mt):
        assert fp._unsharded_param.storage_offset() == 0
    st = stats(mt)
    assert st["rs_in_place"] > 0 and st["ag_resident"] > 0 and "rs_stock" not in st, st
    owner = weakref.ref(importlib.import_module("tide.fsdp.install")._installed[mt].contexts[0].owner)
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
        assert mt.blocks[1].norm.weight.grad is None


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
        for m, o in zip((ms, mt), opts):
            m(x).pow(2).mean().backward()
            norms.append(torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=0.05).full_tensor())
            o.step()
            o.zero_grad()
        assert norms[0].item() > 0.05, norms  # the clip acts
        compare(norms[0], norms[1], f"step {s} total norm", tol)
        compare_models(ms, mt, f"step {s}", tol)
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


class OrderedBlocksModel(Model):
    """Runs its blocks in `order` (None: each once, in module order): a
    block left out (layer drop, conditional computation) or run twice
    (weights shared across positions)."""

    order: tuple[int, ...] | None = None

    def forward(self, x):
        x = self.inp(x)
        for i in self.order if self.order is not None else range(len(self.blocks)):
            x = self.blocks[i](x)
        return self.out(self.norm(x))


def conditional_execution(ctx):
    """Blocks out of module order: one skipped in some steps, one run twice.
    Groups that share a ring slot then run back to back, and FSDP2's
    backward prefetch asks for one while the other still holds the slot.
    The prefetch is deferred (the group gathers at its own unshard) and
    every step matches stock, in both modes. Uninstalling gives FSDP2 its
    own _prefetch_unshard back."""
    build = lambda: OrderedBlocksModel([Block() for _ in range(4)])  # noqa: E731
    orders = [None, (0, 2, 3), None, (0, 1, 3), (1, 2, 3), (0, 1, 2, 1, 3)]
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
    g = torch.Generator().manual_seed(100 * step + ctx.rank)
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
    opts = [torch.optim.Adam(ms.parameters(), lr=1e-2), torch.optim.Adam(mt.parameters(), lr=1e-2)]
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
            for m in (ms, mt):
                (loss_fn(m(xs[0])) + loss_fn(m(xs[1]))).backward()
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


def nested_fully_shard(ctx):
    """fully_shard on each block and on two modules inside it: a block stays
    unsharded while its children run, so it gets a region of its own and only
    the innermost groups share the ring; both modes match stock (the ring
    once put a child into its parent's slot: RegionConflict)."""
    def shard(model, mesh):
        for b in model.blocks:
            fully_shard(b.attn, mesh=mesh)
            fully_shard(b.mlp, mesh=mesh)
            fully_shard(b, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model

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
    backward. Both modes match stock, step after step."""
    build = lambda: OrderedBlocksModel([Block() for _ in range(4)])  # noqa: E731

    def prefetch_next(m):
        blocks = list(m.blocks)
        for a, b in zip(blocks, blocks[1:]):
            a.set_modules_to_forward_prefetch([b])

    tol = tight(ctx, FP32)
    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(build, ctx, mesh_1d(ctx))
        prefetch_next(ms)
        prefetch_next(mt)
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        for s, order in enumerate([None, (0, 2, 3), None, (0, 1, 3)]):
            ms.order = mt.order = order
            step_both(ms, mt, opts, batches(ctx, 1, seed=90 + s), tol=tol, what=f"{mode} prefetch, step {s} {order}")
        assert stats(mt).get("stale_prefetch_dropped", 0) >= 2, stats(mt)
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


def reshard_after_backward_false(ctx):
    """Gradient accumulation without sync and without resharding after
    backward on the first micro-batches: groups left unsharded in a ring slot
    after their backward are resharded when the slot is needed."""
    train(ctx, transformer, micro=3, no_sync_first=True, keep_unsharded_first=True, expect_groups=4)
    train(ctx, transformer, micro=2, no_sync_first=True, keep_unsharded_first=True, mode="slot-reuse",
          expect_groups=4)


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
    assert len(lines) == 3, lines
    opts = [torch.optim.Adam(ms.parameters(), lr=1e-2), torch.optim.Adam(mt.parameters(), lr=1e-2)]
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
    opts = [torch.optim.Adam(ms.parameters(), lr=1e-2), torch.optim.Adam(mt.parameters(), lr=1e-2)]
    step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tight(ctx, FP32), what="step 0")
    unsharded_ids = [id(fp._unsharded_param) for fp in _fsdp_params(mt)]

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
    unsharded_ids = [id(fp._unsharded_param) for fp in _fsdp_params(mt)]

    # install / uninstall / install
    rep = install(mt, ctx)  # already installed: no-op
    assert_all_tide(rep, 4)
    assert tide.fsdp.uninstall(mt)
    assert not tide.fsdp.report(mt, echo=False)["installed"]
    step_both(ms, mt, opts, batches(ctx, 1, seed=2), tol=tight(ctx, FP32), what="step 2 (stock)")
    assert_all_tide(install(mt, ctx, mode="slot-reuse"), 4)
    step_both(ms, mt, opts, batches(ctx, 1, seed=3), tol=tight(ctx, FP32), what="step 3 (reinstalled)")
    assert [id(fp._unsharded_param) for fp in _fsdp_params(mt)] == unsharded_ids, "unsharded Parameters re-created"
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
        install(mt, ctx)
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
    install(mt, ctx)
    opts = [torch.optim.Adam(ms.parameters(), lr=1e-2), torch.optim.Adam(mt.parameters(), lr=1e-2)]
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
        opts = [torch.optim.Adam(ms.parameters(), lr=1e-2), torch.optim.Adam(mt.parameters(), lr=1e-2)]
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


def dropped_without_uninstall(ctx):
    """A model dropped while installed is collected like a stock one, with its
    arena (host fabric: the communicator closes with its last view), FSDP2's
    functions come back, and one warning says uninstall was skipped."""
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    assert_all_tide(install(mt, ctx), 4)
    opts = optimizers(ms, mt, "adam", 1e-2)
    step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tight(ctx, FP32), what="before the drop")
    owner = weakref.ref(importlib.import_module("tide.fsdp.install")._installed[mt].contexts[0].owner)
    model = weakref.ref(mt)
    del mt, opts
    gc.collect()
    assert model() is None, "the installed model outlived its last reference"
    assert owner() is None, "the arena outlived the model"
    assert not dispatch.active(), "FSDP2's functions were not restored"
    dropped = [m for m in ctx.logs.messages(logging.WARNING) if "without tide.fsdp.uninstall" in m]
    assert len(dropped) == 1, dropped
    try:
        copy.deepcopy(importlib.import_module("tide.fsdp.install").Installation("in-place", True))
    except TypeError as e:
        assert "uninstall" in str(e), e
    else:
        raise AssertionError("an installation was deep-copied")


def refusals(ctx):
    """install on a non-root module, a plain module or a model still on the
    meta device changes nothing, says why, and does not raise."""
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
    rep = tide.fsdp.install(mt, topology=(1, 3 * ctx.world), timeout_s=TIMEOUT_S)
    assert rep["groups"] and all(g["reason"] == "bad_topology" for g in rep["groups"]), rep
    assert_all_tide(install(mt, ctx), 4)
    tide.fsdp.uninstall(mt)
    for bad, word in (({"topology": (3,)}, "topology"), ({"topology": "ab"}, "topology"),
                      ({"plan_options": {"bogus": 1}}, "bogus"), ({"timeout_s": "x"}, "timeout_s")):
        try:
            tide.fsdp.install(mt, **{"timeout_s": TIMEOUT_S, **bad})
            raise AssertionError(f"install accepted {bad}")
        except ValueError as e:
            assert word in str(e), (bad, e)
    assert tide.fsdp.report(mt, echo=False)["installed"] is False
    try:
        tide.fsdp.install(mt, fabric="nvlink", timeout_s=TIMEOUT_S)
        raise AssertionError("install accepted fabric 'nvlink'")
    except ValueError as e:
        assert "cuda-ipc" in str(e), e
    assert_all_tide(install(mt, ctx), 4)  # on the root, after training started: fine
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
        ms, mt = make_pair(lambda: transformer(4), ctx, mesh_1d(ctx))
        assert_all_tide(install(mt, ctx, mode=mode), 5)
        opts = optimizers(ms, mt, "sgd", 1e-2)
        tol = tight(ctx, FP32)
        step_both(ms, mt, opts, batches(ctx, 1, seed=90), tol=tol, what=f"{mode} before the failure")
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


# ------------------------------------------------------------------ four ranks

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


def fsdp4_experts_on_a_sub_mesh(ctx):
    """Expert tensors sharded on a 2-rank sub-mesh (shard_placement_fn
    returning a ShardPlacementResult, torch >= 2.13), the rest on all four
    ranks: two parameter groups per block, on two process groups, each with
    its own communicator. Integer data and weights, SUM: bit for bit, both
    modes."""
    try:
        from torch.distributed.fsdp._fully_shard._fsdp_common import FSDPMeshInfo, ShardPlacementResult
    except ImportError:
        raise ScenarioSkipped(f"torch {torch.__version__} has one mesh per module (no ShardPlacementResult)")
    mesh = mesh_1d(ctx)
    sub = init_device_mesh(device_type(ctx), (2, ctx.world // 2), mesh_dim_names=("ep", "efsdp"))["efsdp"]
    experts_mesh = FSDPMeshInfo(mesh=sub, shard_mesh_dim=0)

    def placement(p):
        return ShardPlacementResult(Shard(0), experts_mesh) if p.dim() == 3 else None

    for mode in ("in-place", "slot-reuse"):
        ms, mt = make_pair(ExpertModel, ctx, mesh, integer=True, placement=lambda _block: placement)
        for m in (ms, mt):
            sum_reduction(m)
        rep = install(mt, ctx, mode=mode)
        assert_all_tide(rep, 5)
        ranks = sorted(g["plan"]["topology"][0] * g["plan"]["topology"][1] for g in rep["groups"])
        assert ranks == [2, 2, 4, 4, 4], ranks  # the experts' groups gather over the sub-mesh
        opts = optimizers(ms, mt, "sign", 1e-2)
        for s in range(3):
            xs = batches(ctx, 1, d_in=5, integer=True, seed=s)
            step_both(ms, mt, opts, xs, tol=None, loss_fn=int_loss, what=f"{mode} step {s}")
        tide.fsdp.uninstall(mt)


def hsdp_in_place(ctx):
    """2x2 mesh: TIDE reduce-scatters in each shard group, FSDP2 all-reduces
    across replicas (gloo)."""
    _, _, rep, _ = train(ctx, transformer, mesh=mesh_hsdp(ctx), expect_groups=4, micro=2)
    assert rep["arenas"][0]["ranks"] == 2, rep["arenas"]


def hsdp_slot_reuse_partial_all_reduce(ctx):
    """HSDP, Slot-Reuse, accumulation that reduce-scatters every micro-batch
    but all-reduces only on the last (partial reduce output)."""
    train(ctx, transformer, mesh=mesh_hsdp(ctx), mode="slot-reuse", expect_groups=4, micro=3, hsdp_ar_last=True)


def hsdp_integer_exact(ctx):
    train(ctx, LinearModel, mesh=mesh_hsdp(ctx), integer=True, tol=None, opt="sign",
          loss_fn=int_loss, configure=sum_reduction, expect_groups=3)


def scratch_estimate_is_enough(ctx):
    """An arena of exactly user memory + tide.plan.scratch_bytes (what the
    adapter sizes with) is enough: the library refuses the first collective
    when the scratch does not fit. Several topologies and both modes."""
    from tide.fsdp.arena import align
    from tide.fsdp.backend import HostBackend
    from tide.plan import make_plan, scratch_bytes

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
            offsets = [comm.alloc(p["group"]["unsharded_bytes"])[0] for p in plans]
            for s, g, p, off in zip(sets, groups, plans, offsets):
                shard = torch.zeros(p["group"]["shard_bytes"], dtype=torch.uint8)
                comm.all_gather(g, shard.data_ptr(), off)
                grads = [torch.ones(list(shape), dtype=torch.bfloat16) for shape in s]
                out = torch.zeros(p["group"]["out_bytes"] // 4)
                comm.reduce_scatter(g, [t.data_ptr() for t in grads], out.data_ptr())
                comm.synchronize()
        finally:
            comm.close()


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
            for i, x in enumerate(xs):  # two micro-batches, each reduce-scattered
                orders = []
                for model in (ms, mt):
                    loss = model(x).pow(2).mean()
                    with collective_trace(ms, mt) as trace:
                        loss.backward()
                    orders.append(trace)
                assert orders[0] == stock_order, (what, "stock FSDP2's backward order changed", orders[0])
                assert orders[1] == want, (what, f"step {s} micro-batch {i}", orders[1])
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
        assert "grad" in str(e) or "loss" in str(e) or "other rank" in str(e), e
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
        backend = importlib.import_module("tide.fsdp.install")._installed[mt].contexts[0].backend
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
    install_module = importlib.import_module("tide.fsdp.install")
    for model in list(install_module._installed.keys()):
        tide.fsdp.uninstall(model)


def _fsdp_params(model):
    out = []
    for module in model.modules():
        state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
        if state is not None:
            for g in guards.param_groups(state):
                out.extend(g.fsdp_params)
    return out


TWO_RANKS = [
    "transformer_fp32_in_place", "transformer_fp32_slot_reuse", "transformer_bf16_mixed_precision",
    "bf16_params_slot_reuse", "integer_exact", "integer_exact_slot_reuse_two_nodes", "integer_exact_plan_options",
    "integer_exact_bf16", "passes_fit_the_scratch",
    "gradient_accumulation", "gradient_accumulation_bf16_no_sync", "reshard_after_forward_false",
    "last_block_folded_with_eval", "folded_block_forward_without_its_backward", "reshard_after_backward_false",
    "skipped_blocks_hold_no_slot", "installs_that_overlap", "inversion_after_the_autograd_pass", "forward_that_raised",
    "fallbacks", "state_dict_and_checkpoint",
    "divide_factors", "reduce_dtype_choices", "hooks", "guard_mismatch", "no_ring_no_adopt_explicit_prefetch", "refusals",
    "frozen_parameters", "shard_group_of_one", "prefetch_inversion", "read_done_release", "arena_accounting",
    "grads_released_with_fsdp_state", "activation_checkpointing", "explicit_forward_prefetch",
    "user_unshard_for_eval", "tied_embeddings", "compiled_blocks", "two_models", "gradient_clipping",
    "params_smaller_than_world", "conditional_execution", "embedding_not_unsharded_in_backward",
    "reshard_after_forward_changed", "custom_comm_after_install", "root_only",
    "a_check_failing_on_one_rank_fails_every_rank", "wrapped_by_another_tool", "dropped_without_uninstall",
    "stale_unsharded_use_fails", "nested_fully_shard", "unused_block_output", "dtype_changed_after_install",
]
ONE_RANK = ["one_rank_stays_stock", "shard_group_of_one"]
FOUR_RANKS = [
    "fsdp4_two_by_two_in_place", "fsdp4_push_landing", "fsdp4_slot_reuse_bf16", "fsdp4_integer_exact", "hsdp_in_place",
    "hsdp_slot_reuse_partial_all_reduce", "hsdp_integer_exact", "fallbacks", "scratch_estimate_is_enough",
    "prefetch_inversion", "read_done_release", "params_smaller_than_world", "fsdp4_experts_on_a_sub_mesh",
]
