"""tide.fsdp.arena_lifetime in one process (no torch.distributed): which kept communicators
release_kept closes, in what order, and that a close that fails does not stop the others.
The two-rank behaviour (every rank must have let go) is the FSDP2 scenario
kept_arenas_close_once_let_go."""

from __future__ import annotations

import gc
import random
import weakref

import pytest

from tide.fsdp import arena_lifetime


class FakeComm:
    def __init__(self, log: list, name: str, fail: bool = False):
        self.log, self.name, self.fail, self.handle = log, name, fail, True

    def close(self):
        self.log.append(("close", self.name))
        self.handle = False
        if self.fail:
            raise RuntimeError(f"close of {self.name} failed")


class FakeBackend:
    def __init__(self, log: list):
        self.log = log

    def after_close(self, pg):
        self.log.append(("after_close", pg))

    def drop_inputs_read(self):
        pass


class Owner:
    """Stands in for ArenaOwner: alive while something views the arena."""


@pytest.fixture(autouse=True)
def empty_kept(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(arena_lifetime, "_kept", [])
    monkeypatch.setattr(dist, "is_initialized", lambda: False)  # release_kept exchanges nothing


def kept(log, name, counter, viewed_by=None, fail=False):
    owner = weakref.ref(viewed_by) if viewed_by is not None else None
    return arena_lifetime.Kept(((0,), counter), FakeComm(log, name, fail), f"pg-{name}", FakeBackend(log), owner)


def test_closes_what_nothing_views_in_key_order_and_keeps_the_rest():
    log: list = []
    view = Owner()
    entries = [kept(log, f"c{i}", i, viewed_by=view if i in (1, 3) else None) for i in range(5)]
    for e in random.sample(entries, len(entries)):  # kept in any order (collections run when they run)
        arena_lifetime.keep(e)
    assert arena_lifetime.release_kept() == 3
    assert [x for x in log if x[0] == "close"] == [("close", "c0"), ("close", "c2"), ("close", "c4")]
    assert ("after_close", "pg-c2") in log
    assert arena_lifetime.kept_count() == 2
    del view
    gc.collect()
    assert arena_lifetime.release_kept() == 2 and arena_lifetime.kept_count() == 0


def test_a_failed_close_still_counts_and_the_next_ones_close():
    log: list = []
    for i in range(3):
        arena_lifetime.keep(kept(log, f"c{i}", i, fail=i == 0))
    with pytest.raises(RuntimeError, match="close of c0 failed"):
        arena_lifetime.release_kept()
    assert [x[1] for x in log if x[0] == "close"] == ["c0", "c1", "c2"]
    assert arena_lifetime.kept_count() == 0  # never tried again: the peers have moved on


def test_keys_count_per_rank_set(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: False)  # one process: the group is rank 0

    class Pg:
        pass

    first, second = arena_lifetime.key_for(Pg()), arena_lifetime.key_for(Pg())
    assert first[0] == second[0] == (0,) and second[1] == first[1] + 1


class FakeEvent:
    def __init__(self, passed: bool):
        self.passed = passed

    def query(self):
        return self.passed


def test_keep_drops_the_gradients_whose_read_done_passed():
    """A collected model's CUDA backend is kept with its communicator; the reduce-scatter inputs
    it holds for their read-done must not stay with it once that has passed."""
    import torch
    from tide.fsdp.backend import CudaBackend

    backend = CudaBackend(torch.device("cuda", 0))  # no CUDA call: only its queue is used here
    read, unread = torch.randn(5), torch.randn(7)
    gone, held = weakref.ref(read), weakref.ref(unread)
    backend.released.add(FakeEvent(True), [read])
    backend.released.add(FakeEvent(False), [unread])
    del read, unread
    log: list = []
    arena_lifetime.keep(arena_lifetime.Kept(((0,), 0), FakeComm(log, "c0"), "pg", backend, None))
    gc.collect()
    assert gone() is None, "a gradient whose read-done passed stayed with the kept backend"
    assert held() is not None, "a gradient the reduce-scatter may still read was dropped"
