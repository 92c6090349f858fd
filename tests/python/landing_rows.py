"""Reading an all-gather's landing in the arena: where each rank's shard rows of each parameter sit
(Eq. 2: rank r's rows of parameter p at o_p * N + r * s_p), for the communicator tests."""

from __future__ import annotations

import numpy as np


def landing_view(addr: int, nbytes: int) -> np.ndarray:
    """The landing's bytes at `addr` (from Communicator.alloc), as a writable uint8 array."""
    return np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * nbytes).from_address(addr))


def wrong_landing_bytes(plan: dict, landing: np.ndarray, shards: list[np.ndarray]) -> int:
    """Bytes of the landing that differ from every rank's shard (shards[r]: rank r's packed shard)."""
    ranks = len(shards)
    wrong = 0
    for p in plan["group"]["param_layout"]:
        for src in range(ranks):
            at = p["shard_offset"] * ranks + src * p["shard_bytes"]
            want = shards[src][p["shard_offset"]:p["shard_offset"] + p["shard_bytes"]]
            wrong += int(np.count_nonzero(landing[at:at + p["shard_bytes"]] != want))
    return wrong


def gather_fresh_shards(comm, group, region: tuple[int, int], draw: list[int], ranks: int, rank: int) -> int:
    """One all-gather of `group` into `region` ((offset, address) from Communicator.alloc), poisoned
    first, of random shards (rank r's drawn from numpy's default_rng([*draw, r]), so every rank knows
    them all): the landing's wrong bytes."""
    size = group.plan["group"]["unsharded_bytes"]
    landing = landing_view(region[1], size)
    landing[:] = 0xA5
    shards = [np.random.default_rng([*draw, r]).integers(0, 256, group.plan["group"]["shard_bytes"], dtype=np.uint8)
              for r in range(ranks)]
    comm.all_gather(group, shards[rank].ctypes.data, region[0])
    comm.synchronize()
    return wrong_landing_bytes(group.plan, landing, shards)
