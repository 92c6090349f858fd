"""Whether the ranks of a shard group reached the same install decisions.

install() decides per rank which groups TIDE runs and how (topology, mode,
plan options, ...). A rank that decided otherwise than its peers, say one
handed another topology, or one whose libtide lacks the fabric, would leave
the others waiting in the communicator's bootstrap until the process group's
timeout (30 minutes by default), with an error that names nothing of TIDE.
So the ranks of each shard group compare their decisions first, in one
all_gather_object, and on any difference every rank keeps those groups stock
and says which rank differs in what (paper, Sec. 6.3: inconsistent global
capabilities abort TIDE, not the job).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist


@dataclass(frozen=True)
class Decisions:
    """One rank's install decisions for the groups of one shard group.

    settings: what every rank must share (name -> value, all comparable by ==).
    groups: per group, in install order, (fqn, reason): reason None where TIDE
        may run it.
    details: per group, the reason's detail; reported, not compared (it may
        name this rank's device)."""

    settings: tuple[tuple[str, Any], ...]
    groups: tuple[tuple[str, str | None], ...]
    details: tuple[str, ...] = field(default=())


def differences(everyone: Sequence[Decisions]) -> str | None:
    """None when every rank decided alike; else what differs, by rank (the
    first setting that differs, else the first group), for a log line."""
    first = everyone[0]
    for name, _ in first.settings:
        values = [dict(d.settings).get(name) for d in everyone]
        if any(v != values[0] for v in values):
            return f"{name}: " + ", ".join(f"rank {r} {v!r}" for r, v in enumerate(values))
    if any(len(d.groups) != len(first.groups) for d in everyone):
        return "groups: " + ", ".join(f"rank {r} has {len(d.groups)}" for r, d in enumerate(everyone))
    for i, (fqn, _) in enumerate(first.groups):
        verdicts = [d.groups[i] for d in everyone]
        if any(v != verdicts[0] for v in verdicts):
            return f"group {i} ('{fqn}'): " + ", ".join(
                f"rank {r} " + (f"'{v[0]}' " if v[0] != fqn else "") +
                (f"{v[1]} ({everyone[r].details[i]})" if v[1] else "eligible")
                for r, v in enumerate(verdicts))
    return None


def compare(pg: Any, mine: Decisions) -> str | None:
    """Every rank of `pg` calls this with its decisions (collective, host
    blocking): None when all agree, else differences()'s text, alike on
    every rank."""
    everyone: list[Decisions | None] = [None] * pg.size()
    dist.all_gather_object(everyone, mine, group=pg)
    return differences(everyone)
