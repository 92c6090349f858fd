"""Ranks that pass different landing offsets to a group's all-gather: peers write a rank's landing at
the offset of their own call, so such ranks got each other's rows in the wrong places, without an
error. The ranks now compare each (group, offset) pair the first time a rank uses it. One process
per rank on the multi-process host fabric."""

from __future__ import annotations

import time
import traceback

import numpy as np
from landing_rows import landing_view, wrong_landing_bytes
from spawned_ranks import run_ranks

SHAPES = [[37, 5], [3]]


def _communicator(rank, store, ranks, timeout_s):
    from tide.comm import Communicator

    return Communicator(nodes=1, gpus_per_node=ranks, rank=rank, arena_bytes=1 << 22, fabric="host",
                        store_dir=store, timeout_s=timeout_s)


def _group_with_two_landings(comm):
    """SHAPES registered on `comm`, two landing regions for it ((offset, address) each, allocated
    alike on every rank), and a random shard."""
    group = comm.register_group(SHAPES)
    n = group.plan["group"]["unsharded_bytes"]
    regions = [comm.alloc(n), comm.alloc(n)]
    shard = np.random.default_rng().integers(0, 256, group.plan["group"]["shard_bytes"], dtype=np.uint8)
    return group, regions, shard


def _differing_rank(rank, store, results):
    """Ranks 0 and 2 gather into their first region, rank 1 into its second: both offsets are new to
    every rank, so all three compare, and all fail alike."""
    try:
        from tide._capi import TideError

        with _communicator(rank, store, 3, timeout_s=5) as comm:
            group, regions, shard = _group_with_two_landings(comm)
            offsets = [offset for offset, _ in regions]
            verdicts = []
            for _ in range(2):  # the first call fails on the difference, the second on the unusable communicator
                try:
                    comm.all_gather(group, shard.ctypes.data, offsets[1 if rank == 1 else 0])
                    comm.synchronize()
                    verdicts.append(("completed", ""))
                except TideError as e:
                    verdicts.append((e.reason, e.message))
            results.put((rank, (offsets, verdicts)))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


def test_ranks_that_pass_different_landing_offsets_fail_alike(tmp_path):
    got, codes = run_ranks(_differing_rank, 3, (str(tmp_path),), timeout=90)
    verdicts = dict(got)
    assert codes == [0, 0, 0] and len(verdicts) == 3, (codes, verdicts)
    for rank, v in verdicts.items():
        assert isinstance(v, tuple), v
        (first, second), ((reason, message), (later_reason, later_message)) = v
        assert reason == "landings_differ", (rank, v)
        assert f"ranks 0,2: group 0 at offset {first};" in message, message
        assert f"rank 1: group 0 at offset {second};" in message, message
        mine = second if rank == 1 else first
        assert f"this rank ({rank}) passed offset {mine} to group 0" in message, message
        assert later_reason == "communicator_unusable" and "different landing offsets" in later_message, v


def _alternating_rank(rank, store, seed, results):
    """One group gathered into two regions in turn, fresh shards and a poisoned landing each time
    (poisoned before the call that frees the landing for the peers' writes)."""
    try:
        with _communicator(rank, store, 2, timeout_s=5) as comm:
            group, regions, _ = _group_with_two_landings(comm)
            n = group.plan["group"]["unsharded_bytes"]
            wrong = []
            for call in range(6):
                offset, addr = regions[call % 2]
                landing = landing_view(addr, n)
                landing[:] = 0xA5  # poisoned: an unwritten byte fails
                shards = [np.random.default_rng([seed, call, r]).integers(
                    0, 256, group.plan["group"]["shard_bytes"], dtype=np.uint8) for r in range(2)]
                comm.all_gather(group, shards[rank].ctypes.data, offset)
                comm.synchronize()
                wrong.append(wrong_landing_bytes(group.plan, landing, shards))
        results.put((rank, wrong))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


def test_a_group_gathered_at_two_offsets_in_turn_lands_right_every_time(tmp_path, rng):
    got, codes = run_ranks(_alternating_rank, 2, (str(tmp_path), rng.randrange(1 << 30)), timeout=90)
    wrong = dict(got)
    assert codes == [0, 0] and wrong == {0: [0] * 6, 1: [0] * 6}, (codes, wrong)


def _reusing_rank(rank, store, results):
    """Both ranks gather at their first region; then rank 0 moves to its second region (new to it:
    it compares) while rank 1 gathers at the first again (known: it does not). Neither may hang:
    rank 1's all-gather ends at a deadline (T = 1 s) and records the job's failure, which ends
    rank 0's comparison at once (else at its own deadline, 2 T + 10 s), saying what it compared."""
    try:
        from tide._capi import TideError

        # Not a `with`: closing after a failed collective raises that failure again.
        comm = _communicator(rank, store, 2, timeout_s=1)
        group, regions, shard = _group_with_two_landings(comm)
        offsets = [offset for offset, _ in regions]
        comm.all_gather(group, shard.ctypes.data, offsets[0])
        comm.synchronize()
        start = time.monotonic()
        try:
            comm.all_gather(group, shard.ctypes.data, offsets[1 if rank == 0 else 0])
            comm.synchronize()
            results.put((rank, ("completed", "", time.monotonic() - start)))
        except TideError as e:
            results.put((rank, (e.reason, e.message, time.monotonic() - start)))
        try:
            comm.close()
        except TideError:
            pass  # the failure above, reported again by the drain
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, ("raised", traceback.format_exc(), 0.0)))


def test_a_rank_that_moves_its_landing_alone_fails_stop(tmp_path):
    got, codes = run_ranks(_reusing_rank, 2, (str(tmp_path),), timeout=90)
    verdicts = dict(got)
    assert codes == [0, 0] and len(verdicts) == 2, (codes, verdicts)
    reason1, message1, took1 = verdicts[1]
    # Its own wait's timeout, or (where another of its waits failed the job first) that failure.
    assert reason1 in ("timeout", "peer_failure") and "rank 0" in message1, verdicts
    assert took1 < 10, took1
    reason0, message0, took0 = verdicts[0]
    assert reason0 == "peer_failure" and "comparing a landing offset" in message0, verdicts
    assert "group 0 at landing offset" in message0 and "the job failed" in message0, message0
    assert took0 < 10, took0


def _crossed_comparisons_rank(rank, store, results):
    """Both ranks gather group 0 at their first region (compared), then register group 1. Rank 0
    moves group 0 to its second region (a landing comparison) while rank 1 gathers group 1 for the
    first time (a groups comparison): out of step, the two comparisons meet in one exchange."""
    try:
        from tide._capi import TideError

        with _communicator(rank, store, 2, timeout_s=5) as comm:
            first, regions, shard = _group_with_two_landings(comm)
            offsets = [offset for offset, _ in regions]
            comm.all_gather(first, shard.ctypes.data, offsets[0])
            comm.synchronize()
            second = comm.register_group([[8, 4]])
            try:
                if rank == 0:
                    comm.all_gather(first, shard.ctypes.data, offsets[1])
                else:
                    later_offset, _ = comm.alloc(second.plan["group"]["unsharded_bytes"])
                    later_shard = np.zeros(second.plan["group"]["shard_bytes"], dtype=np.uint8)
                    comm.all_gather(second, later_shard.ctypes.data, later_offset)
                comm.synchronize()
                results.put((rank, ("completed", "")))
            except TideError as e:
                results.put((rank, (e.reason, e.message)))
    except Exception:  # noqa: BLE001 - reported
        results.put((rank, traceback.format_exc()))


def test_a_landing_comparison_met_by_the_groups_comparison_is_named_on_both_sides(tmp_path):
    """Each side names the other as out of step; the groups' side must not read the landing
    comparison's words as a group count and digest (it once said the ranks registered different
    groups, rank 0 some 6e18 of them)."""
    got, codes = run_ranks(_crossed_comparisons_rank, 2, (str(tmp_path),), timeout=90)
    verdicts = dict(got)
    assert codes == [0, 0] and len(verdicts) == 2, (codes, verdicts)
    assert all(isinstance(v, tuple) for v in verdicts.values()), verdicts
    reason0, message0 = verdicts[0]
    assert reason0 == "landings_differ" and "rank 1: in another exchange" in message0, verdicts
    reason1, message1 = verdicts[1]
    assert reason1 == "groups_differ", verdicts
    assert "rank 0: in another exchange (comparing a landing offset" in message1, message1
    assert "rank 1: 2 group(s)" in message1, message1
    assert "registered different groups" not in message1, message1
