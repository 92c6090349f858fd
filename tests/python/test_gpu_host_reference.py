"""The pooled host-fabric reference of tests/gpu/check_collectives.py (tests/gpu/host_reference.py,
HostReference): its rank processes start once per topology and serve every case after it, and
check_collectives.py holds the GPU's landings and reduce-scatter outputs to its bits. Here, on CPU,
for the GPU check's shapes and input classes:

  - every call of one pooled reference gives the bits of a fresh reference (new rank processes,
    new communicator) on the same inputs, whatever calls came before it;
  - its bits are right on their own: every landing holds every rank's shard at the plan's
    offsets, and every output is the float64 sum of the ranks' rows (exact for integer inputs,
    within 1e-5 for normal ones, the expected NaN/Inf classes);
  - changing one input byte or one gradient element changes exactly the bytes it should.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

GPU_TESTS = Path(__file__).resolve().parents[1] / "gpu"
if str(GPU_TESTS) not in sys.path:  # as check_collectives.py imports it; spawned ranks inherit sys.path
    sys.path.insert(0, str(GPU_TESTS))

import check_collectives  # noqa: E402  (SHAPES, make_grads, bf16_bits: the GPU check's inputs)
from host_reference import HostReference  # noqa: E402

from tide import make_plan  # noqa: E402

SHAPES = check_collectives.SHAPES
TOPOLOGIES = [(1, 2), (2, 1), (2, 2)]
# (input class, alpha, accumulate): check_collectives.py's cases on the default plan.
CASES = [("normal", None, False), ("integer", 1.0, False), ("nonfinite", 0.5, False), ("normal", 0.25, True)]


def _inputs(rng, n: int, plan: dict, kind: str, alpha: float | None, accumulate: bool) -> tuple:
    """(shards, grads, alpha, out_init, accumulate) for HostReference.run: random shard bytes,
    bf16 gradient bits of the GPU check's class, and an output that is NaN (overwritten) or
    random (accumulated into)."""
    seed = rng.randrange(1 << 30)
    gen = np.random.default_rng(seed)
    cpu = torch.device("cpu")
    shards = [gen.integers(0, 256, plan["shard_bytes"], dtype=np.uint8) for _ in range(n)]
    grads = [[check_collectives.bf16_bits(x) for x in check_collectives.make_grads(kind, r, seed, cpu)]
             for r in range(n)]
    out_elems = plan["out_bytes"] // 4
    out_init = [gen.standard_normal(out_elems).astype(np.float32) if accumulate
                else np.full(out_elems, np.nan, dtype=np.float32) for _ in range(n)]
    return shards, grads, (1.0 / n if alpha is None else alpha), out_init, accumulate


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32) if a.dtype == np.float32 else a


def _assert_same_bits(got: tuple, want: tuple, what: str) -> None:
    """Landings byte for byte, outputs bit for bit (NaN payloads included: both are the host fabric)."""
    (got_landings, got_outs), (want_landings, want_outs) = got, want
    assert len(got_landings) == len(want_landings) == len(got_outs) == len(want_outs)
    for r, (gl, wl, go, wo) in enumerate(zip(got_landings, want_landings, got_outs, want_outs)):
        assert gl.dtype == wl.dtype == np.uint8 and np.array_equal(gl, wl), f"{what}: rank {r} landing"
        assert go.dtype == wo.dtype == np.float32 and np.array_equal(_bits(go), _bits(wo)), \
            f"{what}: rank {r} output differs in {int(np.sum(_bits(go) != _bits(wo)))} elements"


def _expected_landing(plan: dict, shards: list[np.ndarray]) -> np.ndarray:
    """Parameter-major: per parameter, the N ranks' shard bytes of it back to back."""
    return np.concatenate([shards[r][p["shard_offset"]:p["shard_offset"] + p["shard_bytes"]]
                           for p in plan["param_layout"] for r in range(len(shards))])


def _expected_output(plan: dict, grads: list[list[np.ndarray]], rank: int, alpha: float, init: np.ndarray,
                     accumulate: bool) -> np.ndarray:
    """float64: alpha x the sum over ranks of `rank`'s rows of every parameter (zero past D_p),
    plus the initial output when accumulating."""
    ref = np.zeros(init.shape, dtype=np.float64)
    for p, param in enumerate(plan["param_layout"]):
        k = param["shard_rows"] * param["row_elems"]
        numel = param["rows"] * param["row_elems"]
        lo, hi = rank * k, min((rank + 1) * k, numel)
        if hi > lo:
            with np.errstate(invalid="ignore"):  # Inf + -Inf: NaN, as the nonfinite class wants
                total = sum((g[p].astype(np.uint32) << 16).view(np.float32).astype(np.float64)[lo:hi] for g in grads)
            ref[param["out_offset"]:param["out_offset"] + hi - lo] = total
    return alpha * ref + (init.astype(np.float64) if accumulate else 0.0)


def _assert_right(plan: dict, inputs: tuple, result: tuple, kind: str, what: str) -> None:
    shards, grads, alpha, out_init, accumulate = inputs
    landings, outs = result
    want_landing = _expected_landing(plan, shards)
    assert want_landing.size == plan["unsharded_bytes"]
    for r in range(len(shards)):
        assert np.array_equal(landings[r], want_landing), f"{what}: rank {r} landing"
        ref = _expected_output(plan, grads, r, alpha, out_init[r], accumulate)
        y = outs[r].astype(np.float64)
        if kind == "integer":
            assert np.array_equal(y, ref), f"{what}: rank {r} output not exact"
            continue
        finite = np.isfinite(ref)
        scale = max(1.0, float(np.max(np.abs(ref[finite]))) if finite.any() else 1.0)
        assert np.all(np.abs(y[finite] - ref[finite]) <= 1e-5 * scale), f"{what}: rank {r} output"
        assert np.all(np.isnan(y[np.isnan(ref)])), f"{what}: rank {r} NaN lost"
        inf = np.isinf(ref)
        assert np.array_equal(y[inf], ref[inf]), f"{what}: rank {r} Inf lost"
        if kind == "nonfinite":
            assert np.isnan(ref).any() and inf.any(), "the input class must reach NaN and Inf outputs"


@pytest.mark.parametrize("nodes,gpus", TOPOLOGIES, ids=[f"M{m}L{lc}" for m, lc in TOPOLOGIES])
def test_pooled_reference_gives_fresh_references_bits(rng, nodes, gpus):
    n = nodes * gpus
    plan = make_plan(SHAPES, nodes=nodes, gpus_per_node=gpus)["group"]
    inputs = [_inputs(rng, n, plan, kind, alpha, acc) for kind, alpha, acc in CASES]
    with HostReference(nodes, gpus, SHAPES) as pooled:
        # Every case in turn, then the first again: what an earlier call left in the rank
        # processes (landing, communicator, staging) must not reach a later call's bits.
        pooled_results = [pooled.run(*inp) for inp in inputs]
        first_again = pooled.run(*inputs[0])
    _assert_same_bits(first_again, pooled_results[0], "first case after the others")
    for (kind, _, _), inp, got in zip(CASES, inputs, pooled_results):
        what = f"M{nodes}L{gpus}/{kind}/alpha={inp[2]}/acc={inp[4]}"
        with HostReference(nodes, gpus, SHAPES) as fresh:
            want = fresh.run(*inp)
        _assert_same_bits(got, want, f"{what}: pooled against fresh")
        _assert_right(plan, inp, got, kind, what)


@pytest.mark.parametrize("nodes,gpus", TOPOLOGIES, ids=[f"M{m}L{lc}" for m, lc in TOPOLOGIES])
def test_one_changed_input_changes_exactly_its_bytes(rng, nodes, gpus):
    """A reference that served stale results, or mixed up ranks, would pass the comparisons
    above for some inputs: one shard byte changed must change that byte of every landing and
    nothing else; one gradient element changed, that element's row in its owner's output only."""
    n = nodes * gpus
    plan = make_plan(SHAPES, nodes=nodes, gpus_per_node=gpus)["group"]
    base = _inputs(rng, n, plan, "normal", None, False)
    shards, grads, alpha, out_init, accumulate = base

    src = rng.randrange(n)
    p = rng.randrange(len(SHAPES))
    param = plan["param_layout"][p]
    shard_pos = rng.randrange(param["shard_bytes"])
    changed_shards = [s.copy() for s in shards]
    changed_shards[src][param["shard_offset"] + shard_pos] ^= 0xFF
    landing_pos = param["shard_offset"] * n + src * param["shard_bytes"] + shard_pos

    q = rng.randrange(n)
    numel = param["rows"] * param["row_elems"]
    elem = rng.randrange(numel)
    changed_grads = [[g.copy() for g in gs] for gs in grads]
    changed_grads[q][p][elem] ^= 0x0040  # the top mantissa bit of a bf16: the value moves by a quarter to a half
    k = param["shard_rows"] * param["row_elems"]
    owner = elem // k
    out_pos = param["out_offset"] + elem - owner * k

    with HostReference(nodes, gpus, SHAPES) as ref:
        original = ref.run(*base)
        shard_changed = ref.run(changed_shards, grads, alpha, out_init, accumulate)
        grad_changed = ref.run(shards, changed_grads, alpha, out_init, accumulate)

    for r in range(n):
        diff = np.flatnonzero(shard_changed[0][r] != original[0][r])
        assert diff.tolist() == [landing_pos], (r, diff[:8])
        assert np.array_equal(_bits(shard_changed[1][r]), _bits(original[1][r]))
        assert np.array_equal(grad_changed[0][r], original[0][r])
        diff = np.flatnonzero(_bits(grad_changed[1][r]) != _bits(original[1][r]))
        assert diff.tolist() == ([out_pos] if r == owner else []), (r, owner, diff[:8])
