"""Ranks that register different groups: the collectives never compare plans (each rank runs
its own, and peers' writes land where the writer's plan says), so such ranks gave wrong landings
and sums without an error. Before a group's first collective the ranks now compare a digest of
their groups, and every rank fails alike, naming the ranks that differ. One process per rank on
the multi-process host fabric."""

from __future__ import annotations

import traceback

import numpy as np
import pytest
from landing_rows import landing_view, wrong_landing_bytes
from rs_reference import bf16_bits, rs_rel_errors
from spawned_ranks import run_ranks

A = [[37, 5], [3]]
B = [[16, 4], [9, 2]]
RANKS = 3

# Rank 1 registers something else; ranks 0 and 2 register [A, B].
DIFFERENCES = {
    "a_shape": [[[37, 5], [4]], B],
    "a_group_fewer": [A],
    "the_order": [B, A],
    "the_mode": [A, (B, {"mode": "slot-reuse"})],
    "the_passes": [A, (B, {"passes": 2})],
}


def _register(comm, spec):
    shapes, options = spec if isinstance(spec, tuple) else (spec, {})
    return comm.register_group(shapes, **options)


def _differing_rank(rank, store, case, results):
    try:
        from tide._capi import TideError
        from tide.comm import Communicator

        groups = DIFFERENCES[case] if rank == 1 else [A, B]
        with Communicator(nodes=1, gpus_per_node=RANKS, rank=rank, arena_bytes=1 << 22, fabric="host",
                          store_dir=store, timeout_s=5) as comm:
            handles = [_register(comm, g) for g in groups]
            first = handles[0]
            offset, _ = comm.alloc(first.plan["group"]["unsharded_bytes"])
            shard = np.random.default_rng().integers(0, 256, first.plan["group"]["shard_bytes"], dtype=np.uint8)
            verdicts = []
            for _ in range(2):  # the first call fails on the difference, the second on the unusable communicator
                try:
                    comm.all_gather(first, shard.ctypes.data, offset)
                    comm.synchronize()
                    verdicts.append(("completed", ""))
                except TideError as e:
                    verdicts.append((e.reason, e.message))
        results.put((rank, verdicts))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


@pytest.mark.parametrize("case", sorted(DIFFERENCES))
def test_ranks_that_register_different_groups_fail_alike(case, tmp_path):
    got, codes = run_ranks(_differing_rank, RANKS, (str(tmp_path), case), timeout=90)
    verdicts = dict(got)
    assert codes == [0] * RANKS and len(verdicts) == RANKS, (codes, verdicts)
    for rank, v in verdicts.items():
        assert isinstance(v, list), v
        (reason, message), (later_reason, later_message) = v
        assert reason == "groups_differ", (rank, v)
        # Every rank names both kinds, and its own groups.
        assert "ranks 0,2: 2 group(s)" in message, message
        assert f"rank 1: {len(DIFFERENCES[case])} group(s)" in message, message
        assert f"this rank ({rank}) registered group 0:" in message, message
        assert later_reason == "communicator_unusable" and "registered different groups" in later_message, v


def _local_choices_rank(rank, store, seed, results):
    """Ranks that pick their own sum and landing CTA budgets (rank-local work) still agree."""
    try:
        from tide.comm import Communicator

        with Communicator(nodes=1, gpus_per_node=RANKS, rank=rank, arena_bytes=1 << 22, fabric="host",
                          store_dir=store, timeout_s=5) as comm:
            group = comm.register_group(A, sum_ctas=rank + 1, landing_ctas=2 * rank + 1)
            plan = group.plan
            grads = [bf16_bits(np.random.default_rng([seed, r]).standard_normal((RANKS, int(np.prod(s)))))
                     for r, s in enumerate(A)]  # [param][rank]: every rank's gradients, drawn alike
            mine = [np.ascontiguousarray(g[rank]) for g in grads]
            out = np.full(plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)  # poisoned
            comm.reduce_scatter(group, [g.ctypes.data for g in mine], out.ctypes.data)
            comm.synchronize()
            every_rank = [[g[r] for g in grads] for r in range(RANKS)]
            worst = max(rs_rel_errors(plan, out, every_rank, rank, 1.0))
        results.put((rank, worst))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


def test_rank_local_cta_budgets_do_not_count_as_a_difference(tmp_path, rng):
    got, codes = run_ranks(_local_choices_rank, RANKS, (str(tmp_path), rng.randrange(1 << 30)), timeout=90)
    worst = dict(got)
    assert codes == [0] * RANKS and len(worst) == RANKS, (codes, worst)
    # Three bf16 terms summed in fp32: within a few fp32 ulps of the float64 sum.
    assert all(isinstance(w, float) and w < 1e-5 for w in worst.values()), worst


def _late_rank(rank, store, results):
    """Every rank registers A and gathers it; then each registers a second group, rank 2 another one."""
    try:
        from tide._capi import TideError
        from tide.comm import Communicator

        with Communicator(nodes=1, gpus_per_node=RANKS, rank=rank, arena_bytes=1 << 22, fabric="host",
                          store_dir=store, timeout_s=5) as comm:
            first = comm.register_group(A)
            offset, _ = comm.alloc(first.plan["group"]["unsharded_bytes"])
            shard = np.random.default_rng().integers(0, 256, first.plan["group"]["shard_bytes"], dtype=np.uint8)
            comm.all_gather(first, shard.ctypes.data, offset)
            comm.synchronize()
            late = comm.register_group([[4, 4]] if rank != 2 else [[4, 5]])
            late_offset, _ = comm.alloc(late.plan["group"]["unsharded_bytes"])
            late_shard = np.zeros(late.plan["group"]["shard_bytes"], dtype=np.uint8)
            try:
                comm.all_gather(late, late_shard.ctypes.data, late_offset)
                comm.synchronize()
                results.put((rank, ("completed", "")))
            except TideError as e:
                results.put((rank, (e.reason, e.message)))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, ("raised", traceback.format_exc())))


def test_a_group_registered_late_is_compared_at_its_first_collective(tmp_path):
    got, codes = run_ranks(_late_rank, RANKS, (str(tmp_path),), timeout=90)
    verdicts = dict(got)
    assert codes == [0] * RANKS and len(verdicts) == RANKS, (codes, verdicts)
    for rank, (reason, message) in verdicts.items():
        assert reason == "groups_differ", (rank, reason, message)
        assert "ranks 0,1: 2 group(s)" in message and "rank 2: 2 group(s)" in message, message


def _late_on_one_side_rank(rank, store, seed, results):
    """The same groups and collectives on both ranks; only when rank 1 registers B differs (one
    collective later than rank 0). The comparison follows the calls, not the registrations, so
    nothing fails (it once compared at rank 0's next call and timed out), and B gathers right."""
    try:
        from tide.comm import Communicator

        with Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=1 << 22, fabric="host",
                          store_dir=store, timeout_s=2) as comm:
            a = comm.register_group(A)
            a_offset, _ = comm.alloc(a.plan["group"]["unsharded_bytes"])
            a_shard = np.random.default_rng([seed, rank]).integers(0, 256, a.plan["group"]["shard_bytes"],
                                                                   dtype=np.uint8)
            comm.all_gather(a, a_shard.ctypes.data, a_offset)
            b = comm.register_group(B) if rank == 0 else None
            comm.all_gather(a, a_shard.ctypes.data, a_offset)
            if rank == 1:
                b = comm.register_group(B)
            b_offset, b_addr = comm.alloc(b.plan["group"]["unsharded_bytes"])
            n = b.plan["group"]["unsharded_bytes"]
            landing = landing_view(b_addr, n)
            landing[:] = 0xA5  # poisoned: an unwritten byte fails
            shards = [np.random.default_rng([seed, 100 + r]).integers(0, 256, b.plan["group"]["shard_bytes"],
                                                                      dtype=np.uint8) for r in range(2)]
            comm.all_gather(b, shards[rank].ctypes.data, b_offset)
            comm.synchronize()
            wrong = wrong_landing_bytes(b.plan, landing, shards)
        results.put((rank, wrong))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


def test_a_group_registered_a_call_apart_on_two_ranks_is_not_a_difference(tmp_path, rng):
    got, codes = run_ranks(_late_on_one_side_rank, 2, (str(tmp_path), rng.randrange(1 << 30)), timeout=90)
    wrong = dict(got)
    assert codes == [0, 0] and wrong == {0: 0, 1: 0}, (codes, wrong)


def test_a_peer_that_never_compares_fails_the_call_on_its_deadline(tmp_path):
    """The comparison waits under the bootstrap's deadline (2 T + 10 s at T = 1 s) and names the
    rank it never heard from."""
    got, codes = run_ranks(_gone_or_late_rank, 2, (str(tmp_path), "absent"), timeout=90)
    verdicts = dict(got)
    reason, message, took = verdicts[0]
    assert reason == "timeout" and "never heard from rank(s) 1" in message, verdicts
    assert 11 <= took <= 20, took


def _gone_or_late_rank(rank, store, how, results):
    """Rank 1 makes its communicator and group, then, by `how`: "absent", never makes a
    collective (it sleeps past rank 0's deadline); "exits", exits before any collective; "late",
    makes its first collective at once, and rank 0 comes to its own after rank 1 gave up."""
    import os
    import time

    try:
        from tide._capi import TideError
        from tide.comm import Communicator

        comm = Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=1 << 22, fabric="host",
                            store_dir=store, timeout_s=1)
        group = comm.register_group(A)
        offset, _ = comm.alloc(group.plan["group"]["unsharded_bytes"])
        if rank == 1 and how == "exits":
            os._exit(0)
        if rank == 1 and how == "absent":
            time.sleep(16)
            results.put((rank, ("slept", "", 0.0)))
            return
        if rank == 0 and how == "late":
            time.sleep(14)  # past rank 1's comparison deadline (2 T + 10 s = 12 s)
        shard = np.zeros(group.plan["group"]["shard_bytes"], dtype=np.uint8)
        start = time.monotonic()
        try:
            comm.all_gather(group, shard.ctypes.data, offset)
            comm.synchronize()
            results.put((rank, ("completed", "", time.monotonic() - start)))
        except TideError as e:
            results.put((rank, (e.reason, e.message, time.monotonic() - start)))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, ("raised", traceback.format_exc(), 0.0)))


def test_a_peer_that_exits_before_comparing_is_named_at_once(tmp_path):
    got, codes = run_ranks(_gone_or_late_rank, 2, (str(tmp_path), "exits"), timeout=90)
    reason, message, took = dict(got)[0]
    assert reason == "peer_failure" and "the process of rank 1" in message and "has exited" in message, message
    assert took < 5, took  # not at the 12 s deadline


def test_a_rank_that_comes_after_its_peer_gave_up_fails_at_once(tmp_path):
    """Rank 1 gives up comparing at its deadline; rank 0, coming later, still finds rank 1's words,
    but the job's failure record says rank 1 gave up: rank 0 fails at once instead of waiting its
    collective's deadline for a peer that will never run it."""
    got, codes = run_ranks(_gone_or_late_rank, 2, (str(tmp_path), "late"), timeout=90)
    verdicts = dict(got)
    reason1, message1, _ = verdicts[1]
    assert reason1 == "timeout" and "never heard from rank(s) 0" in message1, verdicts
    reason0, message0, took0 = verdicts[0]
    assert reason0 == "peer_failure" and "never heard from rank(s) 0" in message0, verdicts
    assert took0 < 2, took0
