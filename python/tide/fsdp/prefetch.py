"""Backward prefetch inversion (Sec. 5.1), In-Place mode only.

Stock FSDP2 in backward, default prefetch (groups in forward order; l runs
first in backward):

    pre_backward(l)      all-gather l-1   (l's prefetch target)
    post_backward(l)     reshard l, reduce-scatter l
    pre_backward(l-1)    all-gather l-2   (l-1's prefetch target)

so the all-gather of l-2 is enqueued behind the whole reduce-scatter of l,
and on a multi-node plan it waits behind that call's network phase. In
In-Place mode l's gradients stay in autograd's storage, so once l has
resharded its ring slot is free, and l-2 is the group that uses that slot
next. At post_backward(l), after the reshard and before the reduce-scatter
(the adapter's foreach_reduce, dispatch.py), the adapter issues the
all-gather that pre_backward(l-1) would issue, through FSDP2's own
`_prefetch_unshard`; FSDP2's later prefetch finds it pending and does
nothing. Slot-Reuse parks the gradients in the vacated slot until they are
read, so it does not invert.

The groups come from FSDP2's own bookkeeping, with its multiplicity:
`comm_ctx.post_forward_order` lists every forward invocation, and each group
pops its latest index when it prefetches in pre_backward, so repeated
invocations (activation checkpointing, several micro-batches) stay distinct.
The adapter records the index each TIDE group popped (a wrapper around the
group's `_backward_prefetch`) and at its post_backward takes the next group
in backward (order[k-1]) and that group's next target (order[k'-1], k' the
index it will pop). Anything else -- explicit prefetch
(set_modules_to_backward_prefetch), several parameter groups per module, a
target that is stock, already gathered or whose region is taken, a group
left unsharded after backward, a next group or target whose backward has
run already (the root's post_backward from FSDP2's final callback, when a
block's output did not reach the loss; for a group called more than once in
the step, that invocation's backward: _backward_ran) -- keeps FSDP2's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tide.fsdp import guards


def enable(tg) -> None:
    """Record the post-forward index that `tg`'s group pops in pre_backward."""
    it = guards.internals()
    group = tg.info.group
    stock = type(group)._backward_prefetch.__get__(group)

    def backward_prefetch(*args, **kwargs):
        indices = group._post_forward_indices
        # The condition under which FSDP2 pops (checked in its source by guards).
        if group._training_state == it.TrainingState.PRE_BACKWARD and indices:
            tg.backward_index = indices[-1]
        else:
            tg.backward_index = None
        return stock(*args, **kwargs)

    group._backward_prefetch = backward_prefetch
    tg.invert_prefetch = True


def disable(tg) -> None:
    tg.info.group.__dict__.pop("_backward_prefetch", None)
    tg.invert_prefetch = False
    tg.backward_index = None


def invert(tg, lookup: Callable[[list], Any]) -> None:
    """At tg's post_backward, before its reduce-scatter: issue the all-gather
    that the next group in backward would prefetch, when that is safe.
    `lookup(fsdp_params)` gives a parameter group's TideGroup (or None)."""
    k, tg.backward_index = tg.backward_index, None
    if k is None:
        return
    group = tg.info.group
    order = getattr(group.comm_ctx, "post_forward_order", None)
    # The index must be the one this group popped in this backward.
    if order is None or not 1 <= k < len(order) or order[k] is not group or k in group._post_forward_indices:
        return
    if not group.is_sharded:  # reshard_after_backward=False: the slot stays taken
        return
    nxt = order[k - 1]
    if nxt is group or not _default_single_group_prefetch(group, nxt):
        return
    if not nxt._post_forward_indices:
        return
    k_next = nxt._post_forward_indices[-1]
    if not 1 <= k_next < len(order):
        return
    target = order[k_next - 1]
    # From FSDP2's final callback (the root's post_backward, after the autograd
    # pass), nxt may be a group whose backward never came (its output did not
    # reach the loss): its index was never popped and points at a target whose
    # backward already ran. No backward follows to use such a gather.
    if _backward_ran(nxt, k_next, order) or _backward_ran(target, k_next - 1, order):
        return
    tt = lookup(target.fsdp_params)
    if tt is None or tt.mode != "in-place" or tt.info.group is not target:
        return  # a stock target keeps FSDP2's schedule
    if target._all_gather_result is not None or not target.is_sharded or not target.unshard_in_backward:
        return
    if not tt.region_vacated():  # (tt itself was just checked: sharded, nothing pending)
        return
    guards.internals().param_group.FSDPParamGroup._prefetch_unshard(target, "backward")
    if target._all_gather_result is not None:
        tg.stats["prefetch_inversions"] += 1
        tt.stats["ag_ahead_of_rs"] += 1


def _backward_ran(group, index: int, order: list) -> bool:
    """Whether `group`'s backward for its forward invocation order[index] has
    run. A group called once in the step is past it in POST_BACKWARD (also when
    FSDP2's final callback ran its post_backward without a pre_backward). A group
    called several times (two forwards into one backward) is in POST_BACKWARD
    after its first backward with more to come; its pre_backward pops the
    invocation's index, so an index still held says that backward is to come."""
    if sum(g is group for g in order) > 1:
        return index not in group._post_forward_indices
    return group._training_state == guards.internals().TrainingState.POST_BACKWARD


def _default_single_group_prefetch(*groups) -> bool:
    """FSDP2 prefetches one target per group, by the post-forward order: one
    parameter group per module and no explicit backward prefetch."""
    it = guards.internals()
    for g in groups:
        if getattr(g, "_num_param_groups", 1) != 1:
            return False
        state = it.get_module_fsdp_state(g.modules[0]) if g.modules else None
        if state is None or getattr(state, "_states_to_backward_prefetch", None):
            return False
    return True

