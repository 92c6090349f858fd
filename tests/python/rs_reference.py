"""The float64 reference for a reduce-scatter's fp32 output shards, and bf16 bit conversions in numpy,
for the tests that drive the communicator with raw gradient pointers (no torch needed)."""

from __future__ import annotations

import numpy as np


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (round to nearest even), as uint16. NaN is not expected in the inputs."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_to_f64(bits: np.ndarray) -> np.ndarray:
    """bf16 bits (uint16) -> float64, exactly."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def fp32_to_f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def rs_rel_errors(plan: dict, out: np.ndarray, all_grads, rank: int, alpha: float, before=None,
                  to_f64=bf16_bits_to_f64) -> list[float]:
    """Per parameter of `plan`'s group: max |out - (alpha * float64 sum over ranks [+ before])|
    relative to max(1, |reference|); inf where the output is not finite (an unwritten NaN poison
    fails here). all_grads[r][i]: rank r's gradient of parameter i, flat: bf16 bits, or fp32 with
    to_f64=fp32_to_f64. `out`: this rank's fp32 output; `before`: its contents before an
    accumulating call."""
    errors = []
    for i, p in enumerate(plan["group"]["param_layout"]):
        k = p["shard_rows"] * p["row_elems"]
        total = p["rows"] * p["row_elems"]
        ref = np.zeros(k)
        lo, hi = rank * k, min((rank + 1) * k, total)
        if hi > lo:
            ref[: hi - lo] = sum(to_f64(g[i][lo:hi]) for g in all_grads)
        ref *= alpha
        if before is not None:
            ref += before[p["out_offset"]:p["out_offset"] + k].astype(np.float64)
        got = out[p["out_offset"]:p["out_offset"] + k].astype(np.float64)
        if not np.all(np.isfinite(got)):
            errors.append(float("inf"))
            continue
        errors.append(float(np.max(np.abs(got - ref)) / max(1.0, np.max(np.abs(ref)))))
    return errors
