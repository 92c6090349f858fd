"""Whether the ranks reached the same install decisions.

install() decides per rank which groups TIDE runs and how (topology, mode,
plan options, ...). A rank that decided otherwise than its peers, say one
handed another topology, or one whose libtide lacks the fabric, or one whose
FSDP2 lazy init failed, would leave the others waiting in a collective it
never joins (the communicator's bootstrap at install; under HSDP the
replicas' agreement at uninstall) until the process group's timeout (30
minutes by default), with an error that names nothing of TIDE. So the ranks
compare first, with all_gather_object over each shard group and then across
its replicas (HSDP), and on any difference every rank keeps those groups
stock and says which rank differs in what (paper, Sec. 6.3: inconsistent
global capabilities abort TIDE, not the job).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist

# Ranks named in a message, at most (the rest counted).
_NAMED = 8


@dataclass(frozen=True)
class Decisions:
    """One rank's install decisions for the groups of one shard group.

    settings: what every rank must share (name -> value, all comparable by ==).
    groups: per group, in install order, (fqn, reason): reason None where TIDE
        may run it.
    details: per group, the reason's detail; reported, not compared (it may
        name this rank's device).
    rank: the rank's global rank, for messages."""

    settings: tuple[tuple[str, Any], ...]
    groups: tuple[tuple[str, str | None], ...]
    details: tuple[str, ...] = field(default=())
    rank: int = -1


def _odd_ones(labels: Sequence[str], ranks: Sequence[int]) -> str:
    """'X on n ranks, but rank a Y, rank b Z': the most common label, then the ranks whose
    label differs (at most _NAMED of them named)."""
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    common = max(counts, key=lambda k: (counts[k], -labels.index(k)))
    odd = [f"rank {r} {label}" for r, label in zip(ranks, labels) if label != common]
    more = f" and {len(odd) - _NAMED} more" if len(odd) > _NAMED else ""
    return f"{common} on {counts[common]} rank(s), but " + ", ".join(odd[:_NAMED]) + more


def differences(everyone: Sequence[Decisions]) -> str | None:
    """None when every rank decided alike; else what differs (the first
    setting that differs, else the first group), naming the ranks that
    differ by their global rank, for a log line."""
    first = everyone[0]
    ranks = [d.rank for d in everyone]
    for name, _ in first.settings:
        values = [dict(d.settings).get(name) for d in everyone]
        if any(v != values[0] for v in values):
            return f"{name}: " + _odd_ones([repr(v) for v in values], ranks)
    if any(len(d.groups) != len(first.groups) for d in everyone):
        return "groups: " + _odd_ones([f"has {len(d.groups)}" for d in everyone], ranks)
    for i, (fqn, _) in enumerate(first.groups):
        verdicts = [d.groups[i] for d in everyone]
        if any(v != verdicts[0] for v in verdicts):
            labels = [(f"'{v[0]}' " if v[0] != fqn else "") + (f"{v[1]} ({d.details[i]})" if v[1] else "eligible")
                      for v, d in zip(verdicts, everyone)]
            return f"group {i} ('{fqn}'): " + _odd_ones(labels, ranks)
    return None


def compare(pg: Any, mine: Decisions, replicate_pgs: Sequence[Any] = ()) -> str | None:
    """Every rank of `pg` (a shard group) calls this with its decisions, and
    under HSDP with `replicate_pgs`, the groups across the replicas of the
    groups compared, in the same order on every rank (collective, host
    blocking): None when every rank of every replica decided alike, else what
    differs (whether it differs is alike on all those ranks; the text may
    name another rank on each)."""
    everyone: list[Decisions | None] = [None] * pg.size()
    dist.all_gather_object(everyone, mine, group=pg)
    differ = differences(everyone)
    for replicate_pg in replicate_pgs:
        if replicate_pg.size() == 1:
            continue
        # Every rank of a shard group now holds the same verdict; each replica's
        # rank at the same shard position tells the others its own (so a replica
        # that disagreed, or replicas that agreed on other decisions, stop them all).
        replicas: list[tuple[Decisions, str | None] | None] = [None] * replicate_pg.size()
        dist.all_gather_object(replicas, (mine, differ), group=replicate_pg)
        if differ is not None:
            continue  # told; still exchanged over every replica group, as the others do
        for decisions, verdict in replicas:
            if verdict is not None:
                differ = f"in the replica of rank {decisions.rank}: {verdict}"
                break
        else:
            across = differences([decisions for decisions, _ in replicas])
            differ = None if across is None else f"across replicas, {across}"
    return differ


def refusals(shard_pgs: Sequence[Any], replicate_pgs: Sequence[Any], mine: tuple[str, str] | None,
             rank: int, passes: int = 1) -> list[tuple[int, str, str]]:
    """Install's whole-model refusals that a rank may reach alone (its FSDP2
    lazy init failed, a group is mid-iteration, parameters on the meta
    device), spread before any per-group collective: every rank calls this
    with its own (reason, message) or None, over the model's shard groups and
    then their replica groups, in the same order on every rank, `passes`
    times (refusal_passes: the same count on every rank). Returns every
    refusal seen as (global rank, reason, message), sorted; empty when none."""
    seen = {(rank, *mine)} if mine is not None else set()
    for _ in range(passes):
        for pg in (*shard_pgs, *replicate_pgs):
            if pg.size() == 1:
                continue
            everyone: list[list | None] = [None] * pg.size()
            dist.all_gather_object(everyone, sorted(seen), group=pg)
            for theirs in everyone:
                seen.update(tuple(r) for r in theirs)
    return sorted(seen)


def refusal_passes(partitions: Sequence[Sequence[Sequence[int]] | None], world_size: int) -> tuple[int, bool]:
    """How many passes of refusals() spread every rank's word to every rank it
    shares a chain of groups with, and whether that count is known to do so.

    partitions[i] splits the ranks into the instances of refusals()' i-th
    group (a mesh dimension's rows), or is None where the mesh does not say.
    One pass is enough for one group per rank, wherever a group spans the world
    or all the ranks the groups hold, or for one mesh (its shard groups, then
    their replicas); meshes whose groups only chain need more, since a pass
    carries a word through the groups in their order only.

    The count must be the same on every rank that meets another in a group, so
    it is simulated only where every partition covers one same set of ranks:
    then each of those ranks sees the same rows (a sub-mesh lists the slice of
    the world it belongs to, the same on every rank of that slice, e.g. HSDP's
    mesh beside tensor parallelism). Otherwise one pass, and False (the caller
    says why)."""
    world = frozenset(range(world_size))
    if len(partitions) <= 1 or any(p is not None and any(frozenset(inst) == world for inst in p) for p in partitions):
        return 1, True
    if any(p is None for p in partitions):
        return 1, False
    covered = {frozenset(r for inst in p for r in inst) for p in partitions}
    if len(covered) != 1:
        return 1, False
    (ranks,) = covered
    if any(frozenset(inst) == ranks for p in partitions for inst in p):
        return 1, True
    return _passes_to_spread(partitions), True


def _passes_to_spread(partitions: Sequence[Sequence[Sequence[int]]]) -> int:
    """refusals()' passes simulated, one bit per rank: until a pass teaches no rank anything."""
    ranks = sorted({r for part in partitions for inst in part for r in inst})
    known = {r: 1 << i for i, r in enumerate(ranks)}
    passes = 0
    while True:
        changed = False
        for part in partitions:
            for inst in part:
                union = 0
                for r in inst:
                    union |= known[r]
                for r in inst:
                    if known[r] != union:
                        known[r] = union
                        changed = True
        if not changed:
            return max(passes, 1)
        passes += 1
