"""Virtual topologies over the GPUs of one host: every (nodes M, GPUs per node
L) with M * L = ranks and L <= 8 (the plan's limit), one node first. On two
GPUs that is M1L2 and M2L1; on four, M1L4, M2L2, M4L1; on eight, M1L8, M2L4,
M4L2, M8L1 (the runs the 4- and 8-GPU validation names)."""

from __future__ import annotations

MAX_GPUS_PER_NODE = 8


def node_splits(ranks: int) -> list[tuple[int, int]]:
    if ranks < 1:
        raise ValueError(f"ranks must be positive, got {ranks}")
    return [(ranks // gpus, gpus) for gpus in range(min(ranks, MAX_GPUS_PER_NODE), 0, -1) if ranks % gpus == 0]
