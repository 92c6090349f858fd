"""CUDA ordering of writes into an arena region (tide.fsdp.backend.CudaBackend), on CPU with
recording streams: every write into a region waits for the region's previous all-gather, also
when nothing read that gather (a prefetch of a block that did not run, dropped when a ring-mate
needed the slot). The copy-in of the ring-mate's shard runs on FSDP2's copy-in stream, which
never waits for the all-gather stream by itself; without the wait it wrote rows that the dropped
gather's peers were still writing (session 33, four ranks on one H200: a wrong loss)."""

from __future__ import annotations

import itertools
import types

import pytest
import torch
from tide.fsdp.backend import CudaBackend, Region

_ids = itertools.count()


class RecordingEvent:
    def __init__(self, stream: "RecordingStream") -> None:
        self.stream = stream
        self.id = next(_ids)


class RecordingStream:
    """Records what it was made to wait for; its cuda_stream is a fake handle."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cuda_stream = next(_ids)
        self.waited_events: list[RecordingEvent] = []
        self.waited_streams: list[RecordingStream] = []

    def wait_event(self, event: RecordingEvent) -> None:
        self.waited_events.append(event)

    def wait_stream(self, stream: "RecordingStream") -> None:
        self.waited_streams.append(stream)

    def record_event(self) -> RecordingEvent:
        return RecordingEvent(self)


class RecordingComm:
    def __init__(self) -> None:
        self.gathers: list[tuple] = []

    def all_gather(self, handle, shard_ptr: int, offset: int, stream: int) -> None:
        self.gathers.append((handle, shard_ptr, offset, stream))


def _backend_and_region():
    backend = CudaBackend(torch.device("cuda", 0))  # touches no device until a stream is asked for
    region = Region("slot1", 1 << 20)
    region.offset = 4096
    ctx = types.SimpleNamespace(shard_buffer=None, shard_read_event=None)
    return backend, region, ctx


def test_a_write_after_an_unread_gather_waits_for_it():
    backend, region, ctx = _backend_and_region()
    comm, copy_in, gather = RecordingComm(), RecordingStream("copy-in"), RecordingStream("all-gather")
    dropped = backend.all_gather(comm, "block-1", 0, ctx, region, copy_in, gather)
    assert comm.gathers == [("block-1", 0, region.offset, gather.cuda_stream)]
    assert dropped.stream is gather
    # The ring-mate's copy-in of its own shard into the region: nothing read the dropped gather.
    next_copy_in = RecordingStream("copy-in, next gather")
    backend.before_region_write(region, next_copy_in)
    assert dropped in next_copy_in.waited_events, "the copy-in does not wait for the region's previous all-gather"


def test_the_next_gather_waits_for_the_previous_gather_and_its_readers_then_starts_afresh():
    backend, region, ctx = _backend_and_region()
    comm, copy_in, gather = RecordingComm(), RecordingStream("copy-in"), RecordingStream("all-gather")
    first = backend.all_gather(comm, "block-1", 0, ctx, region, copy_in, gather)
    compute = RecordingStream("compute")
    reader_done = compute.record_event()  # what on_reshard records after the forward read the slot
    region.free_events.append(reader_done)
    other_gather = RecordingStream("all-gather, second")
    second = backend.all_gather(comm, "block-3", 0, ctx, region, copy_in, other_gather)
    assert other_gather.waited_events[:2] == [first, reader_done]
    assert copy_in in other_gather.waited_streams
    # Only the newest gather is left to wait for: the list does not grow from gather to gather.
    assert region.free_events == [second]


def test_a_slot_reuse_gradient_copy_waits_for_the_slot_gather():
    """Slot-Reuse copies gradients into the slot its group vacated: that write too comes after
    the slot's gather, whatever stream the reduce-scatter runs on."""
    backend, region, ctx = _backend_and_region()
    gather = RecordingStream("all-gather")
    event = backend.all_gather(RecordingComm(), "block-2", 0, ctx, region, RecordingStream("copy-in"), gather)
    reduce_scatter = RecordingStream("reduce-scatter")
    backend.before_region_write(region, reduce_scatter)
    assert reduce_scatter.waited_events == [event]


class RefusingComm(RecordingComm):
    def all_gather(self, handle, shard_ptr: int, offset: int, stream: int) -> None:
        raise RuntimeError("tide: the communicator is unusable")


def test_a_gather_that_raised_leaves_the_region_waiting_for_its_readers():
    """A refused all-gather enqueued nothing: the region's previous readers are still the ones a
    later write must wait for (the shared shard buffer's last reader too)."""
    backend, region, ctx = _backend_and_region()
    reader_done = RecordingStream("compute").record_event()
    region.free_events.append(reader_done)
    with pytest.raises(RuntimeError, match="unusable"):
        backend.all_gather(RefusingComm(), "block-1", 0, ctx, region, RecordingStream("copy-in"),
                           RecordingStream("all-gather"))
    assert region.free_events == [reader_done]
    park = RecordingStream("reduce-scatter")
    backend.before_region_write(region, park)
    assert park.waited_events == [reader_done]
