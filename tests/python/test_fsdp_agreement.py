"""tide.fsdp.agreement: what the ranks are told when their install decisions differ, and how a
verdict spreads over shard groups and replicas (the ranks' side: the scenarios
ranks_install_differently and hsdp_one_replica_installs_differently)."""

from __future__ import annotations

import threading

import pytest

from tide.fsdp import agreement
from tide.fsdp.agreement import Decisions, differences

SETTINGS = (("mode", "in-place"), ("topology", (1, 2)))
GROUPS = (("<root>", None), ("blocks.0", None), ("blocks.1", "cpu_offload"))
DETAILS = ("", "", "parameter 'blocks.1.w' is offloaded to CPU")


def decisions(rank: int, settings=SETTINGS, groups=GROUPS, details=DETAILS) -> Decisions:
    return Decisions(settings=settings, groups=groups, details=details, rank=rank)


def test_alike_decisions_agree():
    assert differences([decisions(r) for r in range(4)]) is None


def test_details_are_not_compared():
    """A detail may name the rank's own device: only reasons count."""
    other = decisions(1, details=("", "", "parameter 'blocks.1.w' is offloaded to CPU (cuda:1)"))
    assert differences([decisions(0), other]) is None


def test_the_first_differing_setting_names_the_odd_ranks_by_global_rank():
    other = decisions(10, settings=(("mode", "slot-reuse"), ("topology", (2, 1))))
    assert differences([decisions(4), decisions(6), other, decisions(12)]) == \
        "mode: 'in-place' on 3 rank(s), but rank 10 'slot-reuse'"


def test_only_the_first_ranks_that_differ_are_named():
    everyone = [decisions(r) for r in range(4)] + [decisions(r, settings=(("mode", "slot-reuse"),) + SETTINGS[1:])
                                                  for r in range(4, 14)]
    text = differences(everyone)
    assert text.startswith("mode: 'slot-reuse' on 10 rank(s), but rank 0 'in-place', rank 1 'in-place'"), text
    everyone = [decisions(0)] + [decisions(r, settings=(("mode", f"m{r}"),) + SETTINGS[1:]) for r in range(1, 12)]
    text = differences(everyone)
    assert "rank 8 'm8'" in text and "rank 9 " not in text and text.endswith(" and 3 more"), text


def test_a_group_verdict_that_differs_names_the_group_and_each_odd_ranks_reason():
    other = decisions(1, groups=(("<root>", None), ("blocks.0", "bad_topology"), ("blocks.1", "cpu_offload")),
                      details=("", "1x4 for a shard group of 2 ranks", DETAILS[2]))
    assert differences([decisions(0), decisions(2), other]) == \
        "group 1 ('blocks.0'): eligible on 2 rank(s), but rank 1 bad_topology (1x4 for a shard group of 2 ranks)"


def test_another_group_name_is_shown():
    other = decisions(1, groups=(("<root>", None), ("layers.0", None), ("blocks.1", "cpu_offload")))
    assert differences([decisions(0), decisions(2), other]) == \
        "group 1 ('blocks.0'): eligible on 2 rank(s), but rank 1 'layers.0' eligible"


def test_another_number_of_groups_is_named():
    other = decisions(1, groups=GROUPS[:2], details=DETAILS[:2])
    assert differences([decisions(0), decisions(2), other]) == "groups: has 3 on 2 rank(s), but rank 1 has 2"


class FakeGroup:
    """A process group whose all_gather_object answers with what its other members send
    (`others`, by group rank; this rank's slot is `me`)."""

    def __init__(self, me: int, others: dict[int, object]):
        self.me, self.others = me, others
        self.sent: list[object] = []

    def size(self) -> int:
        return len(self.others) + 1


@pytest.fixture
def gather(monkeypatch):
    def all_gather_object(out, obj, group):
        group.sent.append(obj)
        for r in range(len(out)):
            out[r] = obj if r == group.me else group.others[r]
    monkeypatch.setattr(agreement.dist, "all_gather_object", all_gather_object)


def test_a_replica_that_disagreed_stops_the_others(gather):
    shard = FakeGroup(0, {1: decisions(1)})
    replicas = FakeGroup(0, {1: (decisions(2), "mode: 'in-place' on 1 rank(s), but rank 3 'slot-reuse'")})
    assert agreement.compare(shard, decisions(0), [replicas]) == \
        "in the replica of rank 2: mode: 'in-place' on 1 rank(s), but rank 3 'slot-reuse'"
    assert replicas.sent == [(decisions(0), None)]  # this replica's own verdict went out


def test_replicas_that_agreed_on_other_decisions_disagree(gather):
    shard = FakeGroup(0, {1: decisions(1)})
    replicas = FakeGroup(0, {1: (decisions(2, settings=(("mode", "in-place"), ("topology", (2, 1)))), None)})
    assert agreement.compare(shard, decisions(0), [replicas]) == \
        "across replicas, topology: (1, 2) on 1 rank(s), but rank 2 (2, 1)"


def test_alike_replicas_agree_and_one_replica_asks_no_one(gather):
    shard = FakeGroup(1, {0: decisions(0)})
    assert agreement.compare(shard, decisions(1), [FakeGroup(1, {0: (decisions(3), None)})]) is None
    assert agreement.compare(shard, decisions(1)) is None
    lone = FakeGroup(0, {})
    assert agreement.compare(shard, decisions(1), [lone]) is None and lone.sent == []


def test_refusals_spread_over_shard_groups_then_replicas(gather):
    """Rank 3's refusal reaches rank 0 through rank 2 (rank 0's replica peer), which learnt it in
    its own shard group first; one-rank groups are skipped."""
    shard = FakeGroup(0, {1: []})
    lone = FakeGroup(0, {})
    replicas = FakeGroup(0, {1: [(3, "lazy_init", "out of memory")]})
    assert agreement.refusals([shard, lone], [replicas], None, 0) == [(3, "lazy_init", "out of memory")]
    assert lone.sent == [] and shard.sent == [[]] and replicas.sent == [[]]
    mine = agreement.refusals([FakeGroup(0, {1: [(1, "not_idle", "busy")]})], [], ("meta_device", "meta"), 0)
    assert mine == [(0, "meta_device", "meta"), (1, "not_idle", "busy")]


def test_refusal_passes_one_pass_where_it_reaches_every_rank():
    """One mesh (its rows, then its columns), a group spanning the world, or a single group: one
    pass, known complete."""
    assert agreement.refusal_passes([[[0, 1], [2, 3]], [[0, 2], [1, 3]]], 4) == (1, True)
    assert agreement.refusal_passes([[[0, 1, 2, 3]], [[0, 1]]], 4) == (1, True)  # a sub-mesh beside a world group
    assert agreement.refusal_passes([[[0, 1], [2, 3]]], 4) == (1, True)
    assert agreement.refusal_passes([], 4) == (1, True)
    # HSDP beside tensor parallelism: the sub-mesh lists this rank's slice of a world of 8.
    assert agreement.refusal_passes([[[0, 1], [2, 3]], [[0, 2], [1, 3]]], 8) == (1, True)
    assert agreement.refusal_passes([[[0, 1], [2, 3]], [[0, 1, 2, 3]]], 8) == (1, True)  # spans the slice


def test_refusal_passes_count_chains_and_refuse_partial_views():
    """Groups that only chain need a pass per turn back through the order; groups whose rows
    cover different ranks (a sub-mesh's slice beside a mesh of more ranks), or a mesh that does
    not say its rows, leave one pass, not known complete."""
    ring = [[[0, 1], [2, 3], [4, 5], [6, 7]], [[1, 2], [3, 4], [5, 6], [7, 0]]]
    assert agreement.refusal_passes(ring, 8) == (2, True)
    assert agreement.refusal_passes(ring, 16) == (2, True)  # the same ring on a slice of a world of 16
    chain = [[[2, 3], [0], [1]], [[1, 2], [0], [3]], [[0, 1], [2], [3]]]
    assert agreement.refusal_passes(chain, 4) == (3, True)
    assert agreement.refusal_passes([[[0, 1]], [[0, 2]]], 4) == (1, False)
    assert agreement.refusal_passes([None, [[0, 1], [2, 3]]], 4) == (1, False)


class ThreadGroup:
    """One instance of a process group for ranks run as threads: all_gather_object meets its
    members at a barrier (a deadline, so a rank that never comes fails the test, not hangs it)."""

    def __init__(self, members):
        self.members = list(members)
        self.slots = [None] * len(self.members)
        self.barrier = threading.Barrier(len(self.members), timeout=20)

    def size(self) -> int:
        return len(self.members)


def _spread_in_threads(partitions, refusing, passes, monkeypatch) -> dict[int, list]:
    """Every rank of the world runs agreement.refusals over its instance of each partition's
    groups (all as shard groups, in order), rank r refusing where r is in `refusing`; returns
    each rank's answer."""
    ranks = sorted({r for part in partitions for inst in part for r in inst})
    instances = [{r: group for inst in part for group in [ThreadGroup(inst)] for r in inst} for part in partitions]
    local = threading.local()

    def all_gather_object(out, obj, group):
        i = group.members.index(local.rank)
        group.slots[i] = obj
        group.barrier.wait()
        out[:] = list(group.slots)
        group.barrier.wait()  # nobody writes the next slot before every member read this one

    monkeypatch.setattr(agreement.dist, "all_gather_object", all_gather_object)
    answers, errors = {}, []

    def rank_main(r):
        local.rank = r
        try:
            mine = ("lazy_init", f"rank {r} failed") if r in refusing else None
            answers[r] = agreement.refusals([inst[r] for inst in instances], [], mine, r, passes)
        except Exception as e:  # noqa: BLE001 - reported below, with the rank
            errors.append((r, e))

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in ranks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return answers


def test_refusals_reach_every_rank_over_chained_groups(rng, monkeypatch):
    """Random worlds of 4 to 12 ranks, each group position a random split into equal instances:
    with refusal_passes' count every rank learns every refusal of its connected ranks, in as many
    all_gather_object rounds on every rank; with one pass fewer, where it takes more than one, a
    ring of matchings leaves ranks out (the count is needed)."""
    for _ in range(30):
        n = rng.choice([4, 6, 8, 12])
        positions = rng.randint(1, 4)
        partitions = []
        for _ in range(positions):
            size = rng.choice([k for k in (1, 2, 3, 4, 6) if n % k == 0 and k < n])
            order = rng.sample(range(n), n)
            partitions.append([sorted(order[i:i + size]) for i in range(0, n, size)])
        passes, complete = agreement.refusal_passes(partitions, n)
        assert complete
        refusing = set(rng.sample(range(n), rng.randint(1, 2)))
        answers = _spread_in_threads(partitions, refusing, passes, monkeypatch)
        component = {r: {r} for r in range(n)}  # who is connected to whom, through any group
        for part in partitions:
            for inst in part:
                joined = set().union(*(component[r] for r in inst))
                for r in joined:
                    component[r] = joined
        for r in range(n):
            expected = sorted((q, "lazy_init", f"rank {q} failed") for q in refusing & component[r])
            assert answers[r] == expected, (partitions, passes, r)
    ring = [[[0, 1], [2, 3], [4, 5], [6, 7]], [[1, 2], [3, 4], [5, 6], [7, 0]]]
    assert agreement.refusal_passes(ring, 8) == (2, True)
    short = _spread_in_threads(ring, {4}, 1, monkeypatch)
    assert any(answers == [] for answers in short.values()), short
    full = _spread_in_threads(ring, {4}, 2, monkeypatch)
    assert all(answers == [(4, "lazy_init", "rank 4 failed")] for answers in full.values()), full


def test_one_process_without_torch_distributed_keeps_its_own_refusal(monkeypatch):
    """Without torch.distributed there is no peer to tell: on_some_rank returns this rank's own
    refusal (as rank 0), or none, without reading the model's groups."""
    import torch

    from tide.fsdp import model_consensus

    monkeypatch.setattr(model_consensus.dist, "is_initialized", lambda: False)

    def unreadable(*unused):
        raise AssertionError("read the model's groups with no peers")

    monkeypatch.setattr(model_consensus, "model_process_groups", unreadable)
    model = torch.nn.Linear(2, 2)
    assert model_consensus.on_some_rank(model, ("meta_params", "on the meta device")) == \
        [(0, "meta_params", "on the meta device")]
    assert model_consensus.on_some_rank(model, None) == []
