"""The contract check: may this FSDPParamGroup run on TIDE, and if not, why.

One reason name per group, the plan library's where it has one
(`too_many_params`, `mixed_dtypes`, `unsupported_dtype`, `zero_dim_tensor`,
`empty_param`, ...), else the adapter's own:

  not_sharded               the group's mesh does not shard (DDP / replicate only)
  world_size_1              the shard group has one rank
  shard_dim_<d>             a parameter is sharded on dim d != 0 (Shard(d))
  cpu_offload               CPUOffloadPolicy
  custom_comm               a custom all-gather / reduce-scatter comm is set on the group
  reshard_to_smaller_mesh   reshard_after_forward=<int> (post-forward mesh)
  dtensor_param             tensor-parallel (DTensor) parameters
  all_gather_extension      fsdp_pre_all_gather / fsdp_post_all_gather tensor subclasses
  unsupported_reduce_dtype  a reduce dtype other than fp32 / bf16
  reduce_dtype_narrower     a bf16 reduce dtype for fp32 gradients (stock rounds every
                            gradient to bf16 and reduces in bf16; TIDE reduces in fp32)
  unsupported_device        neither CPU nor CUDA
  layout_mismatch           the plan's per-rank layout differs from FSDP2's padding
  attributes                an FSDPParam / FSDPParamGroup lacks an attribute the adapter uses
  fabric_mismatch           fabric="host" for CUDA parameters or "cuda" for CPU ones
  fabric_unavailable        fabric "cuda" with a libtide built without it
  bad_topology              topology=(M, L) with M*L != the shard group's size
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tide.fsdp import guards

DTYPE_NAMES = {"torch.bfloat16": "bf16", "torch.float32": "fp32"}


@dataclass
class GroupInfo:
    """What the adapter knows about one FSDPParamGroup."""

    group: Any                  # FSDPParamGroup
    fqn: str
    order: int                  # position in module traversal order (proxy for execution order)
    is_root: bool
    reason: str | None = None   # None: TIDE may run it
    detail: str = ""
    pg: Any = None              # shard process group
    world_size: int = 1
    rank: int = 0
    device: Any = None
    ag_dtype: Any = None        # all-gather (= compute, = gradient) dtype
    adoptable: bool = False     # no cast: the sharded data can live in the arena
    shapes: list[tuple[int, ...]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    # Every name under which the group's modules are reachable in the installed
    # model: a module shared by two parents (a T5-style shared embedding) has one
    # per parent, and each parent runs it inside its own forward.
    paths: tuple[str, ...] = ()
    # Modules (by id) that the group's modules hold in plain attributes, not as
    # submodules, each with the attribute path it is held through: the group's
    # forward may run them (plain_references).
    held_outside_tree: dict[int, str] = field(default_factory=dict)

    @property
    def dtype_name(self) -> str:
        return DTYPE_NAMES.get(str(self.ag_dtype), str(self.ag_dtype))


def name_of(dtype: Any) -> str:
    return DTYPE_NAMES[str(dtype)]


def ag_dtype_of(fsdp_param: Any) -> Any:
    """The dtype FSDP2 all-gathers this parameter in (set by lazy init)."""
    param_dtype = getattr(fsdp_param, "param_dtype", None)
    if param_dtype is not None:
        return param_dtype
    orig = getattr(fsdp_param, "orig_dtype", None)
    return orig if orig is not None else fsdp_param.sharded_param.dtype


def has_custom_comms(group) -> bool:
    """Whether FSDP2 was given its own all-gather or reduce-scatter comm for
    this group (set_custom_all_gather, set_custom_reduce_scatter, process-group
    or symmetric-memory allocation): such a group stays stock."""
    it = guards.internals()
    return (type(group._all_gather_comm) is not it.DefaultAllGather
            or type(group._reduce_scatter_comm) is not it.DefaultReduceScatter)


def describe(group: Any, *, order: int, is_root: bool, fqn: str, module_names: dict[int, str]) -> GroupInfo:
    """GroupInfo with the contract verdict (reason None = eligible, pending the plan check).
    `module_names`: id(module) -> its name in the installed model, which names the
    parameters until FSDP2's root lazy init (the first forward) sets their own."""
    info = GroupInfo(group=group, fqn=fqn, order=order, is_root=is_root)

    def refuse(reason: str, detail: str) -> GroupInfo:
        info.reason, info.detail = reason, detail
        return info

    missing = guards.missing_attrs(group, guards.FSDP_PARAM_GROUP_ATTRS)
    for fp in group.fsdp_params:
        missing += [f"FSDPParam.{a}" for a in guards.missing_attrs(fp, guards.FSDP_PARAM_ATTRS)]
    if missing:
        return refuse("attributes", f"missing {sorted(set(missing))}")

    it = guards.internals()
    if not isinstance(group.mesh_info, it.FSDPMeshInfo):
        return refuse("not_sharded", f"mesh info {type(group.mesh_info).__name__} does not shard")
    pg = group.mesh_info.shard_process_group
    info.pg, info.world_size, info.rank = pg, pg.size(), pg.rank()
    info.device = group.device
    if info.world_size == 1:
        return refuse("world_size_1", "the shard group has one rank: nothing to gather or scatter")
    if group.device.type not in ("cpu", "cuda"):
        return refuse("unsupported_device", f"device {group.device}")
    if getattr(group, "_use_post_forward_mesh", False):
        return refuse("reshard_to_smaller_mesh", "reshard_after_forward=<int> reshards to a smaller mesh")
    if has_custom_comms(group):
        return refuse("custom_comm", f"comms {type(group._all_gather_comm).__name__} / "
                                     f"{type(group._reduce_scatter_comm).__name__} are not FSDP2's defaults")

    names, dtypes = [], []
    for i, fp in enumerate(group.fsdp_params):
        name = getattr(fp, "_param_fqn", None) or param_name(fp, module_names)
        names.append(name)
        dim = fp.fsdp_placement.dim
        if dim != 0:
            return refuse(f"shard_dim_{dim}", f"parameter '{name}' is Shard({dim})")
        if fp.offload_to_cpu:
            return refuse("cpu_offload", f"parameter '{name}' is offloaded to CPU")
        if fp.is_dtensor:
            return refuse("dtensor_param", f"parameter '{name}' is a DTensor (tensor parallel)")
        if hasattr(fp._sharded_local_tensor, "fsdp_pre_all_gather"):
            return refuse("all_gather_extension", f"parameter '{name}' has fsdp_pre_all_gather")
        dtypes.append(ag_dtype_of(fp))
    info.names = names
    if len(set(dtypes)) > 1:
        counts = sorted({str(d) for d in dtypes})
        return refuse("mixed_dtypes", f"all-gather dtypes {counts}")
    info.ag_dtype = dtypes[0] if dtypes else None
    if str(info.ag_dtype) not in DTYPE_NAMES:
        return refuse("unsupported_dtype", f"all-gather dtype {info.ag_dtype} (bf16 or fp32)")
    reduce_dtype = getattr(group, "_reduce_dtype", None)
    if reduce_dtype is not None and str(reduce_dtype) not in DTYPE_NAMES:
        return refuse("unsupported_reduce_dtype", f"reduce dtype {reduce_dtype} (fp32 or bf16)")
    if reduce_dtype is not None and reduce_dtype.itemsize < info.ag_dtype.itemsize:
        # TIDE-RS sums what autograd left in fp32; stock's bf16 copy-in and bf16 reduction
        # give other bits, and the gradients accumulated without sync are bf16 then.
        return refuse("reduce_dtype_narrower", f"reduce dtype {reduce_dtype} for {info.ag_dtype} gradients "
                                               "(TIDE reduces in fp32)")
    info.shapes = [tuple(int(d) for d in fp._orig_size) for fp in group.fsdp_params]
    info.adoptable = all(getattr(fp, "param_dtype", None) is None for fp in group.fsdp_params)
    return info


def param_name(fp: Any, module_names: dict[int, str]) -> str:
    """The parameter's name in the installed model, from the module that holds it."""
    info = fp._module_info
    owner = module_names.get(id(info.module), "?")
    return f"{owner}.{info.param_name}" if owner else info.param_name


def check_layout(info: GroupInfo, plan: dict) -> GroupInfo:
    """Does the plan's per-rank layout equal FSDP2's (dim-0 padding to
    ceil(D/N) rows per rank)? Sets the reason when it does not."""
    itemsize = 2 if info.dtype_name == "bf16" else 4
    layout = plan["group"]["param_layout"]
    for fp, name, p in zip(info.group.fsdp_params, info.names, layout):
        padded = tuple(int(d) for d in fp.padded_sharded_param_size)
        numel = math.prod(padded)
        rows = padded[0] if padded else 1
        if p["shard_rows"] != rows or p["shard_rows"] * p["row_elems"] != numel or \
                p["shard_bytes"] != numel * itemsize:
            info.reason = "layout_mismatch"
            info.detail = (f"parameter '{name}': plan shard {p['shard_rows']}x{p['row_elems']}, "
                           f"FSDP2 padded shard {list(padded)}")
            return info
    return info
