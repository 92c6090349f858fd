"""Virtual topologies over the GPUs of one host: every (nodes M, GPUs per node
L) with M * L = ranks and L <= 8 (the plan's limit), one node first. On two
GPUs that is M1L2 and M2L1; on four, M1L4, M2L2, M4L1; on eight, M1L8, M2L4,
M4L2, M8L1 (the runs the 4- and 8-GPU validation names).

Ranks can also be nodes of their own on one host (as_own_host): then every
topology is M = ranks, L = 1, and the rails go through NCCL's network
transport, as across real nodes, on any number of GPUs."""

from __future__ import annotations

import os

MAX_GPUS_PER_NODE = 8


def node_splits(ranks: int) -> list[tuple[int, int]]:
    if ranks < 1:
        raise ValueError(f"ranks must be positive, got {ranks}")
    return [(ranks // gpus, gpus) for gpus in range(min(ranks, MAX_GPUS_PER_NODE), 0, -1) if ranks % gpus == 0]


def as_own_host(label: str) -> None:
    """Makes this process a host of its own as NCCL sees it (NCCL_HOSTID; TIDE's
    load/store team follows it), so that several ranks may share a GPU as
    separate nodes. Call before the process's first NCCL communicator (NCCL
    reads the variable once). The "hosts" talk over sockets on loopback unless
    NCCL_SOCKET_IFNAME or NCCL_IB_DISABLE already say otherwise."""
    os.environ["NCCL_HOSTID"] = label
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_IB_DISABLE", "1")


def parse_topologies(text: str, ranks: int) -> list[tuple[int, int]]:
    """'2x2,1x4' -> [(2, 2), (1, 4)]: a subset of node_splits(ranks), in the order given, so that a
    machine's topologies can be spread over several runs. Refuses (ValueError, naming the item)
    an item that is not MxL, that repeats, or that is no split of `ranks` GPUs."""
    valid = node_splits(ranks)
    out: list[tuple[int, int]] = []
    for item in (part.strip() for part in text.split(",")):
        try:
            m, l = (int(x) for x in item.lower().split("x"))
        except ValueError:
            raise ValueError(f"topology '{item}': want MxL, e.g. 2x4") from None
        if (m, l) not in valid:
            raise ValueError(f"topology '{item}' is no split of {ranks} ranks (want one of "
                             f"{', '.join(f'{a}x{b}' for a, b in valid)})")
        if (m, l) in out:
            raise ValueError(f"topology '{item}' given twice")
        out.append((m, l))
    return out
