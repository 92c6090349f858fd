"""The symmetric arena of one shard group: where unsharded parameters live.

Layout (every rank makes the same `alloc` calls in the same order):

  ring slot 0, ring slot 1   groups that reshard after forward, in execution
                             order (module order), group g in slot g mod 2;
                             each slot sized for the largest group it holds.
                             The last block, when it keeps its parameters
                             after forward (reshard_after_forward=False), is
                             folded into the ring (App. F): it is live only
                             across the forward/backward turn-around.
  pinned regions             the root group and any other group that stays
                             unsharded between its forward and backward
                             (reshard_after_forward=False), one each.
  resident shards            groups that all-gather without a cast keep their
                             sharded data here (adopted in place), so the
                             all-gather reads it without a copy.
  scratch                    the collectives' own staging, at the arena's top
                             (sized by the library at the first collective).

Shards that need a cast (fp32 master weights, bf16 mp_policy) are cast into
one packed buffer that all groups of the communicator share in turn (torch
memory, outside the arena; see all_gather.py).

Memory accounting: who allocates the arena, and why torch does not see it.
libtide's fabric allocates the arena when the communicator is created
(tideCommInitCuda / tideCommInitHost); tideCommAlloc only hands out offsets
in it. On CUDA it is one ncclMemAlloc buffer holding the arena and the
fabric's signal counters, registered as an NCCL symmetric window (the peers'
load/store addresses come from it); on the host fabric it is a POSIX
shared-memory segment that every rank maps. The paper (App. F) allocates its
arena inside a torch.cuda.MemPool so that torch.cuda.memory_reserved()
counts it. We do not, because:
  - a symmetric window needs CUDA VMM (cuMem) memory, as ncclMemAlloc gives;
    the caching allocator's default segments are plain cudaMalloc, so "through
    the caching allocator" is not an option, only a MemPool over an
    ncclMemAlloc-backed allocator (ProcessGroupNCCL's);
  - that allocator would be torch's NCCL, while the window is registered by
    the NCCL that libtide links; the GPU hosts carry two NCCL builds (the
    torch wheel's and the system's), and memory from one registered with the
    other is a coupling nothing here can test;
  - the C API would have to adopt caller memory, and libtide stays free of
    torch (one build for every torch version; the team's shared/DESIGN.md, 3.5).
So the arena stays a fabric allocation and is reported instead: the
communicator says what its fabric holds (tideCommReservedBytes: the whole
window with counters and alignment, or the whole segment), report() prints
it per arena, and tide.fsdp.arena_bytes(model) returns the total, to add to
torch.cuda.memory_reserved() for the rank's footprint.
"""

from __future__ import annotations

import math

from tide.fsdp import plain_references
from tide.fsdp.backend import Region
from tide.plan import scratch_bytes

ALIGN = 4096


def align(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


def ring_members_of(groups: list, *, ring: bool) -> list:
    """The groups (in execution order) that share the two ring slots: every
    non-root group that reshards after forward, and the last block even if
    it keeps its parameters (folded into the ring, App. F). A group whose
    module holds another group's (nested fully_shard, a module shared with
    another parent, under any of its names, or a module held in a plain
    attribute, outside the module tree) stays out: it is unsharded while the
    groups it holds run, so it would hold a slot one of them needs. So does a
    group of several modules (fully_shard([embedding, output])): FSDP2
    unshards it before the first of them runs and reshards it after the last,
    and other groups may run in between."""
    if not ring:
        return []
    non_root = [g for g in groups if not g.info.is_root]

    def holds(g, o) -> bool:
        return (any(q.startswith(p + ".") for p in (g.info.paths or (g.info.fqn,))
                    for q in (o.info.paths or (o.info.fqn,)))
                or plain_references.held_through(g.info.held_outside_tree, o.info.group.modules) is not None)

    leaves = [g for g in non_root
              if len(g.info.group.modules) == 1 and not any(o is not g and holds(g, o) for o in non_root)]
    last = leaves[-1] if leaves else None
    return [g for g in leaves if g.info.group._reshard_after_forward or g is last]


def assign_regions(groups: list, *, ring: bool) -> list[Region]:
    """Regions for TideGroups given in execution order; sets `tg.region`.

    groups: objects with `.info` (GroupInfo) and `.unsharded_bytes`.
    """
    ring_members = ring_members_of(groups, ring=ring)
    in_ring = {id(g) for g in ring_members}
    pinned = [g for g in groups if id(g) not in in_ring]
    regions: list[Region] = []
    if ring_members:
        slots = [Region(f"slot{i}", 0) for i in range(min(2, len(ring_members)))]
        for i, g in enumerate(ring_members):
            slot = slots[i % 2]
            slot.members.append(g)
            slot.nbytes = max(slot.nbytes, g.unsharded_bytes)
            g.region = slot
            g.folded = not g.info.group._reshard_after_forward
        regions += slots
    for g in pinned:
        region = Region(f"pinned:{g.info.fqn}", g.unsharded_bytes)
        region.members.append(g)
        g.region = region
        regions.append(region)
    return regions


def total_user_bytes(regions: list[Region], residents: list[int]) -> int:
    return sum(align(r.nbytes) for r in regions) + sum(align(n) for n in residents)


def arena_bytes(user_bytes: int, plan_args: list[dict], fabric: str) -> tuple[int, int]:
    """(arena bytes, scratch bytes): user memory plus the collectives' scratch for
    these groups as the library reserves it (plan_args: make_plan's arguments per
    registered plan), plus 64 KiB of slack, rounded to 2 MiB on CUDA. No margin
    for alignment: total_user_bytes already rounds every region and resident
    block to the 4 KiB that tideCommAlloc aligns each allocation to (a margin
    of 1/8 of the user memory cost the Llama-like e2e run 64 MiB of device
    memory for nothing)."""
    scratch = scratch_bytes(plan_args)
    total = user_bytes + scratch + (64 << 10)
    return (align(total, 2 << 20) if fabric == "cuda" else align(total)), scratch


def numel_of(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
