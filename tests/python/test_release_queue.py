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
