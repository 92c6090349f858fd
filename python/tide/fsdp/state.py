"""Per-group and per-shard-group state of an installation."""

from __future__ import annotations

import math
import weakref
from collections import Counter
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from tide.fsdp.groups import GroupInfo

try:  # torch >= 2.13: the walk FSDP2 itself makes of a module's outputs for its pre-backward hooks
    from torch.distributed.fsdp._common_utils import collect_grad_tensors as _outputs_requiring_grad
except ImportError:  # earlier FSDP2 flattens them with pytree

    def _outputs_requiring_grad(output: Any) -> tuple[torch.Tensor, ...]:
        return tuple(t for t in tree_flatten(output)[0] if torch.is_tensor(t) and t.requires_grad)


class _GraphSentinel:
    """One forward's: held only by the prehooks on its output nodes (its bound `hook`),
    so alive as long as that autograd graph; `ran` once a backward reached one of them;
    `seq` orders the group's forwards."""

    __slots__ = ("ran", "seq", "__weakref__")

    def __init__(self, seq: int):
        self.ran = False
        self.seq = seq

    def hook(self, grad_outputs):
        self.ran = True
        return None


class TideGroup:
    """One FSDPParamGroup that runs on TIDE."""

    def __init__(self, info: GroupInfo, mode: str, plan: dict, adopt: bool, plan_options: dict):
        self.info = info
        self.mode = mode
        self.plan = plan
        self.plan_options = plan_options  # make_plan options of this group's plans (passes may be its own)
        self.adopt = adopt and info.adoptable
        self.params = list(info.group.fsdp_params)
        self.index = {id(fp): i for i, fp in enumerate(self.params)}
        self.all_index = list(range(len(self.params)))  # a reduce-scatter's index when every parameter has a gradient
        self.numels = [math.prod(s) for s in info.shapes]
        self.grad_dtype = info.ag_dtype
        layout = plan["group"]["param_layout"]
        self.layout = layout
        self.out_offsets = [p["out_offset"] for p in layout]
        self.shard_elems = [p["shard_rows"] * p["row_elems"] for p in layout]
        self.out_elems = plan["group"]["out_bytes"] // 4
        self.unsharded_bytes = plan["group"]["unsharded_bytes"]
        self.shard_bytes = plan["group"]["shard_bytes"]
        self.world_size = info.world_size
        # Does the cast/copy write this rank's shard straight into its own landing rows
        # (one node; the all-gather then runs in place)? Fixed at install (read per call).
        self.in_place_shard = not self.adopt and plan["topology"]["nodes"] == 1
        # What all_gather hands FSDP2 in each AllGatherResult: fixed by the layout, so made
        # once (FSDP2 only reads them, in its own copy-out, which TIDE groups do not run).
        numels = [[fp.padded_sharded_param_size.numel()] for fp in self.params]
        self.ag_input_numels = numels
        self.ag_input_dtypes = [[info.ag_dtype] for _ in self.params]
        self.ag_split_sizes = [n[0] for n in numels]
        # Set when the arena is built.
        self.ctx: CommContext | None = None
        self.handle: Any = None      # gradients in the all-gather dtype
        self.handles: dict = {}      # gradient dtype -> registered group
        self.extra_plans: list[dict] = []
        self.region: Any = None
        self.folded = False          # last block kept after forward, folded into the ring
        self.ag_outputs: list[torch.Tensor] = []
        self.resident: list[torch.Tensor] = []
        self.resident_ptrs: list[int] = []
        self.resident_base = 0
        self.resident_offset = -1
        # Per parameter (sized with the residents at install): weak references to the tensor
        # objects adopt() pointed at its resident shard (all_gather.detach_earlier_adoptions
        # gives those FSDP2 dropped storage of their own).
        self.adopted: list[list] = []
        # Gathered (or its post-backward ran) with gradient sync off since its last reduce-scatter:
        # FSDP2 may hold fp32 accumulated gradients for a bf16 group on some ranks and not on
        # others (a parameter without a gradient in the no-sync backward stays bf16), so the next
        # reduce-scatter takes the fp32 plan on every rank (reduce_scatter.prepare). True at
        # first: an install (or a relayout) between no-sync micro-batches finds such gradients
        # already there, on some ranks only (an upcast more at worst; review, session 35).
        self.accumulated_without_sync = True
        self.marker: torch.Tensor | None = None
        self._shard_views: list[torch.Tensor] | None = None
        self._own_views: tuple[torch.Tensor, ...] | None = None
        self._grad_slots: tuple | None = None
        self._dtypes_checked = False
        self.stats: Counter = Counter()
        self.stock_calls_logged: set[str] = set()
        # foreach_reduce's scaling arguments -> (alpha, premul) or why stock (reduce_scatter.prepare)
        self.rs_scaling: dict[tuple, Any] = {}
        self.deferrals_logged: set[str] = set()  # holders whose slot deferred this group's prefetch
        # Backward prefetch inversion (prefetch.py): on, or why not.
        self.invert_prefetch = False
        self.inversion_off: str | None = None
        self.backward_index: int | None = None  # post-forward index popped in this backward
        # Left unsharded by its own backward (set_reshard_after_backward(False)) and not
        # gathered since: FSDP2 holds these parameters, not the user (all_gather._scan_region).
        self.kept_after_backward = False
        # The shards' versions when it was kept (note_kept), and, once a ring-mate resharded it
        # (ring_resharded_kept), until its next all-gather: shards changed in between (an
        # optimizer step) give that gather other values than stock's kept ones (regathered_updated).
        self._shard_versions_kept: list[int] | None = None
        self._shard_versions_ring_resharded: list[int] | None = None
        self.kept_reshard_warned = False
        # Resharded in its backward, before its post-backward, for a ring-mate's backward
        # (all_gather._reshard_waiting_for_post_backward): its next pre-backward gathers it again.
        self.resharded_in_backward = False
        # Its pending or last all-gather came from FSDPModule.unshard() (all_gather._explicit_unshard):
        # a ring-mate never drops it as a stale prefetch.
        self.explicit_unshard = False
        # While resharded: the unsharded Parameters and the versions they had (mark_resharded).
        self._versions_at_reshard: tuple | None = None
        # Forwards with grad whose backward has not reached them (note_forward_with_grad): their
        # graphs hold views of the ring slots, which only TIDE's next gathers fill again.
        self._graph_sentinels: weakref.WeakSet = weakref.WeakSet()
        self._forwards_noted = 0

    def note_forward_with_grad(self, output: Any) -> None:
        """After its forward with grad enabled (not a recompute in backward): until a
        backward reaches that forward's outputs, or their autograd graph is gone (a
        forward whose backward never runs), uninstall or a new layout would leave the
        graph reading ring slots that other groups' gathers overwrite. A prehook on each
        output's node holds a sentinel; the graph's end drops it. The outputs are found
        as FSDP2 finds them for its pre-backward hook (containers, dataclasses)."""
        self._forwards_noted += 1
        sentinel = _GraphSentinel(self._forwards_noted)
        # Found as FSDP2 finds them, read only: torch's _apply_to_tensors rebuilds every
        # container (a dataclass with an init=False field, or a tuple subclass with its own
        # __new__, makes it raise), and its recursive inner function is a reference cycle that
        # kept what it was given, and the graph with it, until a collection.
        nodes = {id(t.grad_fn): t.grad_fn for t in _outputs_requiring_grad(output) if t.grad_fn is not None}
        for node in nodes.values():
            node.register_prehook(sentinel.hook)
        if nodes:
            self._graph_sentinels.add(sentinel)

    def note_backward_done(self) -> None:
        """At its post-backward: the forwards that backward reached are done, and so are
        those before them (a forward whose backward never came, its loss still held); one
        after them (two forwards, then their backwards in turn) is not."""
        live = list(self._graph_sentinels)
        reached = [s.seq for s in live if s.ran]
        if reached:
            self._graph_sentinels = weakref.WeakSet([s for s in live if not s.ran and s.seq > max(reached)])

    @property
    def awaits_backward(self) -> bool:
        """A forward with grad ran whose graph lives and whose backward has not reached it
        (a second backward through a retained graph is not seen: README)."""
        return any(not s.ran for s in self._graph_sentinels)

    def _shard_versions(self) -> list[int]:
        # The optimizer's in-place updates move the DTensor Parameter's version; a copy
        # into the local tensor (load_state_dict) moves the local one's.
        return [fp.sharded_param._version + fp._sharded_local_tensor._version for fp in self.params]

    def note_kept(self) -> None:
        """Its backward left it unsharded (set_reshard_after_backward(False))."""
        self.kept_after_backward = True
        self._shard_versions_kept = self._shard_versions()

    def ring_resharded_kept(self) -> None:
        """A ring-mate reshards it while FSDP2 keeps it unsharded (all_gather.claim_region)."""
        versions = self._shard_versions_kept
        self.info.group._to_sharded()  # (mark_resharded forgets the kept versions)
        self._shard_versions_ring_resharded = versions

    @property
    def kept_but_ring_resharded(self) -> bool:
        """Kept unsharded by FSDP2 (set_reshard_after_backward(False)), resharded by a
        ring-mate, not gathered since: its modules hold the sharded Parameters where
        stock's hold the unsharded ones, and with them the gradients accumulated
        without sync, which a module's zero_grad() then misses (install's wrapper)."""
        return self._shard_versions_ring_resharded is not None

    def note_resharded_by_fsdp(self) -> None:
        """FSDP2's own post-backward resharded it (reshard_after_backward, as a pipeline schedule
        sets before the post-backward it calls by hand): stock gathers it again too, so a
        ring-mate's earlier reshard no longer sets TIDE apart from stock."""
        self._shard_versions_ring_resharded = None

    def regathered_updated(self) -> bool:
        """At an all-gather: was it kept, resharded by a ring-mate, and are its
        shards changed since it was kept? Stock FSDP2 would not have gathered
        it, and gone on with the values it kept."""
        versions, self._shard_versions_ring_resharded = self._shard_versions_ring_resharded, None
        return versions is not None and versions != self._shard_versions()

    def mark_resharded(self) -> None:
        """At reshard. Stock FSDP2 frees the unsharded storage here, so that a
        later use of an unsharded Parameter (a backward through a graph kept
        with create_graph=True, after its block resharded) fails. Here that
        storage is the arena, which another group's gather then overwrites: a
        use would read its weights silently. So each unsharded Parameter's
        version counter moves on, and autograd refuses a tensor it saved
        before ("modified by an inplace operation") until the next all-gather
        of this group puts the versions back (mark_unsharded)."""
        self._shard_versions_kept = None  # FSDP2 reshards it itself: it gathers again, as stock would
        if self._versions_at_reshard is not None:
            return
        # (Comprehensions into lists: this runs at every reshard, and generator
        # expressions cost more per item.)
        params = [fp._unsharded_param for fp in self.params if hasattr(fp, "_unsharded_param")]
        versions = [p._version for p in params]
        torch._C._autograd._unsafe_set_version_counter(params, [v + 1 for v in versions])
        self._versions_at_reshard = (params, versions)

    def mark_unsharded(self, restore_versions: bool = True) -> None:
        """At this group's all-gather (and uninstall): the versions autograd saw
        (uninstall of a resharded group: not restore_versions, see install._restore)."""
        self.kept_after_backward = False
        self.resharded_in_backward = False
        self._shard_versions_kept = self._shard_versions_ring_resharded = None
        if self._versions_at_reshard is None:
            return
        params, versions = self._versions_at_reshard
        if restore_versions:
            torch._C._autograd._unsafe_set_version_counter(params, versions)
        self._versions_at_reshard = None

    @property
    def comm(self):
        return self.ctx.comm

    @property
    def backend(self):
        return self.ctx.backend

    @property
    def shard_source(self) -> str:
        if self.adopt:
            return "resident"
        return "cast" if any(getattr(fp, "param_dtype", None) is not None for fp in self.params) else "copy"

    def own_landing_views(self) -> tuple[torch.Tensor, ...]:
        """Per parameter, this rank's rows of its unsharded (padded) storage in the arena
        (a tuple: what _unsafe_preserve_version_counter takes, made once)."""
        if self._own_views is None:
            r = self.ctx.comm.rank
            self._own_views = tuple(out.narrow(0, r * (p["shard_bytes"] // out.element_size()),
                                               p["shard_bytes"] // out.element_size())
                                    for out, p in zip(self.ag_outputs, self.layout))
        return self._own_views

    def shard_views(self) -> list[torch.Tensor]:
        """Per-parameter views of the shared shard buffer, in the all-gather dtype."""
        if self._shard_views is None:
            buf = self.ctx.shard_buffer
            self._shard_views = [buf[p["shard_offset"]:p["shard_offset"] + p["shard_bytes"]].view(self.info.ag_dtype)
                                 for p in self.layout]
        return self._shard_views

    def grad_slots(self) -> tuple[tuple[torch.Tensor, ...], list[int]]:
        """Slot-Reuse: per parameter, the start of its unsharded storage in the
        arena that holds its gradient (as many elements), and its address; made once."""
        if self._grad_slots is None:
            views = tuple(out[:n] for out, n in zip(self.ag_outputs, self.numels))
            self._grad_slots = (views, [v.data_ptr() for v in views])
        return self._grad_slots

    def region_vacated(self) -> bool:
        """Is no group unsharded (or being gathered) in this group's region?"""
        for m in self.region.members:  # (a loop, not all() over a generator: runs at every reduce-scatter)
            group = m.info.group
            if group._all_gather_result is not None or not group.is_sharded:
                return False
        return True

    def check_dtypes(self) -> None:
        if self._dtypes_checked:
            return
        from tide.fsdp.groups import ag_dtype_of

        for fp, name in zip(self.params, self.info.names):
            if ag_dtype_of(fp) != self.info.ag_dtype:
                raise RuntimeError(f"tide.fsdp: '{name}' now all-gathers in {ag_dtype_of(fp)}, the arena was laid "
                                   f"out for {self.info.ag_dtype}: uninstall before changing dtypes and install "
                                   "again (after a failed forward, model.reset_iter_state() first)")
        self._dtypes_checked = True

    @property
    def grad_dtypes(self) -> list:
        """Gradient dtypes registered: the all-gather dtype, plus fp32 for a
        bf16 group with an fp32 reduce dtype (FSDP2 accumulates unsharded
        gradients in fp32 when gradient sync is off)."""
        want = [self.grad_dtype]
        if self.grad_dtype == torch.bfloat16 and getattr(self.info.group, "_reduce_dtype", None) == torch.float32:
            want.append(torch.float32)
        return want

    def summary(self) -> dict:
        plan = self.plan
        ag, rs, mem = plan["all_gather"], plan["reduce_scatter"], plan["memory"]
        rs_staging = max(p["reduce_scatter"]["staging_bytes"] for p in [plan, *self.extra_plans])
        staging = rs_staging + ag["stage_bytes"] + (0 if self.adopt or self.in_place_shard else self.shard_bytes)
        return {
            "fqn": self.info.fqn,
            "status": "tide",
            "reason": None,
            "detail": "",
            "params": len(self.params),
            "dtype": self.info.dtype_name,
            "region": self.region.name,
            "region_bytes": self.region.nbytes,
            "prefetch_inversion": "on" if self.invert_prefetch else f"off ({self.inversion_off})",
            "folded": self.folded,
            "unsharded_bytes": self.unsharded_bytes,
            "shard_bytes": self.shard_bytes,
            "shard_source": self.shard_source,
            "shard_in_place": self.in_place_shard,  # cast/copied into the own landing rows
            "staging_bytes": staging,
            "plan": {
                "topology": [plan["topology"]["nodes"], plan["topology"]["gpus_per_node"]],
                "mode": rs["mode"],
                "ag_rounds": ag["rounds"],
                "ag_descriptors": ag["descriptors"],
                "rs_waves": rs["waves"],
                "rs_passes": rs["passes"],
                "rs_landing": rs["landing"],
                # App. F's rail lane (plan_options rail_lane=True on one GPU per node across nodes).
                "rs_rail_lane": rs["rail_lane"],
                "sum_ctas": rs["sum_ctas"],
                "landing_ctas": rs["landing_ctas"],
                "rs_staging_bytes": rs["staging_bytes"],
                # The plans for gradients in a wider dtype (their passes keep their staging near the main plan's).
                "extra_rs_staging_bytes": [p["reduce_scatter"]["staging_bytes"] for p in self.extra_plans],
                "ag_stage_bytes": ag["stage_bytes"],
                "tide_live_ns": mem["tide_live_ns"],
                "fsdp2_live_ns": mem["fsdp2_live_ns"],
            },
            "grad_dtypes": [str(d).replace("torch.", "") for d in self.grad_dtypes],
            "stats": dict(self.stats),
        }


class CommContext:
    """One TIDE communicator: the shard process group's ranks, its arena."""

    def __init__(self, pg: Any, fabric: str, backend: Any, topology: tuple[int, int]):
        self.pg = pg
        self.fabric = fabric
        self.backend = backend
        self.topology = topology
        self.comm: Any = None
        self.owner: Any = None  # arena_lifetime.ArenaOwner: alive while a tensor views the arena
        self.lifetime_key: Any = None  # arena_lifetime.key_for: how every rank names this communicator
        self.timeout_s = 0.0  # every wait's deadline (0: the fabric's default)
        self.groups: list[TideGroup] = []
        self.regions: list = []
        self.arena_bytes = 0
        self.scratch_bytes = 0
        self.user_bytes = 0
        self.reserved_bytes = 0  # what the fabric holds for the arena outside torch's allocator
        self.shard_buffer: torch.Tensor | None = None  # packed cast/copied shards, shared by the groups
        self.shard_read_event = None  # CUDA: the last all-gather that read shard_buffer

    def summary(self) -> dict:
        return {
            "ranks": self.topology[0] * self.topology[1],
            "topology": list(self.topology),
            "fabric": self.backend.name,  # as install names it: host, cuda or cuda-ipc
            "rails": self.comm.rails if self.comm is not None else None,  # the fabric's run-time choice
            "fabric_stats": self.comm.stats if self.comm is not None else None,  # copies, sums, copy graphs
            "timeout_s": self.timeout_s,
            "arena_bytes": self.arena_bytes,
            "reserved_bytes": self.reserved_bytes,
            "scratch_bytes_estimate": self.scratch_bytes,
            "user_bytes": self.user_bytes,
            "regions": [{"name": r.name, "bytes": r.nbytes, "groups": [g.info.fqn for g in r.members]}
                        for r in self.regions],
            "resident_bytes": sum(g.shard_bytes for g in self.groups if g.adopt),
            "shard_buffer_bytes": 0 if self.shard_buffer is None else self.shard_buffer.numel(),
        }
