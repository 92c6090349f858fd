"""The communicator API from Python on the multi-process host fabric: one
process per rank, inputs in numpy arrays, outputs checked against numpy
references (byte-exact gather, float64 sums)."""

from __future__ import annotations

import re
import traceback

import numpy as np

import pytest
from landing_rows import landing_view, wrong_landing_bytes
from rs_reference import bf16_bits, rs_rel_errors
from spawned_ranks import run_ranks

SHAPES = [[37, 5], [3], [64, 2, 3], [1, 7]]


def _inputs(rank: int, seed: int, n: int):
    rng = np.random.default_rng([seed, rank])
    grads = [bf16_bits(rng.standard_normal(int(np.prod(s)))) for s in SHAPES]
    return grads


def _rank_main(rank, nodes, gpus, store, seed, landing, landing_queue, check_calls, errors):
    try:
        import os

        if landing_queue:
            os.environ["TIDE_RS_LANDING_QUEUE"] = landing_queue  # read when the communicator is made
        if check_calls:
            os.environ["TIDE_CHECK_CALLS"] = "1"  # so is this
        from tide.comm import Communicator

        n = nodes * gpus
        with Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=1 << 22, fabric="host",
                          store_dir=store, timeout_s=20) as comm:
            group = comm.register_group(SHAPES, landing=landing)
            assert group.plan["reduce_scatter"]["landing"] == (landing if nodes > 1 else "none")
            plan = group.plan
            shard_bytes = plan["group"]["shard_bytes"]
            landing_off, landing_ptr = comm.alloc(plan["group"]["unsharded_bytes"])
            landing = landing_view(landing_ptr, plan["group"]["unsharded_bytes"])
            shards = [np.random.default_rng([seed, 1000 + r]).integers(0, 256, shard_bytes, dtype=np.uint8)
                      for r in range(n)]
            for call in range(2):
                landing[:] = 0xA5
                comm.all_gather(group, shards[rank].ctypes.data, landing_off)
                grads = _inputs(rank, seed + call, n)
                # The second call accumulates into what the output held (a gradient accumulation).
                accumulate = call == 1
                if accumulate:
                    before = np.random.default_rng([seed, 2000 + rank]).standard_normal(
                        plan["group"]["out_bytes"] // 4).astype(np.float32)
                    out = before.copy()
                else:
                    before, out = None, np.full(plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)
                comm.reduce_scatter(group, [g.ctypes.data for g in grads], out.ctypes.data, alpha=0.5,
                                    accumulate=accumulate)
                comm.synchronize()
                assert wrong_landing_bytes(plan, landing, shards) == 0, f"AG call {call}"
                # Reduce-scatter against a float64 sum over every rank's gradients.
                all_grads = [_inputs(r, seed + call, n) for r in range(n)]
                for i, err in enumerate(rs_rel_errors(plan, out, all_grads, rank, 0.5, before)):
                    assert err <= 1e-5, f"RS param {i} (accumulate={accumulate}): max rel err {err}"
            # What the fabric did over both calls: every all-gather copies this rank's shard into all
            # n landings; rails carry bytes only across nodes; the host fabric builds no copy graphs.
            stats = comm.stats
            assert stats["copy_bytes"] >= 2 * n * shard_bytes and stats["copy_descriptors"] > 0, stats
            assert stats["sum_elems"] > 0, stats
            assert (stats["rail_bytes"] > 0 and stats["rail_puts"] > 0) == (nodes > 1), stats
            assert stats["copy_graph_launches"] == stats["copy_graphs_built"] == 0, stats
            # Two calls of each collective, each with some host time inside it.
            assert stats["all_gather_calls"] == stats["reduce_scatter_calls"] == 2, stats
            assert stats["all_gather_host_ns"] > 0 and stats["reduce_scatter_host_ns"] > 0, stats
    except Exception:  # reported to the parent, which fails the test
        errors.put(f"rank {rank}: {traceback.format_exc()}")


# TIDE_RS_LANDING_QUEUE=net: landings behind the sends (Algorithm 1's one network stream), not on
# their own queue; the results are checked the same way. TIDE_CHECK_CALLS=1: every call compared
# across the ranks first (test_comm_call_agreement.py), which must change no result.
@pytest.mark.parametrize("nodes,gpus,landing,landing_queue,check_calls", [
    (2, 2, "pull", "", False), (1, 4, "pull", "", False), (4, 1, "pull", "", False), (2, 2, "push", "", False),
    (2, 2, "pull", "net", False), (3, 1, "push", "own", False), (2, 2, "pull", "", True)])
def test_collectives_across_processes(nodes, gpus, landing, landing_queue, check_calls, tmp_path, rng, capfd):
    messages, codes = run_ranks(_rank_main, nodes * gpus, (nodes, gpus, str(tmp_path), rng.seed_value, landing,
                                                           landing_queue, check_calls), timeout=120)
    assert not messages, "\n".join(messages)
    assert codes == [0] * (nodes * gpus), codes
    # The setting took (results alone would pass with it ignored): each rank's communicator says so.
    said = capfd.readouterr().err.count("[tide] TIDE_RS_LANDING_QUEUE=net:")
    assert said == (nodes * gpus if landing_queue == "net" else 0), said


def test_an_unknown_landing_queue_is_refused(tmp_path, monkeypatch):
    from tide import _capi
    from tide.comm import Communicator

    monkeypatch.setenv("TIDE_RS_LANDING_QUEUE", "caller")
    with pytest.raises(_capi.TideError, match="TIDE_RS_LANDING_QUEUE=caller"):
        Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                     store_dir=str(tmp_path / "store"), timeout_s=5)


def test_cuda_fabric_reports_unavailable_without_cuda():
    from tide import _capi
    from tide.comm import has_cuda, unique_id

    if has_cuda():
        pytest.skip("this build has the CUDA fabric; the GPU script tests it")
    with pytest.raises(_capi.TideError) as info:
        unique_id()
    assert info.value.result == _capi.Result.UNAVAILABLE



# ------------------------------------------------------------------ read-done

def _read_done_rank(rank, nodes, gpus, store, seed, fault, results):
    """Reduce-scatter, wait for read-done, poison the gradients at once (NaN),
    then finish: the output must be the sum of the unpoisoned gradients."""
    try:
        import os

        if fault:
            os.environ["TIDE_TEST_FAULT"] = fault  # read when the communicator is built
        from tide.comm import Communicator

        n = nodes * gpus
        arena = 1 << 22
        with Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=arena, fabric="host",
                          store_dir=store, timeout_s=20) as comm:
            assert comm.reserved_bytes() >= arena, comm.reserved_bytes()
            # Multi-process host worlds have one-sided rails only: the choice is reported.
            assert comm.rails.startswith("host-puts"), comm.rails
            group = comm.register_group(SHAPES)
            plan = group.plan
            mismatches = 0
            for call in range(2):
                grads = _inputs(rank, seed + call, n)
                out = np.full(plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)
                comm.reduce_scatter(group, [g.ctypes.data for g in grads], out.ctypes.data)
                comm.wait_inputs_read()
                for g in grads:
                    g[:] = 0x7FC0  # bf16 NaN: any read from here on shows up in the output
                comm.synchronize()
                all_grads = [_inputs(r, seed + call, n) for r in range(n)]
                mismatches += sum(err > 1e-5 for err in rs_rel_errors(plan, out, all_grads, rank, 1.0))
            results.put((rank, "ok" if mismatches == 0 else f"{mismatches} parameters wrong"))
    except Exception:
        results.put((rank, f"error: {traceback.format_exc()}"))


def _read_done_job(nodes, gpus, store, seed, fault=""):
    verdicts, codes = run_ranks(_read_done_rank, nodes * gpus, (nodes, gpus, store, seed, fault), timeout=120)
    return dict(verdicts), codes


@pytest.mark.parametrize("nodes,gpus", [(2, 2), (3, 1), (1, 2)])
def test_gradients_may_be_overwritten_at_read_done(nodes, gpus, tmp_path, rng):
    """wait_inputs_read() is honest: gradients overwritten with NaN right
    after it (the network phase may still run) leave every output exact."""
    verdicts, codes = _read_done_job(nodes, gpus, str(tmp_path), rng.seed_value)
    assert verdicts == {r: "ok" for r in range(nodes * gpus)}, verdicts
    assert codes == [0] * (nodes * gpus), codes


def test_an_early_read_done_fails_the_overwrite_test(tmp_path, rng):
    """The same check against a communicator that reports read-done before
    reading (rank 0's reads are also delayed): the poison reaches the outputs."""
    verdicts, _ = _read_done_job(2, 2, str(tmp_path), rng.seed_value, fault="release-grads-early")
    # Detected as wrong outputs, not as some other failure (a refused fault would also be "not ok").
    assert len(verdicts) == 4 and not any(v.startswith("error:") for v in verdicts.values()), verdicts
    assert any(v.endswith("parameters wrong") for v in verdicts.values()), verdicts


def _buffers_in_the_scratch_rank(rank, store, seed, results):
    """Gradients or outputs in the collectives' scratch (which each call rewrites while it
    reads the gradients), or across the arena's end, are refused on the rank that passes
    them, before the ranks compare the call: a retry with good buffers pairs with the
    peers' and its outputs are the float64 sums. Before, an output in the scratch was
    accepted and came out wrong on other ranks, every call reporting success."""
    try:
        from tide import _capi
        from tide.comm import Communicator
        from tide.plan import scratch_bytes

        ranks, arena = 2, 1 << 20
        shapes = [[64, 64]]
        with Communicator(nodes=1, gpus_per_node=ranks, rank=rank, arena_bytes=arena, fabric="host",
                          store_dir=store, timeout_s=20) as comm:
            group = comm.register_group(shapes, dtype="fp32")
            need = scratch_bytes([{"shapes": shapes, "dtype": "fp32", "nodes": 1, "gpus_per_node": ranks}])
            scratch = (arena - need) // 4096 * 4096
            assert need > 0, "two local ranks stage through the scratch"
            offset, ptr = comm.alloc(4096)
            base = ptr - offset  # the arena's first byte
            rng = np.random.default_rng([seed, rank])
            grad = rng.standard_normal(64 * 64).astype(np.float32)
            out = np.full(group.plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)
            refused = []
            for what, grad_ptr, out_ptr in (("out in the scratch", grad.ctypes.data, base + scratch),
                                            ("gradient in the scratch", base + arena - grad.nbytes, out.ctypes.data),
                                            ("out across the arena's end", grad.ctypes.data, base + arena - 8),
                                            ("out over its rows of the gradient", grad.ctypes.data,
                                             grad.ctypes.data + rank * out.nbytes)):
                try:
                    comm.reduce_scatter(group, [grad_ptr], out_ptr)
                    refused.append(f"{what}: accepted")
                except _capi.TideError as e:
                    refused.append(f"{what}: {e}")
            comm.reduce_scatter(group, [grad.ctypes.data], out.ctypes.data)
            comm.synchronize()
            every = [np.random.default_rng([seed, r]).standard_normal(64 * 64).astype(np.float32) for r in range(ranks)]
            want = np.sum([g.astype(np.float64) for g in every], axis=0).reshape(64, 64)[32 * rank:32 * (rank + 1)]
            exact = np.array_equal(out, want.ravel().astype(np.float32))
            # The same for an all-gather's landing: refused on every rank alike, saying where.
            try:
                comm.all_gather(group, grad[:32 * 64].ctypes.data, scratch - 4096)
                refused.append("landing in the scratch: accepted")
            except _capi.TideError as e:
                refused.append(f"landing in the scratch: {e}")
            results.put((rank, (refused, exact)))
    except Exception:
        results.put((rank, f"error: {traceback.format_exc()}"))


def test_reduce_scatter_buffers_in_the_scratch_or_across_the_arena_are_refused(tmp_path, rng):
    got, codes = run_ranks(_buffers_in_the_scratch_rank, 2, (str(tmp_path), rng.seed_value), timeout=120)
    assert codes == [0, 0], (codes, got)
    assert sorted(r for r, _ in got) == [0, 1], got  # every rank reported
    for rank, verdict in got:
        assert not isinstance(verdict, str), verdict
        refused, exact = verdict
        assert "out overlaps the collectives' scratch" in refused[0], refused
        assert "the gradient of parameter 0 overlaps the collectives' scratch" in refused[1], refused
        assert "out starts inside the arena and runs past its end" in refused[2], refused
        assert "out overlaps the gradient of parameter 0" in refused[3], refused
        assert "does not lie in the arena's user area [0, " in refused[4], refused
        assert exact, f"rank {rank}: the retry's output is not the sum"


def test_wait_inputs_read_before_any_reduce_scatter_is_refused(tmp_path):
    from tide import _capi
    from tide.comm import Communicator

    with Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                      store_dir=str(tmp_path / "store"), timeout_s=5) as comm, \
            pytest.raises(_capi.TideError, match="no reduce-scatter"):
        comm.wait_inputs_read()


def test_wait_inputs_read_after_a_refused_reduce_scatter_is_refused(tmp_path, rng):
    """tide.h: refused after a reduce-scatter that failed, a refused argument included. It used to
    succeed on the previous call's read-done point when the refused call never reached the fabric."""
    import ctypes

    from tide import _capi
    from tide.comm import Communicator

    with Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                      store_dir=str(tmp_path / "store"), timeout_s=5) as comm:
        group = comm.register_group([[16, 8]], dtype="fp32")
        grad = np.random.default_rng(rng.seed_value).standard_normal(128).astype(np.float32)
        out = np.full(group.plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)
        comm.reduce_scatter(group, [grad.ctypes.data], out.ctypes.data)
        comm.wait_inputs_read()  # the read-done point of a reduce-scatter that ran
        with pytest.raises(_capi.TideError, match="out overlaps the gradient of parameter 0"):
            comm.reduce_scatter(group, [grad.ctypes.data], grad.ctypes.data)
        with pytest.raises(_capi.TideError, match="the last reduce-scatter failed"):
            comm.wait_inputs_read()
        comm.reduce_scatter(group, [grad.ctypes.data], out.ctypes.data)  # a call that runs gives one again
        comm.wait_inputs_read()
        # Refused before any argument but the communicator is looked at: a null or unknown group
        # (through the C API: the binding refuses None itself).
        grads = (ctypes.c_void_p * 1)(grad.ctypes.data)
        for bad_group in (_capi.GroupHandle(), _capi.GroupHandle(0x10)):
            assert _capi.library().tideReduceScatter(comm.handle, bad_group, grads, out.ctypes.data, 1.0, 0,
                                                     None) == _capi.Result.INVALID_ARGUMENT
            with pytest.raises(_capi.TideError, match="the last reduce-scatter failed"):
                comm.wait_inputs_read()
            comm.reduce_scatter(group, [grad.ctypes.data], out.ctypes.data)
            comm.wait_inputs_read()
        comm.synchronize()
        assert np.array_equal(out, grad)


def test_wait_inputs_read_after_many_later_calls(tmp_path):
    """A read-done event held across more calls than the fabric keeps events for was refused as
    "unknown or recycled"; the wait now drains the communicator instead, and succeeds."""
    from tide.comm import Communicator

    with Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 22, fabric="host",
                      store_dir=str(tmp_path / "store"), timeout_s=5) as comm:
        group = comm.register_group([[16, 8]], dtype="fp32")
        grad = np.arange(128, dtype=np.float32)
        out = np.full(group.plan["group"]["out_bytes"] // 4, np.nan, dtype=np.float32)
        comm.reduce_scatter(group, [grad.ctypes.data], out.ctypes.data)
        shard = np.zeros(128, dtype=np.float32)
        landing, _ = comm.alloc(4 * 128)
        for _ in range(600):
            comm.all_gather(group, shard.ctypes.data, landing)
        comm.synchronize()
        comm.wait_inputs_read()
        assert np.array_equal(out, grad)


def _lone_rank(rank, store, timeout_s, results):
    import time

    from tide.comm import Communicator

    start = time.monotonic()
    try:
        Communicator(nodes=1, gpus_per_node=2, rank=0, arena_bytes=1 << 20, fabric="host", store_dir=store,
                     timeout_s=timeout_s)
        results.put(("joined", 0.0))
    except Exception as e:  # noqa: BLE001 - reported
        results.put((str(e), time.monotonic() - start))


def _pair_rank(rank, store, results):
    from tide.comm import Communicator

    try:
        Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=1 << 20, fabric="host", store_dir=store,
                     timeout_s=1.0).close()
        results.put((rank, "joined"))
    except Exception as e:  # noqa: BLE001 - reported
        results.put((rank, str(e)))


def test_bootstrap_fails_on_the_callers_deadline(tmp_path):
    """A peer that never comes: the bootstrap gave up after a fixed 60 s whatever timeout_s said;
    now after the host deadline of timeout_s (2 T + 10 s). A whole job started next in the same
    store directory is misdirected by the keys the first one left: each of its ranks fails, saying
    that every job needs a fresh store directory (it once blamed a rank that gave up)."""
    got, codes = run_ranks(_lone_rank, 1, (str(tmp_path), 1.0), timeout=90)
    assert codes == [0], codes
    ((message, seconds),) = got
    assert "timed out" in message and seconds < 30, (message, seconds)
    got, codes = run_ranks(_pair_rank, 2, (str(tmp_path),), timeout=90)
    verdicts = dict(got)
    assert len(verdicts) == 2 and all("each job a fresh store directory" in v for v in verdicts.values()), verdicts


def _claims_rank_zero(rank, store, results):
    _pair_rank(0, store, results)


def test_two_processes_given_one_rank_are_told_so(tmp_path):
    """Both processes of a two-rank job given rank 0: each waits for rank 1, which never comes, and
    fails at its deadline with the causes that fit, two processes given the same rank among them
    (it used to point at an earlier job's keys alone)."""
    got, codes = run_ranks(_claims_rank_zero, 2, (str(tmp_path),), timeout=90)
    assert codes == [0, 0], (codes, got)
    assert len(got) == 2 and all("timed out" in v and "two processes given the same rank" in v
                                 for _, v in got), got


def _topology_rank(rank, store, results):
    from tide.comm import Communicator

    nodes, gpus = ((1, 2), (2, 1))[rank]  # both 2 ranks, but not the same topology
    try:
        Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=1 << 20, fabric="host",
                     store_dir=store, timeout_s=5)
        results.put((rank, "joined"))
    except Exception as e:  # noqa: BLE001 - reported
        results.put((rank, str(e)))


def test_ranks_naming_different_topologies_are_refused(tmp_path):
    """M1L2 on one rank, M2L1 on the other: the same rank count, so they met and then timed out
    on a message that named no cause; the segment header now carries the topology."""
    got, codes = run_ranks(_topology_rank, 2, (str(tmp_path),), timeout=90)
    verdicts = dict(got)
    assert any("every rank must name the same topology" in v for v in verdicts.values()), verdicts


def _stopping_rank(rank, store, how, results):
    import os
    import signal
    import time

    from tide.comm import Communicator

    shapes = [[37, 5], [3]]
    try:
        with Communicator(nodes=1, gpus_per_node=3, rank=rank, arena_bytes=1 << 22, fabric="host", store_dir=store,
                          timeout_s=2.0) as comm:
            group = comm.register_group(shapes)
            landing, _ = comm.alloc(group.plan["group"]["unsharded_bytes"])
            shard = np.zeros(group.plan["group"]["shard_bytes"], dtype=np.uint8)
            for call in range(4):
                if rank == 2 and call == 2:
                    if how == "killed":
                        os.kill(os.getpid(), signal.SIGKILL)
                    time.sleep(8)  # alive, but never makes this call
                    results.put((rank, "skipped"))
                    return
                comm.all_gather(group, shard.ctypes.data, landing)
                comm.synchronize()
        results.put((rank, "completed"))
    except Exception as e:  # noqa: BLE001 - reported
        results.put((rank, str(e)))


@pytest.mark.parametrize("how", ["skipped", "killed"])
def test_a_timeout_names_the_ranks_behind_and_gone(how, tmp_path):
    """Rank 2 of three skips a call (or is killed before it). The wait that times out first is
    often another survivor's, stuck behind rank 2 itself, so the message named a live rank; it now
    also lists the ranks that entered fewer calls. A killed rank 2 is named as gone: a wait on it
    notices its process has exited (before any deadline), or a timeout lists it among the exited."""
    got, codes = run_ranks(_stopping_rank, 3, (str(tmp_path), how), timeout=60)
    verdicts = dict(got)
    for rank in (0, 1):
        message = verdicts[rank]
        assert "timed out" in message or "a peer failed" in message, verdicts
        if how == "skipped":
            assert "ranks behind this one" in message and ": 2 (2)" in message, message
        else:
            assert re.search(r"from rank 2, whose process \(pid \d+\) has exited", message) or \
                "ranks whose process has exited: 2" in message, message
