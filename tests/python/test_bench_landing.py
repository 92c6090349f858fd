"""Where the collectives benchmark puts a rank's own shard for the in-place TIDE-AG
(tide.bench.collectives.own_landing_rows): the rank's rows of the parameter-major landing that
FSDP2's copy-out would leave, checked against a landing built independently from every rank's
shard, on groups with padded shards."""

import random

import pytest

torch = pytest.importorskip("torch")
from tide.bench.collectives import Group, ag_expected, ag_shard, own_landing_rows  # noqa: E402


def _random_group(rng: random.Random) -> Group:
    ranks = rng.choice([2, 3, 4, 8])
    shapes = [(rng.randint(1, 40), rng.randint(1, 9)) for _ in range(rng.randint(1, 9))]
    return Group("random", shapes, ranks)


@pytest.mark.parametrize("trial", range(20))
def test_own_rows_are_the_ranks_shard_in_the_parameter_major_landing(trial):
    rng = random.Random()
    group = _random_group(rng)
    cpu = torch.device("cpu")
    # The landing after an all-gather: per parameter, its N shards back to back (rank-major rows
    # of the (N, S) all-gather output, split by parameter).
    expected = ag_expected(group, cpu)
    landing = torch.cat([part.reshape(-1) for part in torch.split(expected, group.shard_numels, dim=1)])
    covered = torch.zeros(landing.numel(), dtype=torch.int32)
    for rank in range(group.ranks):
        shard = ag_shard(group, rank, cpu)
        spans = own_landing_rows(group, rank)
        assert len(spans) == len(group.shapes)
        assert sum(n for _, _, n in spans) == shard.numel()
        for landing_at, shard_at, numel in spans:
            assert torch.equal(landing[landing_at:landing_at + numel], shard[shard_at:shard_at + numel]), \
                (group, rank, landing_at)
            covered[landing_at:landing_at + numel] += 1
    assert bool((covered == 1).all()), "the ranks' own rows must tile the landing exactly once"
