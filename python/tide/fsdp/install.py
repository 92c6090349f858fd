"""install / uninstall."""

from __future__ import annotations

import inspect
import logging
import numbers
import os
import types
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist

from tide import comm as tide_comm
from tide._capi import TideError
from tide.fsdp import all_gather as _ag
from tide.fsdp import arena as _arena
from tide.fsdp import arena_lifetime as _lifetime
from tide.fsdp import backend as _backend
from tide.fsdp import (agreement, dispatch, groups, guards, model_consensus, pg_timeout, plain_references, prefetch,
                       registry)
from tide.fsdp.report import report
from tide.fsdp.state import CommContext, TideGroup
from tide.plan import PlanInputError, build_plan_config, make_plan, scratch_bytes

log = logging.getLogger("tide.fsdp")

MODES = ("in-place", "slot-reuse")
RELEASE_GRADS = ("read-done", "with-fsdp-state", "read-done-polled")


# ------------------------------------------------------------------ install

def install(model: torch.nn.Module, mode: str = "in-place", fabric: str | None = None, *,
            topology: tuple[int, int] | None = None, ring: bool = True, adopt: bool = True,
            invert_prefetch: bool = True, check_read_done: bool = False, release_grads: str = "read-done-polled",
            timeout_s: float | None = None, plan_options: Mapping[str, Any] | None = None) -> dict:
    """Run FSDP2's all-gather and reduce-scatter on TIDE for every parameter
    group of `model` (the root module, after fully_shard) that meets the
    contract; the others stay stock, one logged line each naming the reason.

    mode: "in-place" (reduce-scatter reads gradients where autograd left them)
        or "slot-reuse" (gradients move into the group's vacated all-gather
        region and are freed at once).
    fabric: "host" (CPU, gloo), "cuda" (NCCL bootstrap) or "cuda-ipc" (the
        CUDA fabric bootstrapped through CUDA IPC: ranks may share a GPU, e.g.
        FSDP2 on gloo with several processes per GPU in tests); default: from
        the groups' device ("host" or "cuda").
    topology: (nodes, gpus_per_node) of each shard group; default
        (backend.default_topology): on the host fabric nodes of up to 8
        ranks; on CUDA nodes of the local world size (LOCAL_WORLD_SIZE, else
        the visible GPUs); either way at most 8 per node, and the largest
        count that divides the shard group (a warning says so on CUDA when
        that is not the local world size).
    ring: lay groups out in two ring slots (App. F); False gives every group
        its own region.
    adopt: keep sharded parameters that need no cast in the arena (zero-copy
        all-gather input); False copies them into a buffer each all-gather.
    invert_prefetch: In-Place only: at a group's post_backward, issue the
        next backward all-gather ahead of its reduce-scatter (Sec. 5.1,
        prefetch.py); False keeps FSDP2's order. Slot-Reuse never inverts.
    check_read_done: debug: overwrite every reduce-scatter input with NaN at
        the call's read-done point (where TIDE releases it); a dishonest
        read-done then shows up in the gradients. Costs one fill per input.
        The fill reaches whatever shares a gradient's storage (a reference the
        user kept, a gradient autograd handed to parameters of two groups):
        for tests of read-done, not for training.
    release_grads: when reduce-scatter inputs read in place (In-Place
        gradients) go back to the allocator. "read-done-polled" (default;
        on CUDA, the host fabric releases at read-done anyway): one event
        per call at its read-done point, and the gradients dropped by the
        first later TIDE call that finds it passed; those still queued when
        a backward ends go to the allocator then (one record_stream each).
        No event per gradient in the steady state; the gradients live until
        a later all-gather or reduce-scatter finds their call's read-done
        event passed (the queue is drained in order), at the latest to the
        end of the backward. "read-done": at the call's read-done point, through one
        record_stream per gradient (the caching allocator then records and
        polls one event per gradient: 1711 cudaEventQuery calls per MoE-like
        step against 680, the same allocator peak; BENCHMARKS.md, session
        16). "with-fsdp-state": together with FSDP2's own reduce-scatter
        input, i.e. at the next group's post-backward or the end of
        backward, after FSDP2 made the compute stream wait for the
        reduce-scatter; no event per gradient, but the gradients live one
        group longer (still less than stock, whose fp32 reduce-scatter input
        lives as long).
    timeout_s: deadline of every TIDE wait (fail stop), up to 1e6 s; 0: the
        fabric's own (host: 5 s a wait; CUDA: 60 s); None (default): the process group's own
        timeout, what stock FSDP2's collectives wait (pg_timeout.py).
    plan_options: further make_plan options for every group's plan, e.g. the
        machine's calibration, passes, sum_ctas / landing_ctas, wave_width,
        rail_lane=True (one GPU per node across nodes: both collectives on
        the paper's rail lane, App. F)
        (default: the library's, i.e. the paper's calibration, with
        DEFAULT_PASSES passes). The shapes, topology, dtypes and mode are the
        adapter's and cannot be given here.

    Returns report(model, echo=False). Unsupported torch internals leave
    everything stock with one logged message; nothing raises for them.
    """
    # Every argument but the model, as the caller gave them (taken before any
    # is rebound): a new layout installs again with exactly these.
    given = {name: value for name, value in locals().items() if name != "model"}
    if not isinstance(model, torch.nn.Module):  # no process group to tell the peers through
        raise TypeError(f"model must be a torch.nn.Module (the root FSDP2 module), got {type(model).__name__}")
    # An argument refused on one rank alone (say a timeout_s computed per rank) must not leave
    # its peers waiting in the first exchange below until the process group's timeout: the
    # refusal goes into that exchange, the peers stay stock naming it, and this rank raises.
    try:
        plan_options, fit_passes, topology = _checked_arguments(
            mode=mode, topology=topology, ring=ring, adopt=adopt, invert_prefetch=invert_prefetch,
            check_read_done=check_read_done, release_grads=release_grads, timeout_s=timeout_s,
            plan_options=plan_options, fabric=fabric)
        bad_arguments = None
    except (TypeError, ValueError) as e:
        bad_arguments = e
    if model in registry.installed:
        # Installed already: as it is on every rank while TIDE runs groups on some rank (a rank
        # whose groups all stayed stock would otherwise install again alone, its peers not).
        mine = ("installed", "TIDE runs groups") if registry.installed[model].tide_groups else None
        seen = model_consensus.on_some_rank(model, _arguments_refusal(bad_arguments) or mine)
        if bad_arguments is not None:
            raise bad_arguments
        if seen:
            before = registry.installed[model].options
            ignored = {k: v for k, v in given.items() if not _same_choice(k, before.get(k), v)}
            if ignored:  # said at the default log level: these options do not take effect
                log.warning("tide.fsdp: already installed on this model with %s; not applied: %s (uninstall() "
                            "first to change options)", {k: before.get(k) for k in ignored}, ignored)
            return report(model, echo=False)
        uninstall(model)  # every group stayed stock last time (say a topology that did not fit): try again
    # Refusals every rank reaches alike (same torch, same model structure): no exchange follows,
    # so a rank with bad arguments raises at once.
    problem = guards.check_torch()
    if problem is None:
        it = guards.internals()
        state = it.get_module_fsdp_state(model)
        if state is None:
            problem = ("not_fsdp", "the model is not an FSDP2 module: call fully_shard(model) first")
        elif getattr(state, "_is_root", None) is False:
            problem = ("not_root", "install on the root FSDP2 module (the one whose forward runs first)")
    if problem is not None:
        if bad_arguments is not None:
            raise bad_arguments
        return _refuse(model, *problem)

    # Refusals a rank may reach alone (its state, not its arguments): held until the ranks
    # have compared them (model_consensus.refusals_agreed), so that no rank refuses while its peers go on.
    early = _arguments_refusal(bad_arguments)
    on_meta = [n for n, p in model.named_parameters() if p.device.type == "meta"]
    if on_meta and early is None:
        # Deferred initialization (build on meta, fully_shard, to_empty, init
        # weights): there is no storage to plan for or adopt yet.
        early = ("meta_device", f"{len(on_meta)} parameters are on the meta device (e.g. "
                 f"'{on_meta[0]}'): install after model.to_empty(...) and the weights' initialization")

    inst = registry.Installation(mode, ring)
    inst.check_read_done = check_read_done
    inst.release_grads = release_grads
    names = {id(m): n for n, m in model.named_modules()}
    every_name: dict[int, list[str]] = {}
    for n, m in model.named_modules(remove_duplicate=False):
        every_name.setdefault(id(m), []).append(n)
    held = plain_references.held_outside_tree(model)
    seen: set[int] = set()
    for module in model.modules():
        if early is not None:
            break
        st = it.get_module_fsdp_state(module)
        if st is None or id(st) in seen:
            continue
        seen.add(id(st))
        for group in guards.param_groups(st):
            try:
                # The group-level lazy init (what FSDPModule.unshard runs): dtypes from the
                # mixed-precision policy, re-padded shards. The root's own lazy init waits
                # for its first forward, as FSDP2 wants.
                group.lazy_init()
            except Exception as e:  # FSDP2 refuses: stay stock
                early = ("lazy_init", f"FSDP2 lazy init of a parameter group failed: {e}")
                break
            # Read through getattr: a torch without these attributes gets the group
            # refused by describe ("attributes"), not an AttributeError from here.
            modules = getattr(group, "modules", None) or ()
            fqn = getattr(group, "_module_fqn", None) or ", ".join(names.get(id(m), "?") for m in modules) or "<root>"
            inst.infos.append(groups.describe(group, order=len(inst.infos), is_root=st is state, fqn=fqn,
                                              module_names=names))
            inst.infos[-1].paths = tuple(sorted({n for m in modules for n in every_name.get(id(m), ())}))
            inst.infos[-1].held_outside_tree = plain_references.held_by_group(modules, held)
    # A group TIDE already runs through another installation (on a module inside this one, or
    # one containing it, installed before FSDP2 knew its root): installing it twice would give it
    # two arenas, and the second uninstall would restore what the first had replaced.
    for info in inst.infos:
        if info.reason is None and dispatch.lookup(info.group.fsdp_params) is not None:
            info.reason, info.detail = "installed_elsewhere", "TIDE runs it through another module's install()"
    busy = None
    if early is None:
        eligible = [info for info in inst.infos if info.reason is None]
        _ag.drop_unconsumed_gathers([(info, None) for info in eligible], "install")
        busy = model_consensus.first_busy(eligible)
    if busy is not None:
        early = ("not_idle", f"group '{busy}' is mid-iteration; install between steps")
    early = model_consensus.refusals_agreed(model, early)
    if bad_arguments is not None:
        raise bad_arguments
    if early is not None:
        return _refuse(model, *early)
    if ring:
        _log_held_outside_tree(inst.infos)

    # Per shard process group: plans, the ranks' agreement, arena, communicator.
    # Every group of a shard group of several ranks goes in its bucket, eligible
    # or not, so that every rank of it reaches the agreement in _build_context.
    buckets: OrderedDict[int, list[groups.GroupInfo]] = OrderedDict()
    for info in inst.infos:
        if info.reason is None:
            fab = _backend.fabric_for(fabric, info.device)
            if _backend.device_type(fab) != info.device.type:
                info.reason, info.detail = "fabric_mismatch", f"fabric '{fab}' for parameters on {info.device}"
            elif fab != "host" and not tide_comm.has_cuda():
                info.reason, info.detail = "fabric_unavailable", "this libtide has no CUDA fabric"
        if info.pg is not None and info.world_size > 1:
            buckets.setdefault(id(info.pg), []).append(info)
    # What every rank of a shard group must share besides the groups' verdicts (timeout_s,
    # release_grads and check_read_done act on this rank alone).
    # plan_options as text: any value pickles, and compares by what it says. The fabric goes in
    # resolved, in _build_context (None and the device's own name are the same choice).
    shared = (("mode", mode), ("ring", ring), ("adopt", adopt), ("invert_prefetch", invert_prefetch),
              ("plan_options", repr(sorted(plan_options.items()))), ("fit_passes", fit_passes))
    refused_options: list[Exception] = []  # raised once every bucket has been compared
    try:
        for infos in buckets.values():
            ctx = _build_context(infos, mode, fabric, topology, ring, adopt, timeout_s, plan_options, fit_passes,
                                 shared, refused_options)
            if ctx is not None:
                inst.contexts.append(ctx)
                inst.tide_groups.extend(ctx.groups)
        if refused_options:
            e = refused_options[0]
            raise ValueError(f"tide.fsdp.install: plan_options {dict(given['plan_options'] or {})}: "
                             f"{getattr(e, 'message', e)}") from e

        inst.inversion = _inversion_status(mode, invert_prefetch)
        for ctx in inst.contexts:
            ctx.backend.poison_read_inputs = check_read_done
            ctx.backend.release_grads = release_grads
        for tg in inst.tide_groups:
            _apply(tg)
            if inst.inversion == "on":
                prefetch.enable(tg)
            else:
                tg.inversion_off = inst.inversion[len("off ("):-1]
            dispatch.register(tg)
        if inst.tide_groups:
            dispatch.activate()
    except BaseException:
        _lifetime.keep(*_lifetime.collective_kept(inst.contexts))  # this failed install's: not closed at a collection
        raise
    registry.installed[model] = inst
    # The communicators that close collectively go with the finalizer (it holds nothing of the
    # model), so that a collection of the model keeps them instead of closing them.
    inst.dropped = weakref.finalize(model, _dropped_while_installed, len(inst.tide_groups),
                                    _lifetime.collective_kept(inst.contexts))
    inst.dropped.atexit = False  # exiting with TIDE installed is no drop: nothing to say then
    registry.refused.pop(model, None)
    inst.options = given
    _watch_layout_setters(model, inst)
    _watch_zero_grad(model, inst)
    for info in inst.infos:
        if info.reason is not None:
            log.warning("tide.fsdp: group '%s' stays on stock FSDP2: %s (%s)", info.fqn, info.reason, info.detail)
    log.info("tide.fsdp: TIDE runs %d of %d parameter groups (%s; arena %s bytes per rank)",
             len(inst.tide_groups), len(inst.infos), mode,
             "+".join(str(c.arena_bytes) for c in inst.contexts) or "0")
    detail = os.environ.get("TORCH_DISTRIBUTED_DEBUG") == "DETAIL"
    if inst.contexts and detail and not os.environ.get("TIDE_CHECK_CALLS"):
        # DETAIL's collective fingerprints see torch's process groups, not TIDE's communicators.
        log.info("tide.fsdp: TORCH_DISTRIBUTED_DEBUG=DETAIL does not check TIDE's collectives; TIDE_CHECK_CALLS=1 "
                 "(on every rank) does")
    return report(model, echo=False)


# FSDPModule setters after which the installed layout may no longer hold: the
# ring's members follow reshard_after_forward, and a group given its own comm
# must run stock.
_LAYOUT_SETTERS = ("set_reshard_after_forward", "set_custom_all_gather", "set_custom_reduce_scatter",
                   "set_allocate_memory_from_process_group_for_comm", "set_symm_mem_for_comm")



def _checked_arguments(*, mode, topology, ring, adopt, invert_prefetch, check_read_done, release_grads,
                       timeout_s, plan_options, fabric) -> tuple[dict, bool, tuple[int, int] | None]:
    """install()'s arguments, checked (TypeError, ValueError naming the argument): the plan
    options with the adapter's defaults, whether the passes are the adapter's to fit, and the
    topology as plain ints."""
    for name, value in (("ring", ring), ("adopt", adopt), ("invert_prefetch", invert_prefetch),
                        ("check_read_done", check_read_done)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")
    if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real)):
        raise TypeError(f"timeout_s must be a number of seconds or None, got {timeout_s!r}")
    # (also False for NaN; ints of any size compare exactly)
    if timeout_s is not None and not 0 <= timeout_s <= pg_timeout.MAX_TIMEOUT_S:
        raise ValueError(f"timeout_s must be in 0 (the fabric's default) .. {pg_timeout.MAX_TIMEOUT_S:g} seconds, "
                         f"got {timeout_s!r}")
    if plan_options is not None and not isinstance(plan_options, Mapping):
        raise TypeError(f"plan_options must be a mapping of make_plan options, got {type(plan_options).__name__}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    names = [k for k in (plan_options or {}) if not isinstance(k, str)]
    if names:
        raise TypeError(f"plan_options keys must be option names (str), got {names!r}")
    fit_passes = "passes" not in (plan_options or {})
    given_options = dict(plan_options or {})
    plan_options = {"passes": DEFAULT_PASSES, **given_options}
    owned = sorted(set(plan_options) & _ADAPTER_PLAN_ARGS)
    if owned:
        raise ValueError(f"plan_options cannot set {owned}: the adapter derives them from the model")
    unknown = sorted(set(plan_options) - _PLAN_OPTIONS)
    if unknown:
        raise ValueError(f"plan_options has no {unknown} (it takes {sorted(_PLAN_OPTIONS)})")
    # The values' types and names now, on every rank, whatever groups turn out eligible (before,
    # a bad one went unnoticed where no group was, or raised only after communicators were made).
    # Ranges that depend on a group's shapes and topology are the plan library's, per group.
    try:
        build_plan_config([[1]], nodes=1, gpus_per_node=1, **given_options)
    except (PlanInputError, TypeError) as e:
        raise (TypeError if isinstance(e, TypeError) else ValueError)(f"plan_options {given_options}: {e}") from e
    if topology is not None:  # numpy integers too (numbers.Integral), as plain ints from here on
        if not (isinstance(topology, (tuple, list)) and len(topology) == 2 and
                all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0 for v in topology)):
            raise ValueError(f"topology must be (nodes, gpus_per_node), two positive ints, or None; got {topology!r}")
        topology = (int(topology[0]), int(topology[1]))
    if release_grads not in RELEASE_GRADS:
        raise ValueError(f"release_grads must be one of {RELEASE_GRADS}, got {release_grads!r}")
    if fabric is not None and fabric not in _backend.FABRICS:
        raise ValueError(f"fabric must be one of {_backend.FABRICS} or None, got {fabric!r}")
    return plan_options, fit_passes, topology


def _same_choice(name: str, before: Any, now: Any) -> bool:
    """Whether two values of install() argument `name` choose the same: a topology as a list or a
    tuple, and plan_options None or empty, are one choice (a second install warned of them as
    not applied)."""
    if name == "topology" and before is not None and now is not None:
        return list(before) == list(now)
    if name == "plan_options":
        return dict(before or {}) == dict(now or {})
    return before == now


def _arguments_refusal(error: Exception | None) -> tuple[str, str] | None:
    """A refused argument as the whole-model refusal the peers are told of."""
    return None if error is None else ("bad_arguments", f"install(): {error}")


def _watch_layout_setters(model: torch.nn.Module, inst) -> None:
    """Wraps _LAYOUT_SETTERS on the model's FSDP modules (those this torch
    has): after the stock setter, TIDE is laid out again if needed. The
    wrapped setters are collective over the model's process groups (the ranks
    decide a new layout together), as install() is: every rank calls them
    alike, as SPMD training does; one rank alone waits for its peers until the
    process group's timeout (README)."""
    it = guards.internals()
    for module in model.modules():
        if it.get_module_fsdp_state(module) is None:
            continue
        for name in _LAYOUT_SETTERS:
            stock = getattr(module, name, None)
            if stock is None:
                continue

            def setter(*args, _stock=stock, **kwargs):
                before = _comm_settings(model)
                result = _stock(*args, **kwargs)
                try:
                    _relayout_if_needed(model)
                except LayoutBusy:
                    _restore_comm_settings(before)  # refused: FSDP2 keeps what TIDE's layout was made for
                    raise
                return result

            _wrap_instance_method(inst, module, name, setter)


def _watch_zero_grad(model: torch.nn.Module, inst) -> None:
    """Wraps zero_grad on every module of the model holding parameters. A group
    that FSDP2 keeps unsharded after its backward (set_reshard_after_backward(False))
    has its unsharded Parameters registered on its modules, so a module's
    zero_grad() drops the gradients they accumulated without sync; once a
    ring-mate reshards it for the slot (all_gather.claim_region), its modules
    hold the sharded Parameters instead, and zero_grad() would miss those
    gradients, which the next synced backward would then reduce as well. After
    the stock zero_grad, the wrapper does to them what stock's would have."""
    for module in model.modules():
        if next(module.parameters(), None) is None:
            continue

        def zero_grad(*args, _module=module, _stock=module.zero_grad, **kwargs):
            result = _stock(*args, **kwargs)
            hidden = [tg for tg in inst.tide_groups if tg.kept_but_ring_resharded]
            if hidden:
                _zero_kept_unsharded_grads(_module, hidden, *args, **kwargs)
            return result

        _wrap_instance_method(inst, module, "zero_grad", zero_grad)


def _zero_kept_unsharded_grads(module: torch.nn.Module, hidden: list[TideGroup], set_to_none: bool = True) -> None:
    """torch.nn.Module.zero_grad on the unsharded Parameters of `hidden`'s groups
    that `module`'s subtree would hold in stock FSDP2."""
    within = {id(m) for m in module.modules()}
    for tg in hidden:
        for fp in tg.params:
            infos = [fp._module_info] + list(getattr(fp, "_shared_module_infos", ()))
            param = getattr(fp, "_unsharded_param", None)
            if param is None or param.grad is None or not any(id(i.module) in within for i in infos):
                continue
            tg.stats["kept_resharded_grads_zeroed"] += 1
            if set_to_none:
                param.grad = None
            else:
                if param.grad.grad_fn is not None:
                    param.grad.detach_()
                else:
                    param.grad.requires_grad_(False)
                param.grad.zero_()


class LayoutBusy(RuntimeError):
    """A setting that changes TIDE's layout came mid-iteration (refused)."""


# What _LAYOUT_SETTERS change on FSDP2's states and parameter groups.
_STATE_SETTINGS = ("_auto_reshard_after_forward",)
_GROUP_SETTINGS = ("post_forward_mesh_info", "_all_gather_comm", "_reduce_scatter_comm")


def _comm_settings(model: torch.nn.Module) -> list:
    """(object, attribute, value) for every setting a layout setter may change."""
    it = guards.internals()
    saved = []
    for module in model.modules():
        state = it.get_module_fsdp_state(module)
        if state is None:
            continue
        saved += [(state, a, getattr(state, a)) for a in _STATE_SETTINGS if hasattr(state, a)]
        for group in guards.param_groups(state):
            saved += [(group, a, getattr(group, a)) for a in _GROUP_SETTINGS if hasattr(group, a)]
    return saved


def _restore_comm_settings(saved: list) -> None:
    for obj, attr, value in saved:
        setattr(obj, attr, value)


def _wrap_instance_method(inst, module: torch.nn.Module, name: str, wrapper) -> None:
    """Sets `wrapper` as the module's instance attribute `name`, remembering what the
    instance held before (a user's own per-instance method, or nothing) for _unwatch."""
    inst.watched.append(registry.WrappedMethod(module, name, wrapper, module.__dict__.get(name, registry.ABSENT)))
    setattr(module, name, wrapper)


def _unwatch(inst) -> None:
    """Gives every wrapped module back what its instance held before install. An attribute
    replaced since (by the user) is theirs now, and stays."""
    for w in reversed(inst.watched):
        current = w.module.__dict__.get(w.name, registry.ABSENT)
        if current is not w.wrapper:
            log.info("tide.fsdp: %s.%s was replaced after install; uninstall leaves the replacement in place",
                     type(w.module).__name__, w.name)
            continue
        if w.previous is registry.ABSENT:
            del w.module.__dict__[w.name]
        else:
            w.module.__dict__[w.name] = w.previous
    inst.watched = []


def _relayout_if_needed(model: torch.nn.Module) -> None:
    """Lays TIDE out again (uninstall, install with the same options) when
    the installed layout no longer holds: the groups' reshard_after_forward
    no longer gives the ring its installed members (a ring group that now
    keeps its parameters needs a region of its own, else the next group of
    its slot finds it taken; a pinned group that reshards again can share a
    slot), a TIDE group was given its own comm (it must run stock), or a
    group that stayed stock for its own comm has FSDP2's back."""
    inst = registry.installed.get(model)
    if inst is None:
        return
    in_ring = {id(tg) for ctx in inst.contexts for tg in _arena.ring_members_of(ctx.groups, ring=inst.ring)}
    # A ring member moves out or in, or the last block starts or stops keeping its
    # parameters within the ring (folded: its reshard after a no-grad forward).
    moved = [tg.info.fqn for tg in inst.tide_groups
             if (id(tg) in in_ring) != tg.region.name.startswith("slot")
             or (id(tg) in in_ring and tg.folded != (not tg.info.group._reshard_after_forward))]
    custom = [tg.info.fqn for tg in inst.tide_groups if groups.has_custom_comms(tg.info.group)]
    default = [info.fqn for info in inst.infos
               if info.reason == "custom_comm" and not groups.has_custom_comms(info.group)]
    # Whether to lay out again is every rank's together: a rank whose groups all stayed
    # stock has nothing that moved, yet must join the install its peers run.
    mine = ("relayout", "its layout no longer holds") if moved or custom or default else None
    if not model_consensus.on_some_rank(model, mine):
        return
    _ag.drop_unconsumed_gathers([(tg.info, tg) for tg in inst.tide_groups], "a new layout")
    busy = model_consensus.first_busy([tg.info for tg in inst.tide_groups])
    waiting = model_consensus.awaiting_backward_on_some_rank(model, inst, busy)
    if busy is not None:
        raise LayoutBusy(f"tide.fsdp: this setting changes TIDE's layout, which cannot change mid-iteration "
                         f"(group '{busy}' is busy): change it between steps; it was not applied")
    if waiting is not None:
        raise LayoutBusy(f"tide.fsdp: this setting changes TIDE's layout, which cannot change between a forward "
                         f"and its backward ({waiting}): change it between steps; it was not applied")
    changes = [(moved, "reshard_after_forward changed for"), (custom, "own comms given to"),
               (default, "FSDP2's own comms back for")]
    log.warning("tide.fsdp: laying TIDE out again: %s%s",
                "; ".join(f"{what} {', '.join(fqns)}" for fqns, what in changes if fqns) or "on another rank",
                "; state dicts taken before now hold the shards' old storage (they move with the layout): take "
                "them again" if any(tg.adopt for tg in inst.tide_groups) else "")
    uninstall(model)
    install(model, **inst.options)


def _dropped_while_installed(tide_groups: int, collective: list) -> None:
    """The model was collected without uninstall (it and its installation
    went together): FSDP2's functions come back if no other model uses them.
    Its arena went with its last view on the host fabric; a CUDA arena is
    kept (arena_lifetime), since closing its communicator is collective and
    cannot run at a garbage collection: release_kept_arenas() closes it."""
    dispatch.deactivate_if_unused()
    _lifetime.keep(*collective)
    log.warning("tide.fsdp: a model with %d TIDE groups was garbage collected without tide.fsdp.uninstall()%s",
                tide_groups, "; its CUDA arena stays allocated until every rank calls "
                "tide.fsdp.release_kept_arenas() after letting go of it, or the process exits" if collective else "")


def _inversion_status(mode: str, wanted: bool) -> str:
    if mode != "in-place":
        return "off (slot-reuse: the vacated slot holds the gradients until they are read)"
    if not wanted:
        return "off (install(invert_prefetch=False))"
    problem = guards.check_prefetch_inversion()
    if problem is not None:
        log.warning("tide.fsdp: backward prefetch inversion is off: %s (%s)", *problem)
        return f"off ({problem[0]}: {problem[1]})"
    return "on"


def _refuse(model, reason: str, message: str) -> dict:
    log.warning("tide.fsdp: FSDP2 stays stock: %s (%s)", reason, message)
    registry.refused[model] = {"reason": reason, "message": message}
    return report(model, echo=False)


# The plan library's bound on reduce-scatter passes (src/plan/reduce_scatter_plan.cpp).
MAX_PASSES = 64
# make_plan arguments the adapter sets from the model and the process group.
_ADAPTER_PLAN_ARGS = frozenset({"shapes", "nodes", "gpus_per_node", "dtype", "grad_dtype", "mode"})
# What plan_options may set: build_plan_config's other keywords.
_PLAN_OPTIONS = frozenset(inspect.signature(build_plan_config).parameters) - _ADAPTER_PLAN_ARGS
# Reduce-scatter passes per call of the largest group when plan_options gives
# none (smaller groups take fewer when their scratch fits: _fit_passes). Four passes
# bound each call's Level 1 staging to 1/8 of N*S on one node (one pass: 1/2),
# which the arena holds for the largest group (e.g. an untied embedding and
# LM head: 222 of the MoE-like model's 1134 MiB arena at one pass). Passes
# never change the bits, and the H200-pair calibration measures its reduce-
# scatter at four (BENCHMARKS.md).
DEFAULT_PASSES = 4


def _build_context(infos, mode, fabric, topology, ring, adopt, timeout_s, plan_options,
                   fit_passes: bool, shared: tuple, refused_options: list) -> CommContext | None:
    """TIDE's context for the groups of one shard group (`infos`: all of them,
    eligible or not; every rank of the shard group calls this), or None where
    it runs none of them."""
    first = infos[0]
    fab = _backend.fabric_for(fabric, first.device)
    world = first.world_size
    nodes, gpus = topology if topology is not None else _backend.default_topology(world, fab)
    tide_groups = []
    refused_here = False
    for info in infos:
        if info.reason is not None:
            continue
        if nodes * gpus != world:
            info.reason, info.detail = "bad_topology", f"{nodes}x{gpus} for a shard group of {world} ranks"
            continue
        try:
            plan = make_plan(**_plan_args(info, info.ag_dtype, nodes, gpus, mode, plan_options))
        except (PlanInputError, TideError) as e:
            # The caller's plan_options (refused by make_plan's checks or the library's):
            # raised once the peers have been told. Any other refusal is this group's.
            if isinstance(e, PlanInputError) or e.reason == "bad_option":
                refused_options.append(e)
                refused_here = True
                info.reason, info.detail = "bad_plan_options", getattr(e, "message", str(e))
            else:
                info.reason, info.detail = e.reason, e.message
            continue
        groups.check_layout(info, plan)
        if info.reason is None:
            tide_groups.append(TideGroup(info, mode, plan, adopt, plan_options))
    mine = agreement.Decisions(settings=(*shared, ("fabric", fab), ("topology", (nodes, gpus))),
                               groups=tuple((info.fqn, info.reason) for info in infos),
                               details=tuple(info.detail or "" for info in infos), rank=dist.get_rank())
    # Across replicas too (the replica groups of every group here, each once): the replicas
    # must end with the same contexts.
    replicas: list = []
    for info in infos:
        pg = getattr(getattr(info.group, "mesh_info", None), "replicate_process_group", None)
        if pg is not None and all(pg is not seen for seen in replicas):
            replicas.append(pg)
    differ = agreement.compare(first.pg, mine, replicas)
    if refused_here:  # the peers are told (the comparison above); raised after the last bucket
        return None
    if differ is not None:
        for tg in tide_groups:
            tg.info.reason = "ranks_disagree"
            tg.info.detail = f"the ranks of its shard group decided differently: {differ}"
        return None
    if not tide_groups:
        return None
    if fit_passes:
        _fit_passes(tide_groups, nodes, gpus, mode, plan_options)

    backend = _backend.make_backend(fab, first.device)
    ctx = CommContext(first.pg, backend.fabric, backend, (nodes, gpus))
    ctx.groups = tide_groups
    ctx.regions = _arena.assign_regions(tide_groups, ring=ring)
    residents = [tg.shard_bytes for tg in tide_groups if tg.adopt]
    ctx.user_bytes = _arena.total_user_bytes(ctx.regions, residents)
    for tg in tide_groups:  # gradients in another dtype get their own plan
        for dtype in tg.grad_dtypes[1:]:
            tg.extra_plans.append(make_plan(**_plan_args(tg.info, dtype, nodes, gpus, mode, tg.plan_options)))
    plan_args = [_plan_args(tg.info, dtype, nodes, gpus, mode, tg.plan_options)
                 for tg in tide_groups for dtype in tg.grad_dtypes]
    ctx.arena_bytes, ctx.scratch_bytes = _arena.arena_bytes(ctx.user_bytes, plan_args, backend.fabric)

    # Named before it is made: every rank of the group gets here (the comparison above), even
    # one whose communicator then fails to come up, so the names stay alike on every rank.
    ctx.lifetime_key = _lifetime.key_for(first.pg)
    if timeout_s is None:
        timeout_s = pg_timeout.process_group_timeout_s(first.pg, first.device)
    ctx.timeout_s = timeout_s
    comm = backend.create_comm(first.pg, nodes, gpus, ctx.arena_bytes, timeout_s)
    ctx.comm = comm
    ctx.owner = _lifetime.ArenaOwner(comm, close_on_release=not backend.closes_collectively)
    try:
        _lay_out_arena(ctx, tide_groups, mode, world, first.device)
    except BaseException:
        _lifetime.keep(*_lifetime.collective_kept([ctx]))  # not closed at whatever collection reaches it
        raise
    return ctx


def _lay_out_arena(ctx: CommContext, tide_groups: list[TideGroup], mode: str, world: int,
                   device: torch.device) -> None:
    """Registers the groups' plans with ctx's communicator and places their regions, resident
    shards and the shared shard buffer in its arena."""
    comm, backend, owner = ctx.comm, ctx.backend, ctx.owner
    nodes, gpus = ctx.topology
    ctx.reserved_bytes = comm.reserved_bytes()
    for tg in tide_groups:
        tg.ctx = ctx
        for dtype in tg.grad_dtypes:
            args = _plan_args(tg.info, dtype, nodes, gpus, mode, tg.plan_options)
            del args["nodes"], args["gpus_per_node"]  # the communicator's own
            tg.handles[dtype] = comm.register_group(args.pop("shapes"), **args)
        tg.handle = tg.handles[tg.grad_dtype]
    n = world
    for region in ctx.regions:
        region.offset, region.addr = comm.alloc(_arena.align(region.nbytes))
    # One packed-shard buffer for every group that casts or copies its shard:
    # all-gathers reuse it in turn (each waits until the previous one has read it).
    staging = max((tg.shard_bytes for tg in tide_groups if not tg.adopt and not tg.in_place_shard), default=0)
    if staging:
        ctx.shard_buffer = torch.empty(staging, dtype=torch.uint8, device=device)
    for tg in tide_groups:
        dtype = tg.info.ag_dtype
        tg.ag_outputs = [backend.wrap(tg.region.addr + p["shard_offset"] * n, p["shard_bytes"] * n, dtype, owner)
                         for p in tg.layout]
        tg.marker = torch.empty(0, dtype=dtype, device=device)
        if tg.adopt:
            tg.resident_offset, tg.resident_base = comm.alloc(tg.shard_bytes)
            tg.resident = [backend.wrap(tg.resident_base + p["shard_offset"], p["shard_bytes"], dtype, owner)
                           for p in tg.layout]
            tg.resident_ptrs = [t.data_ptr() for t in tg.resident]
            tg.adopted = [[] for _ in tg.resident]


def _fit_passes(tide_groups: list[TideGroup], nodes: int, gpus: int, mode: str,
                plan_options: Mapping[str, Any]) -> None:
    """Give each group the fewest reduce-scatter passes whose scratch fits in
    what the arena reserves anyway: the largest group's at DEFAULT_PASSES.
    Every pass costs the host a fixed set of stream operations per chunk
    (waits, a copy batch, signals, a sum launch: about 35 µs per chunk on an
    H200 host), and the 4K-token steps are host-bound (BENCHMARKS.md, session
    5), so groups much smaller than the largest (the MoE-like layers against
    its 233 M-parameter embedding and LM head) run fewer passes at no memory
    cost. Passes never change the bits. Only when plan_options names no passes."""
    budget = scratch_bytes([_plan_args(tg.info, d, nodes, gpus, mode, plan_options)
                            for tg in tide_groups for d in tg.grad_dtypes])
    for tg in tide_groups:
        for passes in range(1, int(plan_options["passes"])):
            options = {**plan_options, "passes": passes}
            need = scratch_bytes([_plan_args(tg.info, d, nodes, gpus, mode, options) for d in tg.grad_dtypes])
            if need <= budget:
                tg.plan_options = options
                tg.plan = make_plan(**_plan_args(tg.info, tg.grad_dtype, nodes, gpus, mode, options))
                break


def _plan_args(info: groups.GroupInfo, grad_dtype: torch.dtype, nodes: int, gpus: int, mode: str,
               plan_options: Mapping[str, Any]) -> dict:
    """make_plan's arguments for the group's gradients in `grad_dtype`. A gradient
    dtype wider than the all-gather dtype (fp32 gradients of a bf16 group,
    only seen when gradient sync is off) takes proportionally more passes, so
    that its staging is the main plan's (up to chunk rounding), not twice it:
    the arena's scratch is sized for the largest plan, and passes never change
    the bits."""
    args = dict(shapes=_shapes(info), nodes=nodes, gpus_per_node=gpus, dtype=info.dtype_name,
                grad_dtype=groups.name_of(grad_dtype), mode=mode, **plan_options)
    widen = grad_dtype.itemsize // info.ag_dtype.itemsize
    if widen > 1:  # within the plan's bound (then the staging is larger, and the arena sized for it)
        args["passes"] = min(MAX_PASSES, max(1, int(plan_options.get("passes", 1))) * widen)
    return args


def _shapes(info: groups.GroupInfo) -> list[dict]:
    return [{"name": n, "shape": list(s), "dtype": info.dtype_name} for n, s in zip(info.names, info.shapes)]


def _apply(tg: TideGroup) -> None:
    """Point the group's unsharded storage at the arena (and adopt its shards).
    The unsharded Parameter objects are kept (autograd accumulates into them):
    when they exist their data is swapped, else FSDP2 makes them later from
    all_gather_outputs as usual."""
    group = tg.info.group
    if not group.is_sharded:
        group._to_sharded()  # idle (checked at install): FSDP2 reshards freely here
    first = tg.params[0]
    backend, region = tg.backend, tg.region

    def free_unsharded_param(fp):
        # The region is reused by the next group; nothing to free. Record
        # where its last readers are (CUDA) before the next write, and make a
        # later use of the unsharded Parameters fail as stock's freed storage does.
        if fp is first:
            backend.on_reshard(region)
            tg.mark_resharded()

    with torch.no_grad():
        for fp, out, idx in zip(tg.params, tg.ag_outputs, range(len(tg.params))):
            if hasattr(fp, "_unsharded_param"):
                fp._unsharded_param.data = torch.as_strided(out, fp._orig_size, fp._contiguous_orig_stride, 0)
            fp.all_gather_outputs = [out]
            fp.free_unsharded_param = types.MethodType(free_unsharded_param, fp)
            if tg.adopt:
                _ag.adopt(tg, idx)
    stock_post_backward = group.post_backward
    stock_pre_backward = group.pre_backward
    it = guards.internals()

    def pre_backward(*args, **kwargs):
        _ag.note_pre_backward(tg)  # (gathers of other groups until its post_backward are its prefetches)
        # A ring-mate's backward resharded this group while it waited for its post-backward
        # (all_gather._reshard_waiting_for_post_backward). FSDP2 returns at once for a group
        # already in PRE_BACKWARD, on the parameters it would have kept: gather them again, or,
        # when a backward prefetch (FSDP2's or the inversion's) gathered them since, wait for
        # that gather. Stock never leaves a PRE_BACKWARD group with a pending gather (its
        # unshard of an unsharded group does nothing); skipping the wait let this group's
        # backward read the slot before the gather wrote it (CUDA, session 31).
        if group._training_state == it.TrainingState.PRE_BACKWARD and (
                tg.resharded_in_backward or group._all_gather_result is not None):
            if group._all_gather_result is not None:
                tg.stats["regather_in_backward_waited"] += 1
            group.unshard(getattr(group, "unshard_async_op", False))  # (nothing when gathered or pending)
            group.wait_for_unshard()
            return None
        return stock_pre_backward(*args, **kwargs)

    def post_backward(*args, **kwargs):
        tg.resharded_in_backward = False  # (its post-backward after all, without another backward first)
        tg.note_backward_done()
        if not group.reduce_grads:  # (sync turned off after the forward's gather)
            tg.accumulated_without_sync = True
        result = stock_post_backward(*args, **kwargs)
        # set_reshard_after_backward(False): the group keeps its ring slot past
        # its backward; a ring-mate may reshard it (all_gather._scan_region).
        if not group.is_sharded:
            tg.note_kept()
        elif getattr(group, "reshard_after_backward", True):
            tg.note_resharded_by_fsdp()
        return result

    group.pre_backward = pre_backward
    group.post_backward = post_backward
    stock_post_forward = group.post_forward

    def post_forward(module, input, output):
        result = stock_post_forward(module, input, output)
        if torch.is_grad_enabled():
            if torch._C._current_graph_task_id() == -1:  # (not a recompute inside a backward)
                tg.note_forward_with_grad(output)
        elif (tg.folded and not group.is_sharded and group._all_gather_result is None
              and group._training_state == it.TrainingState.IDLE):
            # App. F: the folded last block reshards after a no-grad forward
            # (validation), since no backward will free its ring slot.
            group._to_sharded()
        return result

    group.post_forward = post_forward


def _restore(tg: TideGroup) -> None:
    group = tg.info.group
    prefetch.disable(tg)
    unsharded = not group.is_sharded
    # A resharded group's Parameters keep the versions mark_resharded moved on: a graph that
    # still holds views of its ring slot (which no gather fills again after uninstall) fails
    # in its backward ("modified by an inplace operation") instead of reading other weights.
    tg.mark_unsharded(restore_versions=unsharded)
    with torch.no_grad():
        for idx, (fp, out) in enumerate(zip(tg.params, tg.ag_outputs)):
            fp.__dict__.pop("free_unsharded_param", None)
            if hasattr(fp, "_unsharded_param"):
                fresh = torch.empty_like(out)
                if unsharded:
                    fresh.copy_(out)
                fp._unsharded_param.data = torch.as_strided(fresh, fp._orig_size, fp._contiguous_orig_stride, 0)
                fp.all_gather_outputs = [fresh]
                if not unsharded:
                    fresh.untyped_storage().resize_(0)  # FSDP2's freed state
            else:
                fp.all_gather_outputs = []
            if tg.adopt:
                _ag.detach_earlier_adoptions(tg, idx)
                if fp._sharded_param_data.data_ptr() == tg.resident_ptrs[idx]:
                    _ag.point_shard_at(fp, tg.resident[idx].clone())
    group.__dict__.pop("post_forward", None)
    group.__dict__.pop("pre_backward", None)
    group.__dict__.pop("post_backward", None)
    tg.kept_after_backward = tg.resharded_in_backward = False


def _log_held_outside_tree(infos: list) -> None:
    """One line per non-root group that holds another group's module outside the
    module tree: the ring keeps the holder out (arena.ring_members_of)."""
    for info in infos:
        if info.is_root or not info.held_outside_tree:
            continue
        for other in infos:
            path = plain_references.held_through(info.held_outside_tree, other.group.modules)
            if other is not info and path is not None:
                log.info("tide.fsdp: group '%s' holds group '%s' outside the module tree (%s, not a registered "
                         "submodule) and may run it in its forward: it stays out of the ring slots, as a parent "
                         "does", info.fqn, other.fqn, path)


# ------------------------------------------------------------------ uninstall

def uninstall(model: torch.nn.Module) -> bool:
    """Restore stock FSDP2 for `model` (between steps). The arena is released
    once nothing views it any more (CUDA: now if no rank views it, else at a
    later tide.fsdp.release_kept_arenas(); arena_lifetime). Returns False if
    install() was not called on `model` (or it was uninstalled since); True
    otherwise, also where every group had stayed stock (install still
    wrapped the model's layout setters and zero_grad, which this restores)."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    inst = registry.installed.get(model)
    if inst is None:
        return False
    _ag.drop_unconsumed_gathers([(tg.info, tg) for tg in inst.tide_groups], "uninstall")
    busy = model_consensus.first_busy([tg.info for tg in inst.tide_groups])
    waiting = model_consensus.awaiting_backward_on_some_rank(model, inst, busy)  # refused alike on every rank
    if busy is not None:
        raise RuntimeError(f"tide.fsdp: group '{busy}' is mid-iteration; uninstall between steps")
    if waiting is not None:
        raise RuntimeError(f"tide.fsdp: {waiting}: uninstall after that backward (or drop the forward's outputs "
                           f"if it will not run); nothing was changed")
    _unwatch(inst)
    for ctx in inst.contexts:
        ctx.shard_buffer = None
        if ctx.fabric == "cuda":  # the last reduce-scatters may still read the arena
            torch.cuda.synchronize(ctx.backend.device)
            ctx.backend.released.clear()  # every read-done has passed
    for tg in inst.tide_groups:
        _restore(tg)
        dispatch.unregister(tg)
        tg.ag_outputs, tg.resident, tg._shard_views, tg._own_views, tg.marker = [], [], None, None, None
        tg.adopted = []
        tg._grad_slots = None
    dispatch.deactivate_if_unused()
    del registry.installed[model]
    if inst.dropped is not None:
        inst.dropped.detach()
    for i, ctx in enumerate(inst.contexts):
        ctx.shard_buffer = None
        try:
            released = not ctx.backend.closes_collectively or _lifetime.release_collectively(ctx)
        except BaseException:
            _lifetime.keep(*_lifetime.collective_kept(inst.contexts[i + 1:]))  # their finalizer is gone
            raise
        if not released:
            log.warning("tide.fsdp: tensors still view the arena of %s ranks (e.g. a state dict taken while "
                        "installed); it stays allocated until every rank calls tide.fsdp.release_kept_arenas() "
                        "once none does, or the process exits", ctx.topology)
    log.info("tide.fsdp: uninstalled; %d parameter groups back on stock FSDP2", len(inst.tide_groups))
    return True
