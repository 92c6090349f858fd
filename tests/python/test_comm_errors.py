"""The communicator API refuses bad input with a clear error, never a crash
(one CPU rank on the host fabric)."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from landing_rows import landing_view, wrong_landing_bytes
from rs_reference import bf16_bits, rs_rel_errors

from tide import _capi
from tide.comm import Communicator
from tide.plan import build_plan_config


def _comm(tmp_path, arena=1 << 20, nodes=1, gpus=1, rank=0):
    return Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=arena, fabric="host",
                        store_dir=str(tmp_path / "store"), timeout_s=5)


def test_bad_config_is_refused(tmp_path):
    for kwargs in ({"arena": 0}, {"rank": 1}, {"gpus": 9}):
        with pytest.raises(_capi.TideError) as info:
            _comm(tmp_path, **kwargs)
        assert info.value.result in (_capi.Result.INVALID_ARGUMENT,)
    # More than 1024 nodes: refused at once (it waited for 1025 peers, then refused the first collective).
    with pytest.raises(_capi.TideError, match="nodes 1025 above 1024") as info:
        _comm(tmp_path, nodes=1025)
    assert info.value.result == _capi.Result.INVALID_ARGUMENT
    # A deadline must stay a finite number of nanoseconds: infinity once put every wait's deadline in the past.
    for timeout in (float("inf"), float("nan"), 1e10, -1.0):
        with pytest.raises(_capi.TideError, match="timeoutSeconds") as info:
            Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                         store_dir=str(tmp_path / "store"), timeout_s=timeout)
        assert info.value.result == _capi.Result.INVALID_ARGUMENT
    with pytest.raises(_capi.TideError, match="arenaBytes"):
        _comm(tmp_path, arena=(1 << 62))
    with pytest.raises(ValueError):
        Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="nvlink")
    with pytest.raises(ValueError):
        Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host")  # no store


def test_alloc_past_the_arena_is_refused(tmp_path):
    with _comm(tmp_path, arena=1 << 16) as comm:
        off, ptr = comm.alloc(4096)
        assert off == 0 and ptr
        with pytest.raises(_capi.TideError, match="do not fit"):
            comm.alloc(1 << 20)
        with pytest.raises(_capi.TideError):
            comm.alloc(0)
        # A size near INT64_MAX must not wrap past the check (it once returned a negative offset next).
        with pytest.raises(_capi.TideError, match="do not fit"):
            comm.alloc((1 << 63) - 1)
        off, _ = comm.alloc(4096)
        assert off == 4096, off


def test_group_for_another_topology_is_refused(tmp_path):
    """Through the raw C API: the Python wrapper always plans for the communicator's topology."""
    import ctypes

    from tide.plan import build_plan_config

    with _comm(tmp_path) as comm:
        config, _alive = build_plan_config([[4, 4]], nodes=2, gpus_per_node=1)
        handle = _capi.GroupHandle()
        with pytest.raises(_capi.TideError, match="topology"):
            _capi.check(_capi.library().tideGroupRegister(comm.handle, ctypes.byref(config), ctypes.byref(handle)))


def test_group_of_another_communicator_is_refused(tmp_path):
    """Group handles belong to the communicator that registered them."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with _comm(tmp_path / "a") as a, _comm(tmp_path / "b") as b:
        group = a.register_group([[8, 4], [3]])
        b.register_group([[8, 4], [3]])  # the same shapes: its plan would fit b as well
        off, _ = b.alloc(group.plan["group"]["unsharded_bytes"])
        shard = np.ones(group.plan["group"]["shard_bytes"], dtype=np.uint8)
        out = np.zeros(group.plan["group"]["out_bytes"] // 4, dtype=np.float32)
        grads = [np.ones(n, dtype=np.uint16) for n in (32, 3)]
        with pytest.raises(_capi.TideError, match="another communicator"):
            b.all_gather(group, shard.ctypes.data, off)
        with pytest.raises(_capi.TideError, match="another communicator"):
            b.reduce_scatter(group, [g.ctypes.data for g in grads], out.ctypes.data)
        # The C API refuses it too (the binding refuses first): called directly.
        with pytest.raises(_capi.TideError, match="tideAllGather: the group was registered on another"):
            _capi.check(b._lib.tideAllGather(b.handle, group.handle, shard.ctypes.data, off, 0))
        ptrs = (ctypes.c_void_p * 2)(*[g.ctypes.data for g in grads])
        with pytest.raises(_capi.TideError, match="tideReduceScatter: the group was registered on another"):
            _capi.check(b._lib.tideReduceScatter(b.handle, group.handle, ptrs, out.ctypes.data, 1.0, 0, 0))


def test_a_closed_communicators_group_is_refused_not_taken_for_a_later_ones(tmp_path):
    """The C library knows handles by address, so a communicator made after another closed may
    get its address, and the closed one's group handle its group's: the binding refuses such a
    group, and a closed communicator's calls, by name (before, the call ran the later group's
    plan on buffers sized for the old one, and crashed)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _comm(tmp_path / "a")
    old_group = first.register_group([[8, 4]])
    first.close()
    with pytest.raises(_capi.TideError, match="all_gather: the communicator is closed"):
        first.all_gather(old_group, 0, 0)
    with pytest.raises(_capi.TideError, match="Group.plan: the communicator is closed"):
        old_group.plan
    with _comm(tmp_path / "b") as later:
        group = later.register_group([[1000, 4]])
        grads = [np.ones(32, dtype=np.uint16)]
        out = np.zeros(32, dtype=np.float32)
        with pytest.raises(_capi.TideError, match="reduce_scatter: the group was registered on another"):
            later.reduce_scatter(old_group, [g.ctypes.data for g in grads], out.ctypes.data)
        assert group.plan["group"]["out_bytes"] == 1000 * 4 * 4  # the later group is untouched


def test_reduce_scatter_arguments_the_binding_would_change_are_refused(tmp_path, rng):
    """accumulate must be a bool ("no" is truthy), and alpha must survive fp32, the C API's
    type, as neither 0 nor infinity unless it was one. An alpha of 0 is kept: accumulating adds
    nothing (the output keeps its bits), and without accumulating the output is all zeros."""
    rng = np.random.default_rng(rng.seed_value)
    with _comm(tmp_path) as comm:
        group = comm.register_group([[8, 4]], dtype="fp32")
        grads = [rng.standard_normal(32).astype(np.float32)]
        out = rng.standard_normal(32).astype(np.float32)
        before = out.copy()
        call = lambda **kw: comm.reduce_scatter(group, [grads[0].ctypes.data], out.ctypes.data, **kw)  # noqa: E731
        with pytest.raises(TypeError, match="accumulate must be a bool, got 'no'"):
            call(accumulate="no")
        for alpha, says in ((1e-50, "alpha 1e-50 is 0 in fp32"), (1e39, "alpha 1e+39 is inf in fp32"),
                            (float("nan"), "alpha nan is nan in fp32"), (-float("inf"), "alpha -inf is -inf")):
            with pytest.raises(ValueError, match=re.escape(says)):
                call(alpha=alpha)
        assert np.array_equal(out, before)  # every refusal left the output alone
        call(alpha=0.0, accumulate=True)  # 0 stays 0: out + 0 * sum
        comm.synchronize()
        assert out.tobytes() == before.tobytes()
        out[:] = np.nan  # poison: an unwritten element stays NaN
        call(alpha=0.0, accumulate=False)
        comm.synchronize()
        assert np.all(out == 0), out


def test_wrong_gradient_count_null_shard_and_bad_landing(tmp_path):
    with _comm(tmp_path) as comm:
        group = comm.register_group([[8, 4], [3]])
        off, _ = comm.alloc(group.plan["group"]["unsharded_bytes"])
        with pytest.raises(ValueError, match="gradient pointers"):
            comm.reduce_scatter(group, [1], 1)
        # A null shard on one node means in place (the shard already in the own landing rows):
        # accepted, and on one rank nothing moves. Across nodes it is refused (C++ host tests).
        comm.all_gather(group, 0, off)
        shard = np.zeros(group.plan["group"]["shard_bytes"], dtype=np.uint8)
        with pytest.raises(_capi.TideError, match="landing"):
            comm.all_gather(group, shard.ctypes.data, 1 << 30)  # outside the arena
        with pytest.raises(_capi.TideError, match="landing"):  # an offset whose end wraps around
            comm.all_gather(group, shard.ctypes.data, (1 << 63) - 100)
        comm.synchronize()


def test_shard_overlapping_its_landing_is_refused(tmp_path, rng):
    """Peers write a call's landing while its shard is read for them: a shard in the arena that
    overlaps the landing (by its first or its last byte) is refused before the call is counted;
    one in the arena's next allocation is gathered, and the communicator stays usable."""
    import ctypes

    with _comm(tmp_path) as comm:
        group = comm.register_group([[8, 4], [3]], dtype="fp32")
        unsharded, shard_bytes = group.plan["group"]["unsharded_bytes"], group.plan["group"]["shard_bytes"]
        comm.alloc(4096)  # room before the landing, so that a shard can end inside it from below
        off, landing = comm.alloc(unsharded)
        _, after = comm.alloc(shard_bytes)
        assert off >= shard_bytes and after >= landing + unsharded
        for bad in (landing, landing + unsharded - 1, landing - shard_bytes + 1):
            with pytest.raises(_capi.TideError, match="overlaps this call's landing") as info:
                comm.all_gather(group, bad, off)
            assert info.value.result == _capi.Result.INVALID_ARGUMENT
        assert comm.stats["all_gather_calls"] == 0
        data = rng.randbytes(shard_bytes)
        ctypes.memmove(after, data, shard_bytes)
        ctypes.memset(landing, 0xA5, unsharded)  # poison: an unwritten byte fails
        comm.all_gather(group, after, off)
        comm.synchronize()
        assert ctypes.string_at(landing, shard_bytes) == data
        assert comm.stats["all_gather_calls"] == 1


def test_misaligned_reduce_scatter_pointers_are_refused(tmp_path, rng):
    """The sum kernels load and store whole elements: on a GPU a misaligned one faults."""
    rng = np.random.default_rng(rng.seed_value)
    with _comm(tmp_path) as comm:
        group = comm.register_group([[8, 4], [3]])  # bf16 gradients
        out = np.full(group.plan["group"]["out_bytes"] // 4 + 1, np.nan, dtype=np.float32)  # poisoned
        grads = [bf16_bits(rng.standard_normal(n + 1)) for n in (32, 3)]  # one spare element each
        ptrs = [g.ctypes.data for g in grads]
        with pytest.raises(_capi.TideError, match="out is not 4-byte aligned"):
            comm.reduce_scatter(group, ptrs, out.ctypes.data + 2)
        with pytest.raises(_capi.TideError, match="parameter 1 is not 2-byte aligned"):
            comm.reduce_scatter(group, [ptrs[0], ptrs[1] + 1], out.ctypes.data)
        assert np.isnan(out).all()  # refused before anything was written
        comm.reduce_scatter(group, ptrs, out.ctypes.data)  # aligned: runs
        comm.synchronize()
        # One rank: its output is its own gradients, in fp32 (exact from bf16).
        assert max(rs_rel_errors(group.plan, out, [grads], 0, 1.0)) == 0.0


def test_a_scale_that_is_not_finite_is_refused(tmp_path, rng):
    """alpha NaN or infinite would turn every output element NaN or infinite: the C API refuses
    it before the call (called directly: the binding refuses first), the output left as it was."""
    with _comm(tmp_path) as comm:
        group = comm.register_group([[8, 4], [3]], dtype="fp32")
        rng = np.random.default_rng(rng.seed_value)
        out = rng.standard_normal(group.plan["group"]["out_bytes"] // 4).astype(np.float32)
        before = out.copy()
        grads = [rng.standard_normal(n).astype(np.float32) for n in (32, 3)]
        ptrs = (ctypes.c_void_p * 2)(*[g.ctypes.data for g in grads])
        for alpha in (float("nan"), float("inf"), -float("inf")):
            with pytest.raises(_capi.TideError, match="alpha .* is not finite"):
                _capi.check(comm._lib.tideReduceScatter(comm.handle, group.handle, ptrs, out.ctypes.data, alpha, 0, 0))
        assert np.array_equal(out, before)
        comm.reduce_scatter(group, [g.ctypes.data for g in grads], out.ctypes.data, alpha=0.5)  # finite: runs
        comm.synchronize()
        want = 0.5 * np.concatenate([g.astype(np.float64) for g in grads])
        np.testing.assert_allclose(out, want.astype(np.float32), rtol=0, atol=0)


def test_groups_registered_after_the_first_collective_that_fit(tmp_path, rng):
    rng = np.random.default_rng(rng.seed_value)
    with _comm(tmp_path, nodes=1, gpus=1) as comm:
        small = comm.register_group([[4, 4]])
        off, ptr = comm.alloc(small.plan["group"]["unsharded_bytes"])
        landing = landing_view(ptr, small.plan["group"]["unsharded_bytes"])
        landing[:] = 0xA5
        shard = rng.integers(0, 256, small.plan["group"]["shard_bytes"], dtype=np.uint8)
        comm.all_gather(small, shard.ctypes.data, off)
        comm.synchronize()
        assert wrong_landing_bytes(small.plan, landing, [shard]) == 0
        # One rank uses no staging and no blocks, so any later group fits.
        later = comm.register_group([[64, 64]])
        assert later.plan["group"]["params"] == 1


def test_rails_query_reports_the_choice_and_refuses_null(tmp_path):
    import ctypes

    with _comm(tmp_path) as comm:
        assert comm.rails.startswith("host-puts"), comm.rails
        lib = _capi.library()
        # The answer is kept by the communicator: the same string, at the same address, each time.
        first, again = ctypes.c_char_p(), ctypes.c_char_p()
        assert lib.tideCommGetRails(comm.handle, ctypes.byref(first)) == _capi.Result.SUCCESS
        assert lib.tideCommGetRails(comm.handle, ctypes.byref(again)) == _capi.Result.SUCCESS
        address = ctypes.cast(first, ctypes.c_void_p).value
        assert address is not None and address == ctypes.cast(again, ctypes.c_void_p).value
        assert first.value.decode() == comm.rails
        assert lib.tideCommGetRails(comm.handle, None) == _capi.Result.INVALID_ARGUMENT
        assert lib.tideCommGetRails(None, ctypes.byref(ctypes.c_char_p())) == _capi.Result.INVALID_ARGUMENT


def test_stats_start_at_zero_and_refuse_null(tmp_path):
    import ctypes

    with _comm(tmp_path) as comm:
        # Nothing issued yet: every count is zero (a fresh communicator's fabric has done nothing).
        assert set(comm.stats.values()) == {0}, comm.stats
        lib = _capi.library()
        assert lib.tideCommGetStats(comm.handle, None) == _capi.Result.INVALID_ARGUMENT
        assert lib.tideCommGetStats(None, ctypes.byref(_capi.CommStats())) == _capi.Result.INVALID_ARGUMENT


def test_cuda_ipc_communicator_refuses_bad_input(tmp_path):
    # fabric="cuda-ipc" (tests: ranks sharing GPUs through CUDA IPC) needs a store directory.
    with pytest.raises(ValueError):
        Communicator(nodes=1, gpus_per_node=2, rank=0, arena_bytes=1 << 20, fabric="cuda-ipc")
    with pytest.raises(_capi.TideError) as info:  # bad rank: refused before any CUDA call
        Communicator(nodes=1, gpus_per_node=2, rank=2, arena_bytes=1 << 20, fabric="cuda-ipc",
                     store_dir=str(tmp_path / "store"))
    assert info.value.result == _capi.Result.INVALID_ARGUMENT


def _has_cuda_gpu():
    import torch
    return torch.cuda.is_available()


# On a machine with GPUs the same call succeeds; tests/gpu/check_collectives.py --ipc runs that path.
@pytest.mark.skipif(_has_cuda_gpu(), reason="this machine has a GPU; the no-GPU error cannot arise")
def test_cuda_ipc_communicator_on_a_machine_without_gpus_says_so(tmp_path):
    # An error that says so, or (a build without the CUDA fabric) that the fabric is unavailable.
    with pytest.raises(_capi.TideError) as info:
        Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="cuda-ipc",
                     store_dir=str(tmp_path / "store"), timeout_s=5)
    assert info.value.result != _capi.Result.SUCCESS
    assert "cuda" in str(info.value).lower()


def test_destroyed_and_made_up_handles_are_refused(tmp_path):
    """A handle used after tideCommDestroy, destroyed twice, or never handed out is refused
    with an error (it once read freed memory)."""
    import ctypes

    lib = _capi.library()
    comm = _comm(tmp_path)
    group = comm.register_group([[8, 4]])
    comm_handle, group_handle = _capi.CommHandle(comm.handle.value), _capi.GroupHandle(group.handle.value)
    comm.close()
    for result in (lib.tideCommSynchronize(comm_handle),
                   lib.tideCommDestroy(comm_handle),
                   lib.tideGroupGetJson(group_handle, ctypes.byref(ctypes.c_char_p())),
                   lib.tideCommGetStats(comm_handle, ctypes.byref(_capi.CommStats()))):
        assert result == _capi.Result.INVALID_ARGUMENT
    assert "destroyed" in lib.tideGetLastError().decode()
    bogus = _capi.CommHandle(ctypes.addressof(ctypes.create_string_buffer(64)))
    assert lib.tideCommSynchronize(bogus) == _capi.Result.INVALID_ARGUMENT
    assert lib.tideCommDestroy(_capi.CommHandle()) == _capi.Result.SUCCESS  # destroying NULL is a no-op


def test_numbers_beyond_c_ranges_and_nul_paths_are_refused(tmp_path):
    """ctypes would keep the low bits: rank 2**32 joined as rank 0, an arena of 2**64 + 4096 bytes
    was 4 KiB. A NUL byte would cut the store path short."""
    from tide import PlanInputError

    with pytest.raises(PlanInputError, match="rank"):
        _comm(tmp_path, rank=2**32)
    with pytest.raises(PlanInputError, match="arena_bytes"):
        _comm(tmp_path, arena=2**64 + 4096)
    with pytest.raises(ValueError, match="NUL"):
        Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                     store_dir=str(tmp_path / "a\0b"))
    with _comm(tmp_path) as comm:
        with pytest.raises(PlanInputError, match="nbytes"):
            comm.alloc(2**64 + 16)
        group = comm.register_group([[8, 4]])
        with pytest.raises(PlanInputError, match="landing_offset"):
            comm.all_gather(group, 0, 2**64)


def test_destroyed_and_made_up_plans_are_refused():
    """A plan destroyed twice aborted the process (a double free); a destroyed one's JSON was read
    from freed memory."""
    import ctypes

    from tide.plan import build_plan_config

    lib = _capi.library()
    config, _keep = build_plan_config([[8, 4]], nodes=1, gpus_per_node=2)
    plan = _capi.plan_create(config)
    assert '"group"' in _capi.plan_get_json(plan)
    assert lib.tidePlanDestroy(plan) == _capi.Result.SUCCESS
    assert lib.tidePlanDestroy(plan) == _capi.Result.INVALID_ARGUMENT
    assert "destroyed" in lib.tideGetLastError().decode()
    assert lib.tidePlanGetJson(plan, ctypes.byref(ctypes.c_char_p())) == _capi.Result.INVALID_ARGUMENT
    bogus = _capi.PlanHandle(ctypes.addressof(ctypes.create_string_buffer(64)))
    assert lib.tidePlanDestroy(bogus) == _capi.Result.INVALID_ARGUMENT
    assert lib.tidePlanDestroy(_capi.PlanHandle()) == _capi.Result.SUCCESS  # NULL: a no-op


def test_a_stale_handle_never_names_a_later_object(tmp_path):
    """Handles are numbers never handed out twice (live_handles.hpp): with addresses as handles, a
    destroyed plan's or communicator's handle named the next object made at its address, whose
    JSON it read and which a second destroy freed under its owner."""
    import ctypes

    from tide.plan import build_plan_config

    lib = _capi.library()
    config, _keep = build_plan_config([[8, 4]], nodes=1, gpus_per_node=2)
    stale_plan = _capi.plan_create(config)
    assert lib.tidePlanDestroy(stale_plan) == _capi.Result.SUCCESS
    later_plans = [_capi.plan_create(config) for _ in range(16)]  # the allocator hands the memory out again
    assert stale_plan.value not in {p.value for p in later_plans}
    assert lib.tidePlanGetJson(stale_plan, ctypes.byref(ctypes.c_char_p())) == _capi.Result.INVALID_ARGUMENT
    assert lib.tidePlanDestroy(stale_plan) == _capi.Result.INVALID_ARGUMENT
    for plan in later_plans:
        assert '"group"' in _capi.plan_get_json(plan)  # none freed by the stale destroy
        assert lib.tidePlanDestroy(plan) == _capi.Result.SUCCESS

    comm = _comm(tmp_path / "first")
    group = comm.register_group([[8, 4]])
    stale_comm, stale_group = _capi.CommHandle(comm.handle.value), _capi.GroupHandle(group.handle.value)
    comm.close()
    later = [_comm(tmp_path / f"later{i}") for i in range(4)]
    later_groups = [c.register_group([[8, 4]]) for c in later]
    assert stale_comm.value not in {c.handle.value for c in later}
    assert stale_group.value not in {g.handle.value for g in later_groups}
    assert lib.tideCommDestroy(stale_comm) == _capi.Result.INVALID_ARGUMENT
    assert lib.tideCommSynchronize(stale_comm) == _capi.Result.INVALID_ARGUMENT
    assert lib.tideGroupGetJson(stale_group, ctypes.byref(ctypes.c_char_p())) == _capi.Result.INVALID_ARGUMENT
    for c, g in zip(later, later_groups):
        c.synchronize()  # each still live: the stale destroy freed none
        assert g.plan["group"]
        c.close()


def test_store_directories_that_cannot_serve_are_bad_input(tmp_path):
    """A store directory that is empty, a regular file or cannot be created is the caller's input:
    tideInvalidArgument naming it (some came back as internal errors); missing parents are created."""
    (tmp_path / "a_file").write_text("")
    for path, want in (("", "empty directory name"), (str(tmp_path / "a_file"), "not a directory"),
                       ("/proc/no-such-dir/store", "cannot create")):
        with pytest.raises(_capi.TideError) as info:
            Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host", store_dir=path,
                         timeout_s=5)
        assert info.value.result == _capi.Result.INVALID_ARGUMENT and want in info.value.message, info.value
    nested = tmp_path / "a" / "b" / "store"
    with Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host", store_dir=str(nested),
                      timeout_s=5) as comm:
        comm.synchronize()
    assert nested.is_dir()


def test_every_call_clears_the_last_error(tmp_path):
    """tideGetLastError is about this thread's last call: a call that succeeds leaves it empty,
    the JSON getters and plan destroy included (they kept the previous failure's message)."""
    import ctypes

    from tide.plan import build_plan_config

    lib = _capi.library()
    config, _keep = build_plan_config([[8, 4]], nodes=1, gpus_per_node=1)
    plan = _capi.plan_create(config)
    with _comm(tmp_path) as comm:
        group = comm.register_group([[8, 4]])
        succeeding = [lambda: lib.tidePlanGetJson(plan, ctypes.byref(ctypes.c_char_p())),
                      lambda: lib.tideGroupGetJson(group.handle, ctypes.byref(ctypes.c_char_p())),
                      lambda: lib.tideCommReservedBytes(comm.handle, ctypes.byref(ctypes.c_int64())),
                      lambda: lib.tidePlanDestroy(_capi.PlanHandle()),
                      lambda: lib.tidePlanDestroy(plan)]
        for call in succeeding:
            assert lib.tideCommSynchronize(_capi.CommHandle()) == _capi.Result.INVALID_ARGUMENT
            assert lib.tideGetLastError().decode() != ""
            assert call() == _capi.Result.SUCCESS
            assert lib.tideGetLastError().decode() == "", lib.tideGetLastError()
        # The calls without a result leave it (tide.h), so that it can be read after them.
        assert lib.tideCommSynchronize(_capi.CommHandle()) == _capi.Result.INVALID_ARGUMENT
        failure = lib.tideGetLastError().decode()
        lib.tideHasCuda()
        lib.tideFaultNames()
        lib.tideGetErrorString(_capi.Result.INVALID_ARGUMENT)
        lib.tideGetLastReason()
        assert lib.tideGetLastError().decode() == failure


def test_calls_from_two_threads_are_serialized(tmp_path, rng):
    """Two threads calling one communicator at once corrupted the heap (the host fabric's queues
    and the communicator's state are one thread's). The calls now take turns: every one succeeds
    and every output is the exact sum (one rank: its own gradients, integer-valued)."""
    import threading

    shapes = [[24, 16], [7]]
    with _comm(tmp_path, arena=1 << 22) as comm:
        group = comm.register_group(shapes, dtype="fp32")
        out_elems = group.plan["group"]["out_bytes"] // 4
        failures: list[str] = []

        def worker(seed: int) -> None:
            local = np.random.default_rng(seed)
            try:
                for _ in range(150):
                    grads = [local.integers(-8, 8, size=int(np.prod(s)), dtype=np.int32).astype(np.float32)
                             for s in shapes]
                    out = np.full(out_elems, np.nan, dtype=np.float32)
                    comm.reduce_scatter(group, [g.ctypes.data for g in grads], out.ctypes.data)
                    comm.wait_inputs_read()
                    comm.synchronize()
                    if not np.array_equal(out, np.concatenate(grads)):  # one rank: its shard is everything
                        failures.append("wrong output")
            except Exception as e:  # noqa: BLE001 - reported below
                failures.append(repr(e))

        threads = [threading.Thread(target=worker, args=(rng.getrandbits(32) + t,)) for t in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == [], failures[:3]


def test_a_communicator_dropped_without_close_is_destroyed(tmp_path):
    """Dropped without close(), a communicator kept its queue threads and shared memory for the
    rest of the process (and one left open at exit crashed it, its threads still reading freed
    buffers); it is now destroyed when collected, and at exit."""
    import gc
    import os

    def threads() -> set[str]:
        return set(os.listdir("/proc/self/task"))

    # The communicators' own threads, by id: a thread of an earlier test that ends meanwhile
    # (a count compared once made this fail, 3 threads before and 2 after, in CI) is not theirs.
    for i in range(5):
        before = threads()
        comm = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                            store_dir=str(tmp_path / f"store{i}"), timeout_s=5)
        started = threads() - before
        assert started, "the communicator started no thread"
        del comm
        gc.collect()
        assert not started & threads(), f"communicator {i}'s threads {sorted(started & threads())} outlived it"


def test_arena_sizing_counts_allocations_from_4k_boundaries(tmp_path):
    """Two 200-byte allocations and the scratch: the second allocation starts at 4096, so
    400 + scratch bytes are too few, and the refusal once read "arena of 4496 bytes is too small:
    user memory 4296 + collective scratch 0". It now says where each part starts; sized as tide.h
    says (allocations from multiples of 4096), the arena fits."""
    from tide.plan import scratch_bytes

    shapes = [[8, 4]]
    scratch = scratch_bytes([{"shapes": shapes, "nodes": 1, "gpus_per_node": 1}])
    for arena, fits in ((400 + scratch, False), (4096 + 200 + scratch, True)):
        with Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=arena, fabric="host",
                          store_dir=str(tmp_path / f"store{arena}"), timeout_s=5) as comm:
            group = comm.register_group(shapes)
            comm.alloc(200)
            landing, ptr = comm.alloc(200)
            shard = np.random.default_rng().integers(0, 256, 64, dtype=np.uint8)  # 32 bf16 elements
            if fits:
                view = landing_view(ptr, group.plan["group"]["unsharded_bytes"])
                view[:] = 0xA5
                comm.all_gather(group, shard.ctypes.data, landing)
                comm.synchronize()
                assert wrong_landing_bytes(group.plan, view, [shard]) == 0
            else:
                with pytest.raises(_capi.TideError, match="user memory ends at 4296.*would start at 4096"):
                    comm.all_gather(group, shard.ctypes.data, landing)


def _first_collective_in_an_arena_below_the_scratch(rank, store, results):
    try:
        from tide.plan import scratch_bytes

        shapes = [[4]]  # a landing far smaller than the scratch, so that only the scratch does not fit
        need = scratch_bytes([{"shapes": shapes, "nodes": 1, "gpus_per_node": 2, "dtype": "fp32"}])
        with Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=need - 4096 - 1, fabric="host",
                          store_dir=store, timeout_s=5) as comm:
            group = comm.register_group(shapes, dtype="fp32")
            shard = np.zeros(2, dtype=np.float32)
            try:
                comm.all_gather(group, shard.ctypes.data, 0)
                results.put((rank, None))
            except _capi.TideError as e:
                results.put((rank, (int(e.result), e.message)))
    except Exception as e:  # noqa: BLE001 - reported to the test
        results.put((rank, ("error", repr(e))))


def test_an_arena_smaller_than_the_scratch_says_so():
    """An arena a little smaller than the scratch alone (less than 4096 bytes short) once fell
    through the detailed check (its base rounded up to 0) to a terse internal refusal; it now
    names the scratch's size and tideScratchBytes."""
    import tempfile

    from spawned_ranks import run_ranks

    with tempfile.TemporaryDirectory() as store:
        got, codes = run_ranks(_first_collective_in_an_arena_below_the_scratch, 2, (store,), timeout=60)
    assert codes == [0, 0], (codes, got)
    assert sorted(r for r, _ in got) == [0, 1], got  # every rank reported
    for rank, outcome in got:
        assert outcome is not None and outcome[0] == _capi.Result.INVALID_ARGUMENT, (rank, outcome)
        assert "collective scratch" in outcome[1] and "tideScratchBytes" in outcome[1], outcome


def test_pointers_beyond_64_bits_or_negative_are_refused(tmp_path):
    """ctypes would keep the low 64 bits: 2**64 would reach the library as NULL (a shard "in
    place") and a negative address as a huge one, read later by the copy queues."""
    with _comm(tmp_path) as comm:
        group = comm.register_group([[8, 4]], dtype="fp32")
        off, ptr = comm.alloc(group.plan["group"]["unsharded_bytes"])
        shard = np.zeros(32, dtype=np.float32)
        out = np.zeros(group.plan["group"]["out_bytes"] // 4, dtype=np.float32)
        grad = np.zeros(32, dtype=np.float32)
        for bad in (1 << 64, shard.ctypes.data + (1 << 64), -5):
            with pytest.raises(ValueError, match="all_gather: shard_ptr: .* not an address"):
                comm.all_gather(group, bad, off)
            with pytest.raises(ValueError, match=r"reduce_scatter: grad_ptrs: .* not an address"):
                comm.reduce_scatter(group, [bad], out.ctypes.data)
            with pytest.raises(ValueError, match="reduce_scatter: out_ptr: .* not an address"):
                comm.reduce_scatter(group, [grad.ctypes.data], bad)
            with pytest.raises(ValueError, match="all_gather: stream: .* not an address"):
                comm.all_gather(group, shard.ctypes.data, off, stream=bad)
            with pytest.raises(ValueError, match="wait_inputs_read: stream: .* not an address"):
                comm.wait_inputs_read(stream=bad)
        # A bool would pass as 0 or 1 (False: an in-place shard; True: CUDA's legacy stream), None
        # failed inside the check; both refused by name, before the call.
        for bad in (False, True, None, "0", 1.0):
            with pytest.raises(TypeError, match="all_gather: shard_ptr: .* is not an address"):
                comm.all_gather(group, bad, off)
            with pytest.raises(TypeError, match="reduce_scatter: stream: .* is not an address"):
                comm.reduce_scatter(group, [grad.ctypes.data], out.ctypes.data, stream=bad)
        with pytest.raises(TypeError, match="all_gather: group must be a Group from register_group, got NoneType"):
            comm.all_gather(None, shard.ctypes.data, off)
        with pytest.raises(TypeError, match="reduce_scatter: alpha must be a real number, got True"):
            comm.reduce_scatter(group, [grad.ctypes.data], out.ctypes.data, alpha=True)
        assert comm.stats["all_gather_calls"] == 0 and comm.stats["reduce_scatter_calls"] == 0
        # numpy integers are addresses like ints: both collectives run, and (one rank) the landing
        # holds the shard and the output the gradient.
        shard[:] = np.arange(32, dtype=np.float32) + 0.5
        grad[:] = np.arange(32, dtype=np.float32) - 7.25
        landing = landing_view(ptr, group.plan["group"]["unsharded_bytes"])
        landing[:] = 0xA5
        out[:] = np.nan
        comm.all_gather(group, np.int64(shard.ctypes.data), np.int64(off), stream=np.uint64(0))
        comm.reduce_scatter(group, [np.uint64(grad.ctypes.data)], np.int64(out.ctypes.data))
        comm.synchronize()
        assert landing.tobytes() == shard.tobytes() and np.array_equal(out, grad)
        assert comm.stats["all_gather_calls"] == 1 and comm.stats["reduce_scatter_calls"] == 1


def test_calls_on_a_closed_communicator_say_it_is_closed(tmp_path):
    """Each said "null communicator" (an argument the caller never passed) or failed elsewhere."""
    comm = _comm(tmp_path)
    comm.close()
    for name, call in (("synchronize", comm.synchronize), ("alloc", lambda: comm.alloc(64)),
                       ("stats", lambda: comm.stats), ("rails", lambda: comm.rails),
                       ("register_group", lambda: comm.register_group([[8]])),
                       ("reserved_bytes", comm.reserved_bytes), ("wait_inputs_read", comm.wait_inputs_read)):
        with pytest.raises(_capi.TideError, match=f"^{name}: the communicator is closed"):
            call()


def test_bad_timeout_types_are_refused_by_name(tmp_path):
    for bad in (True, "5", None):
        with pytest.raises(TypeError, match=f"timeout_s must be a real number, got {re.escape(repr(bad))}"):
            Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                         store_dir=str(tmp_path / "store"), timeout_s=bad)
    with pytest.raises(_capi.TideError, match=r"timeoutSeconds -1e-07 s outside 0 \(the default\)..1e\+06 s"):
        Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 20, fabric="host",
                     store_dir=str(tmp_path / "store"), timeout_s=-1e-7)


def test_a_dropped_communicator_with_groups_is_destroyed_at_once(tmp_path):
    """Groups keep their communicator alive, not the reverse: dropping both destroys it by
    reference counting, not at the next cyclic collection (its threads and shared memory held
    until then)."""
    import gc

    gc.disable()
    try:
        comm = _comm(tmp_path)
        comm.register_group([[8, 4]])
        group = comm.register_group([[3]])
        finalizer = comm._finalizer
        del comm
        assert finalizer.alive, "a group's communicator went while the group was held"
        del group
        assert not finalizer.alive, "the communicator waited for the cyclic collector"
    finally:
        gc.enable()


def test_c_api_refusals_name_the_argument(tmp_path):
    """Called directly (the binding refuses most of these first): each refusal names the null or
    bad argument, and a refused tideCommInit* leaves no stale handle behind."""
    lib = _capi.library()

    def said(result) -> str:
        assert result == _capi.Result.INVALID_ARGUMENT, result
        return lib.tideGetLastError().decode()

    config = _capi.CommConfig(nodes=1, gpusPerNode=1, rank=0, arenaBytes=1 << 20, timeoutSeconds=5.0, device=-1)
    store = str(tmp_path / "store").encode()
    assert said(lib.tideCommInitHost(ctypes.byref(config), store, None)) == \
        "tideCommInitHost: null comm (the handle to fill)"
    assert said(lib.tideCommInitHost(ctypes.byref(config), None, ctypes.byref(_capi.CommHandle()))) == \
        "tideCommInitHost: null storeDir"
    stale = _capi.CommHandle(0xDEADBEEF)
    bad = _capi.CommConfig(nodes=1, gpusPerNode=1, rank=3, arenaBytes=1 << 20, timeoutSeconds=5.0, device=-1)
    assert "rank 3 outside 0..0" in said(lib.tideCommInitHost(ctypes.byref(bad), store, ctypes.byref(stale)))
    assert not stale.value, "a refused init left the caller's handle as it was"
    with _comm(tmp_path) as comm:
        group = comm.register_group([[8, 4]], dtype="fp32")
        offset = ctypes.c_int64()
        assert said(lib.tideCommAlloc(comm.handle, 0, ctypes.byref(offset), None)) == \
            "tideCommAlloc: bytes 0 is not positive"
        assert said(lib.tideCommAlloc(comm.handle, 64, None, None)) == "tideCommAlloc: null offset"
        grad = np.zeros(32, dtype=np.float32)
        ptrs = (ctypes.c_void_p * 1)(grad.ctypes.data)
        assert said(lib.tideReduceScatter(comm.handle, group.handle, ptrs, None, 1.0, 0, None)) == \
            "tideReduceScatter: null out"
        assert said(lib.tideReduceScatter(comm.handle, group.handle, None, grad.ctypes.data, 1.0, 0, None)) == \
            "tideReduceScatter: null grads"
        other, _keep = build_plan_config([[8, 4]], nodes=2, gpus_per_node=1)
        message = said(lib.tideGroupRegister(comm.handle, ctypes.byref(other), ctypes.byref(_capi.GroupHandle())))
        assert "the group's topology 2 x 1 differs from the communicator's 1 x 1" in message, message
        assert comm.stats["reduce_scatter_calls"] == 0
