"""Communicator life-cycle misuse on the host fabric, found by review: a destroy racing other
threads' calls, a destroy that drains a failed collective, a refused call before the first
collective, and groups asking for different Level 2 landings. Each is refused or reported with a
clear error, and nothing hangs or reads freed memory."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import traceback

import numpy as np
import pytest
from landing_rows import gather_fresh_shards
from rs_reference import bf16_bits, rs_rel_errors
from spawned_ranks import run_ranks

from tide import _capi

# Run in a child process with a timeout: before the fix, about one run of 300 rounds in seven left
# a thread blocked for good on the mutex of a communicator that destroy had freed (a race: a run
# without it passes on the old code too).
DESTROY_RACE = textwrap.dedent("""
    import sys, threading
    import numpy as np
    from tide import _capi
    from tide.comm import Communicator

    lib = _capi.library()
    store, rounds = sys.argv[1], int(sys.argv[2])
    seen = {}
    bad = []  # refusals that do not name the destroyed communicator: an assert in a thread would only print
    for i in range(rounds):
        comm = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 22, fabric="host",
                            store_dir=f"{store}/s{i}", timeout_s=5)
        group = comm.register_group([[64, 64]], dtype="fp32")
        landing, _ = comm.alloc(group.plan["group"]["unsharded_bytes"])
        shard = np.ones(64 * 64, dtype=np.float32)
        handle = _capi.CommHandle(comm.handle.value)
        stop = threading.Event()

        def call():
            while not stop.is_set():
                r = lib.tideAllGather(handle, group.handle, shard.ctypes.data, landing, None)
                seen[r] = seen.get(r, 0) + 1
                if r != 0:
                    message = lib.tideGetLastError().decode()
                    if r != _capi.Result.INVALID_ARGUMENT or "destroyed" not in message:
                        bad.append((r, message))
                    return

        threads = [threading.Thread(target=call) for _ in range(3)]
        for t in threads:
            t.start()
        comm.close()  # while the threads call
        stop.set()
        for t in threads:
            t.join()
    if bad:
        sys.exit(f"{len(bad)} refusal(s) not naming the destroyed communicator, e.g. {bad[0]}")
    print(sorted(seen.items()))
""")


def test_destroy_while_other_threads_call(tmp_path):
    """tideCommDestroy while three threads loop tideAllGather on the communicator: every call
    either completes or is refused naming the destroyed communicator; no thread hangs on (or
    touches) the freed communicator."""
    done = subprocess.run([sys.executable, "-c", DESTROY_RACE, str(tmp_path), "300"], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = dict(ast.literal_eval(done.stdout.strip().splitlines()[-1]))  # [(result, count), ...]
    assert set(seen) <= {_capi.Result.SUCCESS, _capi.Result.INVALID_ARGUMENT}, seen
    assert seen.get(_capi.Result.SUCCESS, 0) > 0, seen


def _after_one_matched_all_gather(rank, store, timeout_s):
    """Two host ranks' communicators after one all-gather both made (the first compares their
    groups, host-blocking): (comm, group, landing offset, shard)."""
    from tide.comm import Communicator

    comm = Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=1 << 22, fabric="host",
                        store_dir=store, timeout_s=timeout_s)
    group = comm.register_group([[64, 64]], dtype="fp32")
    landing, _ = comm.alloc(group.plan["group"]["unsharded_bytes"])
    shard = np.random.default_rng(rank).standard_normal(64 * 64 // 2).astype(np.float32)
    comm.all_gather(group, shard.ctypes.data, landing)
    comm.synchronize()
    return comm, group, landing, shard


def _stay_idle_then_close(comm, rank, results, seconds):
    """Rank 1's part: alive, never making the next call, then closing."""
    time.sleep(seconds)
    comm.close()
    results.put((rank, "closed", ""))


def _destroy_after_unmatched_call(rank, store, results):
    """Both ranks make one all-gather (the first compares their groups, host-blocking); then rank 0
    enqueues one that rank 1 never makes, and destroys its communicator."""
    try:
        comm, group, landing, shard = _after_one_matched_all_gather(rank, store, 2)
        if rank == 1:
            _stay_idle_then_close(comm, rank, results, 6)
            return
        comm.all_gather(group, shard.ctypes.data, landing)  # enqueued: returns at once
        start = time.monotonic()
        try:
            comm.close()
            results.put((rank, "closed", f"after {time.monotonic() - start:.1f} s"))
        except _capi.TideError as e:
            took = time.monotonic() - start
            comm.close()  # gone all the same: closing again does nothing
            results.put((rank, "raised", (int(e.result), e.message, took)))
    except Exception:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", traceback.format_exc()))


def _rank0_outcome_after_rank1_idles(target, tmp_path, want):
    """Runs `target` on two host ranks, rank 1 idling then closing: rank 0's (what, detail),
    checked to be `want`."""
    got, codes = run_ranks(target, 2, (str(tmp_path / "store"),), timeout=60)
    assert codes == [0, 0], (codes, got)
    by_rank = {r: (what, detail) for r, what, detail in got}
    assert by_rank[1][0] == "closed", by_rank
    what, detail = by_rank[0]
    assert what == want, by_rank
    return detail


def test_destroy_reports_the_collective_it_drained(tmp_path):
    """The enqueued all-gather fails in destroy's drain (a peer never made it). Destroy used to
    discard that failure and return success, leaving nothing to report it: now it tears the
    communicator down all the same and returns the failure."""
    result, message, took = _rank0_outcome_after_rank1_idles(_destroy_after_unmatched_call, tmp_path, "raised")
    assert result == _capi.Result.TIMEOUT and "all_gather#2" in message and "tideCommDestroy" in message, \
        (result, message, took)
    assert took < 30, (result, message, took)


def _calls_after_a_failed_call(rank, store, results):
    """Both ranks make one all-gather; then rank 0 enqueues one that rank 1 never makes, lets its
    deadline pass without synchronizing, and calls again."""
    try:
        comm, group, landing, shard = _after_one_matched_all_gather(rank, store, 1)
        if rank == 1:
            _stay_idle_then_close(comm, rank, results, 5)
            return
        out = np.zeros(group.plan["group"]["out_bytes"] // 4, dtype=np.float32)
        grad = np.random.default_rng(10 + rank).standard_normal(64 * 64).astype(np.float32)
        comm.all_gather(group, shard.ctypes.data, landing)  # enqueued: returns at once, fails at its deadline
        time.sleep(3)
        later = comm.register_group([[8, 8]], dtype="fp32")  # its first call would meet the peers on the host
        later_landing, _ = comm.alloc(later.plan["group"]["unsharded_bytes"])
        refused = []
        for call in (lambda: comm.all_gather(group, shard.ctypes.data, landing),
                     lambda: comm.reduce_scatter(group, [grad.ctypes.data], out.ctypes.data),
                     lambda: comm.all_gather(later, shard.ctypes.data, later_landing)):
            start = time.monotonic()
            try:
                call()
                refused.append(None)
            except _capi.TideError as e:
                refused.append((int(e.result), e.reason, e.message, time.monotonic() - start))
        calls = comm.stats["all_gather_calls"], comm.stats["reduce_scatter_calls"]
        try:
            comm.synchronize()
            synced = None
        except _capi.TideError as e:
            synced = (int(e.result), e.message)
        try:
            comm.close()
        except _capi.TideError:
            pass  # the drain reports the failure again; the communicator is gone all the same
        results.put((rank, "refused", (refused, calls, synced)))
    except Exception:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", traceback.format_exc()))


def test_calls_after_issued_work_failed_are_refused(tmp_path):
    """A collective whose enqueued work fails later (a wait past its deadline: the peer never made
    the call) leaves the communicator unusable, as one that fails while it is issued does: the next
    all-gather and reduce-scatter are refused, communicator_unusable, naming the failed call,
    without a synchronize in between, and so is the first call on a group registered since, before
    it would meet the peers to compare groups. Before, both returned success and did nothing, their tasks
    skipped on the failed queues."""
    refused, calls, synced = _rank0_outcome_after_rank1_idles(_calls_after_a_failed_call, tmp_path, "refused")
    for r in refused:
        assert r is not None, refused
        result, reason, message, took = r
        assert result == _capi.Result.INTERNAL_ERROR and reason == "communicator_unusable", r
        assert "all_gather#2" in message, r
        assert took < 5, r  # at once: not after the group comparison's wait for the peer (2T + 10 s)
    assert calls == (2, 0), calls  # the refused calls are not counted
    assert synced is not None and synced[0] == _capi.Result.TIMEOUT and "all_gather#2" in synced[1], synced


def _gather_checked(comm, group, seed: int, ranks: int, rank: int) -> int:
    """One all-gather of fresh random shards (every rank's drawn from `seed`) into a fresh, poisoned
    landing: the landing's wrong bytes."""
    region = comm.alloc(group.plan["group"]["unsharded_bytes"])
    return gather_fresh_shards(comm, group, region, [seed], ranks, rank)


def _refused_then_register(rank, store, seed, results):
    try:
        from tide.comm import Communicator

        with Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=1 << 24, fabric="host",
                          store_dir=store, timeout_s=5) as comm:
            small = comm.register_group([[64, 64]])
            shard = np.zeros(small.plan["group"]["shard_bytes"], dtype=np.uint8)
            grads = [np.zeros(64 * 64, dtype=np.uint16)]
            refusals = []
            top = (1 << 24) - small.plan["group"]["unsharded_bytes"]  # where the scratch will lie
            for call in (lambda: comm.all_gather(small, shard.ctypes.data, 1 << 40),
                         lambda: comm.reduce_scatter(small, [grads[0].ctypes.data + 1], 0x1000),
                         lambda: comm.all_gather(small, shard.ctypes.data, top)):
                try:
                    call()
                    refusals.append("not refused")
                except _capi.TideError as e:
                    refusals.append(e.message)
            big = comm.register_group([[2048, 2048]])  # more scratch than `small` alone: accepted
            wrong = _gather_checked(comm, big, seed, 2, rank)
            results.put((rank, "ok", (refusals, wrong)))
    except Exception:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", traceback.format_exc()))


def test_a_refused_call_does_not_size_the_scratch(tmp_path, rng):
    """Calls refused for their arguments (a landing outside the arena, a misaligned gradient, a
    landing where the scratch will lie) before any collective ran used to make the communicator
    and size its scratch for the groups so far: a larger group registered next was refused
    ("register every group before the first collective"). They are checked first now, and the
    larger group registers and gathers."""
    got, codes = run_ranks(_refused_then_register, 2, (str(tmp_path / "store"), rng.randrange(1 << 30)), timeout=60)
    assert codes == [0, 0], (codes, got)
    assert sorted(r for r, _, _ in got) == [0, 1], got  # every rank reported
    for rank, what, detail in got:
        assert what == "ok", detail
        (landing, aligned, in_scratch), wrong = detail
        assert wrong == 0, (rank, wrong)  # the larger group gathers right
        assert "landing offset" in landing and "outside the arena" in landing, detail
        assert "aligned" in aligned, detail
        assert "does not lie in the arena's user area" in in_scratch, detail


def _ranks_fill_their_arenas(rank, store, fill_ranks, results):
    """Each rank of `fill_ranks` allocates user memory up to its arena's end, where the scratch goes."""
    try:
        from tide import _capi
        from tide.comm import Communicator

        arena = 1 << 20
        with Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=arena, fabric="host",
                          store_dir=store, timeout_s=20) as comm:
            group = comm.register_group([[64, 64]], dtype="fp32")
            landing, _ = comm.alloc(group.plan["group"]["unsharded_bytes"])
            if rank in fill_ranks:
                comm.alloc(arena - group.plan["group"]["unsharded_bytes"])  # to the arena's end
            shard = np.ones(64 * 32, dtype=np.float32)
            start = time.monotonic()
            try:
                comm.all_gather(group, shard.ctypes.data, landing)
                comm.synchronize()
                results.put((rank, "not refused", ""))
            except _capi.TideError as e:
                results.put((rank, "refused", (e.reason, e.message, time.monotonic() - start)))
    except Exception:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", traceback.format_exc()))


def test_user_memory_where_one_ranks_scratch_goes_is_refused_on_every_rank(tmp_path):
    """Ranks whose tideCommAlloc calls differ may disagree on whether the scratch fits above user
    memory. Before, the rank it did not fit refused the first collective alone and its peer
    waited in the collective until its deadline, told only that rank 1 never came; now the first
    collective compares where user memory ends, and every rank refuses at once, naming rank 1."""
    got, codes = run_ranks(_ranks_fill_their_arenas, 2, (str(tmp_path / "store"), (1,)), timeout=60)
    assert codes == [0, 0], (codes, got)
    assert sorted(r for r, _, _ in got) == [0, 1], got
    for rank, what, detail in got:
        assert what == "refused", (rank, what, detail)
        reason, message, took = detail
        assert reason == "arena_too_small", detail
        assert "below where user memory ends on rank(s) 1 " in message, message
        assert took < 10, f"rank {rank} refused only after {took:.1f} s (the deadline is 20 s)"


def test_user_memory_where_every_ranks_scratch_goes_is_refused_with_the_same_reason(tmp_path):
    """Where the scratch fits on no rank (or is larger than the arena), the refusal has the reason
    of the some-ranks case, arena_too_small (it came back as bad_argument)."""
    def every_rank_refused(got, codes, needle):
        assert codes == [0, 0], (codes, got)
        for rank, what, detail in got:
            assert what == "refused", (rank, what, detail)
            reason, message, _ = detail
            assert reason == "arena_too_small", detail
            assert needle in message, message

    every_rank_refused(*run_ranks(_ranks_fill_their_arenas, 2, (str(tmp_path / "store"), (0, 1)), timeout=60),
                       "is too small: user memory ends at")
    # Two nodes: a 256 KiB landing fits the 512 KiB arena, the rails' scratch (about 1 MiB) does not.
    every_rank_refused(*run_ranks(_scratch_larger_than_the_arena, 2, (str(tmp_path / "small"),), timeout=60),
                       "arena of 524288 bytes is too small")


def _scratch_larger_than_the_arena(rank, store, results):
    try:
        from tide import _capi
        from tide.comm import Communicator

        with Communicator(nodes=2, gpus_per_node=1, rank=rank, arena_bytes=1 << 19, fabric="host",
                          store_dir=store, timeout_s=20) as comm:
            group = comm.register_group([[256, 256]], dtype="fp32")
            shard = np.ones(128 * 256, dtype=np.float32)
            try:
                comm.all_gather(group, shard.ctypes.data, 0)
                comm.synchronize()
                results.put((rank, "not refused", ""))
            except _capi.TideError as e:
                results.put((rank, "refused", (e.reason, e.message, 0.0)))
    except Exception:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", traceback.format_exc()))


def _mixed_landings(rank, store, collective_first, seed, results):
    try:
        from tide.comm import Communicator

        with Communicator(nodes=2, gpus_per_node=1, rank=rank, arena_bytes=1 << 24, fabric="host",
                          store_dir=store, timeout_s=5) as comm:
            pull = comm.register_group([[64, 64]], dtype="fp32")
            wrong = []
            if collective_first:
                wrong.append(_gather_checked(comm, pull, seed, 2, rank))
            try:
                comm.register_group([[64, 64]], dtype="fp32", landing="push")
                refusal = "not refused"
            except _capi.TideError as e:
                refusal = e.message
            wrong.append(_gather_checked(comm, pull, seed + 1, 2, rank))  # the communicator is still usable
            results.put((rank, "ok", (refusal, wrong)))
    except Exception:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", traceback.format_exc()))


def test_groups_with_different_landings_are_refused_at_register(tmp_path, rng):
    """One communicator holds one Level 2 landing. A push group after a pull group was accepted
    and made every later collective fail (before the first collective), or was refused blaming
    the scratch's size (after it). Now tideGroupRegister refuses it, naming both landings, and
    the pull group goes on working."""
    for collective_first in (False, True):
        got, codes = run_ranks(_mixed_landings, 2, (str(tmp_path / f"store{int(collective_first)}"),
                                                    collective_first, rng.randrange(1 << 30)), timeout=60)
        assert codes == [0, 0], (codes, got)
        assert sorted(r for r, _, _ in got) == [0, 1], got  # every rank reported
        for rank, what, detail in got:
            assert what == "ok", detail
            refusal, wrong = detail
            assert "share one Level 2 landing" in refusal and "push" in refusal and "pull" in refusal, refusal
            assert wrong == [0] * (1 + collective_first), (rank, wrong)  # every gather landed right


def _lane_beside_push(rank, store, lane_first, seed, results):
    try:
        from tide.comm import Communicator

        with Communicator(nodes=2, gpus_per_node=1, rank=rank, arena_bytes=1 << 24, fabric="host",
                          store_dir=store, timeout_s=5) as comm:
            shapes = [[37, 5], [11]]
            if lane_first:
                lane = comm.register_group(shapes, landing="push", rail_lane=True)
            staged = comm.register_group(shapes, landing="push")
            if not lane_first:
                lane = comm.register_group(shapes, landing="push", rail_lane=True)
            # Every rank's gradients (bf16 bits of normal draws), so each rank has the float64 reference.
            every_rank = [[bf16_bits(np.random.default_rng([seed, r, i]).standard_normal(n))
                           for i, n in enumerate((37 * 5, 11))] for r in range(2)]
            grads = every_rank[rank]
            outs, errors = {}, {}
            for name, group in (("staged", staged), ("lane", lane)):
                outs[name] = np.full(group.plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)  # poisoned
                comm.reduce_scatter(group, [g.ctypes.data for g in grads], outs[name].ctypes.data, alpha=0.5)
            comm.synchronize()
            for name, group in (("staged", staged), ("lane", lane)):
                errors[name] = max(rs_rel_errors(group.plan, outs[name], every_rank, rank, 0.5))
            results.put((rank, "ok", (lane.plan["reduce_scatter"]["rail_lane"], lane.plan["reduce_scatter"]["landing"],
                                      staged.plan["reduce_scatter"]["landing"],
                                      outs["staged"].tobytes() == outs["lane"].tobytes(), errors)))
    except Exception:  # noqa: BLE001 - reported to the test
        results.put((rank, "error", traceback.format_exc()))


def test_a_rail_lane_group_registers_beside_push_landing_groups(tmp_path):
    """A rail-lane group has no Level 2 landing, so it mixes with push-landing groups (its plan
    says none): register refused the pair, in either order. Both run, with the same bits, each
    within fp32 rounding of the float64 sum of both ranks' gradients."""
    seed = int(np.random.default_rng().integers(1 << 31))
    for lane_first in (False, True):
        got, codes = run_ranks(_lane_beside_push, 2, (str(tmp_path / f"store{int(lane_first)}"), lane_first, seed),
                               timeout=60)
        assert codes == [0, 0], (codes, got)
        assert sorted(r for r, _, _ in got) == [0, 1], got  # every rank reported
        for rank, what, detail in got:
            assert what == "ok", detail
            on_lane, lane_landing, staged_landing, same_bits, errors = detail
            assert on_lane and lane_landing == "none" and staged_landing == "push", detail
            # Two bf16 terms summed in fp32 and halved: exact but for the fp32 rounding of the sum.
            assert all(e <= 1e-6 for e in errors.values()), (seed, detail)
            assert same_bits, (seed, detail)


class _AfterStringCall:
    """The library as seen by Python, except that `getter` (a call that hands back a string the
    communicator owns) runs `then()` right after the library returned, before the caller has
    copied the string."""

    def __init__(self, lib, getter: str, then):
        self._lib, self._getter, self._then = lib, getter, then

    def __getattr__(self, name):
        real = getattr(self._lib, name)
        if name != self._getter:
            return real

        def call_then(*args):
            result = real(*args)
            self._then()
            return result

        return call_then


@pytest.mark.parametrize("getter", ["tideGroupGetJson", "tideCommGetRails"])
def test_close_on_another_thread_waits_for_a_string_being_read(getter, tmp_path, monkeypatch):
    """Group.plan and Communicator.rails read a string that lives in the communicator after the
    library call returns; a close() on another thread in between would free it under the reader.
    close() now waits until the string is read, and the reader gets it whole."""
    from tide.comm import Communicator

    comm = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 22, fabric="host",
                        store_dir=str(tmp_path), timeout_s=5)
    group = comm.register_group([[48, 8]], dtype="fp32")
    want = group.plan if getter == "tideGroupGetJson" else comm.rails
    closers: list[threading.Thread] = []

    def close_on_another_thread():
        closers.append(threading.Thread(target=comm.close))
        closers[-1].start()
        closers[-1].join(0.5)  # without the hold, destroy (one host rank) ends well within this

    lib = _AfterStringCall(_capi.library(), getter, close_on_another_thread)
    monkeypatch.setattr(_capi, "library", lambda: lib)
    got = group.plan if getter == "tideGroupGetJson" else comm.rails
    assert closers, "the getter was not called"
    closed_before_read = not closers[0].is_alive()
    closers[0].join(30)
    assert not closers[0].is_alive(), "close() never finished"
    assert not closed_before_read, "close() destroyed the communicator while its string was being read"
    assert got == want
    assert not comm.handle  # closed after the read
    with pytest.raises(_capi.TideError, match="Group.plan: the communicator is closed"):
        group.plan  # noqa: B018 - the group went with its communicator: refused, not read


@pytest.mark.parametrize("getter", ["tideGroupGetJson", "tideCommGetRails"])
def test_close_from_a_signal_handler_during_a_string_read_waits_for_the_copy(getter, tmp_path, monkeypatch):
    """A signal handler that closes the communicator, run while this thread is between the library
    call and the copy of its string: with a plain lock the close waited for itself for ever, with
    a reentrant one it freed the string under the copy. Now the close is carried out right after
    the copy: the string comes back whole, and the communicator is closed."""
    from tide.comm import Communicator

    comm = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 22, fabric="host",
                        store_dir=str(tmp_path), timeout_s=5)
    group = comm.register_group([[48, 8]] * 20, dtype="fp32")
    want = group.plan if getter == "tideGroupGetJson" else comm.rails
    handled = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: (comm.close(), handled.append(bool(comm.handle))))
    try:
        monkeypatch.setattr(_capi, "library", lambda lib=_AfterStringCall(_capi.library(), getter, lambda: os.kill(os.getpid(), signal.SIGUSR1)): lib)
        got = group.plan if getter == "tideGroupGetJson" else comm.rails
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert handled == [True], "the handler did not run during the read, or closed at once"
    assert got == want
    assert not comm.handle  # closed once the copy was done


class _HandlerRaised(Exception):
    pass


def test_a_close_deferred_by_a_read_that_raises_is_carried_out_at_once(tmp_path, monkeypatch):
    """A handler that closes during a string read and then raises (the usual clean-up-and-exit
    handler): the deferred close was skipped with the read's exception, and a later, unrelated
    read closed the communicator. It is now carried out as the read unwinds."""
    from tide.comm import Communicator

    comm = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 22, fabric="host",
                        store_dir=str(tmp_path), timeout_s=5)

    def close_then_raise(*_):
        comm.close()
        raise _HandlerRaised()

    previous = signal.signal(signal.SIGUSR1, close_then_raise)
    try:
        monkeypatch.setattr(_capi, "library", lambda lib=_AfterStringCall(
            _capi.library(), "tideCommGetRails", lambda: os.kill(os.getpid(), signal.SIGUSR1)): lib)
        with pytest.raises(_HandlerRaised):
            comm.rails  # noqa: B018 - the read the handler interrupts
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not comm.handle, "the close the handler asked for was dropped with its exception"
    assert not comm._close_pending


def test_a_close_interrupted_by_a_close_on_its_own_thread_finishes(tmp_path, monkeypatch):
    """A signal handler that calls close() while its own thread is inside close() (e.g. SIGTERM
    during a long destroy's drain) waited for a lock that thread held, for ever. It now returns
    at once and the outer close() finishes the job."""
    import threading

    from tide.comm import Communicator

    comm = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 22, fabric="host",
                        store_dir=str(tmp_path), timeout_s=5)
    reentered = []

    class _ReenteringDestroy:
        def __init__(self, lib):
            self._lib = lib

        def __getattr__(self, name):
            real = getattr(self._lib, name)
            if name != "tideCommDestroy":
                return real

            def destroy(handle):
                comm.close()  # what a handler running here would do
                reentered.append(True)
                return real(handle)

            return destroy

    monkeypatch.setattr(_capi, "library", lambda lib=_ReenteringDestroy(_capi.library()): lib)
    closer = threading.Thread(target=comm.close, daemon=True)
    closer.start()
    closer.join(timeout=20)
    assert not closer.is_alive(), "close() re-entered on its own thread waited for itself"
    assert reentered == [True]
    assert not comm.handle


def _child_with_an_inherited_communicator(comm, results) -> None:
    # Runs in a forked child: a call says why it is refused; the child exits normally afterwards.
    try:
        comm.synchronize()
        results.put("not refused")
    except _capi.TideError as e:
        results.put(e.message)


def test_a_forked_child_drops_inherited_communicators(tmp_path):
    """A child made by fork() that exits (or closes) with its parent's communicator destroyed it,
    joining host-fabric threads that do not exist in the child: SIGSEGV. The child now forgets
    them; a call there says so, the child exits 0, and the parent's communicator still works."""
    import multiprocessing

    from tide.comm import Communicator

    with Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 22, fabric="host",
                      store_dir=str(tmp_path), timeout_s=5) as comm:
        ctx = multiprocessing.get_context("fork")
        results = ctx.Queue()
        child = ctx.Process(target=_child_with_an_inherited_communicator, args=(comm, results))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0, f"the child ended with {child.exitcode}"
        message = results.get(timeout=5)
        assert "inherited across fork()" in message, message
        comm.synchronize()  # the parent's is untouched
        assert comm.stats["all_gather_calls"] == 0


def test_real_arguments_out_of_floats_range_and_pointer_arrays(tmp_path):
    """An int past float's range was an OverflowError (alpha, timeout_s), not the documented
    ValueError; a numpy array of gradient pointers failed on its truth value; run_host took
    timeout_s=True as one second."""
    from tide.comm import Communicator
    from tide.host_bench import run_host

    with pytest.raises(ValueError, match="timeout_s"):
        Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                     store_dir=str(tmp_path / "a"), timeout_s=10**400)
    with pytest.raises(TypeError, match="timeout_s"):
        run_host([[8, 4]], nodes=1, gpus_per_node=1, iters=1, timeout_s=True)
    with Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                      store_dir=str(tmp_path / "b"), timeout_s=5) as comm:
        group = comm.register_group([[16, 8], [8]], dtype="fp32")
        rng = np.random.default_rng()
        grads = [rng.standard_normal(128).astype(np.float32), rng.standard_normal(8).astype(np.float32)]
        out = np.full(group.plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)
        with pytest.raises(ValueError, match="alpha"):
            comm.reduce_scatter(group, [g.ctypes.data for g in grads], out.ctypes.data, alpha=10**400)
        comm.reduce_scatter(group, np.array([g.ctypes.data for g in grads], dtype=np.uint64), out.ctypes.data)
        comm.synchronize()
        assert np.array_equal(out, np.concatenate(grads))
