"""Rebinding FSDP2's collective functions, and routing each call.

`_fsdp_param_group` imports foreach_all_gather, foreach_all_gather_copy_out
and foreach_reduce by name, so the replacements are bound there; foreach_reduce
looks foreach_reduce_scatter_copy_in up as a global of `_fsdp_collectives`, so
that one is bound there. Each replacement routes calls for TIDE groups to the
adapter and everything else (other models, fallback groups) to the original,
unchanged. The rebinding is process-wide and stays while any model has TIDE
groups installed; the originals come back with the last uninstall (a
binding someone else replaced after install is left to them, with a
warning: their wrapper's calls reach FSDP2's original through it).

foreach_reduce is also where In-Place groups invert the backward prefetch
(prefetch.py): FSDP2 calls it from post_backward after the group resharded,
so the next group's all-gather can be issued there, ahead of this
reduce-scatter.

FSDPParamGroup._prefetch_unshard (a static method, bound on the class) is
where a prefetch that would gather into a ring slot another group still
holds is deferred: groups that run out of module order (a module skipped or
run twice in a step, explicit prefetch deeper than one) make FSDP2 prefetch
a group whose slot is taken. The prefetch is dropped, with one warning per
pair of groups, and the group gathers at its own unshard, once the holder
has resharded; the step runs as stock's, with less overlap. An unshard that
is not a prefetch still raises RegionConflict.
"""

from __future__ import annotations

import logging
import weakref

from tide.fsdp import all_gather as _ag
from tide.fsdp import guards, prefetch
from tide.fsdp import reduce_scatter as _rs

log = logging.getLogger("tide.fsdp")

# id(FSDPParam) -> weak reference to its TideGroup (which holds the FSDPParam). Weak: the
# group refers to its model, and a model dropped without uninstall must be collectable.
_by_param: dict[int, weakref.ref] = {}
# FSDP2's own functions, captured at the first activation and kept: a tool
# that wrapped a replacement after install keeps calling it after the last
# uninstall (the binding is left to it), and every call then goes here.
_originals: dict[str, object] = {}
_active = False


def lookup(fsdp_params):
    if not fsdp_params:
        return None
    first = fsdp_params[0]
    tg = _group_of(id(first))
    if tg is None or tg.params[tg.index[id(first)]] is not first:
        return None
    return tg


def _group_of(key: int):
    ref = _by_param.get(key)
    return ref() if ref is not None else None


def register(tg) -> None:
    ref = weakref.ref(tg)
    for fp in tg.params:
        _by_param[id(fp)] = ref


def unregister(tg) -> None:
    for fp in tg.params:
        if _group_of(id(fp)) is tg:
            del _by_param[id(fp)]


def _prune() -> None:
    """Drops the entries of groups that were collected with their model."""
    for key in [k for k, ref in _by_param.items() if ref() is None]:
        del _by_param[key]


# ------------------------------------------------------------------ replacements
# Same parameter names as FSDP2's (checked by guards), so positional and
# keyword calls both work.

def foreach_all_gather(fsdp_params, group, async_op, all_gather_copy_in_stream, all_gather_stream, device,
                       all_gather_comm):
    tg = lookup(fsdp_params)
    if tg is None:
        return _originals["foreach_all_gather"](fsdp_params, group, async_op, all_gather_copy_in_stream,
                                                all_gather_stream, device, all_gather_comm)
    return _ag.all_gather(tg, async_op, all_gather_copy_in_stream, all_gather_stream)


def foreach_all_gather_copy_out(all_gather_result, fsdp_params, group):
    tg = lookup(fsdp_params)
    if tg is None:
        return _originals["foreach_all_gather_copy_out"](all_gather_result, fsdp_params, group)
    return _ag.copy_out(tg, all_gather_result)


def foreach_reduce(fsdp_params, unsharded_grads, reduce_scatter_group, reduce_scatter_stream, reduce_scatter_comm,
                   orig_dtype, reduce_dtype, device, gradient_divide_factor, all_reduce_group, all_reduce_stream,
                   all_reduce_grads, partial_reduce_output, all_reduce_hook, force_sum_reduction_for_comms=False):
    tg = lookup(fsdp_params)
    call = None
    if tg is not None and tg.invert_prefetch:
        prefetch.invert(tg, lookup)
    if tg is not None:
        call = _rs.prepare(tg, fsdp_params, unsharded_grads, reduce_scatter_group, reduce_dtype, device,
                           gradient_divide_factor, all_reduce_group, force_sum_reduction_for_comms)
    with _rs.activate(call):
        return _originals["foreach_reduce"](
            fsdp_params, unsharded_grads, reduce_scatter_group, reduce_scatter_stream,
            call if call is not None else reduce_scatter_comm, orig_dtype, reduce_dtype, device,
            gradient_divide_factor, all_reduce_group, all_reduce_stream, all_reduce_grads, partial_reduce_output,
            all_reduce_hook, force_sum_reduction_for_comms)


def foreach_reduce_scatter_copy_in(unsharded_grads, reduce_scatter_input, world_size):
    call = _rs.active_call()
    if call is not None and reduce_scatter_input is call.marker:
        return call.take_grads(unsharded_grads)
    return _originals["foreach_reduce_scatter_copy_in"](unsharded_grads, reduce_scatter_input, world_size)


def prefetch_unshard(target_fsdp_param_group, pass_type):
    tg = lookup(target_fsdp_param_group.fsdp_params)
    if tg is not None and tg.info.group is target_fsdp_param_group:
        holder = _ag.region_holder(tg)
        if holder is not None:
            _defer_prefetch(tg, holder, pass_type)
            return None
    with _ag.prefetching():
        return _originals["_prefetch_unshard"].__func__(target_fsdp_param_group, pass_type)


def _defer_prefetch(tg, holder, pass_type) -> None:
    tg.stats["prefetch_deferred"] += 1
    if holder.info.fqn not in tg.deferrals_logged:
        tg.deferrals_logged.add(holder.info.fqn)
        log.warning("tide.fsdp: ring %s: the %s prefetch of group '%s' is deferred to its own unshard while "
                    "'%s' holds the slot (the groups ran out of module order: a module skipped or run twice, "
                    "or prefetch deeper than one); ring=False gives every group its own region",
                    tg.region.name, pass_type, tg.info.fqn, holder.info.fqn)


for _fn in (foreach_all_gather, foreach_all_gather_copy_out, foreach_reduce, foreach_reduce_scatter_copy_in,
            prefetch_unshard):
    _fn._tide_dispatch = True

# (module attribute holder, name, replacement)
def _bindings():
    it = guards.internals()
    return [
        (it.param_group, "foreach_all_gather", foreach_all_gather),
        (it.param_group, "foreach_all_gather_copy_out", foreach_all_gather_copy_out),
        (it.param_group, "foreach_reduce", foreach_reduce),
        (it.collectives, "foreach_reduce_scatter_copy_in", foreach_reduce_scatter_copy_in),
    ]


def active() -> bool:
    return _active


def activate() -> None:
    global _active
    if _active:
        return
    it = guards.internals()
    for module, name, replacement in _bindings():
        # The originals live in _fsdp_collectives; the first capture stays (that module's
        # copy-in may still be bound to a tool's wrapper around this replacement).
        _originals.setdefault(name, getattr(it.collectives, name))
        setattr(module, name, replacement)
    cls = it.param_group.FSDPParamGroup
    problem = guards.check_prefetch_unshard()
    if problem is None:
        current = cls.__dict__["_prefetch_unshard"]
        if getattr(current, "__func__", None) is not prefetch_unshard:
            _originals.setdefault("_prefetch_unshard", current)
        cls._prefetch_unshard = staticmethod(prefetch_unshard)
        _ag.prefetches_marked = True
    else:
        _ag.prefetches_marked = False
        log.info("tide.fsdp: prefetches into a held ring slot will raise RegionConflict, not be deferred: %s (%s)",
                 *problem)
    _active = True


def deactivate_if_unused() -> None:
    global _active
    _prune()
    if _by_param or not _active:
        return
    for module, name, replacement in _bindings():
        if getattr(module, name) is replacement:
            setattr(module, name, _originals[name])
        else:
            log.warning("tide.fsdp: %s.%s was rebound by someone else; leaving it", module.__name__, name)
    original = _originals.get("_prefetch_unshard")
    if original is not None:
        cls = guards.internals().param_group.FSDPParamGroup
        if getattr(cls.__dict__.get("_prefetch_unshard"), "__func__", None) is prefetch_unshard:
            cls._prefetch_unshard = original
        else:
            log.warning("tide.fsdp: FSDPParamGroup._prefetch_unshard was rebound by someone else; leaving it")
    _ag.prefetches_marked = False
    _active = False
