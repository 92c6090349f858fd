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
