"""Scenarios: the ways install leaves FSDP2 stock that fsdp_scenarios_install.py does not reach,
each with its verdict, its one logged line and training that matches stock FSDP2 (the fallback
reasons of groups.describe for CPU offload, fp16, an fp16 reduce dtype, tensor-parallel
parameters and all-gather extensions; the torch guards for a torch too old and for FSDP2 objects
lacking an attribute the adapter uses); and Slot-Reuse's promise that the gradients autograd left
are freed once copied into the vacated slot, before the reduce-scatter's collective starts."""

from __future__ import annotations

import logging
import types

import tide.fsdp
import torch
from fsdp_scenario_kit import (
    Block, FP32, Model, Shard1Block, agree, assert_all_tide, batches, device_type, fsdp_modules, install, make_pair,
    mesh_1d, optimizers, stats, step_both, tight, transformer,
)
from tide.fsdp import dispatch, guards
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
from torch.multiprocessing.reductions import StorageWeakRef


def _stock_lines(ctx) -> list[str]:
    """install's warnings for the groups it left on stock FSDP2."""
    return [m for m in ctx.logs.messages(logging.WARNING) if "stays on stock FSDP2" in m]


def _one_line_each(ctx, expected: dict[str, str]) -> None:
    """Exactly one stock line per group in `expected` (fqn -> reason), naming its reason, and no other."""
    lines = _stock_lines(ctx)
    for fqn, reason in expected.items():
        mine = [m for m in lines if f"group '{fqn}'" in m]
        assert len(mine) == 1 and f": {reason} (" in mine[0], (fqn, reason, lines)
    assert len(lines) == len(expected), lines


def _group_of(module):
    """The one FSDPParamGroup of a module fully_shard was applied to."""
    (group,) = guards.param_groups(module._get_fsdp_state())
    return group


# ------------------------------------------------------------------ fallback reasons

def _bf16_gather_pre(calls: list[int]):
    """An all-gather extension (FSDP2's fsdp_pre_all_gather, with the five arguments FSDP2
    checks for): gathers the shard in bf16, as a quantizing extension does (the way torch's own
    monkey-patch test defines it), counting its calls in calls[0]."""
    def fsdp_pre_all_gather(self, mesh, outer_size, outer_stride, module, mp_policy):
        calls[0] += 1
        return (self.to(torch.bfloat16),), None
    return fsdp_pre_all_gather


@torch.no_grad()
def _bf16_gather_post(self, all_gather_outputs, metadata, param_dtype, *, out=None):
    """fsdp_post_all_gather: the gathered bf16 tensor upcast to the parameter dtype (into `out`
    once FSDP2 holds the unsharded Parameter)."""
    (gathered,) = all_gather_outputs
    if out is not None:
        with torch.autograd._unsafe_preserve_version_counter(out):
            out.copy_(gathered.view(out.shape))
        return None
    upcast = gathered.to(param_dtype)
    return upcast, (gathered, upcast)


def groups_offloaded_fp16_or_extended_stay_stock(ctx):
    """One model with a group per fallback reason that needs no other mesh, between groups TIDE
    runs: CPUOffloadPolicy (cpu_offload); fp16 compute, with fp16 or with fp32 reduction
    (unsupported_dtype: the all-gather dtype decides, whatever the reduce dtype); an fp16 reduce
    dtype for fp32 gradients (unsupported_reduce_dtype, checked before reduce_dtype_narrower,
    which a 2-byte reduce dtype for 4-byte gradients would also meet); and parameters with
    fsdp_pre_all_gather / fsdp_post_all_gather (all_gather_extension). Each stays stock with
    one logged line naming it and its reason; the others run TIDE, and three steps match stock
    bit for bit (the stock groups run FSDP2's own code in both models, the extension's gathers
    as often in the one as in the other)."""
    out_fp32 = {"output_dtype": torch.float32}  # the next block's fp32 weights take its output
    per_block = {
        1: {"offload_policy": CPUOffloadPolicy(pin_memory=False)},
        2: {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.float16, **out_fp32)},
        3: {"mp_policy": MixedPrecisionPolicy(reduce_dtype=torch.float16)},
        4: {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32, **out_fp32)},
    }
    extended = 5  # no padding there (every dim even): the extension's inputs are the shards as they are
    gathers = []  # per model (stock's, then TIDE's: make_pair's order): calls of the extension

    def build():
        return Model([Block(), Block(), Block(), Block(), Block(), Shard1Block(), Block()])

    def shard_fn(model, mesh):
        for i, block in enumerate(model.blocks):
            fully_shard(block, mesh=mesh, **per_block.get(i, {}))
        fully_shard(model, mesh=mesh)
        # On the shards' local tensors, as instance methods (FSDP2 looks them up there, and
        # re-reads them at its lazy init): no tensor subclass needed.
        gathers.append([0])
        for p in model.blocks[extended].parameters():
            local = p._local_tensor
            local.fsdp_pre_all_gather = types.MethodType(_bf16_gather_pre(gathers[-1]), local)
            local.fsdp_post_all_gather = types.MethodType(_bf16_gather_post, local)
        return model

    ms, mt = make_pair(build, ctx, mesh_1d(ctx), shard_fn=shard_fn)
    rep = install(mt, ctx)
    status = {g["fqn"]: (g["status"], g["reason"]) for g in rep["groups"]}
    stock = {"blocks.1": "cpu_offload", "blocks.2": "unsupported_dtype", "blocks.3": "unsupported_reduce_dtype",
             "blocks.4": "unsupported_dtype", "blocks.5": "all_gather_extension"}
    want = {"<root>": ("tide", None), "blocks.0": ("tide", None), "blocks.6": ("tide", None),
            **{fqn: ("stock", reason) for fqn, reason in stock.items()}}
    assert status == want, status
    _one_line_each(ctx, stock)
    details = " ".join(_stock_lines(ctx))
    assert "all-gather dtype torch.float16" in details and "reduce dtype torch.float16" in details, details
    assert "'blocks.5.fc1.weight' has fsdp_pre_all_gather" in details, details

    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(3):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"step {s}")
    st = stats(mt)
    # Three TIDE groups, each gathered in forward and backward, and reduce-scattered, every step.
    assert st["reduce_scatters"] == 3 * 3 and st["all_gathers"] >= 3 * 3, st
    # The extension ran in both models alike: TIDE's model gathered that group through it.
    assert gathers[1][0] == gathers[0][0] > 0, gathers
    tide.fsdp.uninstall(mt)


def tensor_parallel_group_stays_stock(ctx):
    """FSDP2 over the data-parallel dim of a (dp, tp) mesh with one block tensor-parallel
    (parallelize_module: its Linear weights are DTensors on the tp dim, of size 1 here so that
    two ranks suffice): that group stays stock (dtensor_param), one logged line naming the
    first DTensor parameter; the others run TIDE and three steps match stock."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(device_type(ctx), (ctx.world, 1), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh["dp"], mesh["tp"]

    def shard_fn(model, _mesh):
        parallelize_module(model.blocks[1], tp, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        for block in model.blocks:
            fully_shard(block, mesh=dp)
        fully_shard(model, mesh=dp)
        return model

    ms, mt = make_pair(lambda: transformer(3), ctx, dp, shard_fn=shard_fn)
    rep = install(mt, ctx)
    status = {g["fqn"]: (g["status"], g["reason"]) for g in rep["groups"]}
    assert status == {"<root>": ("tide", None), "blocks.0": ("tide", None), "blocks.1": ("stock", "dtensor_param"),
                      "blocks.2": ("tide", None)}, status
    _one_line_each(ctx, {"blocks.1": "dtensor_param"})
    assert "'blocks.1.fc1.weight' is a DTensor" in _stock_lines(ctx)[0], _stock_lines(ctx)
    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(3):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"step {s}")
    assert stats(mt)["reduce_scatters"] == 3 * 3, stats(mt)
    tide.fsdp.uninstall(mt)


# ------------------------------------------------------------------ torch guards

def _fsdp2_untouched(model) -> None:
    """Nothing of TIDE's is bound into FSDP2: its module functions are its own and no group of
    `model` carries an instance-level replacement of its hooks."""
    it = guards.internals()
    assert not dispatch.active()
    for name in ("foreach_all_gather", "foreach_all_gather_copy_out", "foreach_reduce"):
        assert getattr(it.param_group, name) is getattr(it.collectives, name), name
    assert not getattr(it.collectives.foreach_reduce_scatter_copy_in, "_tide_dispatch", False)
    for module in fsdp_modules(model):
        for group in guards.param_groups(module._get_fsdp_state()):
            replaced = sorted({"pre_backward", "post_backward", "post_forward"} & set(vars(group)))
            assert not replaced, (module.__class__.__name__, replaced)
            for fp in group.fsdp_params:
                assert "free_unsharded_param" not in vars(fp), "a parameter's free was replaced"


def torch_too_old_stays_stock(ctx):
    """A torch older than the adapter supports (torch.__version__ reads 2.10 while install
    runs): install neither raises nor patches anything (no FSDP2 function rebound, no group's
    hooks replaced), leaves the whole model stock (the report lists no group, reason
    torch_version) with one logged line naming the version, and the model trains bit for bit
    as stock."""
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    real = torch.__version__
    torch.__version__ = "2.10.1+cpu"
    try:
        assert guards.torch_version() == (2, 10)
        rep = install(mt, ctx)
    finally:
        torch.__version__ = real  # restored before anything else runs (scenarios share the process)
    assert guards.check_torch() is None, "the real torch is refused too: this test cannot tell"
    assert not rep["installed"] and rep["reason"] == "torch_version" and rep["groups"] == [], rep
    assert "2.10.1+cpu" in rep["message"], rep
    lines = [m for m in ctx.logs.messages(logging.WARNING) if "stays stock" in m]
    assert len(lines) == 1 and "torch_version" in lines[0] and "2.10.1" in lines[0], lines
    assert len(ctx.logs.messages(logging.WARNING)) == 1, ctx.logs.messages(logging.WARNING)
    _fsdp2_untouched(mt)
    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(2):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=None, what=f"stock step {s}")
    assert not tide.fsdp.uninstall(mt)


def fsdp_objects_missing_an_attribute_stay_stock(ctx):
    """An FSDPParam lacking an attribute the adapter reads (contiguous_sharded_stride, on one
    parameter of blocks.1) and FSDPParamGroups lacking one (post_forward_mesh_info on blocks.2,
    _module_fqn on blocks.0, which install also reads to name the group: it raised an
    AttributeError there), as a torch that renamed them would: those groups stay stock
    (attributes), one logged line each naming the attribute; the root runs TIDE. The attributes
    are hidden only while install runs (FSDP2 itself needs them), then training matches stock."""
    ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
    fp = next(fp for fp in _group_of(mt.blocks[1]).fsdp_params if fp._module_info.module is mt.blocks[1].fc1
              and fp._module_info.param_name == "weight")
    group = _group_of(mt.blocks[2])
    hidden = [(fp, "contiguous_sharded_stride"), (group, "post_forward_mesh_info"),
              (_group_of(mt.blocks[0]), "_module_fqn")]
    # All are among what the guard checks, and plain instance attributes that FSDP2's lazy init
    # (which install runs first) does not set again.
    assert "contiguous_sharded_stride" in guards.FSDP_PARAM_ATTRS
    assert {"post_forward_mesh_info", "_module_fqn"} <= set(guards.FSDP_PARAM_GROUP_ATTRS)
    for obj, name in hidden:
        assert name in vars(obj), f"{name} is no instance attribute of {type(obj).__name__} in this torch"
    saved = [(obj, name, vars(obj).pop(name)) for obj, name in hidden]
    try:
        rep = install(mt, ctx)
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)
    status = {g["fqn"]: (g["status"], g["reason"]) for g in rep["groups"]}
    assert status == {"<root>": ("tide", None), "blocks.0": ("stock", "attributes"),
                      "blocks.1": ("stock", "attributes"), "blocks.2": ("stock", "attributes")}, status
    _one_line_each(ctx, {"blocks.0": "attributes", "blocks.1": "attributes", "blocks.2": "attributes"})
    lines = {fqn: next(m for m in _stock_lines(ctx) if f"'{fqn}'" in m) for fqn in ("blocks.0", "blocks.1", "blocks.2")}
    assert "_module_fqn" in lines["blocks.0"] and "FSDPParam." not in lines["blocks.0"], lines
    assert "FSDPParam.contiguous_sharded_stride" in lines["blocks.1"], lines
    assert "post_forward_mesh_info" in lines["blocks.2"] and "FSDPParam." not in lines["blocks.2"], lines
    opts = optimizers(ms, mt, "adam", 1e-2)
    for s in range(3):
        step_both(ms, mt, opts, batches(ctx, 1, seed=s), tol=tight(ctx, FP32), what=f"step {s}")
    assert stats(mt)["reduce_scatters"] == 1 * 3, stats(mt)
    tide.fsdp.uninstall(mt)


# ------------------------------------------------------------------ Slot-Reuse frees the gradients

class GradientStorageProbe:
    """For one model: the storages of the gradients autograd accumulates into each group's
    unsharded Parameters (weak references, from post-accumulate-grad hooks, by parameter name),
    and which of them are still alive when that group's reduce-scatter collective starts
    (FSDP2's comm called, TIDE's per-call one or stock's default) and when its post-backward
    returns. Storages, not tensor objects: a copy or a view kept elsewhere would keep the memory."""

    running: GradientStorageProbe | None = None  # the probe whose group's post-backward runs now

    def __init__(self, model):
        self.pending: dict[int, list[tuple[str, StorageWeakRef]]] = {}  # id(group) -> (parameter, storage)
        self.at_collective: dict[str, tuple[set[str], int]] = {}  # group -> (parameters alive, gradients)
        self.after_post_backward: dict[str, set[str]] = {}  # group -> parameters alive
        self.group = None
        module_names = {id(m): n for n, m in model.named_modules()}
        for module in fsdp_modules(model):
            for group in guards.param_groups(module._get_fsdp_state()):
                for fp in group.fsdp_params:
                    info = fp._module_info
                    name = f"{module_names[id(info.module)]}.{info.param_name}".lstrip(".")
                    fp._unsharded_param.register_post_accumulate_grad_hook(
                        lambda p, key=id(group), name=name: self.pending.setdefault(key, []).append(
                            (name, StorageWeakRef(p.grad.untyped_storage()))))
                group.post_backward = self._wrap(group, group._module_fqn or "<root>", group.post_backward)

    @staticmethod
    def _alive(refs) -> set[str]:
        return {name for name, ref in refs if not ref.expired()}

    def _wrap(self, group, fqn, inner):
        def post_backward(*args, **kwargs):
            GradientStorageProbe.running, self.group = self, (group, fqn)
            try:
                return inner(*args, **kwargs)
            finally:
                GradientStorageProbe.running, self.group = None, None
                refs = self.pending.pop(id(group), [])
                if refs:
                    self.after_post_backward[fqn] = self._alive(refs)
        return post_backward

    def collective_starts(self) -> None:
        group, fqn = self.group
        refs = self.pending.get(id(group), [])
        self.at_collective[fqn] = (self._alive(refs), len(refs))


def _probing_collectives():
    """Wraps the reduce-scatter comms' __call__ (TIDE's per-call comm and FSDP2's default) so
    that the running probe looks at its gradients first; returns the undo."""
    from tide.fsdp import reduce_scatter as rs_mod

    classes = (rs_mod.ReduceScatterCall, guards.internals().DefaultReduceScatter)
    originals = [cls.__dict__["__call__"] for cls in classes]

    def probed(inner):
        def __call__(self, *args, **kwargs):
            if GradientStorageProbe.running is not None:
                GradientStorageProbe.running.collective_starts()
            return inner(self, *args, **kwargs)
        return __call__

    for cls, inner in zip(classes, originals):
        cls.__call__ = probed(inner)

    def undo():
        for cls, inner in zip(classes, originals):
            cls.__call__ = inner
    return undo


def slot_reuse_frees_gradients_before_the_collective(ctx):
    """Slot-Reuse copies each group's gradients into its vacated ring slot and frees their
    storage at once: when the group's reduce-scatter collective starts, the only storages
    autograd left in its unsharded Parameters' .grad still alive are those stock FSDP2 still
    holds then (stock has copied them into its reduce-scatter input and dropped its list;
    foreach_reduce's loop variable keeps the last parameter's gradient until it returns), and
    those are fewer than all. In-Place reads the gradients where autograd left them, so there
    every one is alive then (which also shows the probe sees live gradients). Every gradient is
    freed before the group's post-backward returns, in every mode (In-Place: on the host fabric,
    whose read-done comes inside the call).
    Two steps per mode (the hooks go on after the first, once FSDP2 has made the unsharded
    Parameters), every group observed, training matching stock."""
    groups = ["<root>", "blocks.0", "blocks.1", "blocks.2"]
    undo = _probing_collectives()
    try:
        for mode in ("slot-reuse", "in-place"):
            ms, mt = make_pair(transformer, ctx, mesh_1d(ctx))
            assert_all_tide(install(mt, ctx, mode=mode), 4)
            opts = optimizers(ms, mt, "sgd", 1e-2)
            step_both(ms, mt, opts, batches(ctx, 1, seed=0), tol=tight(ctx, FP32), what=f"{mode} step 0")
            before = stats(mt)
            stock, tide_probe = GradientStorageProbe(ms), GradientStorageProbe(mt)
            step_both(ms, mt, opts, batches(ctx, 1, seed=1), tol=tight(ctx, FP32), what=f"{mode} step 1")
            after = stats(mt)
            # Every call of the step took this mode's path (a Slot-Reuse call whose slot is still
            # occupied reads in place, which this test would rightly flag).
            key = f"rs_{mode.replace('-', '_')}"
            assert after.get(key, 0) - before.get(key, 0) == len(groups), (mode, before, after)

            def check(mode=mode, stock=stock, tide_probe=tide_probe):
                for probe in (stock, tide_probe):
                    assert sorted(probe.at_collective) == groups, probe.at_collective
                    assert sorted(probe.after_post_backward) == groups, probe.after_post_backward
                    if probe is tide_probe and mode == "in-place" and device_type(ctx) != "cpu":
                        continue  # (CUDA's default release_grads queues In-Place inputs past the call)
                    kept = {fqn: alive for fqn, alive in probe.after_post_backward.items() if alive}
                    assert not kept, f"gradients outlived their group's post-backward ({mode}): {kept}"
                for fqn in groups:
                    stock_alive, n = stock.at_collective[fqn]
                    tide_alive, tide_n = tide_probe.at_collective[fqn]
                    assert n == tide_n > len(stock_alive), (fqn, "stock", stock_alive, n, "TIDE", tide_n)
                    # In-Place: every one (read where autograd left it); Slot-Reuse: no more than stock.
                    want = f"all {n}" if mode == "in-place" else sorted(stock_alive)
                    ok = len(tide_alive) == n if mode == "in-place" else tide_alive == stock_alive
                    assert ok, (f"group {fqn}, {mode}: gradient storages alive when its reduce-scatter collective "
                                f"started: {sorted(tide_alive)} (of {n}); want {want}")
            agree(check)
            tide.fsdp.uninstall(mt)
    finally:
        undo()
