"""TIDE_CHECK_CALLS=1: every collective compares itself (kind, group, landing, call number) across
the ranks before it runs. Without it, ranks that swap two groups of one shape, or an all-gather's
landing between two offsets each has used before, get each other's bytes in the wrong places
without an error: the first-use comparisons of groups and landings do not see it. One process per
rank on the multi-process host fabric."""

from __future__ import annotations

import os
import traceback

import numpy as np
import pytest
from landing_rows import gather_fresh_shards
from rs_reference import fp32_to_f64, rs_rel_errors
from spawned_ranks import run_ranks

SHAPES = [[37, 5], [3]]


def _communicator(rank, store, check_calls=True):
    if check_calls:
        os.environ["TIDE_CHECK_CALLS"] = "1"  # read when the communicator is made
    from tide.comm import Communicator

    return Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=1 << 22, fabric="host",
                        store_dir=store, timeout_s=10)


def _gather(comm, group, region, seed, call, rank):
    """One all-gather of fresh random shards into `region` (poisoned first); the landing's wrong bytes."""
    return gather_fresh_shards(comm, group, region, [seed, call], 2, rank)


def _reduce_scatter(comm, group, seed, call, rank):
    """One reduce-scatter of fresh random fp32 gradients into a poisoned output, which must hold
    the float64 sum of both ranks' gradients (within fp32 rounding)."""
    def grads_of(r):
        return [np.random.default_rng([seed, call, r, p]).standard_normal(int(np.prod(s))).astype(np.float32)
                for p, s in enumerate(SHAPES)]

    grads = grads_of(rank)
    out = np.full(group.plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)
    comm.reduce_scatter(group, [g.ctypes.data for g in grads], out.ctypes.data)
    comm.synchronize()
    errors = rs_rel_errors(group.plan, out, [grads_of(r) for r in range(2)], rank, 1.0, to_f64=fp32_to_f64)
    assert max(errors) <= 1e-6, (call, errors)


def _swapping_rank(rank, store, seed, swap, results):
    """Two groups of one shape, two landing regions each; every (group, region) pair is gathered
    once alike on both ranks (so the first-use comparisons pass), then the ranks part as `swap` says."""
    try:
        from tide._capi import TideError

        with _communicator(rank, store) as comm:
            groups = [comm.register_group(SHAPES, grad_dtype="fp32") for _ in range(2)]
            n = groups[0].plan["group"]["unsharded_bytes"]
            regions = [[comm.alloc(n), comm.alloc(n)] for _ in groups]
            wrong = [_gather(comm, groups[g], regions[g][i], seed, 2 * g + i, rank) for g in (0, 1) for i in (0, 1)]
            _reduce_scatter(comm, groups[0], seed, 4, rank)
            verdicts = []
            for _ in range(2):  # the parting call, then one on the communicator it left unusable
                try:
                    if swap == "groups":
                        _gather(comm, groups[rank], regions[rank][0], seed, 9, rank)
                    elif swap == "landings":
                        _gather(comm, groups[0], regions[0][rank], seed, 9, rank)
                    elif rank == 0:  # kinds
                        _gather(comm, groups[0], regions[0][0], seed, 9, rank)
                    else:
                        _reduce_scatter(comm, groups[0], seed, 9, rank)
                    verdicts.append(("completed", ""))
                except TideError as e:
                    verdicts.append((e.reason, e.message))
            results.put((rank, (wrong, verdicts)))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


# What each rank's parting call (call 5: four all-gathers and a reduce-scatter came before) is named.
PARTED = {
    "groups": ["call 5, all-gather of group 0", "call 5, all-gather of group 1"],
    "landings": ["call 5, all-gather of group 0 (landing digest", "call 5, all-gather of group 0 (landing digest"],
    "kinds": ["call 5, all-gather of group 0", "call 5, reduce-scatter of group 0"],
}


@pytest.mark.parametrize("swap", sorted(PARTED))
def test_ranks_that_part_on_known_groups_or_landings_fail_alike(swap, tmp_path, rng):
    got, codes = run_ranks(_swapping_rank, 2, (str(tmp_path), rng.randrange(1 << 30), swap), timeout=90)
    verdicts = dict(got)
    assert codes == [0, 0] and len(verdicts) == 2, (codes, verdicts)
    for rank, v in verdicts.items():
        assert isinstance(v, tuple), v
        wrong, ((reason, message), (later_reason, later_message)) = v
        assert wrong == [0, 0, 0, 0], (rank, wrong)  # the checked calls before the parting landed right
        assert reason == "calls_differ", (rank, v)
        assert "the ranks issued different collectives" in message, message
        assert f"rank 0: {PARTED[swap][0]}" in message and f"rank 1: {PARTED[swap][1]}" in message, message
        assert f"this rank ({rank}) issued {PARTED[swap][rank]}" in message, message
        assert later_reason == "communicator_unusable" and "different collectives" in later_message, v
    if swap == "landings":  # the two landings' digests must differ in the message
        assert verdicts[0][1][0][1].count("landing digest") == 3, verdicts[0]


def _one_rank_checks(rank, store, results):
    try:
        from tide._capi import TideError

        with _communicator(rank, store, check_calls=rank == 1) as comm:
            group = comm.register_group(SHAPES)
            region = comm.alloc(group.plan["group"]["unsharded_bytes"])
            try:
                _gather(comm, group, region, 1, 0, rank)
                results.put((rank, ("completed", "")))
            except TideError as e:
                results.put((rank, (e.reason, e.message)))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


def test_ranks_that_set_the_check_differently_fail_at_their_first_collective(tmp_path):
    got, codes = run_ranks(_one_rank_checks, 2, (str(tmp_path),), timeout=90)
    verdicts = dict(got)
    assert codes == [0, 0] and len(verdicts) == 2, (codes, verdicts)
    for v in verdicts.values():
        assert isinstance(v, tuple) and v[0] == "groups_differ", verdicts
        assert "set TIDE_CHECK_CALLS differently" in v[1], v[1]
        assert "rank 0: 1 group(s), digest" in v[1] and "comparing every call;" in v[1], v[1]


def test_an_unknown_check_value_is_refused(tmp_path, monkeypatch):
    from tide import _capi
    from tide.comm import Communicator

    monkeypatch.setenv("TIDE_CHECK_CALLS", "yes")
    with pytest.raises(_capi.TideError, match="TIDE_CHECK_CALLS=yes"):
        Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                     store_dir=str(tmp_path / "store"), timeout_s=5)


def _refused_then_retried_rank(rank, store, check, seed, results):
    """Rank 0 first passes a shard inside its own landing (refused: its own argument), then retries
    with a good one; rank 1 issues the call once."""
    try:
        from tide._capi import TideError

        with _communicator(rank, store, check_calls=check) as comm:
            group = comm.register_group(SHAPES)
            region = comm.alloc(group.plan["group"]["unsharded_bytes"])
            verdicts = []
            if rank == 0:
                try:
                    comm.all_gather(group, region[1], region[0])
                    verdicts.append("completed")
                except TideError as e:
                    verdicts.append(e.reason)
            verdicts.append(_gather(comm, group, region, seed, 0, rank))
            results.put((rank, verdicts))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


@pytest.mark.parametrize("check", [False, True])
def test_a_call_refused_for_its_shard_is_counted_nowhere(check, tmp_path, rng):
    """The refusal comes before the ranks compare (and count) the call: the retry pairs with the
    peer's call, checked or not (it once came after the comparison, and both ranks then waited to
    their deadlines, one call apart)."""
    got, codes = run_ranks(_refused_then_retried_rank, 2, (str(tmp_path), check, rng.randrange(1 << 30)), timeout=60)
    verdicts = dict(got)
    assert codes == [0, 0] and verdicts == {0: ["bad_argument", 0], 1: [0]}, (codes, verdicts)


def _parting_on_something_new_rank(rank, store, part, seed, results):
    """After one agreed all-gather (group 0, region 0), rank 0 issues a call that is new to it (group 0
    at region 1, or a group registered since) while rank 1 repeats a known one or reduce-scatters."""
    try:
        from tide._capi import TideError

        with _communicator(rank, store) as comm:
            group = comm.register_group(SHAPES, grad_dtype="fp32")
            n = group.plan["group"]["unsharded_bytes"]
            regions = [comm.alloc(n), comm.alloc(n)]
            assert _gather(comm, group, regions[0], seed, 0, rank) == 0
            later = comm.register_group(SHAPES, grad_dtype="fp32")  # fits the scratch sized for the first
            try:
                if rank == 0:
                    _gather(comm, later if part == "group" else group, regions[1], seed, 1, rank)
                elif part == "kind":
                    _reduce_scatter(comm, group, seed, 1, rank)
                else:
                    _gather(comm, group, regions[0], seed, 1, rank)
                results.put((rank, ("completed", "")))
            except TideError as e:
                results.put((rank, (e.reason, e.message)))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


@pytest.mark.parametrize("part", ["landing", "kind", "group"])
def test_a_call_new_to_one_rank_is_compared_as_a_call(part, tmp_path, rng):
    """Whether a rank compares a landing or the groups depends on its own calls; the call comparison
    comes first, so ranks whose calls differ meet in it and are named by their calls (they once met
    in different exchanges, failing with different reasons, one told its peer passed an offset where
    it had issued a reduce-scatter)."""
    got, codes = run_ranks(_parting_on_something_new_rank, 2, (str(tmp_path), part, rng.randrange(1 << 30)),
                           timeout=60)
    verdicts = dict(got)
    assert codes == [0, 0] and len(verdicts) == 2, (codes, verdicts)
    rank0 = f"call 1, all-gather of group {1 if part == 'group' else 0} (landing digest"
    rank1 = "call 1, reduce-scatter of group 0" if part == "kind" else "call 1, all-gather of group 0 (landing digest"
    for rank, v in verdicts.items():
        assert isinstance(v, tuple) and v[0] == "calls_differ", (rank, v)
        assert f"rank 0: {rank0}" in v[1] and f"rank 1: {rank1}" in v[1], v[1]
