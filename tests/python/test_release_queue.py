"""tide.fsdp.backend.ReleaseQueue (install's release_grads="read-done-polled"): tensors are held
until their event has passed, dropped in order, never before; clear() drops the rest."""

from __future__ import annotations

import gc
import weakref

import torch
from tide.fsdp.backend import ReleaseQueue


class FakeEvent:
    """An event of one stream: passed once the test says so."""

    def __init__(self) -> None:
        self.passed = False
        self.queries = 0

    def query(self) -> bool:
        self.queries += 1
        return self.passed


def _held(refs: list) -> int:
    gc.collect()
    return sum(r() is not None for r in refs)


def test_tensors_are_dropped_in_order_once_their_event_passed():
    q = ReleaseQueue()
    events = [FakeEvent() for _ in range(3)]
    refs = []
    for i, ev in enumerate(events):
        tensors = [torch.randn(4) for _ in range(i + 1)]
        refs.append([weakref.ref(t) for t in tensors])
        q.add(ev, tensors)
        del tensors
    assert len(q) == 6 and q.queued == 6
    assert q.reap() == 0 and all(_held(r) == len(r) for r in refs)
    # A later event passed before an earlier one (not possible on one stream): nothing jumps the queue.
    events[1].passed = True
    assert q.reap() == 0 and _held(refs[1]) == 2
    events[0].passed = True
    assert q.reap() == 3  # the first two entries
    assert _held(refs[0]) == 0 and _held(refs[1]) == 0 and _held(refs[2]) == 3
    queries = events[2].queries
    assert q.reap() == 0 and events[2].queries == queries + 1  # one query for the head that has not passed
    assert len(q) == 3 and q.dropped == 3


def test_clear_drops_everything_and_an_empty_queue_queries_nothing():
    q = ReleaseQueue()
    ev = FakeEvent()
    tensors = [torch.randn(2), torch.randn(3)]
    refs = [weakref.ref(t) for t in tensors]
    q.add(ev, tensors)
    del tensors
    q.clear()
    assert _held(refs) == 0 and len(q) == 0 and q.dropped == 2
    before = ev.queries
    assert q.reap() == 0 and ev.queries == before


def test_hand_over_releases_every_queued_tensor_then_drops_them():
    q = ReleaseQueue()
    released = []
    refs = []
    for n in (2, 1):
        tensors = [torch.randn(3) for _ in range(n)]
        refs += [weakref.ref(t) for t in tensors]
        q.add(FakeEvent(), tensors)
        del tensors
    assert q.hand_over(lambda t: released.append(t.shape)) == 3
    assert released == [torch.Size([3])] * 3
    assert _held(refs) == 0 and len(q) == 0 and q.dropped == q.handed_over == 3
    assert q.hand_over(released.append) == 0 and len(released) == 3


class FakeGradient:
    """A queued input: records the streams it is handed to."""

    def __init__(self) -> None:
        self.streams = []

    def record_stream(self, stream) -> None:
        self.streams.append(stream)


def test_the_queue_goes_to_the_allocator_at_the_end_of_each_backward():
    """CudaBackend (read-done-polled): calls inside a backward queue one end-of-backward callback
    between them, which hands every queued input to the read stream (record_stream); outside a
    backward nothing is queued and the inputs wait for the next call."""
    from tide.fsdp.backend import CudaBackend

    backend = CudaBackend(torch.device("cuda", 0))
    read = object()
    backend.read_stream = lambda: read  # no CUDA here: the stream is only handed to record_stream
    grads = []

    def reduce_scatter_call():  # what CudaBackend.reduce_scatter does for "read-done-polled"
        g = FakeGradient()
        grads.append(g)
        backend.released.add(FakeEvent(), [g])
        backend._hand_over_at_backward_end()

    x = torch.randn(4, requires_grad=True)
    for step in range(2):
        y = x * 2
        y.register_hook(lambda g: [reduce_scatter_call() for _ in range(3)] and g)
        y.sum().backward()
        assert len(backend.released) == 0 and backend.released.handed_over == 3 * (step + 1)
        assert all(g.streams == [read] for g in grads), [g.streams for g in grads]
    reduce_scatter_call()  # outside a backward: held for the next call's reap
    assert len(backend.released) == 1 and grads[-1].streams == []
