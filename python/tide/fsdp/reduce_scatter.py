"""TIDE-RS inside FSDP2's own foreach_reduce.

FSDP2's foreach_reduce keeps the semantics (divide factors, HSDP partial
accumulation and replica all-reduce, the all-reduce hook, post-divide, the
cast back to the parameter dtype, accumulation into existing sharded
gradients, post-accumulate-grad hooks). Only its copy-in and its collective
change: for a TIDE group the adapter calls the stock foreach_reduce with a
per-call `ReduceScatterCall` as its reduce-scatter comm, which

  - hands out a zero-size placeholder for the full-group reduce-scatter input
    (no `_chunk_cat`, no full-group fp32 buffer);
  - receives the per-parameter gradients in foreach_reduce_scatter_copy_in
    (rebound in _fsdp_collectives) and keeps pointers to them where autograd
    left them (In-Place), or copies them into the group's vacated region and
    lets FSDP2 free them at once (Slot-Reuse); inputs read in place are
    released once the call's read-done point has passed, before its network
    phase ends (by default on CUDA, queued behind one event per call and
    dropped by a later TIDE call that finds it passed, or at the end of the
    backward; with release_grads="read-done", through one record_stream each;
    the host fabric releases at read-done itself), or (install's
    release_grads="with-fsdp-state") handed to FSDP2's reduce-scatter state
    with the placeholder, which FSDP2 drops once its compute stream has
    waited for the call (backend.py);
  - runs TIDE-RS into FSDP2's packed fp32 per-rank output with the divide
    factor folded into alpha.

Divide factors (FSDP2's _get_gradient_divide_factors decides, as stock):
  AVG                 alpha = 1 / shard world size (exact for powers of two)
  SUM                 alpha = 1 (the post-divide, if any, runs in foreach_reduce)
  PREMUL_SUM(1/f)     alpha = 1/f when that is a power of two (exact); else
                      fp32 gradients are pre-multiplied (a copy), as NCCL
                      would, and bf16 gradients fold 1/f into alpha (the sum
                      is fp32 either way; the last bit may differ from NCCL's)
A bf16 reduce dtype (bf16 gradients, bf16 output): TIDE sums in fp32 and
rounds once, in the cast into FSDP2's bf16 output; the stock collective sums
in bf16 and rounds every partial sum. With two ranks both round once and
agree; with more, the last bits may differ (TIDE's is the fp32 sum rounded once).
Gradients in fp32 for a bf16 group (FSDP2 accumulates them in the fp32
reduce dtype when gradient sync is off) use a second plan registered for
fp32 gradients (in place: they do not fit the bf16 landing). A predivide
(only for fp16 reductions, outside the contract) or any other gradient dtype
makes that one call run stock, logged once per group.
"""

from __future__ import annotations

import ctypes
import logging
import math
import threading

import torch
import torch.distributed as dist

from tide.fsdp import guards

log = logging.getLogger("tide.fsdp")

_active = threading.local()


def _power_of_two(x: float) -> bool:
    if x <= 0 or not math.isfinite(x):
        return False
    mantissa, _ = math.frexp(x)
    return mantissa == 0.5


def active_call():
    return getattr(_active, "call", None)


class _Active:
    def __init__(self, call):
        self.call = call

    def __enter__(self):
        self.prev = getattr(_active, "call", None)
        _active.call = self.call

    def __exit__(self, *exc):
        _active.call = self.prev


try:  # FSDP2's comm interface, when importable (guards refuse to install otherwise)
    from torch.distributed.fsdp._fully_shard._fsdp_api import ReduceScatter as _ReduceScatterBase
except Exception:  # pragma: no cover
    _ReduceScatterBase = object


class ReduceScatterCall(_ReduceScatterBase):
    """FSDP2 reduce-scatter comm for one foreach_reduce call of a TIDE group."""

    def __init__(self, tg, fsdp_params: list, index: list[int], alpha: float, premul: float | None,
                 grad_dtype: torch.dtype):
        self.tg = tg
        self.grad_dtype = grad_dtype
        self.handle = tg.handles[grad_dtype]
        self.fsdp_params = fsdp_params
        self.index = index  # per entry of fsdp_params, its position in the group (prepare checked each)
        self.alpha = alpha
        self.premul = premul
        self.marker: torch.Tensor | None = None
        self.ptrs: list[int] | None = None
        self.keep: list[torch.Tensor] = []         # torch tensors read in place (released at read-done)
        self.slot_views: list[torch.Tensor] = []   # Slot-Reuse: the gradients' copies in the region
        self.region = None
        self.missing: list[int] = []  # group positions without a gradient on this rank (take_grads)

    # -- Comm
    def allocate(self, size, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        if self.marker is None:  # the full-group input: never materialized
            self.marker = torch.empty(0, dtype=dtype, device=device)
            return self.marker
        return torch.empty(*size, dtype=dtype, device=device)

    # -- foreach_reduce_scatter_copy_in
    @guards.no_grad
    def take_grads(self, unsharded_grads: list[torch.Tensor]) -> None:
        tg = self.tg
        index = self.index
        if len(index) != len(unsharded_grads):
            raise RuntimeError(f"tide.fsdp: group '{tg.info.fqn}': {len(unsharded_grads)} gradients for "
                               f"{len(index)} parameters")
        numels, premul = tg.numels, self.premul
        grads = []
        for p, g in zip(index, unsharded_grads):
            if g.numel() != numels[p]:
                raise RuntimeError(f"tide.fsdp: group '{tg.info.fqn}': gradient of '{tg.info.names[p]}' has "
                                   f"{g.numel()} elements, the parameter {numels[p]}")
            if not g.is_contiguous():
                g = g.contiguous()
            if g.dtype != self.grad_dtype:  # (prepare widened the call: exact)
                g = g.to(self.grad_dtype)
                tg.stats["rs_grads_widened"] += 1
            if premul is not None:
                # Into a new tensor, as stock scales its own copy: autograd may hand several
                # parameters one gradient storage (torch.stack(params).sum(0)), which an in-place
                # multiply would scale once per parameter sharing it (review, session 34).
                g = g * premul
            grads.append(g)
        ptrs: list[int | None] = [None] * len(numels)
        if index is tg.all_index:  # every parameter has a gradient (prepare's common case)
            missing = []
        else:
            present = set(index)
            missing = [p for p in range(len(numels)) if p not in present]
        self.missing = missing
        if missing:  # parameters without a gradient this step contribute zeros
            zeros = torch.zeros(max(tg.numels[p] for p in missing), dtype=self.grad_dtype, device=grads[0].device
                                if grads else tg.backend.device)
            self.keep.append(zeros)
            tg.stats["rs_partial"] += 1
            for p in missing:
                ptrs[p] = zeros.data_ptr()
        region = tg.region
        # (Gradients wider than the parameters do not fit their landing: in place.)
        if tg.mode == "slot-reuse" and self.grad_dtype == tg.info.ag_dtype and tg.region_vacated():
            # Park the gradients in the vacated region; FSDP2 drops its references
            # right after this returns, which frees them at once.
            tg.backend.before_region_write(region)
            slots, slot_ptrs = tg.grad_slots()
            if index is tg.all_index:
                outs, views = tuple(tg.ag_outputs), list(slots)
            else:
                outs, views = tuple(tg.ag_outputs[p] for p in index), [slots[p] for p in index]
            # The region backs the unsharded Parameters: like FSDP2's copy-out, keep
            # their version counters so saved references to them stay valid.
            with torch.autograd._unsafe_preserve_version_counter(outs):
                torch._foreach_copy_(views, [g.view(-1) for g in grads])
            for p in index:
                ptrs[p] = slot_ptrs[p]
            self.slot_views.extend(views)
            self.region = region
            tg.stats["rs_slot_reuse"] += 1
        else:
            for p, g in zip(index, grads):
                ptrs[p] = g.data_ptr()
            self.keep.extend(grads)
            tg.stats["rs_in_place"] += 1
        self.ptrs = ptrs  # type: ignore[assignment]

    # -- ReduceScatter
    @guards.no_grad
    def __call__(self, output_tensor: torch.Tensor, input_tensor: torch.Tensor, group, op, async_op: bool = False):
        tg = self.tg
        if input_tensor is not self.marker or self.ptrs is None:
            raise RuntimeError("tide.fsdp: foreach_reduce called the reduce-scatter without handing the "
                               "gradients to foreach_reduce_scatter_copy_in (torch internals changed?)")
        full = len(self.fsdp_params) == len(tg.numels)
        direct = (full and output_tensor.dtype == torch.float32 and output_tensor.is_contiguous()
                  and output_tensor.numel() == tg.out_elems)
        out = output_tensor if direct else torch.empty(tg.out_elems, dtype=torch.float32,
                                                       device=output_tensor.device)
        retained = tg.backend.reduce_scatter(tg.comm, self.handle, self.ptrs, out, self.alpha, self.keep,
                                             self.slot_views, self.region)
        if retained:
            # FSDP2 returns the marker as this call's reduce-scatter input and keeps
            # it in its reduce-scatter state until the compute stream has waited
            # for the call; the inputs read in place go with it.
            self.marker._tide_retained_inputs = retained
            tg.stats["rs_inputs_retained"] += 1
        if tg.backend.poison_read_inputs:
            tg.stats["rs_inputs_poisoned"] += 1
        if not direct:
            if full:
                output_tensor.view(-1).copy_(out)  # the cast to a bf16 reduce dtype
            else:  # pack the parameters that had gradients, as FSDP2 lays them out
                at = 0
                for fp in self.fsdp_params:
                    p = tg.index[id(fp)]
                    n = tg.shard_elems[p]
                    output_tensor.view(-1)[at:at + n].copy_(out[tg.out_offsets[p]:tg.out_offsets[p] + n])
                    at += n
        self.ptrs, self.keep, self.slot_views = None, [], []
        tg.stats["reduce_scatters"] += 1
        # Frozen parameters (requires_grad False, alike on every rank, as FSDP2's own reduce-scatter
        # assumes) are missing on every rank by construction: not checked, so that a group holding
        # them (base weights beside adapters) pays no host wait per call.
        trainable = [p for p in self.missing if tg.params[p].sharded_param.requires_grad]
        if trainable:
            self._check_unused_everywhere(out, trainable)

    def _check_unused_everywhere(self, out: torch.Tensor, trainable: list[int]) -> None:
        """Parameters without a gradient here must have none on any rank.

        Stock FSDP2 reduce-scatters only the parameters with gradients, so
        ranks that disagree on which have one call it with different sizes
        and fail. TIDE's call has the group's fixed layout and adds zeros for
        the missing ones: it completes, and FSDP2 would then drop this rank's
        reduced shard of a parameter another rank did train, so the shards
        drift apart silently. Every rank contributed zeros for it exactly
        when its reduced shard here is zero; a nonzero one is such a
        disagreement. (A disagreement whose reduced shard happens to be zero
        here goes unseen.) This waits for the call: only calls missing the
        gradient of a trainable parameter (`trainable`) pay it, which FSDP2
        makes only without set_reduce_scatter_unused_params(True)."""
        tg = self.tg
        tg.stats["rs_unused_checks"] += 1
        spans = [out[tg.out_offsets[p]:tg.out_offsets[p] + tg.shard_elems[p]] for p in trainable]
        trained = torch.stack([span.ne(0).any() for span in spans]).tolist()
        names = [tg.info.names[p] for p, t in zip(trainable, trained) if t]
        if names:
            raise RuntimeError(
                f"tide.fsdp: group '{tg.info.fqn}': {names} had no gradient on this rank but did on another (their "
                "reduced shard here is not zero): the ranks disagree on which parameters were used, which stock "
                "FSDP2's reduce-scatter cannot take either. Call set_reduce_scatter_unused_params(True) on the "
                "FSDP modules whose parameters some ranks leave unused")


def prepare(tg, fsdp_params, unsharded_grads, reduce_scatter_group, reduce_dtype, device, gradient_divide_factor,
            all_reduce_group, force_sum_reduction_for_comms) -> ReduceScatterCall | None:
    """A ReduceScatterCall for this foreach_reduce, or None (with the reason
    logged once per group) when this call must run stock."""
    if fsdp_params == tg.params:  # every parameter has a gradient: one list comparison (identity per item)
        index = tg.all_index
    else:
        index = [tg.index.get(id(fp)) for fp in fsdp_params]
        if None in index:
            return _stock(tg, "parameters from another group")
    # (FSDP2 passes the group's own shard group, whose size install read.)
    if reduce_scatter_group is None or (reduce_scatter_group is not tg.info.pg
                                        and reduce_scatter_group.size() != tg.info.world_size):
        return _stock(tg, "the reduce-scatter group differs from the all-gather group")
    dtypes = {g.dtype for g in unsharded_grads}
    grad_dtype = next(iter(dtypes)) if len(dtypes) == 1 else None
    widen, tg.accumulated_without_sync = tg.accumulated_without_sync, False
    if widen and torch.float32 in tg.handles and dtypes <= {torch.float32, tg.info.ag_dtype}:
        # Gradient sync was off since the last reduce-scatter: FSDP2 keeps the gradients of
        # parameters that had one then in fp32, the others in the parameter dtype, and which is
        # which differs between ranks. Every rank takes the fp32 plan (upcasting, as stock's
        # _chunk_cat does); choosing by the local dtypes paired different plans across ranks
        # (wrong gradients or a timeout; review, session 35).
        grad_dtype = torch.float32
    if grad_dtype not in tg.handles:
        return _stock(tg, f"gradient dtype {sorted(map(str, dtypes))}: no plan registered for it "
                          f"(registered: {[str(d) for d in tg.handles]})")
    # The scaling depends only on these arguments (and the groups' sizes, fixed), and a group
    # sees the same few every step: decided once per combination.
    key = (reduce_scatter_group, all_reduce_group, reduce_dtype, grad_dtype, device.type, gradient_divide_factor,
           force_sum_reduction_for_comms)
    scaling = tg.rs_scaling.get(key)
    if scaling is None:
        scaling = _scaling(tg, reduce_scatter_group, all_reduce_group, reduce_dtype, grad_dtype, device,
                           gradient_divide_factor, force_sum_reduction_for_comms)
        if len(tg.rs_scaling) < 64:  # (a bound, should a key never compare equal again, e.g. a NaN factor)
            tg.rs_scaling[key] = scaling
    if isinstance(scaling, str):
        return _stock(tg, scaling)
    alpha, premul = scaling
    return ReduceScatterCall(tg, fsdp_params, index, alpha, premul, grad_dtype)


def _scaling(tg, reduce_scatter_group, all_reduce_group, reduce_dtype, grad_dtype, device, gradient_divide_factor,
             force_sum_reduction_for_comms) -> tuple[float, float | None] | str:
    """(alpha, premul) for TIDE-RS under FSDP2's divide factors, or why the call runs stock."""
    pre, _post, rs_op, _ar_op = guards.internals().get_gradient_divide_factors(
        reduce_scatter_group, all_reduce_group, reduce_dtype or grad_dtype, device.type,
        gradient_divide_factor, force_sum_reduction_for_comms)
    if pre is not None and pre != 1:
        return f"predivide by {pre}"
    premul = None
    if rs_op == dist.ReduceOp.AVG:
        alpha = 1.0 / tg.info.world_size
    elif rs_op == dist.ReduceOp.SUM:
        alpha = 1.0
    elif gradient_divide_factor:
        scale = 1.0 / gradient_divide_factor
        scale32 = ctypes.c_float(scale).value
        if not math.isfinite(scale32) or scale32 == 0.0:
            # The scale goes to the sum in fp32, where it would be infinite or 0 (the binding
            # refuses both); stock scales by the same fp32 value, so the call is stock's alike.
            return f"divide factor {gradient_divide_factor}: its reciprocal is {scale32} in fp32"
        if _power_of_two(scale) or grad_dtype != torch.float32:
            alpha = scale
        else:
            alpha, premul = 1.0, scale
    else:
        return f"reduce op {rs_op}"
    return alpha, premul


def _stock(tg, why: str) -> None:
    if why not in tg.stock_calls_logged:
        tg.stock_calls_logged.add(why)
        log.warning("tide.fsdp: group '%s': this reduce-scatter runs stock: %s (said once per group and reason)",
                    tg.info.fqn, why)
    tg.stats["rs_stock"] += 1


def activate(call: ReduceScatterCall | None) -> _Active:
    return _Active(call)
