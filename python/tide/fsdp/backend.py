"""The two fabrics as the adapter sees them. They differ only in the fabric,
the device and the stream:

- HostBackend (CPU, gloo): one process per rank over POSIX shared memory,
  bootstrapped through a directory that the shard group's rank 0 creates and
  broadcasts. TIDE calls run on the fabric's worker threads; the adapter waits
  for each collective before returning (no overlap on CPU).
- CudaBackend (CUDA): the copy-engine fabric; collectives are enqueued on
  FSDP2's streams and ordered with events. Bootstrapped through NCCL (a
  unique id broadcast over the shard group), or, with fabric "cuda-ipc",
  through CUDA IPC and a file store (any number of ranks per GPU, no NCCL:
  FSDP2 on gloo with several ranks on one GPU, for tests). (Not exercised by
  the CPU tests.)

Arena memory is wrapped as torch tensors that each own a fresh storage with
storage_offset 0 (what FSDP2's as_strided and copy.deepcopy of a state dict
need). Every wrapper keeps `keepalive` (the arena's owner) alive, so the arena
outlives any tensor that views it.

Reduce-scatter inputs are released at the call's read-done point
(Communicator.wait_inputs_read), not at its end: In-Place gradients go back
to the allocator, and a Slot-Reuse region may be gathered into again, while
the network phase still runs. With release_grads "with-fsdp-state" the
inputs read in place are instead returned to the caller, which hands them to
FSDP2's reduce-scatter state (reduce_scatter.py): no record_stream and no
allocator event per gradient, at the cost of holding them one group longer.
With release_grads "read-done-polled" (CUDA) the inputs read in place
are not handed to the allocator with one record_stream each: the call
records one event at read-done and queues them behind it (ReleaseQueue), and
every later TIDE call on this host thread first drops those whose event has
passed. One event per call instead of one allocator event per gradient (which
the caching allocator records at the free and then polls at every malloc),
at the cost of holding the gradients until the next TIDE call after read-done.
The last calls of a backward have no next call before the optimizer step (the
root group's embedding and output gradients among them), so at the end of
each backward whatever is still queued goes to the allocator the
read-done way, one record_stream each (a callback the call queues on the
autograd engine, once per backward).
With `poison_read_inputs` set (install's check_read_done) every input is
overwritten with NaN right there, which proves that read-done is honest: any
later read reaches the output.
"""

from __future__ import annotations

import collections
import ctypes
import logging
import os
import shutil
import tempfile
import threading
from typing import Any

import torch
import torch.distributed as dist

from tide.comm import Communicator


def _group_src(pg: Any) -> int:
    return dist.get_global_rank(pg, 0)


class Region:
    """A span of the arena that unsharded groups take turns in (a ring slot)
    or own alone (pinned). Also carries the ordering state of the region."""

    def __init__(self, name: str, nbytes: int):
        self.name = name
        self.nbytes = nbytes
        self.offset = -1
        self.addr = 0
        self.members: list = []        # TideGroups assigned here
        self.free_events: list = []    # CUDA: events after which the region may be overwritten


def _poison(keep: list, slot_views: list) -> None:
    with torch.no_grad():
        for t in keep:
            t.fill_(float("nan"))
        for v in slot_views:  # views of arena tensors that back unsharded Parameters
            with torch.autograd._unsafe_preserve_version_counter(v):
                v.fill_(float("nan"))


class ReleaseQueue:
    """Tensors held until an event has passed, in the order they were queued.
    Events of one stream complete in order, so reap() drops entries from the
    front while their event has completed and stops at the first that has not
    (one query per call in the steady state)."""

    def __init__(self) -> None:
        # Forward's all-gathers run on the main thread, backward's calls on autograd's.
        self._lock = threading.Lock()
        self._entries: collections.deque = collections.deque()
        self.queued = 0       # tensors queued so far
        self.dropped = 0      # of them, dropped by reap(), hand_over() or clear()
        self.handed_over = 0  # of those, by hand_over()

    def add(self, event: Any, tensors: list) -> None:
        with self._lock:
            self._entries.append((event, tensors))
            self.queued += len(tensors)

    def reap(self) -> int:
        """Drops the tensors whose event has passed; returns how many."""
        if not self._entries:  # every TIDE call reaps, most modes queue nothing: no lock then
            return 0
        n = 0
        with self._lock:
            while self._entries and self._entries[0][0].query():
                n += len(self._entries.popleft()[1])
            self.dropped += n
        return n

    def hand_over(self, release) -> int:
        """Calls release(t) for every tensor still queued, then drops them all
        (release makes the drop safe, e.g. Tensor.record_stream); returns how many."""
        with self._lock:
            entries, self._entries = self._entries, collections.deque()
            n = 0
            for _event, tensors in entries:
                for t in tensors:
                    release(t)
                n += len(tensors)
            self.dropped += n
            self.handed_over += n
        return n

    def clear(self) -> None:
        """Drops everything: call only once the device has passed every event."""
        with self._lock:
            self._entries.clear()
            self.dropped = self.queued

    def __len__(self) -> int:
        return self.queued - self.dropped  # tensors still held


def _retained(backend: Any, keep: list) -> list:
    """The inputs read in place that the reduce-scatter call hands to FSDP2's
    reduce-scatter state (release_grads "with-fsdp-state"); none otherwise."""
    return list(keep) if backend.release_grads == "with-fsdp-state" else []


class HostBackend:
    fabric = name = "host"
    closes_collectively = False  # closing a host communicator is local (arena_lifetime)

    def __init__(self, device: torch.device):
        self.device = device
        self.poison_read_inputs = False
        self.release_grads = "read-done"

    def create_comm(self, pg: Any, nodes: int, gpus_per_node: int, arena_bytes: int, timeout_s: float) -> Communicator:
        rank = pg.rank()
        box = [tempfile.mkdtemp(prefix="tide-fsdp-") if rank == 0 else None]
        dist.broadcast_object_list(box, src=_group_src(pg), group=pg)
        try:
            comm = Communicator(nodes=nodes, gpus_per_node=gpus_per_node, rank=rank, arena_bytes=arena_bytes,
                                fabric="host", store_dir=box[0], timeout_s=timeout_s)
        finally:
            # Every rank has mapped every segment once all returned; the files did their job.
            dist.barrier(group=pg)
            if rank == 0:
                shutil.rmtree(box[0], ignore_errors=True)
        return comm

    def after_close(self, pg: Any) -> None:
        """Nothing to clean up: the store directory went at creation."""

    def drop_inputs_read(self) -> None:
        """Nothing held: the host fabric's reduce-scatter returns once its inputs are read."""

    def wrap(self, addr: int, nbytes: int, dtype: torch.dtype, keepalive: Any) -> torch.Tensor:
        buf = (ctypes.c_uint8 * nbytes).from_address(addr)
        buf._tide_keepalive = keepalive  # the storage holds buf, buf holds the arena
        return torch.frombuffer(buf, dtype=dtype)

    def stream_handle(self, stream: Any) -> int:
        return 0

    # ---- all-gather
    def before_copy_in(self, ctx: Any, copy_in_stream: Any) -> None:
        pass

    def all_gather(self, comm: Communicator, handle: Any, shard_ptr: int, ctx: Any, region: Region,
                   copy_in_stream: Any, all_gather_stream: Any) -> Any:
        comm.all_gather(handle, shard_ptr, region.offset, 0)
        comm.synchronize()
        return None

    # ---- reduce-scatter
    def before_region_write(self, region: Region, stream: Any = None) -> None:
        pass

    def reduce_scatter(self, comm: Communicator, handle: Any, ptrs: list[int], out: torch.Tensor, alpha: float,
                       keep: list, slot_views: list, region: Region | None) -> list:
        """keep: torch tensors read in place (gradients, zeros), released at
        read-done (the list is emptied); slot_views: the gradients' copies in
        `region` (Slot-Reuse). Returns what the caller must hold as long as
        FSDP2 holds its reduce-scatter input (release_grads "with-fsdp-state")."""
        comm.reduce_scatter(handle, ptrs, out.data_ptr(), alpha=alpha, accumulate=False, stream=0)
        comm.wait_inputs_read()  # the host blocks until the inputs are read; the network phase may still run
        if self.poison_read_inputs:
            _poison(keep, slot_views)
        retained = _retained(self, keep)
        keep.clear()
        comm.synchronize()
        return retained

    def on_reshard(self, region: Region) -> None:
        pass


class _CudaArray:
    """Device memory behind __cuda_array_interface__; torch keeps this object
    (and so the arena) alive as long as the tensor's storage."""

    def __init__(self, addr: int, nbytes: int, keepalive: Any):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (addr, False),
                                         "strides": None, "version": 2}
        self._keepalive = keepalive


class CudaBackend:
    fabric = "cuda"
    closes_collectively = True  # closing deregisters the NCCL window, a collective (arena_lifetime)

    def __init__(self, device: torch.device, name: str = "cuda"):
        self.device = device
        self.name = name  # "cuda" (NCCL bootstrap) or "cuda-ipc"
        self.poison_read_inputs = False
        self.release_grads = "read-done"
        self._read_stream: torch.cuda.Stream | None = None
        self._store_dir: str | None = None  # "ipc": rank 0's store directory, removed in after_close
        self.released = ReleaseQueue()  # release_grads "read-done-polled": inputs waiting for their read-done
        self._hand_over_queued_for = None  # the backward (graph task id) whose end hands the queue over

    def read_stream(self) -> torch.cuda.Stream:
        """A stream that waits only for reduce-scatters' read-done points."""
        if self._read_stream is None:
            self._read_stream = torch.cuda.Stream(self.device)
        return self._read_stream

    def create_comm(self, pg: Any, nodes: int, gpus_per_node: int, arena_bytes: int, timeout_s: float) -> Communicator:
        from tide.comm import unique_id

        rank = pg.rank()
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        if self.name == "cuda-ipc":
            # The store serves the fabric's barriers until the communicator
            # closes (close itself meets the other ranks there): it is removed
            # only in after_close, once every rank has closed.
            box = [tempfile.mkdtemp(prefix="tide-fsdp-ipc-") if rank == 0 else None]
            dist.broadcast_object_list(box, src=_group_src(pg), group=pg)
            self._store_dir = box[0] if rank == 0 else None
            return Communicator(nodes=nodes, gpus_per_node=gpus_per_node, rank=rank, arena_bytes=arena_bytes,
                                fabric="cuda-ipc", store_dir=box[0], device=index, timeout_s=timeout_s)
        box = [unique_id() if rank == 0 else None]
        dist.broadcast_object_list(box, src=_group_src(pg), group=pg)
        return Communicator(nodes=nodes, gpus_per_node=gpus_per_node, rank=rank, arena_bytes=arena_bytes,
                            fabric="cuda", unique_id=box[0], device=index, timeout_s=timeout_s)

    def after_close(self, pg: Any) -> None:
        """Called on every rank of `pg` once its communicator is closed."""
        if self.name == "cuda-ipc":
            dist.barrier(group=pg)  # no rank still meets the others in the store
            if self._store_dir is not None:
                shutil.rmtree(self._store_dir, ignore_errors=True)
                self._store_dir = None

    def drop_inputs_read(self) -> None:
        """Drops the reduce-scatter inputs held for a read-done that has passed (every call
        does so first; a kept communicator's model makes no more calls). Safe from a garbage
        collection's finalizer: no call of a collected model can hold this queue's lock."""
        self.released.reap()

    def wrap(self, addr: int, nbytes: int, dtype: torch.dtype, keepalive: Any) -> torch.Tensor:
        return torch.as_tensor(_CudaArray(addr, nbytes, keepalive), device=self.device).view(dtype)

    def stream_handle(self, stream: Any) -> int:
        return stream.cuda_stream

    # ---- all-gather
    def before_copy_in(self, ctx: Any, copy_in_stream: Any) -> None:
        # The shard buffer is shared: the previous all-gather must have read it.
        if ctx.shard_read_event is not None:
            copy_in_stream.wait_event(ctx.shard_read_event)

    def all_gather(self, comm: Communicator, handle: Any, shard_ptr: int, ctx: Any, region: Region,
                   copy_in_stream: Any, all_gather_stream: Any) -> Any:
        self.released.reap()
        all_gather_stream.wait_stream(copy_in_stream)
        for event in region.free_events:  # last readers of the previous occupant
            all_gather_stream.wait_event(event)
        comm.all_gather(handle, shard_ptr, region.offset, all_gather_stream.cuda_stream)
        event = all_gather_stream.record_event()
        # Only once the gather is enqueued does its event stand in for the ones it waited for: a call
        # that raised leaves them, so a later write into the region still waits for its readers.
        region.free_events.clear()
        # The gather itself is the region's latest writer: the next write waits for it too. A
        # consumed gather is waited for anyway (its readers follow it on the current stream), but
        # one dropped unconsumed (a prefetch of a block that did not run, taken over by a
        # ring-mate's gather: all_gather._drop_stale_gather) has no readers, and the ring-mate's
        # copy-in runs on the copy-in stream, which never waited for this all-gather stream: its
        # shard went into rows the dropped gather's peers were still writing (one H200, four
        # ranks, session 33: a wrong loss).
        region.free_events.append(event)
        if ctx.shard_buffer is not None and shard_ptr == ctx.shard_buffer.data_ptr():
            ctx.shard_read_event = event
        return event

    # ---- reduce-scatter
    def before_region_write(self, region: Region, stream: Any = None) -> None:
        """`stream` (default: the current one) waits until the region's previous
        occupant is no longer read."""
        stream = stream if stream is not None else torch.cuda.current_stream(self.device)
        for event in region.free_events:
            stream.wait_event(event)

    def reduce_scatter(self, comm: Communicator, handle: Any, ptrs: list[int], out: torch.Tensor, alpha: float,
                       keep: list, slot_views: list, region: Region | None) -> list:
        self.released.reap()
        stream = torch.cuda.current_stream(self.device)  # FSDP2's reduce-scatter stream
        comm.reduce_scatter(handle, ptrs, out.data_ptr(), alpha=alpha, accumulate=False, stream=stream.cuda_stream)
        retained = _retained(self, keep)
        # Retained inputs need no stream bookkeeping: FSDP2 orders its compute
        # stream after this whole reduce-scatter before it drops them. The
        # poisoning writes them on the read stream, so they are recorded there.
        free_at_read_done = not retained or self.poison_read_inputs
        if free_at_read_done or region is not None:
            # The read stream waits for read-done only, not for the network phase.
            read = self.read_stream()
            comm.wait_inputs_read(read.cuda_stream)
            if self.poison_read_inputs:
                with torch.cuda.stream(read):
                    _poison(keep, slot_views)
            if free_at_read_done and self.release_grads == "read-done-polled":
                # Held until a later call finds this point passed (one event for all),
                # or until the end of this backward.
                self.released.add(read.record_event(), list(keep))
                self._hand_over_at_backward_end()
            elif free_at_read_done:
                # The caching allocator may hand the gradients out again once the
                # read stream passes this point (their frees are recorded on it).
                for t in keep:
                    t.record_stream(read)
            if region is not None:  # Slot-Reuse: the next all-gather into the region waits for the reads only
                region.free_events.append(read.record_event())
        keep.clear()
        return retained

    def _hand_over_at_backward_end(self) -> None:
        """Queues, once per backward, a callback that hands the queued inputs to
        the allocator when the backward ends. Outside a backward (a reduce-scatter
        issued by hand) the next TIDE call reaps them instead."""
        task = torch._C._current_graph_task_id()
        if task < 0 or task == self._hand_over_queued_for:
            return
        torch.autograd.Variable._execution_engine.queue_callback(self._hand_over_to_allocator)
        self._hand_over_queued_for = task

    def _hand_over_to_allocator(self) -> None:
        self._hand_over_queued_for = None
        read = self.read_stream()  # it waits for every queued call's read-done
        self.released.hand_over(lambda t: t.record_stream(read))

    def on_reshard(self, region: Region) -> None:
        region.free_events.append(torch.cuda.current_stream(self.device).record_event())


FABRICS = ("host", "cuda", "cuda-ipc")


def device_type(fabric: str) -> str:
    """The torch device type of the parameters a fabric serves."""
    return "cpu" if fabric == "host" else "cuda"


def fabric_for(fabric: str | None, device: torch.device) -> str:
    """The fabric install uses for parameters on `device`: the one asked
    for, else the device's own ("cuda" with the NCCL bootstrap, or "host")."""
    return fabric or ("cuda" if device.type == "cuda" else "host")


def make_backend(fabric: str, device: torch.device) -> HostBackend | CudaBackend:
    if fabric == "host":
        return HostBackend(device)
    if fabric in ("cuda", "cuda-ipc"):
        return CudaBackend(device, fabric)
    raise ValueError(f"unknown fabric {fabric!r} (one of {FABRICS})")


def default_topology(world_size: int, fabric: str) -> tuple[int, int]:
    """(nodes, gpus_per_node): one node of up to 8 on the host fabric; on CUDA
    the local world size (LOCAL_WORLD_SIZE, else the visible GPUs)."""
    if fabric != "host":
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "0") or 0) or torch.cuda.device_count() or 1
    else:
        local = 8
    wanted = min(local, world_size)
    local = max(1, min(local, 8, world_size))
    while world_size % local:
        local -= 1
    if fabric != "host" and local != wanted:
        # Not a node per host (more than 8, or not dividing the group): said, since a wrong guess is
        # only refused later, if at all.
        logging.getLogger("tide.fsdp").warning(
            "tide.fsdp: a shard group of %d ranks runs as %d node(s) of %d GPUs, not %d per node (at most 8 per "
            "node, dividing the group); install(topology=...) to choose", world_size, world_size // local, local,
            wanted)
    return world_size // local, local
