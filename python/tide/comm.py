"""Communicators from Python: TIDE-AG and TIDE-RS on raw device or host
addresses, through the C API. Nothing here imports torch: callers pass
pointers (`tensor.data_ptr()`) and streams (`torch.cuda.current_stream().cuda_stream`),
so one build serves every torch version.
"""

from __future__ import annotations

import ctypes
import json
import math
import operator
import os
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from tide import _capi
from tide.plan import INT32, INT64, build_plan_config, c_integer, c_real


def has_cuda() -> bool:
    """Does this build of libtide carry the CUDA fabric?"""
    return bool(_capi.library().tideHasCuda())


def host_us_per_call(stats: Mapping[str, int], kind: str) -> float:
    """Mean host µs inside one successful call of `kind` ("all_gather" or
    "reduce_scatter") from Communicator.stats (on CUDA the enqueue); 0 before any."""
    calls = stats.get(f"{kind}_calls", 0)
    return stats.get(f"{kind}_host_ns", 0) / 1e3 / calls if calls else 0.0


def unique_id() -> bytes:
    """A fresh NCCL unique id (rank 0 makes it, every rank passes it to Communicator)."""
    uid = _capi.UniqueId()
    _capi.check(_capi.library().tideGetUniqueId(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid))


# Every open Communicator of this process: a forked child forgets them (below).
_open_communicators: weakref.WeakSet = weakref.WeakSet()


def _forget_inherited_communicators() -> None:
    """In a child made by fork(): the parent's communicators are the parent's. Their host-fabric
    threads and their CUDA state did not come along, so destroying one here (at the child's exit,
    or a close()) joined threads that do not exist and crashed the child (SIGSEGV). The child
    drops them instead; calling one says why."""
    for comm in list(_open_communicators):
        comm._finalizer.detach()
        comm.handle = _capi.CommHandle()
        comm._closed_why = "it was inherited across fork() and belongs to the parent process"
        comm._strings_held = threading.Lock()  # another thread of the parent may have held it
        comm._copying = set()
        comm._closing = set()
        comm._close_pending = False
    _open_communicators.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_communicators)


def _destroy_left_open(lib, handle) -> None:
    """A Communicator collected, or left open at interpreter exit, without
    close(): destroy it (the library drains its queued work first, which may
    still read the caller's buffers; at exit they are alive until after this)."""
    try:
        _capi.check(lib.tideCommDestroy(handle))
    except Exception as e:  # a finalizer must not raise: say it and go on
        print(f"tide: closing a communicator that was not closed failed: {e}", file=sys.stderr)


_POINTER_END = 1 << 64


def _addresses(what: str, values: Sequence[Any]) -> Sequence[int]:
    """`values` as addresses (or stream handles) ctypes passes unchanged. ctypes keeps the low 64
    bits of an int passed as a pointer: 2**64 would arrive as NULL (for a shard, "in place") and
    -5 as 0xff...fb; and a bool passes as 0 or 1 (False as an in-place shard, True as CUDA's legacy
    stream). Refused instead, naming the argument; numpy integers are taken as ints. The common
    case (plain ints in range) costs one pass in C-implemented builtins, per collective call."""
    if len(values) and set(map(type, values)) == {int} and min(values) >= 0 and max(values) < _POINTER_END:
        return values
    out = []
    for i, v in enumerate(values):
        name = what if len(values) == 1 else f"{what}[{i}]"
        if isinstance(v, bool) or not hasattr(type(v), "__index__"):
            raise TypeError(f"{name}: {v!r} is not an address (an int)")
        v = operator.index(v)
        if not 0 <= v < _POINTER_END:
            raise ValueError(f"{name}: {v} is not an address (0 <= pointer < 2**64)")
        out.append(v)
    return out


def _address(what: str, value: Any) -> int:
    """One address or stream handle, checked as _addresses does."""
    return _addresses(what, (value,))[0]


class Group:
    """One registered parameter group (its plan)."""

    def __init__(self, comm: Communicator, handle: _capi.GroupHandle, num_params: int):
        self._comm = comm
        self.handle = handle
        self.num_params = num_params
        self._ptr_array = ctypes.c_void_p * num_params  # reduce_scatter's pointer array type, made once

    @property
    def plan(self) -> dict:
        self._comm._refuse_if_closed("Group.plan")  # its handle died with the communicator
        raw = self._comm._copy_string(lambda out: _capi.library().tideGroupGetJson(self.handle, out))
        return json.loads(raw.decode())


class Communicator:
    """One rank's TIDE communicator.

    fabric="cuda": NCCL-bootstrapped copy-engine fabric; pass `unique_id`
        (bytes from unique_id() on rank 0, shared with every rank) and `device`.
    fabric="host": CPU ranks as processes over POSIX shared memory; pass
        `store_dir`, a directory all ranks share, fresh per job.
    fabric="cuda-ipc": the CUDA fabric without NCCL (tests): ranks as
        processes reaching each other's arenas through CUDA IPC, several
        per GPU if need be; pass `store_dir` as for "host", and `device`.
    """

    def __init__(self, *, nodes: int, gpus_per_node: int, rank: int, arena_bytes: int,
                 fabric: str = "cuda", unique_id: bytes | None = None, store_dir: str | None = None,
                 device: int = -1, timeout_s: float = 0.0):
        self.nodes, self.gpus_per_node, self.rank = nodes, gpus_per_node, rank
        config = _capi.CommConfig(nodes=c_integer(nodes, "nodes", *INT32),
                                  gpusPerNode=c_integer(gpus_per_node, "gpus_per_node", *INT32),
                                  rank=c_integer(rank, "rank", *INT32),
                                  arenaBytes=c_integer(arena_bytes, "arena_bytes", *INT64),
                                  timeoutSeconds=c_real(timeout_s, "timeout_s"),
                                  device=c_integer(device, "device", *INT32))
        handle = _capi.CommHandle()
        lib = _capi.library()
        if fabric == "cuda":
            if unique_id is None:
                raise ValueError("fabric='cuda' needs unique_id")
            if len(unique_id) != ctypes.sizeof(_capi.UniqueId):
                raise ValueError(f"unique_id must be {ctypes.sizeof(_capi.UniqueId)} bytes, got {len(unique_id)}")
            uid = _capi.UniqueId.from_buffer_copy(unique_id)
            _capi.check(lib.tideCommInitCuda(ctypes.byref(config), ctypes.byref(uid), ctypes.byref(handle)))
        elif fabric in ("host", "cuda-ipc"):
            if store_dir is None:
                raise ValueError(f"fabric={fabric!r} needs store_dir")
            init = lib.tideCommInitHost if fabric == "host" else lib.tideCommInitCudaIpc
            path = os.fsencode(store_dir)  # the file system's bytes, as the C library opens them
            if b"\0" in path:
                raise ValueError(f"store_dir {store_dir!r} contains a NUL byte")
            _capi.check(init(ctypes.byref(config), path, ctypes.byref(handle)))
        else:
            raise ValueError(f"unknown fabric {fabric!r} (cuda, host or cuda-ipc)")
        self.fabric = fabric
        self.handle = handle
        # Held while a string the library returned (a plan's JSON, the rails)
        # is copied out, and by close(): that memory belongs to the communicator.
        self._strings_held = threading.Lock()
        self._copying: set[int] = set()  # threads inside _copy_string, from before its lock to after it
        self._close_pending = False  # close() called by a signal handler that interrupted that copy
        self._closing: set[int] = set()  # threads inside close()
        self._closed_why = ""  # said when a call finds it closed other than by close()
        self._lib = lib  # the collectives run per FSDP2 call: no library() lock each time
        # Dropped or left open at exit without close(): destroyed then, so its threads,
        # shared memory and in-flight work do not outlive it (or the buffers it reads).
        self._finalizer = weakref.finalize(self, _destroy_left_open, lib, handle)
        _open_communicators.add(self)

    def _copy_string(self, call) -> bytes:
        """call(ctypes.byref(c_char_p)): a library call that hands back a string the
        communicator owns, copied out before a close() can free it. A close() on another
        thread waits; one from a signal handler that interrupts the copy on this thread
        (Python runs handlers between the call and the copy) is carried out after it."""
        out = ctypes.c_char_p()
        me = threading.get_ident()
        # Marked before the lock is taken and unmarked after it is released: a handler that
        # runs anywhere in between (taking the lock, inside it, releasing it) defers its
        # close() instead of waiting for a lock its own thread holds.
        self._copying.add(me)
        try:
            with self._strings_held:
                result = call(ctypes.byref(out))
                raw = out.value
                _capi.check(result)
        finally:
            self._copying.discard(me)
            # Also when the read raised (a failed call, or the handler's own exception after its
            # close()): a close left pending would otherwise be carried out by some later read.
            if self._close_pending:
                self._close_pending = False
                self.close()
        return raw

    def close(self) -> None:
        me = threading.get_ident()
        if me in self._copying:
            # A signal handler interrupted this thread's copy of a string the
            # communicator owns (waiting here would wait for itself): closed
            # as soon as the copy is done.
            self._close_pending = True
            return
        if me in self._closing:
            return  # a signal handler interrupted this thread's own close(), which finishes it
        self._closing.add(me)
        try:
            with self._strings_held:
                if not self.handle:
                    return
                # Gone even when destroy reports a failure it drained (it tears down all the same).
                handle, self.handle = self.handle, _capi.CommHandle()
                _open_communicators.discard(self)
                lib, result = _capi.library(), None
                try:
                    result = lib.tideCommDestroy(handle)
                finally:
                    # Only once destroy ran: an exception a signal handler raises before it
                    # leaves the finalizer to destroy the communicator at exit, not nobody.
                    if result is not None:
                        self._finalizer.detach()
                _capi.check(result)
        finally:
            self._closing.discard(me)

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def register_group(self, shapes: Sequence[Sequence[int] | Mapping[str, Any]], **plan_options: Any) -> Group:
        """Register a parameter group (same order on every rank, before the first collective)."""
        self._refuse_if_closed("register_group")
        config, _keepalive = build_plan_config(shapes, nodes=self.nodes, gpus_per_node=self.gpus_per_node,
                                               **plan_options)
        handle = _capi.GroupHandle()
        _capi.check(_capi.library().tideGroupRegister(self.handle, ctypes.byref(config), ctypes.byref(handle)))
        # The group keeps its communicator alive (its handle dies with it); the
        # communicator keeps no list of its groups, so that dropping both frees
        # them at once, without waiting for the cyclic collector.
        return Group(self, handle, config.numParams)

    def alloc(self, nbytes: int) -> tuple[int, int]:
        """Symmetric memory in the arena: (offset, local address); same calls on every rank."""
        self._refuse_if_closed("alloc")
        offset, ptr = ctypes.c_int64(), ctypes.c_void_p()
        _capi.check(_capi.library().tideCommAlloc(self.handle, c_integer(nbytes, "nbytes", *INT64),
                                                  ctypes.byref(offset), ctypes.byref(ptr)))
        return offset.value, ptr.value

    def _refuse_if_closed(self, call: str) -> None:
        if not self.handle:
            why = f" ({self._closed_why})" if self._closed_why else ""
            raise _capi.TideError(_capi.Result.INVALID_ARGUMENT, "closed", f"{call}: the communicator is closed{why}")

    def _check_group(self, group: Group, call: str) -> None:
        """A group of this communicator, which is open: said here, with the communicator's
        own words, before the C library would refuse the handle."""
        if not isinstance(group, Group):
            raise TypeError(f"{call}: group must be a Group from register_group, got {type(group).__name__}")
        if group._comm is not self:
            raise _capi.TideError(_capi.Result.INVALID_ARGUMENT, "bad_argument",
                                  f"{call}: the group was registered on another communicator")
        self._refuse_if_closed(call)

    def all_gather(self, group: Group, shard_ptr: int, landing_offset: int, stream: int = 0) -> None:
        """shard_ptr 0 (one node only): this rank's shard is already in its own landing rows."""
        self._check_group(group, "all_gather")
        shard_ptr = _address("all_gather: shard_ptr", shard_ptr)
        stream = _address("all_gather: stream", stream)
        _capi.check(self._lib.tideAllGather(self.handle, group.handle, shard_ptr,
                                            c_integer(landing_offset, "landing_offset", *INT64), stream))

    def reduce_scatter(self, group: Group, grad_ptrs: Sequence[int], out_ptr: int, *, alpha: float = 1.0,
                       accumulate: bool = False, stream: int = 0) -> None:
        self._check_group(group, "reduce_scatter")
        if len(grad_ptrs) != group.num_params:
            raise ValueError(f"expected {group.num_params} gradient pointers, got {len(grad_ptrs)}")
        if accumulate is not True and accumulate is not False:  # "no" would accumulate
            raise TypeError(f"reduce_scatter: accumulate must be a bool, got {accumulate!r}")
        alpha32 = ctypes.c_float(c_real(alpha, "reduce_scatter: alpha")).value  # what the C API receives
        if not math.isfinite(alpha32) or (alpha32 == 0.0) != (alpha == 0.0):
            raise ValueError(f"reduce_scatter: alpha {alpha!r} is {'0' if math.isfinite(alpha32) else alpha32} "
                             f"in fp32, the sum's type")
        grad_ptrs = _addresses("reduce_scatter: grad_ptrs", grad_ptrs)
        out_ptr = _address("reduce_scatter: out_ptr", out_ptr)
        stream = _address("reduce_scatter: stream", stream)
        arr = group._ptr_array(*grad_ptrs)
        _capi.check(self._lib.tideReduceScatter(self.handle, group.handle, arr, out_ptr, alpha32,
                                                1 if accumulate else 0, stream))

    def wait_inputs_read(self, stream: int = 0) -> None:
        """Order the caller after the point where the last reduce_scatter has
        read its gradients (its network phase may still run); from then on
        their memory may be freed or overwritten.

        CUDA fabric: work enqueued on `stream` (a cudaStream_t) after this
        call waits for that point; the host does not block. Host fabric: the
        host blocks until then (`stream` ignored). The output is final only
        once the reduce-scatter completes (synchronize(), or its stream)."""
        self._refuse_if_closed("wait_inputs_read")
        stream = _address("wait_inputs_read: stream", stream)
        _capi.check(self._lib.tideCommWaitInputsRead(self.handle, stream))

    def synchronize(self) -> None:
        self._refuse_if_closed("synchronize")
        _capi.check(self._lib.tideCommSynchronize(self.handle))

    @property
    def rails(self) -> str:
        """How this rank's rails travel, chosen at run time, and why, e.g.
        "copy-engine (every rail peer is load/store reachable)" or
        "nccl-send-recv (host RMA unavailable: ...)"."""
        self._refuse_if_closed("rails")
        return self._copy_string(lambda out: _capi.library().tideCommGetRails(self.handle, out)).decode()

    @property
    def stats(self) -> dict[str, int]:
        """What this rank's fabric has done since the communicator was made:
        copy_bytes, copy_descriptors, rail_bytes, rail_puts, sum_elems,
        land_elems, and (CUDA fabric; 0 on the host) copy_graph_launches and
        copy_graphs_built: copy lists that went out as one launch of a cached
        graph of memcpy nodes, and the graphs built for them; all_gather_calls
        and reduce_scatter_calls (successful calls) with the host time spent
        inside them, all_gather_host_ns and reduce_scatter_host_ns (on CUDA
        the enqueue; the device work runs later)."""
        self._refuse_if_closed("stats")
        out = _capi.CommStats()
        _capi.check(_capi.library().tideCommGetStats(self.handle, ctypes.byref(out)))
        return {name: getattr(out, name) for name, _ in _capi.CommStats._fields_}

    def reserved_bytes(self) -> int:
        """Bytes the fabric holds for this rank's arena outside any framework
        allocator: the CUDA fabric's ncclMemAlloc window (arena, counters,
        alignment; torch.cuda.memory_reserved() does not count it), the host
        fabric's shared-memory segment."""
        self._refuse_if_closed("reserved_bytes")
        out = ctypes.c_int64()
        _capi.check(_capi.library().tideCommReservedBytes(self.handle, ctypes.byref(out)))
        return out.value
