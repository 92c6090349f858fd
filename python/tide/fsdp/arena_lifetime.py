"""When an arena's communicator closes.

Host fabric: closing a communicator is local, so it closes when the last
tensor that views its arena goes (ArenaOwner's finalizer).

CUDA fabric: closing deregisters the NCCL window, a collective over the
shard group, so it must not run at whatever moment each rank's garbage
collector picks. uninstall() closes it on every rank together when no rank
has a view left (release_collectively). Otherwise, and when an installed
model is garbage collected without uninstall, the communicator is kept here
instead of closing at a collection; release_kept() closes the kept ones once
every rank of their group kept them and none views them any more. Before it,
a kept communicator stayed to the process's exit even after its last view
went, holding its arena (a whole unsharded ring and more) and its streams.

Every kept communicator is named alike on every rank of its group: the
group's global ranks and how many communicators this process made for groups
of those ranks before it (installs are collective over the group, so that
count is the same on each of its ranks)."""

from __future__ import annotations

import gc
import itertools
import logging
import weakref
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("tide.fsdp")

Key = tuple[tuple[int, ...], int]


class ArenaOwner:
    """Lives exactly as long as some tensor views the arena (every arena
    tensor keeps it alive). With close_on_release (host fabric) the
    communicator closes when it goes."""

    def __init__(self, comm: Any, *, close_on_release: bool):
        self._finalizer = weakref.finalize(self, comm.close) if close_on_release else None


_made_for: defaultdict[tuple[int, ...], itertools.count] = defaultdict(itertools.count)


def key_for(pg: Any) -> Key:
    """The name every rank of `pg` gives the communicator it makes now (call once per
    communicator, at its creation, on every rank of the group)."""
    import torch.distributed as dist

    ranks = tuple(dist.get_process_group_ranks(pg)) if dist.is_initialized() else (0,)
    return ranks, next(_made_for[ranks])


@dataclass(eq=False)  # each one is itself (removed from _kept by identity)
class Kept:
    """A communicator that could not close collectively when its arena was let go. Holds
    nothing of the model (the model's finalizer keeps one of these) but its backend, which
    keep() empties of the gradients whose read-done has passed."""

    key: Key
    comm: Any
    pg: Any
    backend: Any
    owner: weakref.ref | None  # the arena's owner (None: gone already)

    def viewed(self) -> bool:
        return self.owner is not None and self.owner() is not None

    def close(self) -> None:
        """On every rank of the group together."""
        self.comm.close()
        self.backend.after_close(self.pg)


_kept: list[Kept] = []


def kept_of(ctx: Any) -> Kept:
    """What keeping ctx's communicator needs, without ctx (which holds the model's groups)."""
    owner = weakref.ref(ctx.owner) if ctx.owner is not None else None
    return Kept(ctx.lifetime_key, ctx.comm, ctx.pg, ctx.backend, owner)


def collective_kept(contexts: list) -> list[Kept]:
    """What keeping the communicators of `contexts` that close collectively needs (the
    others close with their arena's last view)."""
    return [kept_of(ctx) for ctx in contexts if ctx.comm is not None and ctx.backend.closes_collectively]


def keep(*kept: Kept) -> None:
    for k in kept:
        # The backend stays with its communicator (its close needs it), but not the gradients it
        # holds for a read-done: those of a collected model's last backward would otherwise stay
        # to the release. Those whose read-done has not passed yet go with the close.
        k.backend.drop_inputs_read()
    _kept.extend(kept)


def kept_count() -> int:
    return len(_kept)


def release_collectively(ctx: Any) -> bool:
    """Close ctx's communicator on every rank of its group if no rank has a tensor left
    that views the arena (True); else keep it for release_kept (False). Call on every rank
    of the group, with every adapter reference to arena tensors dropped."""
    import torch
    import torch.distributed as dist

    kept = kept_of(ctx)
    ctx.owner = None
    gc.collect()
    free = torch.tensor([0 if kept.viewed() else 1], device=ctx.backend.device)
    dist.all_reduce(free, op=dist.ReduceOp.MIN, group=ctx.pg)
    if int(free.item()):
        kept.close()
        return True
    keep(kept)
    return False


def release_kept() -> int:
    """Close every kept communicator that every rank of its group kept and none views any
    more; keep the others. A collective over all ranks (the default process group): call it
    on every rank at the same point. Returns how many it closed on this rank."""
    import torch.distributed as dist

    gc.collect()
    mine = [(k.key, not k.viewed()) for k in _kept]
    if dist.is_initialized() and dist.get_world_size() > 1:
        everyone: list = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
    else:
        everyone = [mine]
    free_on = defaultdict(set)  # key -> the ranks that kept it and no longer view it
    for rank, theirs in enumerate(everyone):
        for key, free in theirs:
            if free:
                free_on[tuple(key[0]), key[1]].add(rank)
    closed, errors = 0, []
    # In one order on every rank (the keys'): each close is a collective over its group. A close
    # that fails here still counts as done, and the next is still tried, so that this rank stays
    # in step with the ranks it closes the next ones with; the first failure is raised after.
    for kept in sorted(_kept, key=lambda k: k.key):
        if free_on[kept.key] >= set(kept.key[0]):
            _kept.remove(kept)
            closed += 1
            try:
                kept.close()
            except Exception as e:  # noqa: BLE001 - raised below, once the others are closed
                errors.append(e)
    if _kept:
        log.info("tide.fsdp: %d kept arena(s) still viewed, or not yet let go on every rank of their group",
                 len(_kept))
    if errors:
        raise errors[0]
    return closed
