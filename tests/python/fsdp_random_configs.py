"""Random configurations of tide.fsdp against stock FSDP2, run inside every rank of a gloo job
(fsdp_harness). Each draw picks a model (block count, widths, padded and empty shards), a mode,
a topology, the install flags, plan options, the mixed-precision policy, reshard and accumulation
settings, activation checkpointing, explicit prefetch, blocks skipped in some steps (layer drop),
a reinstall mid-run, two forwards into one backward, a frozen input layer, FSDP2's prefetch
entry point left unwrapped (as on a torch the adapter cannot wrap it on), and what the user
does between steps (an evaluation forward, a state-dict round trip), and trains TIDE
beside stock FSDP2 on the same data (fsdp_scenarios.train): losses, gradients and parameters
compared every step, bit for bit where the arithmetic allows (integer data with SUM; fp32 on two
CPU ranks), else within float tolerance.

The fixed scenarios test each option on its own; this sweep tests them together, where the
interactions live (a host-bench sweep of the same kind found two bugs the fixed cases missed).

TIDE_FSDP_SWEEP_SEED picks the draws (default: drawn fresh on rank 0 and printed),
TIDE_FSDP_SWEEP_DRAWS how many (default 6), TIDE_FSDP_SWEEP_ONLY=i runs draw i alone (to
reproduce a failure: the seed and the index are in its message), TIDE_FSDP_SWEEP_TRACE=1
prints each failure's traceback, and TIDE_FSDP_SWEEP_STREAMS=k draws only the options of the
first k random streams (each stream holds the options added together; fewer streams reproduce a
draw as it was before the later ones existed)."""

from __future__ import annotations

import contextlib
import os
import random
import time
import traceback

import fsdp_scenarios as sc
import tide.fsdp
import torch
import torch.distributed as dist
from fsdp_harness import uninstall_all_tide
from tide.fsdp import guards
from torch.distributed.fsdp import MixedPrecisionPolicy

DEFAULT_DRAWS = 6
BF16_STOCK_ROUNDS = {"rtol": 6e-2, "atol": 6e-2}  # bf16 parameters, more than two ranks (train_config)


def shared_seed() -> int:
    """The sweep's seed, the same on every rank: TIDE_FSDP_SWEEP_SEED, else rank 0's fresh draw."""
    given = os.environ.get("TIDE_FSDP_SWEEP_SEED")
    seed = torch.tensor([int(given) if given else random.SystemRandom().randrange(1 << 31)], dtype=torch.int64,
                        device=sc.collective_device())
    dist.broadcast(seed, 0)
    return int(seed.item())


def draw_model(rng: random.Random, integer: bool, extra: random.Random):
    """A builder for a random model. Integer runs take LinearModel (integer activations and
    gradients stay exact); float runs a Model of Blocks of random widths, sometimes with a
    TinyParamBlock (parameters smaller than the world: empty shards), sometimes with every
    block's activations recomputed in backward (activation checkpointing: a block's forward
    runs again over the parameters its pre-backward all-gather brought back). `extra` draws the
    options added after the first recorded seeds, so those seeds still give the same draws."""
    if integer:
        # Within LinearModel's exactness bound (every value an integer below 2**24 for three sign
        # steps); wider or deeper ones round in fp32, and four ranks then sum in another order.
        d, n = rng.randint(2, 4), rng.randint(1, 2)
        return (lambda: sc.LinearModel(d=d, n=n)), f"LinearModel(d={d}, n={n})", n + 1
    d = rng.choice([8, 12, 24, 30])
    hs = [rng.randint(3, 64) for _ in range(rng.randint(1, 4))]
    tiny = rng.random() < 0.3
    d_in, d_out = rng.randint(3, 9), rng.randint(2, 6)
    recompute = extra.random() < 0.25
    # OrderedBlocksModel runs its blocks in module order until told otherwise (draw_config's orders).
    model_class = sc.CheckpointedModel if recompute else sc.OrderedBlocksModel

    def build():
        blocks = [sc.Block(d=d, h=h) for h in hs]
        if tiny:
            blocks.append(sc.TinyParamBlock(d=d))
        return model_class(blocks, d=d, d_in=d_in, d_out=d_out)

    build.blocks = len(hs) + int(tiny) if model_class is sc.OrderedBlocksModel else 0  # 0: no orders
    name = f"{model_class.__name__}(d={d}, h={hs}, tiny={tiny}, d_in={d_in}, d_out={d_out})"
    return build, name, len(hs) + int(tiny) + 1


def draw_order(rng: random.Random, blocks: int) -> tuple[int, ...] | None:
    """Which blocks a step runs: all in module order, or all but one (layer drop)."""
    if rng.random() < 0.3:
        return None
    skipped = rng.randrange(blocks)
    return tuple(i for i in range(blocks) if i != skipped)


def draw_config(rng: random.Random, world: int, extra: random.Random, later: random.Random | None = None,
                latest: random.Random | None = None, newest: random.Random | None = None,
                lane: random.Random | None = None, between: random.Random | None = None) -> dict:
    """`later` draws the options added after `extra`'s, `latest` those added after `later`'s,
    `newest` those added after `latest`'s, `lane` the rail lane, and `between` what runs between
    steps, added last (so that older seeds give the same draws)."""
    integer = rng.random() < 0.4
    build, model_name, groups = draw_model(rng, integer, extra)
    hsdp = world == 4 and rng.random() < 0.3
    shard_ranks = world // 2 if hsdp else world
    if os.environ.get("TIDE_FSDP_SWEEP_NODE_PER_RANK") == "1":
        # Ranks on hosts of their own (fsdp_cuda_smoke.py --host-per-rank): a node per rank is the
        # only layout; one spanning hosts is refused at install (fsdp_cuda_smoke checks that apart).
        topologies = [None, (shard_ranks, 1)]
    else:
        topologies = [None] + [(m, shard_ranks // m) for m in (1, 2, 4) if shard_ranks % m == 0]
    mode = rng.choice(["in-place", "slot-reuse"])
    micro = rng.choice([1, 1, 2, 3])
    plan_options = {}
    if rng.random() < 0.5:
        plan_options["passes"] = rng.randint(1, 8)
    for key in ("sum_ctas", "landing_ctas"):
        if rng.random() < 0.3:
            plan_options[key] = rng.randint(1, 8)
    if rng.random() < 0.2:
        plan_options["landing"] = rng.choice(["pull", "push"])
    install_kw = {
        "invert_prefetch": rng.random() < 0.7,
        "check_read_done": rng.random() < 0.3,
        "release_grads": rng.choice(["read-done-polled", "read-done", "with-fsdp-state"]),
    }
    if plan_options:
        install_kw["plan_options"] = plan_options
    cfg = {
        "model": model_name, "build": build, "groups": groups, "integer": integer, "hsdp": hsdp,
        "mode": mode, "topology": rng.choice(topologies), "ring": rng.random() < 0.8, "adopt": rng.random() < 0.8,
        "micro": micro, "no_sync_first": micro > 1 and rng.random() < 0.5,
        "keep_unsharded_first": micro > 1 and rng.random() < 0.3,
        "raf": rng.choice([None, True, False]), "last_raf": rng.choice([None, None, True, False]),
        "steps": rng.randint(2, 3), "install_kw": install_kw,
        # Explicit prefetch (FSDP2's set_modules_to_*_prefetch): one block ahead in forward, or
        # two blocks in backward (the ring defers a prefetch into a slot still held).
        "prefetch": extra.choice([None, None, "forward-next", "backward-two"]),
        # After the first step: uninstall and install again in the other mode, the second time
        # after a step on stock FSDP2 ("stock-step"): the adapter's state must not leak across.
        "reinstall": extra.choice([None, None, None, "other-mode", "stock-step"]),
    }
    if integer:
        # bf16 integers stay exact only where AVG divides by 2 (stock FSDP2 on four gloo ranks pre- and
        # post-divides in bf16, TIDE sums in fp32 and scales once: other roundings past 256).
        cfg.update(precision="integer", dtype=rng.choice([None, None, torch.bfloat16] if world == 2 else [None]))
        if cfg["dtype"] is not None:
            cfg["steps"] = 2  # integers stay exact in bf16 for two sign steps (integer_exact_bf16)
    else:
        cfg.update(precision=rng.choice(["fp32", "fp32", "bf16-compute", "bf16-params"]), dtype=None)
    # Blocks skipped in some steps (layer drop): a skipped block must keep no ring slot from the
    # others, whatever prefetch, accumulation or reshard settings the draw has.
    cfg["orders"] = None
    if later is not None and getattr(build, "blocks", 0) >= 2 and later.random() < 0.5:
        # One order per micro-batch of each step (a "stock-step" reinstall's step included): a
        # block kept unsharded after one micro-batch's backward may be skipped in the next. Step 0
        # runs every block: stock FSDP2 fails a no-sync backward with a reduce dtype for a block
        # that never ran (its unsharded parameter does not exist yet; torch 2.13).
        cfg["orders"] = [[None] * micro] + [[draw_order(later, build.blocks) for _ in range(micro)]
                                            for _ in range(cfg["steps"])]
    # Float models only (integers stay exact for one forward's values): the model called twice per
    # micro-batch into one backward, and its input layer frozen, which makes the first block wait
    # for its post-backward through the other call's backward (a ring-mate reshards it meanwhile).
    cfg["two_forwards"] = cfg["frozen_input"] = False
    if latest is not None and not integer:
        cfg["two_forwards"] = latest.random() < 0.3
        cfg["frozen_input"] = latest.random() < 0.3
    # As on a torch whose FSDPParamGroup._prefetch_unshard the adapter cannot wrap: prefetches are
    # then told apart only in the backward (by the group whose pre_backward ran last), and one into
    # a held slot raises RegionConflict instead of being deferred: not with two-deep prefetch, nor with
    # blocks skipped (FSDP2's default backward prefetch then reaches past the skipped block).
    cfg["prefetch_wrapper"] = True
    if newest is not None and cfg["prefetch"] != "backward-two" and cfg["orders"] is None:
        cfg["prefetch_wrapper"] = newest.random() >= 0.2
    # Both collectives on the rail lane (App. F), where it applies: one GPU per node across nodes.
    if lane is not None and cfg["topology"] == (shard_ranks, 1) and shard_ranks > 1 and lane.random() < 0.5:
        install_kw["plan_options"] = {**install_kw.get("plan_options", {}), "rail_lane": True}
    # Between steps, on both models (between_steps): a no-grad forward in train mode, one under
    # inference_mode in eval mode, the root unsharded by the user around a no-grad forward, or the
    # model state dict read and loaded back. And gradients zeroed in place after each step
    # (zero_grad(set_to_none=False)): the next backward accumulates into the kept tensors.
    cfg["between"], cfg["zero_grad_in_place"] = None, False
    if between is not None:
        cfg["between"] = between.choice([None, None, "no-grad", "inference", "root-unshard", "state-dict"])
        cfg["zero_grad_in_place"] = between.random() < 0.3
    return cfg


def describe(cfg: dict) -> str:
    shown = {k: v for k, v in cfg.items() if k != "build"}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


def set_prefetch(model, how: str | None) -> None:
    blocks = list(model.blocks)
    if how == "forward-next":
        for a, b in zip(blocks, blocks[1:]):
            a.set_modules_to_forward_prefetch([b])
    elif how == "backward-two":
        for k in range(2, len(blocks)):
            blocks[k].set_modules_to_backward_prefetch([blocks[k - 1], blocks[k - 2]])


def train_config(ctx, cfg: dict) -> None:
    def configure(model):
        set_prefetch(model, cfg["prefetch"])
        if cfg["precision"] == "integer" and cfg["dtype"] is None:
            sc.sum_reduction(model)  # SUM: integer gradients (bf16 integers stay AVG, exact by 2)

    def reinstall(mt):
        other = "slot-reuse" if cfg["mode"] == "in-place" else "in-place"
        rep = sc.install(mt, ctx, mode=other, topology=cfg["topology"], ring=cfg["ring"], adopt=cfg["adopt"],
                         **cfg["install_kw"])
        sc.assert_all_tide(rep, cfg["groups"])

    def set_order(model, s: int, i: int) -> None:
        model.order = cfg["orders"][s][i]

    def after_step(ms, mt, s):
        between_steps(ctx, cfg, ms, mt, s)
        how = cfg["reinstall"]
        if how is not None and s == 0:
            assert tide.fsdp.uninstall(mt), "uninstall found nothing installed"
        if (how, s) in (("other-mode", 0), ("stock-step", 1)):
            reinstall(mt)
        reshard_where_the_other_is_sharded(ms, mt)

    build = cfg["build"]
    if cfg["frozen_input"]:
        def build():
            model = cfg["build"]()
            model.inp.requires_grad_(False)
            return model
    forward = (lambda model, x: model(x) + model(0.5 * x)) if cfg["two_forwards"] else None
    stock_step = cfg["reinstall"] == "stock-step"  # one step more: the stock one between
    kw = dict(steps=cfg["steps"] + stock_step, after_step=after_step, mode=cfg["mode"], topology=cfg["topology"],
              ring=cfg["ring"], adopt=cfg["adopt"],
              micro=cfg["micro"], no_sync_first=cfg["no_sync_first"], keep_unsharded_first=cfg["keep_unsharded_first"],
              raf=cfg["raf"], last_raf=cfg["last_raf"], install_kw=cfg["install_kw"],
              mesh=sc.mesh_hsdp(ctx) if cfg["hsdp"] else None, expect_groups=cfg["groups"], configure=configure,
              before_micro=set_order if cfg["orders"] is not None else None, forward=forward,
              set_to_none=not cfg["zero_grad_in_place"])
    with contextlib.nullcontext() if cfg["prefetch_wrapper"] else sc.prefetch_wrapper_refused("sweep"):
        _train(ctx, cfg, build, kw)


def train_tolerance(ctx, cfg: dict) -> dict | None:
    """The tolerance _train hands sc.train for the draw's precision (None: bit for bit; sc.train
    tightens the others to bit for bit where sc.tight says the arithmetic allows it)."""
    if cfg["precision"] == "integer":
        return None
    if cfg["precision"] == "fp32":
        return sc.FP32
    if cfg["precision"] == "bf16-compute":
        return sc.BF16
    return BF16_STOCK_ROUNDS if ctx.world > 2 else sc.BF16


def paired_groups(module_pairs) -> list[tuple]:
    """(stock group, TIDE group) for every FSDP parameter group of each (stock, TIDE) module pair."""
    return [(x, y) for a, b in module_pairs
            for x, y in zip(*(guards.param_groups(m._get_fsdp_state()) for m in (a, b)), strict=True)]


def between_steps(ctx, cfg: dict, ms, mt, s: int) -> None:
    """cfg["between"] on both models after step s: forward outputs compared, or the state dict
    read and loaded back and the parameters compared. Outputs are not compared for bf16
    parameters on more than two ranks: their parameters are only within BF16_STOCK_ROUNDS, and a
    forward through them differs by more."""
    how = cfg["between"]
    if how is None:
        return
    what = f"between steps {s} and {s + 1} ({how})"
    tol = sc.tight(ctx, train_tolerance(ctx, cfg))
    if how == "state-dict":
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
        for m in (ms, mt):
            set_model_state_dict(m, get_model_state_dict(m))
        sc.compare_models(ms, mt, what, tol)
        return
    dtype = torch.bfloat16 if cfg["precision"] == "bf16-params" else cfg["dtype"] or torch.float32
    x = sc.batches(ctx, 1, d_in=ms.inp.in_features, integer=cfg["precision"] == "integer", dtype=dtype,
                   seed=500 + s)[0]
    ys = []
    for m in (ms, mt):
        if how == "root-unshard":
            m.unshard()  # the root's group only; the blocks gather in their forward
        if how == "inference":
            m.eval()
        with torch.inference_mode() if how == "inference" else torch.no_grad():
            ys.append(m(x).clone())
        m.train()
        if how == "root-unshard":
            m.reshard()
    if not (cfg["precision"] == "bf16-params" and ctx.world > 2):
        sc.compare(ys[0], ys[1], f"{what} outputs", tol)
    # The root, then the blocks the next step runs (every one where no orders were drawn).
    orders = cfg["orders"][s + 1] if cfg["orders"] is not None else [None]
    running = sorted({i for order in orders for i in (range(len(mt.blocks)) if order is None else order)})
    groups = paired_groups([(ms, mt)] + [(ms.blocks[i], mt.blocks[i]) for i in running])
    if not any(b.is_sharded for _, b in groups):
        # Every group the next step runs kept unsharded (reshard_after_forward=False outside the
        # ring, the ring's own members skipped): that step would gather nothing, and step_both
        # requires TIDE's all-gathers in every step. The roots are resharded, as a user freeing
        # memory after evaluation would (kept_unsharded_across_a_step carries unsharded groups
        # into a step on its own).
        for root in groups[0]:
            root.reshard()


def reshard_where_the_other_is_sharded(ms, mt) -> None:
    """After a no-grad forward TIDE reshards the folded last block (App. F: no backward will free
    its ring slot), where stock keeps it unsharded under reshard_after_forward=False, and an
    install reshards the groups a no-grad forward left unsharded (the root's). Both then train
    alike, but their parameters have other shapes: the other model's group is resharded too, so
    that the parameters compare (and restart_from_stock copies them) shard for shard."""
    for x, y in paired_groups(zip(sc.fsdp_modules(ms), sc.fsdp_modules(mt), strict=True)):
        if x.is_sharded != y.is_sharded:
            (x if y.is_sharded else y).reshard()


def _train(ctx, cfg: dict, build, kw: dict) -> None:
    if cfg["precision"] == "integer":
        sc.train(ctx, build, integer=True, tol=train_tolerance(ctx, cfg), opt="sign", loss_fn=sc.int_loss,
                 dtype=cfg["dtype"], **kw)
    elif cfg["precision"] == "fp32":
        # Bit for bit (two CPU ranks): Adam, whose normalisation shows any difference. Within float
        # tolerance (four ranks, or CUDA): SGD, since Adam's first step turns a near-zero gradient's
        # last-bit difference (another summation order) into one of up to lr in a parameter.
        exact = sc.tight(ctx, sc.FP32) is None
        sc.train(ctx, build, tol=train_tolerance(ctx, cfg), opt="adam" if exact else "sgd", **kw)
    elif cfg["precision"] == "bf16-compute":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        sc.train(ctx, build, mp_policy=policy, tol=train_tolerance(ctx, cfg), opt="sgd", **kw)
    else:  # bf16 parameters without a policy: bf16 reduce dtype, summed in fp32 by TIDE, in bf16 by gloo
        # On two ranks both round the sum once. On more, stock FSDP2 rounds every partial sum and
        # its pre- and post-division in bf16 (and accumulates micro-batches in bf16): a cancelling
        # gradient of about 0.1 then differs by a few bf16 steps of its addends (seed 855064809,
        # draw 38: 0.022 after three micro-batches and two steps), past BF16's 0.02.
        # Those differences compound from step to step: each step restarts TIDE from stock's
        # parameters (seed 853083026, draw 58 of 60, four ranks with two forwards: step 2's
        # gradients 0.13 apart, within 0.01 once step 2 starts from the same parameters).
        many = ctx.world > 2
        sc.train(ctx, build, dtype=torch.bfloat16, tol=train_tolerance(ctx, cfg), opt="sgd", lr=0.05,
                 restart_from_stock=many, **kw)


def random_configurations(ctx):
    """TIDE_FSDP_SWEEP_DRAWS random configurations; every one is trained (a failure does not
    stop the sweep), and the failures are raised together, each with its draw."""
    seed = shared_seed()
    draws = int(os.environ.get("TIDE_FSDP_SWEEP_DRAWS", DEFAULT_DRAWS))
    if ctx.rank == 0:
        print(f"[fsdp sweep] world {ctx.world}, seed {seed} (TIDE_FSDP_SWEEP_SEED), {draws} draws", flush=True)
    # TIDE_FSDP_SWEEP_STREAMS=4 draws without the newest stream's options: a draw pinned before they
    # existed stays the configuration it was (gpu_run.sh's fsdp_sweep_found_on_gpu).
    streams = int(os.environ.get("TIDE_FSDP_SWEEP_STREAMS", "7"))
    if not 2 <= streams <= 7:
        raise ValueError(f"TIDE_FSDP_SWEEP_STREAMS must be 2 to 7, got {streams}")
    rng, extra, later, latest, newest, lane, between = (random.Random(seed + k) if k < streams else None
                                                         for k in range(7))
    only = os.environ.get("TIDE_FSDP_SWEEP_ONLY")
    failures = []
    for i in range(draws):
        cfg = draw_config(rng, ctx.world, extra, later, latest, newest, lane, between)
        if only is not None and i != int(only):
            continue
        # One line per draw as it ends: a sweep cut by a time limit still says how far it got.
        t0, verdict = time.monotonic(), "PASS"
        try:
            train_config(ctx, cfg)
        except Exception as e:  # every rank raises together (sc.agree), so the ranks stay in step
            verdict = f"FAIL ({type(e).__name__})"
            failures.append(f"draw {i} (seed {seed}): {describe(cfg)}\n  {type(e).__name__}: {e}")
            if os.environ.get("TIDE_FSDP_SWEEP_TRACE"):
                traceback.print_exc()
        finally:
            uninstall_all_tide()  # a failed draw may have left TIDE installed
        if ctx.rank == 0:
            print(f"[fsdp sweep] draw {i}: {verdict} ({time.monotonic() - t0:.1f} s) {describe(cfg)}", flush=True)
    if failures:
        raise AssertionError(f"{len(failures)} of {draws} random configurations failed:\n" + "\n".join(failures))


SWEEP = ["random_configurations"]
