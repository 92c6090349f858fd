"""TIDE-AG in place of FSDP2's all-gather, copy-in and copy-out.

FSDP2 stock: cast/copy every shard into a flat rank-major buffer, all-gather
it, then copy each rank's piece of each parameter out into the parameter's
unsharded storage. Here the unsharded storages are the arena (each FSDPParam's
`all_gather_outputs[0]` is a view of its group's region, made once at
install), and TIDE-AG writes every rank's shard straight into them, so the
copy-out is only a wait. The shard is read where it lives (adopted, resident
in the arena) or from the packed buffer that the cast writes into: one torch
buffer per communicator, sized for the largest shard, which the groups'
all-gathers take in turn (each cast waits until the previous all-gather has
read it; with prefetch depth 1 that one has completed by then anyway). A
buffer per all-gather from the caching allocator was tried: it lowered the
allocator's peak but raised its reserved memory more (fragmentation).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref

import torch
import torch.distributed as dist

from tide.fsdp import guards

log = logging.getLogger("tide.fsdp")


class RegionConflict(RuntimeError):
    """A group needs a ring slot that another unsharded group still uses."""


# Where an all-gather comes from. FSDP2 prefetches through _prefetch_unshard,
# which dispatch wraps (`prefetches_marked` once it does); a gather of an idle
# group outside it is the user's FSDPModule.unshard(), which a ring-mate must
# never drop as a stale prefetch. Without the wrapper nothing tells the two
# apart, and every idle gather counts as a prefetch (as before the marking).
_in_prefetch = threading.local()
prefetches_marked = False


@contextlib.contextmanager
def prefetching():
    """Marks the all-gathers issued inside as FSDP2 prefetches."""
    before = getattr(_in_prefetch, "on", False)
    _in_prefetch.on = True
    try:
        yield
    finally:
        _in_prefetch.on = before


# The group whose pre_backward ran last on this thread (install's wrapper notes it). Without
# the prefetch marking, a gather of another group while that one is still in its backward is
# one of its backward prefetches (FSDP2's default one inside its pre_backward, or the explicit
# ones FSDPState._pre_backward issues right after it): it must not reshard the group whose
# backward is about to run, and raises RegionConflict instead, as the line dispatch logs then
# says. With the marking, the prefetch wrapper defers such a gather.
_last_pre_backward = threading.local()


def note_pre_backward(tg) -> None:
    _last_pre_backward.tg = weakref.ref(tg)  # (a model dropped takes its arena along)


def _last_pre_backward_owner():
    """The group whose pre_backward ran last on this thread, or None."""
    ref = getattr(_last_pre_backward, "tg", None)
    return ref() if ref is not None else None


def _unmarked_backward_prefetch(tg) -> bool:
    """Is this gather of tg a backward prefetch that no wrapper marked?"""
    if prefetches_marked:
        return False
    owner = _last_pre_backward_owner()
    # (Its post_backward or the end of the backward moves the owner out of PRE_BACKWARD.)
    return (owner is not None and owner is not tg
            and owner.info.group._training_state == guards.internals().TrainingState.PRE_BACKWARD)


def _explicit_unshard(group) -> bool:
    """Is this all-gather of `group` the user's FSDPModule.unshard()?"""
    return (prefetches_marked and not getattr(_in_prefetch, "on", False)
            and group._training_state == guards.internals().TrainingState.IDLE)


def region_holder(tg):
    """The group that keeps tg's region from being gathered into now (one
    with an all-gather pending, or unsharded and not yet past its backward),
    or None when claim_region would succeed. Changes nothing.

    The folded last block (App. F) is no holder while idle: it kept its
    parameters after its forward for a backward that has not come (two
    forwards before one backward, a forward whose loss was dropped), and,
    resharded here, its backward gathers them again, as FSDP2 does for any
    block that reshards after forward."""
    return _scan_region(tg, own_unshard=False)[0]


def _scan_region(tg, own_unshard: bool, unmarked_prefetch: bool = False) -> tuple:
    """(holder, others): region_holder's answer, and when it is None the
    other members claim_region must clear first, in member order, each with
    whether its pending gather is one to drop (else it is a group to
    reshard). `own_unshard`: tg gathers for its own forward or backward (not
    a prefetch, which region_holder's caller defers instead). One pass over
    the members (it runs at every all-gather and prefetch; in a ring slot of a
    deep model most members are sharded with nothing pending, which two reads
    show)."""
    it = guards.internals()
    idle = it.TrainingState.IDLE
    pre_backward = it.TrainingState.PRE_BACKWARD
    others = []
    for other in tg.region.members:
        if other is tg:
            continue
        group = other.info.group
        if group._all_gather_result is not None:
            # A prefetch nobody waited for: a backward prefetch whose output did
            # not reach the loss, or, when tg needs the slot for itself, any
            # prefetch of a group not running (a block skipped this step). FSDP2
            # drops such a gather at the end of the backward, or never uses it;
            # the group gathers again should it run after all.
            if not other.explicit_unshard and (stale_backward_prefetch(tg, other)
                                               or (own_unshard and group._training_state == idle)):
                others.append((other, True))
                continue
            return other, []
        if group.is_sharded:
            continue
        state = group._training_state
        # Unsharded past its backward (POST_BACKWARD in it; IDLE after it, until its
        # next gather), or the idle folded last block: FSDP2's parameters, which it
        # would have resharded itself with reshard_after_backward / _forward.
        if (state == it.TrainingState.POST_BACKWARD or (state == idle and (other.folded or other.kept_after_backward))):
            others.append((other, False))
            continue
        # In its backward with no post-backward yet, while tg gathers for its own backward:
        # FSDP2 runs a group's post-backward once gradients reach the inputs of one of its
        # forward calls, and only at the end of the backward when they need none (a first
        # block after a frozen embedding, a block called again on an input without grad).
        # Stock keeps such a group unsharded to the end of the backward, with a second
        # forward's backward still to come; the ring reshards it for tg, and it gathers again
        # at its next backward (install's pre_backward wrapper). Its gradients stay where
        # autograd accumulates them, for its own post-backward, as stock's.
        # The same for a backward prefetch no wrapper could mark (unmarked_prefetch), issued inside
        # the backward of the group whose pre_backward ran last: a ring-mate other than that group
        # waits only for its post-backward (two forwards into one backward, the first after a frozen
        # layer), and the wrapper's deferral would reshard it at tg's own pre-backward just after.
        # The group whose backward is about to run stays a holder (a prefetch reaching too far).
        if state == pre_backward and ((own_unshard and tg.info.group._training_state == pre_backward)
                                      or (unmarked_prefetch and other is not _last_pre_backward_owner())):
            others.append((other, False))
            continue
        return other, []
    return None, others


def claim_region(tg, prefetch: bool = False) -> None:
    """Make tg's region free for its all-gather: every other group in it must
    be sharded. A group whose backward already ran (POST_BACKWARD; e.g. with
    reshard_after_backward=False), or the idle folded last block, is
    resharded here, as FSDP2 would do at the end of its post-backward or
    post-forward; so is a group still waiting for its post-backward when tg
    gathers for its own backward (it gathers again at its next backward:
    _reshard_waiting_for_post_backward). Anything else is a conflict (the
    execution order differs from the module order the ring was laid out
    in), raised before any group is touched. `prefetch`: tg's gather is a
    backward prefetch the dispatch could not mark (_unmarked_backward_prefetch),
    which takes a slot only where no group is in the way but ones it could
    reshard, and never the slot of the group whose pre_backward ran last."""
    holder, others = _scan_region(tg, own_unshard=not prefetch, unmarked_prefetch=prefetch)
    if holder is not None:
        raise RegionConflict(_conflict(tg, holder, prefetch))
    pre_backward = guards.internals().TrainingState.PRE_BACKWARD
    for other, stale in others:  # (the members that are neither sharded nor free of a pending gather)
        if stale:
            _drop_stale_gather(tg, other)
        if other.kept_after_backward:
            other.ring_resharded_kept()
            _say_kept_resharded(tg, other)
        elif not other.info.group.is_sharded:
            if other.info.group._training_state == pre_backward:
                _reshard_waiting_for_post_backward(tg, other)
            else:
                other.info.group._to_sharded()


def stale_backward_prefetch(tg, other) -> bool:
    """Is `other`'s pending all-gather a backward prefetch FSDP2 will never
    wait for? It is when tg, earlier in forward order, is in its own
    pre-backward while `other` has not had its backward: `other`'s output did
    not reach the loss. FSDP2 clears such a gather at the end of the backward
    (finalize_backward); in a ring the slot it holds is needed before that."""
    it = guards.internals()
    group = other.info.group
    return (group._all_gather_result is not None
            and tg.info.group._training_state == it.TrainingState.PRE_BACKWARD
            and group._training_state == it.TrainingState.IDLE
            and other.info.order > tg.info.order)


def _forget_gather(group, current_stream) -> None:
    """What finalize_backward does to an unshard nobody waited for: the current stream (asked
    only where there is an event to wait for) waits for its gather, then FSDP2 forgets it."""
    result = group._all_gather_result
    if result.all_gather_event is not None:
        current_stream().wait_event(result.all_gather_event)
    if isinstance(result.all_gather_work, dist.distributed_c10d.Work):
        result.all_gather_work.wait()
    group._all_gather_result = None


def _drop_stale_gather(tg, other) -> None:
    """What finalize_backward does to a stale gather, early: wait for it, forget it."""
    _forget_gather(other.info.group, lambda: torch.cuda.current_stream(tg.backend.device))
    other.mark_resharded()  # never copied out; the slot is overwritten next
    other.stats["stale_prefetch_dropped"] += 1
    if other.stats["stale_prefetch_dropped"] == 1:  # said once per group
        log.info("tide.fsdp: group '%s': its prefetch went unused (a block skipped, or an output that did not reach "
                 "the loss); dropped when '%s' needed the ring slot, as FSDP2 drops it at the end of the backward; "
                 "the group gathers again if it runs", other.info.fqn, tg.info.fqn)


def drop_unconsumed_gathers(members: list[tuple], when: str) -> None:
    """Between steps (every group of `members` IDLE), a group's all-gather that FSDP2 issued and
    never waited for: a prefetch of a module that did not run, in a forward with no backward to
    follow (a no-grad evaluation with layer drop). FSDP2 drops such a gather at the end of a
    backward (finalize_backward); without one it stays pending, and install, uninstall or a new
    layout would refuse the model as mid-iteration. Waited for and dropped here as FSDP2 drops
    it, with one line per group (`when`: what for); the group gathers again when its module
    runs. Any group not IDLE: nothing is dropped (first_busy refuses).
    members: (GroupInfo, its TideGroup or None). A TideGroup's ring forgets the dropped gather
    (its slot is written again by whichever group gathers next), and the user's own
    FSDPModule.unshard() stays pending (first_busy then refuses it). On a stock model nothing
    tells that unshard from a prefetch: a pending unshard(async_op=True) is dropped too, and its
    handle's wait() then leaves the parameters sharded."""
    idle = guards.internals().TrainingState.IDLE
    if any(info.group._training_state != idle for info, _ in members):
        return
    for info, tg in members:
        group = info.group
        if group._all_gather_result is None or (tg is not None and tg.explicit_unshard):
            continue
        _forget_gather(group, group.device_handle.current_stream)
        if tg is not None:
            tg.mark_resharded()
        log.info("tide.fsdp: group '%s' had an all-gather FSDP2 never waited for (a prefetch of a module that did "
                 "not run, with no backward to drop it); waited for and dropped before %s, as FSDP2's end of "
                 "backward drops it; the group gathers again when it runs", info.fqn, when)


def _counted_first(tg, stat: str) -> bool:
    """Counts one more `stat` for tg; True the first time (a line said once per group)."""
    tg.stats[stat] += 1
    return tg.stats[stat] == 1


def _reshard_waiting_for_post_backward(tg, other) -> None:
    """`other` is unsharded in its backward, its post-backward not yet run,
    and tg needs the ring slot for its own backward (_scan_region says when):
    reshard it, and have its next pre-backward gather it again (FSDP2's own
    returns at once for a group already in PRE_BACKWARD). Should autograd
    still need its parameters before that (its backward interleaved with
    tg's), the version counters moved at the reshard make autograd refuse
    them, which the logged line explains."""
    other.info.group._to_sharded()
    other.resharded_in_backward = True
    if _counted_first(other, "resharded_in_backward"):  # said once per group
        log.info("tide.fsdp: ring %s: group '%s' was unsharded in its backward, its post-backward not yet run (FSDP2 "
                 "runs it once gradients reach the inputs of one of its calls, or at the end of the backward), when "
                 "'%s' needed the slot: resharded, it gathers again at its next backward. Should autograd then say "
                 "its parameters were modified by an inplace operation, its backward ran interleaved with '%s''s: "
                 "install with ring=False for this model", tg.region.name, other.info.fqn, tg.info.fqn,
                 tg.info.fqn)


def _say_kept_resharded(tg, other) -> None:
    """`other`, kept unsharded by set_reshard_after_backward(False), leaves
    its slot to tg: until its next gather its modules hold the sharded
    Parameters, where stock's hold the unsharded ones (README, FSDP2 adapter)."""
    if _counted_first(other, "kept_ring_resharded"):  # said once per group
        log.warning("tide.fsdp: ring %s: group '%s' was kept unsharded by set_reshard_after_backward(False) and is "
                    "resharded, since '%s' needs the slot: until its next gather its modules hold the sharded "
                    "Parameters, so code reading model.parameters() or their .grad in between (scaling or clipping "
                    "gradients between no-sync micro-batches) does not see the gradients it accumulated, which it "
                    "still reduces (zero_grad still drops them). install with ring=False for stock's behaviour "
                    "(said once per group)", tg.region.name, other.info.fqn, tg.info.fqn)


def _warn_regathered_updated(tg) -> None:
    """tg was kept unsharded by set_reshard_after_backward(False), a ring-mate
    needed its slot, and its shards changed since it was kept (an optimizer
    step): this gather takes the updated shards, where stock FSDP2 would go
    on computing with the unsharded values it kept."""
    tg.stats["kept_regathered_after_update"] += 1
    if tg.kept_reshard_warned:
        return
    tg.kept_reshard_warned = True
    log.warning("tide.fsdp: ring %s: group '%s' was kept unsharded by set_reshard_after_backward(False), resharded "
                "when a ring-mate needed the slot, and its shards have changed since (an optimizer step): it gathers "
                "the updated shards, where stock FSDP2 would go on with the unsharded values it kept. Call "
                "set_reshard_after_backward(True) before the step that updates the shards, or install with "
                "ring=False to keep stock's behaviour (said once per group)", tg.region.name, tg.info.fqn)


def _conflict(tg, other, prefetch: bool = False) -> str:
    group = other.info.group
    pending = group._all_gather_result is not None
    where = f"tide.fsdp: ring {tg.region.name}: group '{tg.info.fqn}' needs it while '{other.info.fqn}'"
    ring_false = "Install with ring=False (one region per group) for this model."
    if prefetch:
        # (Only when dispatch could not wrap FSDP2's _prefetch_unshard; it logged why.)
        held = "with an all-gather pending" if pending else f"unsharded ({group._training_state.name})"
        return (f"{where} holds it, {held}: a backward prefetch of '{tg.info.fqn}' into a held ring slot, "
                "which this torch's FSDP2 gives the adapter no way to defer (see the line install logged about "
                "prefetches): the groups do not run in module order (a block skipped or run twice), or the prefetch "
                "reaches more than one block ahead (set_modules_to_backward_prefetch). Install with ring=False "
                "(one region per group) for this model.")
    what = "has an all-gather pending" if pending else "is unsharded"
    if other.explicit_unshard:
        return (f"{where} {what} from FSDPModule.unshard(): a ring slot holds one group's parameters at a time "
                f"(ring-mates: {', '.join(m.info.fqn for m in tg.region.members)}); call reshard() on it first, "
                f"or unshard only one group per slot. {ring_false}")
    if not pending:
        what += f" ({group._training_state.name})"
    if (torch._C._current_graph_task_id() != -1
            and tg.info.group._training_state == guards.internals().TrainingState.FORWARD):
        # tg's forward inside a backward: a recompute of an activation-checkpointed region. FSDP2
        # keeps every group the region recomputes unsharded together until their backward, and
        # a region of more groups than the ring has slots cannot fit, whatever the order.
        return (f"{where} {what}: '{tg.info.fqn}' is being recomputed inside the backward, so an "
                "activation-checkpointed region spans several FSDP groups, which FSDP2 keeps unsharded together "
                f"until their backward, and the ring's two slots hold one group each. "
                f"Checkpoint at most two consecutive groups per region (e.g. one block per checkpoint). {ring_false}")
    if group._training_state == guards.internals().TrainingState.FORWARD:
        # Ring-mates never nest in the module tree or through modules' plain attributes
        # (install keeps holders out of the ring), so a ring-mate still in its forward either
        # raised there or calls this group's module through a reference install cannot see.
        what += (" -- if an exception ended a forward, call the root module's reset_iter_state() before the "
                 "next step, which resets FSDP2's state and frees the slot; if its forward calls this group's "
                 "module, which is not among its submodules, the groups nest where install cannot see it "
                 "(install sees modules held in a module's plain attributes, lists and dicts, but not in a "
                 "closure, a global or an object that is no module)")
    return f"{where} {what}; the groups do not run in module order with prefetch depth 1. {ring_false}"


def adopt(tg, index: int, copy_in_stream=None) -> None:
    """Move parameter `index`'s sharded data into the group's resident region
    and point FSDP2's padded shard and the DTensor's local tensor at it (same
    tensor objects: `.data` is swapped, so the optimizer and the sharded
    Parameter keep their identity).

    `copy_in_stream`: adopting again inside an all-gather (CUDA), whose
    all-gather stream waits for the copy-in stream, not for the current one:
    the copy goes there, after what the current stream wrote into the new
    shard (load_state_dict), and the old storage is not reused before it."""
    fp, res = tg.params[index], tg.resident[index]
    detach_earlier_adoptions(tg, index)
    src = fp._sharded_param_data
    if copy_in_stream is not None and tg.backend.fabric == "cuda":
        copy_in_stream.wait_stream(torch.cuda.current_stream(tg.backend.device))
        with torch.cuda.stream(copy_in_stream):
            res.copy_(src)
        src.record_stream(copy_in_stream)
    else:
        res.copy_(src)
    point_shard_at(fp, res)
    refs = tg.adopted[index]
    for t in (fp._sharded_param_data, fp._sharded_local_tensor):
        if not any(r() is t for r in refs):
            refs.append(weakref.ref(t))


def point_shard_at(fp, padded: torch.Tensor) -> None:
    """Point FSDP2's padded shard and the DTensor's local tensor at `padded`
    (the same tensor objects: `.data` is swapped)."""
    fp._sharded_param_data.data = padded
    fp._sharded_local_tensor.data = padded.view(fp.padded_sharded_param_size).narrow(0, 0, fp.sharded_size[0])


def copy_sources_viewing_residents(ctx) -> None:
    """Before a re-adoption writes a resident shard: the new sharded tensors of
    load_state_dict(assign=True) may view other parameters' resident shards
    (a state dict taken while installed, its keys remapped: blocks shifted,
    two parameters swapped), which the adoptions, one parameter after another
    and group by group, would overwrite before reading them. Every such
    tensor, in any group of the arena, gets its values in storage of its own
    first (stock's new Parameters keep the values they were loaded with)."""
    residents = {res.untyped_storage().data_ptr() for g in ctx.groups if g.adopt for res in g.resident}
    for g in ctx.groups:
        if not g.adopt:
            continue
        for fp, res in zip(g.params, g.resident):
            storage = fp._sharded_param_data.untyped_storage().data_ptr()
            if storage != res.untyped_storage().data_ptr() and storage in residents:
                with torch.no_grad():
                    point_shard_at(fp, fp._sharded_param_data.clone())
                g.stats["sources_copied_from_residents"] += 1


def detach_earlier_adoptions(tg, index: int) -> None:
    """Tensor objects adopted for parameter `index` before FSDP2 replaced them
    (load_state_dict(assign=True) makes a new sharded Parameter; the old one may
    live on in an optimizer or a user's list) still view the resident shard.
    Stock leaves them their own storage, so they get a copy of it now: the next
    adoption then does not write through them, nor writes through them into
    the model, and they do not keep the arena alive after uninstall."""
    fp, res = tg.params[index], tg.resident[index]
    current = (fp._sharded_param_data, fp._sharded_local_tensor)
    # By storage, not address: a rank's local tensor of a parameter smaller than the world
    # is empty, and an empty tensor's data_ptr() is 0, yet it keeps the arena's storage.
    resident_storage = res.untyped_storage().data_ptr()
    kept = []
    for ref in tg.adopted[index]:
        t = ref()
        if t is None:
            continue
        if any(t is c for c in current):
            kept.append(ref)
        elif t.untyped_storage().data_ptr() == resident_storage:
            with torch.no_grad():
                t.data = t.data.clone()
            tg.stats["adoptions_detached"] += 1
    tg.adopted[index] = kept


def shard_pointer(tg, copy_in_stream) -> int:
    """Address of this rank's packed shard for the group: the resident
    (adopted) shards, 0 when the cast/copy wrote it into this rank's own
    landing rows (one node: the all-gather runs in place, as FSDP2's own
    all-gather input is a slice of its output), or the shared shard buffer
    after a cast/copy (across nodes the rails send one contiguous shard)."""
    fsdp_params = tg.info.group.fsdp_params
    if tg.adopt:
        # Rebound behind the adapter (load_state_dict(assign=True), module.to(), ...): adopt again.
        rebound = [i for i, (fp, ptr) in enumerate(zip(fsdp_params, tg.resident_ptrs))
                   if fp._sharded_param_data.data_ptr() != ptr]
        if rebound:
            copy_sources_viewing_residents(tg.ctx)
        for i in rebound:
            fp = fsdp_params[i]
            if fp._sharded_param_data.dtype != tg.resident[i].dtype:  # e.g. model.to(torch.bfloat16)
                raise RuntimeError(
                    f"tide.fsdp: group '{tg.info.fqn}': a parameter is now {fp._sharded_param_data.dtype}, the "
                    f"arena holds {tg.resident[i].dtype}: uninstall before changing dtypes and install again "
                    "(after a failed forward, model.reset_iter_state() first)")
            adopt(tg, i, copy_in_stream)
            tg.stats["readopted"] += 1
        tg.stats["ag_resident"] += 1
        return tg.resident_base
    # The all-gather casts (or adoption is off): write the shard (FSDP2's foreach copy).
    sources = [fp._sharded_param_data for fp in fsdp_params]
    if tg.in_place_shard:
        # Into the own landing rows, once the region's previous readers are done. The
        # unsharded parameters view this storage: their version counter must not move,
        # or autograd would take the next gather for an in-place edit of saved tensors.
        tg.backend.before_region_write(tg.region, copy_in_stream)
        views = tg.own_landing_views()
        with _stream(tg, copy_in_stream), torch.autograd._unsafe_preserve_version_counter(views):
            torch._foreach_copy_(views, sources)
        tg.stats["ag_in_place"] += 1
        return 0
    tg.backend.before_copy_in(tg.ctx, copy_in_stream)
    with _stream(tg, copy_in_stream):
        torch._foreach_copy_(tg.shard_views(), sources)
    tg.stats["ag_copied"] += 1
    return tg.ctx.shard_buffer.data_ptr()


_NO_STREAM = contextlib.nullcontext()  # the host fabric's copy-in runs where it is called


def _stream(tg, stream):
    """The context that runs the copy-in on `stream` (CUDA); none on the host."""
    return torch.cuda.stream(stream) if tg.backend.fabric == "cuda" else _NO_STREAM


@guards.no_grad
def all_gather(tg, async_op: bool, copy_in_stream, all_gather_stream):
    """foreach_all_gather for a TIDE group: returns an AllGatherResult whose
    output is a placeholder (the data is already in the parameters)."""
    it = guards.internals()
    group = tg.info.group
    sharded = it.ShardedState.SHARDED
    for fp in group.fsdp_params:
        if fp.sharded_state != sharded:
            raise RuntimeError(f"tide.fsdp: group '{tg.info.fqn}': all-gather from state {fp.sharded_state}")
    tg.check_dtypes()
    claim_region(tg, prefetch=_unmarked_backward_prefetch(tg))
    if tg.regathered_updated():
        _warn_regathered_updated(tg)
    tg.explicit_unshard = _explicit_unshard(group)
    tg.mark_unsharded()  # before the gather writes (shard_pointer preserves the versions it finds)
    shard_ptr = shard_pointer(tg, copy_in_stream)
    event = tg.backend.all_gather(tg.comm, tg.handle, shard_ptr, tg.ctx, tg.region, copy_in_stream,
                                  all_gather_stream)
    tg.stats["all_gathers"] += 1
    if not group.reduce_grads:  # (read at a collective: every rank reads it at the same point)
        tg.accumulated_without_sync = True
    return it.AllGatherResult(
        all_gather_output=tg.marker,
        all_gather_event=event,
        all_gather_work=None,
        param_all_gather_input_dtypes=tg.ag_input_dtypes,
        param_all_gather_input_numels=tg.ag_input_numels,
        all_gather_input_split_sizes=tg.ag_split_sizes,
    )


def copy_out(tg, all_gather_result) -> None:
    """foreach_all_gather_copy_out for a TIDE group: wait; nothing to copy.
    (No tensor operation here, so no grad mode to set.)"""
    if all_gather_result.all_gather_output is not tg.marker:
        raise RuntimeError(f"tide.fsdp: group '{tg.info.fqn}': copy-out of an all-gather TIDE did not issue")
    event = all_gather_result.all_gather_event
    if event is not None:
        torch.cuda.current_stream(tg.backend.device).wait_event(event)
    for fp, out in zip(tg.info.group.fsdp_params, tg.ag_outputs):
        outputs = fp.all_gather_outputs
        if len(outputs) != 1 or outputs[0] is not out:
            raise RuntimeError(f"tide.fsdp: group '{tg.info.fqn}': the unsharded storage of "
                               f"'{getattr(fp, '_param_fqn', fp)}' was replaced behind the adapter's back")
