"""The models, meshes, data and checks every FSDP2 scenario uses (fsdp_scenarios.py lists the
scenarios): a stock FSDP2 model and a TIDE one built identically, trained on the same per-rank data,
their losses, gradients and parameters compared, and the comparisons agreed across ranks."""

from __future__ import annotations

import contextlib
import tide.fsdp
import torch
import torch.distributed as dist
import torch.utils.checkpoint
from tide.fsdp import guards
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


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
    """Two models of the same weights (stock, then the one TIDE goes on), drawn from the run's
    seed, built on the CPU and sharded on `mesh` by `shard` (shard_kw), or by shard_fn(model, mesh)."""
    out = []
    for _ in range(2):
        torch.manual_seed(ctx.seed)
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


def data_generator(ctx, seed: int) -> torch.Generator:
    """This rank's stream `seed` of the run's data: distinct per rank, per seed and per run."""
    return torch.Generator().manual_seed((ctx.seed * 1_000_003 + 1000 * seed + ctx.rank) % 2**63)


def batches(ctx, n: int, *, d_in: int = 7, rows: int = 6, integer=False, dtype=torch.float32, seed: int = 0):
    g = data_generator(ctx, seed)
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
        # strict: a parameter one model lacks is a difference, not one left uncompared.
        for (name, ps), pt in zip(ms.named_parameters(), mt.parameters(), strict=True):
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
              keep_unsharded_first=False, before_micro=None, forward=None, set_to_none=True):
    """One optimizer step of both models over `micro` micro-batches; compares
    losses, accumulated gradients, and parameters after the step.
    before_micro(model, i): anything else to set before micro-batch i.
    forward(model, x): the step's forward (default model(x)), e.g. a method
    registered with register_fsdp_forward_method.
    set_to_none: the optimizers' zero_grad(set_to_none=...) after the step.
    Where TIDE runs groups of mt, the step must have run TIDE's all-gathers and
    reduce-scatters, none of them handed back to stock at run time: a stock
    call gives stock's bits, so the comparison alone would pass without TIDE."""
    loss_fn = loss_fn or (lambda y: y.float().pow(2).mean())
    before = stats(mt)
    forward = forward or (lambda model, x: model(x))
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
            loss = loss_fn(forward(model, x))
            loss.backward()
            total.append(loss.detach())
        losses.append(torch.stack(total))
    after = stats(mt)
    compare_and_step(ms, mt, opts, losses, what, tol, set_to_none=set_to_none)
    check_tide_ran(before, after, what)


def check_tide_ran(before: dict, after: dict, what: str) -> None:
    """Between two stats(mt) taken around a step, TIDE's groups ran all-gathers and reduce-scatters,
    none handed back to stock at run time (a stock call gives stock's bits, so a comparison with
    stock alone would pass without TIDE). For steps a scenario drives itself; step_both checks its
    own. Every rank must call it (agree()'s all-reduce); one where TIDE runs no group (its install
    differed on purpose) has nothing to check: scenarios that expect every group on TIDE say so
    with assert_all_tide."""
    ran = {k: after.get(k, 0) - before.get(k, 0) for k in ("all_gathers", "reduce_scatters", "rs_stock")}
    agree(lambda: _check_tide_ran(ran, what) if before or after else None)


def _check_tide_ran(ran: dict, what: str) -> None:
    if ran["all_gathers"] <= 0 or ran["reduce_scatters"] <= 0:
        raise AssertionError(f"{what}: TIDE's groups ran no all-gather or no reduce-scatter in the step: {ran}")
    if ran["rs_stock"]:
        raise AssertionError(f"{what}: {ran['rs_stock']} reduce-scatter(s) of TIDE's groups ran stock: {ran}")


def compare_and_step(ms, mt, opts, losses, what: str, tol, set_to_none=True):
    """The end of a step of both models: their losses (stock's, TIDE's) and
    gradients compared, the optimizers stepped and zeroed, the parameters
    compared."""
    compare(losses[0], losses[1], f"{what} losses", tol)
    compare_models(ms, mt, what, tol, grads=True)
    for o in opts:
        o.step()
        o.zero_grad(set_to_none=set_to_none)
    compare_models(ms, mt, what, tol)



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


# Adam moves a parameter by lr * g / (|g| + eps) on its first step, and its slope in g peaks
# at lr / eps where g cancels to ~0. With torch's eps 1e-8 that slope is 1e6: a gradient
# summed to 1.2e-7 from partial sums of 1e-2, whose last bit differs between two summation
# orders (4 gloo ranks vs TIDE's), moved the parameter 2.7e-6 apart although the gradients
# agreed to 5e-10. eps 1e-4 bounds the slope to 100, so the parameter tolerance checks TIDE,
# not Adam's conditioning; two-rank runs are bit for bit either way.
ADAM_EPS = 1e-4


def optimizers(ms, mt, opt: str, lr: float):
    if opt == "adam":
        return [torch.optim.Adam(ms.parameters(), lr=lr, eps=ADAM_EPS),
                torch.optim.Adam(mt.parameters(), lr=lr, eps=ADAM_EPS)]
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
          after_step=None, before_micro=None, forward=None, restart_from_stock=False, set_to_none=True, **shard_kw):
    """Trains a stock and a TIDE model side by side (make_pair, step_both). after_step(ms, mt, s),
    if given, runs between step s and the next (e.g. to uninstall and install TIDE again);
    before_micro(model, s, i) before micro-batch i of step s, on both models; forward(model, x)
    is each micro-batch's forward (step_both's). restart_from_stock: every step after the first
    compares the parameters once more (after after_step) and then starts TIDE's model from
    stock's, so that each step's comparison sees that step's arithmetic alone, not roundings
    compounded over the earlier steps. set_to_none: the optimizers' zero_grad after each step."""
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
        if restart_from_stock and s > 0:
            compare_models(ms, mt, f"before step {s}", tol)
            with torch.no_grad():
                for ps, pt in zip(ms.parameters(), mt.parameters()):
                    local(pt).copy_(local(ps))
        xs = batches(ctx, micro, d_in=d_in, integer=integer, dtype=in_dtype, seed=s)
        per_micro = None if before_micro is None else (lambda model, i, s=s: before_micro(model, s, i))
        step_both(ms, mt, opts, xs, tol=tol, micro=micro, no_sync_first=no_sync_first, what=f"step {s}",
                  loss_fn=loss_fn, hsdp_ar_last=hsdp_ar_last, keep_unsharded_first=keep_unsharded_first,
                  before_micro=per_micro, forward=forward, set_to_none=set_to_none)
        if after_step is not None and s + 1 < steps:
            after_step(ms, mt, s)
    st = stats(mt)
    assert st.get("all_gathers", 0) > 0 and st.get("reduce_scatters", 0) > 0, f"TIDE did not run: {st}"
    tide.fsdp.uninstall(mt)
    return ms, mt, rep, st


def int_loss(y):
    return y.sum()  # SUM: integer gradients


@contextlib.contextmanager
def prefetch_wrapper_refused(why: str):
    """As on a torch whose FSDPParamGroup._prefetch_unshard the adapter cannot wrap:
    guards.check_prefetch_unshard refuses it (`why` goes into install's log line)."""
    from tide.fsdp import guards

    stock = guards.check_prefetch_unshard
    guards.check_prefetch_unshard = lambda: ("torch_internals", f"FSDPParamGroup._prefetch_unshard differs ({why})")
    try:
        yield
    finally:
        guards.check_prefetch_unshard = stock


def fsdp_modules(model) -> list:
    """The model's FSDP modules (FSDPModule's methods do not recurse)."""
    return [m for m in model.modules() if isinstance(m, torch.distributed.fsdp.FSDPModule)]


def sum_reduction(model):
    """SUM on every FSDP module's groups."""
    for module in fsdp_modules(model):
        module.set_gradient_divide_factor(1.0)
        module.set_force_sum_reduction_for_comms(True)


def fsdp_params_of(model):
    out = []
    for module in model.modules():
        state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
        if state is not None:
            for g in guards.param_groups(state):
                out.extend(g.fsdp_params)
    return out


def gathers_pending_at_post_backward(model) -> list[str]:
    """A list that fills, as `model` trains, with the name of every module whose
    post-backward began while a gather of its parameters was still pending: its
    backward then ran without waiting for that gather (on CUDA it read the slot
    before the gather wrote it). Wraps the groups' post_backward as installed."""
    pending: list[str] = []
    for name, module in model.named_modules():
        state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
        for group in guards.param_groups(state) if state is not None else ():
            def post_backward(*args, _group=group, _inner=group.post_backward, _name=name or "<root>", **kwargs):
                if _group._all_gather_result is not None:
                    pending.append(_name)
                return _inner(*args, **kwargs)
            group.post_backward = post_backward
    return pending
