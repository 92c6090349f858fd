"""Checks of the running torch's FSDP2 internals, run before anything is patched.

The adapter leans on private FSDP2 functions and attributes (see
/work/shared/notes/fsdp2-internals.md). Every assumption it makes is checked
here; any mismatch means "leave FSDP2 stock" and one logged message, never a
crash. `check_torch()` returns None when everything the adapter needs is
present, else a (reason, message) pair.
"""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any

MIN_TORCH = (2, 11)

# Parameter names of the functions the adapter rebinds or drives, in order.
SIGNATURES = {
    "foreach_all_gather": ("fsdp_params", "group", "async_op", "all_gather_copy_in_stream",
                           "all_gather_stream", "device", "all_gather_comm"),
    "foreach_all_gather_copy_out": ("all_gather_result", "fsdp_params", "group"),
    "foreach_reduce_scatter_copy_in": ("unsharded_grads", "reduce_scatter_input", "world_size"),
    "foreach_reduce": ("fsdp_params", "unsharded_grads", "reduce_scatter_group", "reduce_scatter_stream",
                       "reduce_scatter_comm", "orig_dtype", "reduce_dtype", "device", "gradient_divide_factor",
                       "all_reduce_group", "all_reduce_stream", "all_reduce_grads", "partial_reduce_output",
                       "all_reduce_hook", "force_sum_reduction_for_comms"),
    "_get_gradient_divide_factors": ("reduce_scatter_group", "all_reduce_group", "reduce_dtype", "device_type",
                                     "factor", "force_sum_reduction_for_comms"),
}

ALL_GATHER_RESULT_FIELDS = ("all_gather_output", "all_gather_event", "all_gather_work",
                            "param_all_gather_input_dtypes", "param_all_gather_input_numels",
                            "all_gather_input_split_sizes")

# What foreach_reduce must do for the adapter to drive it with its own
# reduce-scatter comm: allocate the input through the comm, hand the
# gradients to foreach_reduce_scatter_copy_in (a module global), then call
# the comm. Checked in its source text.
FOREACH_REDUCE_SOURCE_MARKERS = ("reduce_scatter_comm.allocate(", "foreach_reduce_scatter_copy_in(",
                                 "reduce_scatter_comm(")

# Attributes read or written on live objects (checked per group at install).
FSDP_PARAM_ATTRS = ("_module_info", "all_gather_outputs", "padded_sharded_param_size", "sharded_size", "contiguous_sharded_stride",
                    "_orig_size", "_contiguous_orig_stride", "_sharded_param_data", "sharded_param",
                    "fsdp_placement", "sharded_state", "mp_policy", "offload_to_cpu", "is_dtensor",
                    "free_unsharded_param", "init_unsharded_param", "_sharded_local_tensor")
FSDP_PARAM_GROUP_ATTRS = ("fsdp_params", "mesh_info", "post_forward_mesh_info", "device", "comm_ctx",
                          "_all_gather_comm", "_reduce_scatter_comm", "_all_gather_result", "_training_state",
                          "_sharded_state", "_to_sharded", "is_sharded", "is_unsharded", "post_forward",
                          "_all_gather_process_group", "_reduce_dtype", "_orig_dtype", "_module_fqn",
                          "_use_post_forward_mesh", "_reshard_after_forward", "offload_policy", "modules",
                          "reduce_grads")


class Internals:
    """Handles on the FSDP2 modules and names the adapter uses (after check_torch passed)."""

    def __init__(self) -> None:
        import torch
        from torch.distributed.fsdp._fully_shard import (
            _fsdp_collectives,
            _fsdp_common,
            _fsdp_param,
            _fsdp_param_group,
            _fsdp_state,
        )

        self.torch = torch
        self.collectives = _fsdp_collectives
        self.param_group = _fsdp_param_group
        self.param = _fsdp_param
        self.common = _fsdp_common
        self.state = _fsdp_state
        self.AllGatherResult = _fsdp_collectives.AllGatherResult
        self.TrainingState = _fsdp_common.TrainingState
        self.ShardedState = _fsdp_param.ShardedState
        self.FSDPMeshInfo = _fsdp_common.FSDPMeshInfo
        self.DDPMeshInfo = _fsdp_common.DDPMeshInfo
        self.DefaultAllGather = _fsdp_collectives.DefaultAllGather
        self.DefaultReduceScatter = _fsdp_collectives.DefaultReduceScatter
        self.get_gradient_divide_factors = _fsdp_collectives._get_gradient_divide_factors
        self.get_module_fsdp_state = _fsdp_state._get_module_fsdp_state
        try:
            from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter
        except ImportError:  # pragma: no cover - guarded by check_torch
            ReduceScatter = object
        self.ReduceScatterBase = ReduceScatter


_internals: Internals | None = None


def internals() -> Internals:
    global _internals
    if _internals is None:
        _internals = Internals()
    return _internals


def torch_version() -> tuple[int, int]:
    import torch

    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _names(fn: Any) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)


def check_torch() -> tuple[str, str] | None:
    """None if this torch has every FSDP2 internal the adapter needs, else
    (reason, message)."""
    try:
        import torch
    except ImportError as e:
        return "no_torch", f"torch is not importable: {e}"
    version = torch_version()
    if version < MIN_TORCH:
        return "torch_version", f"torch {torch.__version__} is older than {MIN_TORCH[0]}.{MIN_TORCH[1]}"
    try:
        from torch.distributed.fsdp._fully_shard import (
            _fsdp_collectives,
            _fsdp_common,
            _fsdp_param,
            _fsdp_param_group,
            _fsdp_state,
        )
        from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter  # noqa: F401
    except Exception as e:  # any import failure means unknown internals
        return "torch_internals", f"FSDP2 modules not importable: {e}"

    for name, want in SIGNATURES.items():
        fn = getattr(_fsdp_collectives, name, None)
        if fn is None:
            return "torch_internals", f"_fsdp_collectives.{name} is missing"
        try:
            got = _names(fn)
        except (TypeError, ValueError) as e:
            return "torch_internals", f"signature of {name} unreadable: {e}"
        if got != want:
            return "torch_internals", f"{name}{got} differs from the expected {name}{want}"

    # _fsdp_param_group imports these by name; the adapter rebinds them there.
    for name in ("foreach_all_gather", "foreach_all_gather_copy_out", "foreach_reduce"):
        bound = getattr(_fsdp_param_group, name, None)
        if bound is None:
            return "torch_internals", f"_fsdp_param_group.{name} is missing"
        if bound is not getattr(_fsdp_collectives, name) and not getattr(bound, "_tide_dispatch", False):
            return "foreign_patch", f"_fsdp_param_group.{name} was replaced by someone else ({bound!r})"

    fields = tuple(getattr(_fsdp_collectives.AllGatherResult, "_fields", ()))
    if fields != ALL_GATHER_RESULT_FIELDS:
        return "torch_internals", f"AllGatherResult fields {fields} differ from {ALL_GATHER_RESULT_FIELDS}"

    try:
        source = inspect.getsource(inspect.unwrap(_fsdp_collectives.foreach_reduce))
    except (OSError, TypeError) as e:
        return "torch_internals", f"source of foreach_reduce unreadable: {e}"
    for marker in FOREACH_REDUCE_SOURCE_MARKERS:
        if marker not in source:
            return "torch_internals", f"foreach_reduce no longer calls {marker!r}"

    FSDPParam = _fsdp_param.FSDPParam
    for attr in ("free_unsharded_param", "init_unsharded_param", "to_sharded", "to_unsharded",
                 "_sharded_local_tensor", "all_gather_inputs"):
        if not hasattr(FSDPParam, attr):
            return "torch_internals", f"FSDPParam.{attr} is missing"
    FSDPParamGroup = _fsdp_param_group.FSDPParamGroup
    for attr in ("lazy_init", "unshard", "wait_for_unshard", "pre_backward", "post_backward", "post_forward", "reshard",
                 "_to_sharded", "is_sharded", "is_unsharded", "_all_gather_process_group", "_use_post_forward_mesh",
                 "_reshard_after_forward"):
        if not hasattr(FSDPParamGroup, attr):
            return "torch_internals", f"FSDPParamGroup.{attr} is missing"
    if not hasattr(torch.autograd, "_unsafe_preserve_version_counter"):
        return "torch_internals", "torch.autograd._unsafe_preserve_version_counter is missing"
    state_cls = _fsdp_state.FSDPState
    if not hasattr(state_cls, "_lazy_init"):
        return "torch_internals", "FSDPState._lazy_init is missing"
    for name in ("TrainingState",):
        if not hasattr(_fsdp_common, name):
            return "torch_internals", f"_fsdp_common.{name} is missing"
    for member in ("IDLE", "FORWARD", "PRE_BACKWARD", "POST_BACKWARD"):
        if not hasattr(_fsdp_common.TrainingState, member):
            return "torch_internals", f"TrainingState.{member} is missing"
    for member in ("SHARDED", "UNSHARDED"):
        if not hasattr(_fsdp_param.ShardedState, member):
            return "torch_internals", f"ShardedState.{member} is missing"
    return None


def check_prefetch_unshard() -> tuple[str, str] | None:
    """None if FSDPParamGroup._prefetch_unshard is the static method
    (target_fsdp_param_group, pass_type) that dispatch.py wraps to defer a
    prefetch into a taken ring slot, else (reason, message). A mismatch only
    leaves such prefetches raising RegionConflict; TIDE still runs."""
    cls = internals().param_group.FSDPParamGroup
    raw = cls.__dict__.get("_prefetch_unshard")
    if not isinstance(raw, staticmethod):
        return "torch_internals", "FSDPParamGroup._prefetch_unshard is not a static method"
    if getattr(raw.__func__, "_tide_dispatch", False):
        return None  # already ours (another installed model)
    try:
        names = _names(raw.__func__)
    except (TypeError, ValueError) as e:
        return "torch_internals", f"FSDPParamGroup._prefetch_unshard unreadable: {e}"
    if names != ("target_fsdp_param_group", "pass_type"):
        return "torch_internals", (f"FSDPParamGroup._prefetch_unshard{names} differs from "
                                   "(target_fsdp_param_group, pass_type)")
    return None


# Backward prefetch inversion (prefetch.py) leans on how FSDP2 orders
# backward: the group pops its post-forward index and prefetches the group
# before it in that order; post_backward reshards before it reduce-scatters.
BACKWARD_PREFETCH_SOURCE_MARKERS = ("_post_forward_indices.pop()", "post_forward_order[", "_prefetch_unshard(")


def check_prefetch_inversion() -> tuple[str, str] | None:
    """None if this torch orders backward the way prefetch inversion
    expects (run after check_torch passed), else (reason, message). A
    mismatch only turns inversion off; TIDE still runs."""
    it = internals()
    cls = it.param_group.FSDPParamGroup
    for attr in ("_backward_prefetch", "_prefetch_unshard", "pre_backward", "post_backward", "unshard"):
        if not callable(getattr(cls, attr, None)):
            return "torch_internals", f"FSDPParamGroup.{attr} is missing"
    try:
        names = _names(cls._prefetch_unshard)
        sources = {name: inspect.getsource(inspect.unwrap(getattr(cls, name)))
                   for name in ("_backward_prefetch", "pre_backward", "post_backward")}
        state_source = inspect.getsource(inspect.unwrap(it.state.FSDPState._pre_backward))
    except (AttributeError, OSError, TypeError, ValueError) as e:
        return "torch_internals", f"FSDP2's backward hooks are unreadable: {e}"
    if names != ("target_fsdp_param_group", "pass_type"):
        return "torch_internals", (f"FSDPParamGroup._prefetch_unshard{names} differs from "
                                   "(target_fsdp_param_group, pass_type)")
    for marker in BACKWARD_PREFETCH_SOURCE_MARKERS:
        if marker not in sources["_backward_prefetch"]:
            return "torch_internals", f"FSDPParamGroup._backward_prefetch no longer uses {marker!r}"
    if "self._backward_prefetch()" not in sources["pre_backward"]:
        return "torch_internals", "FSDPParamGroup.pre_backward no longer calls _backward_prefetch()"
    post = sources["post_backward"]
    reshard, reduce = post.find("self.reshard()"), post.find("foreach_reduce(")
    if reshard < 0 or reduce < 0 or reshard > reduce:
        return "torch_internals", "FSDPParamGroup.post_backward no longer reshards before foreach_reduce"
    if "_states_to_backward_prefetch" not in state_source:
        return "torch_internals", "FSDPState._pre_backward no longer reads _states_to_backward_prefetch"
    return None


def no_grad(fn):
    """`@torch.no_grad()` for the adapter's per-call functions, without its
    per-call objects: torch's decorator makes a no_grad instance on every call,
    whose __enter__ and __exit__ each make a set_grad_enabled instance (about
    2 us of host time per call against 0.4 us here, on the CPU test host).
    The same switch, torch._C._set_grad_enabled, restored on the way out."""
    import torch

    is_enabled, set_enabled = torch.is_grad_enabled, torch._C._set_grad_enabled

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        prev = is_enabled()
        set_enabled(False)
        try:
            return fn(*args, **kwargs)
        finally:
            set_enabled(prev)

    return wrapper


def param_groups(state: Any) -> list:
    """The FSDPParamGroups of an FSDPState: `_fsdp_param_groups` (newer torch)
    or `_fsdp_param_group` (2.11, at most one)."""
    groups = getattr(state, "_fsdp_param_groups", None)
    if groups is not None:
        return list(groups)
    group = getattr(state, "_fsdp_param_group", None)
    return [group] if group is not None else []


def missing_attrs(obj: Any, names: tuple[str, ...]) -> list[str]:
    return [n for n in names if not hasattr(obj, n)]
