"""What every rank of a model learns before it acts alone.

Install's whole-model refusals (FSDP2's lazy init failed, a group mid-iteration,
parameters on the meta device, a bad argument), and uninstall's and the layout
setters' (a forward whose backward has not run), are each rank's own: a rank that
refused while its peers went on would leave them in collectives it never joins. So
the ranks tell each other first, over the model's shard groups and then their
replica groups (agreement.refusals), in as many rounds as those groups' mesh rows
need to reach every rank (agreement.refusal_passes).
"""

from __future__ import annotations

import functools
import gc
import logging
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from tide.fsdp import agreement, groups, guards

if TYPE_CHECKING:
    from tide.fsdp.state import TideGroup

log = logging.getLogger("tide.fsdp")


def first_busy(infos: list[groups.GroupInfo]) -> str | None:
    """The name of the first group mid-iteration (an all-gather pending, or
    not IDLE), or None: install, uninstall and a new layout wait for none."""
    it = guards.internals()
    for info in infos:
        if info.group._all_gather_result is not None or info.group._training_state != it.TrainingState.IDLE:
            return info.fqn
    return None


def first_awaiting_backward(tide_groups: list[TideGroup]) -> str | None:
    """The first group (its name) whose forward ran with grad and whose backward has not
    (TideGroup.awaits_backward), on this rank, or None."""
    for tg in tide_groups:
        if tg.awaits_backward:
            return tg.info.fqn
    return None


def model_process_groups(model, it) -> tuple[list, list, list]:
    """The shard groups, then the replica groups (HSDP), of the model's FSDP2 parameter
    groups, each once, in module order (the same on every rank of each); and, in the same
    order, each group's mesh rows (every instance's global ranks; None where the mesh does
    not say them)."""
    shard, replicate, seen = [], [], set()
    rows: dict[str, list] = {"shard": [], "replicate": []}
    for module in model.modules():
        st = it.get_module_fsdp_state(module)
        if st is None:
            continue
        for group in guards.param_groups(st):
            mesh_info = getattr(group, "mesh_info", None)
            for kind, out in (("shard", shard), ("replicate", replicate)):
                pg = getattr(mesh_info, f"{kind}_process_group", None)
                if pg is not None and id(pg) not in seen:
                    seen.add(id(pg))
                    out.append(pg)
                    rows[kind].append(_mesh_rows(mesh_info, f"{kind}_mesh_dim", pg))
    return shard, replicate, rows["shard"] + rows["replicate"]


def _mesh_rows(mesh_info, dim_attr: str, pg) -> list[list[int]] | None:
    """The global ranks of every instance of `pg` along the mesh's dimension `dim_attr`
    (the mesh's rows along it), or None where the mesh does not say them. Decided from the
    mesh's shape alone (the group's size is the dimension's on every rank), never from a
    rank's own call that could fail on some ranks only: the pass count built on these rows
    must be the same on every rank."""
    ranks, dim = getattr(getattr(mesh_info, "mesh", None), "mesh", None), getattr(mesh_info, dim_attr, None)
    if not isinstance(ranks, torch.Tensor) or not isinstance(dim, int) or not 0 <= dim < ranks.dim():
        return None
    if ranks.size(dim) != pg.size():
        return None
    return ranks.movedim(dim, -1).reshape(-1, ranks.size(dim)).tolist()


def refusals_agreed(model, mine: tuple[str, str] | None) -> tuple[str, str] | None:
    """This rank's whole-model refusal, or, where only peers refused, why it refuses with
    them ("ranks_disagree"): every rank of the model's process groups learns every rank's."""
    seen = on_some_rank(model, mine)
    if mine is not None or not seen:
        return mine
    rank, reason, message = seen[0]
    more = f" (and {len(seen) - 1} more rank(s))" if len(seen) > 1 else ""
    return "ranks_disagree", f"rank {rank} refused{more}: {reason} ({message}); its peers stay stock with it"


def awaiting_backward_on_some_rank(model, inst, busy: str | None = None) -> str | None:
    """Why uninstall or a new layout must wait, or None, alike on every rank: a forward
    with grad whose backward has not run, on some rank. Its autograd graph saved views of
    the ring slots, which only TIDE's gathers fill again before that backward: after an
    uninstall or a new layout it would read other groups' weights. Whether such a graph
    lives is a rank's own (a loss only rank 0 keeps for its logging), and a rank that
    refused while its peers went on would leave them in collectives it never joins: the
    ranks agree, over the model's shard and replica groups (not only TIDE's: a rank whose
    groups all stayed stock must refuse with the others). `busy`: this rank's group that is
    mid-iteration, a refusal it must not take alone either."""
    mine = first_awaiting_backward(inst.tide_groups) if busy is None else None
    if mine is not None:
        # A graph only a reference cycle still holds goes now, not at some rank's next
        # collection. Only here: a full collection takes up to a second in a process that
        # compiled models, and uninstall or a setter would pay it every time.
        gc.collect()
        mine = first_awaiting_backward(inst.tide_groups)
    if busy is not None:
        why = f"group '{busy}' is mid-iteration"
    elif mine is not None:
        why = f"group '{mine}' ran a forward whose backward has not run yet"
    else:
        why = None
    seen = on_some_rank(model, ("waiting", why) if why else None)
    if not seen:
        return None
    if why is not None:
        return why
    rank, _, theirs = seen[0]
    return f"on rank {rank}, {theirs}"


def on_some_rank(model, mine: tuple[str, str] | None) -> list[tuple[int, str, str]]:
    """Every rank's (reason, message) that is not None, over the model's shard and replica
    groups (agreement.refusals): what one rank must not decide alone."""
    if not dist.is_initialized():  # one process, no peers to tell: no groups to read either
        return [(0, *mine)] if mine is not None else []
    shard, replicate, partitions = model_process_groups(model, guards.internals())
    passes, complete = agreement.refusal_passes(partitions, dist.get_world_size())
    if not complete:
        _say_refusal_spread_unknown()
    return agreement.refusals(shard, replicate, mine, dist.get_rank(), passes)


@functools.cache
def _say_refusal_spread_unknown() -> None:
    """Once per process: why a refusal might not reach every rank."""
    log.warning("tide.fsdp: the model's meshes list different ranks (or do not list them), so a refusal that one "
                "rank reaches alone (e.g. its FSDP2 lazy init failed) spreads in one pass over the model's groups: "
                "enough for one mesh or where a group spans the world, not where several meshes only chain; a rank "
                "left out would then wait in install's next exchange until the process group's timeout")
