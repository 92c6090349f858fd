"""The virtual topologies the GPU scripts run over one host's GPUs."""

import os

import pytest

from tide.bench.topologies import as_own_host, node_splits, parse_topologies


@pytest.mark.parametrize("ranks, want", [
    (1, [(1, 1)]),
    (2, [(1, 2), (2, 1)]),
    (4, [(1, 4), (2, 2), (4, 1)]),
    (8, [(1, 8), (2, 4), (4, 2), (8, 1)]),
    (6, [(1, 6), (2, 3), (3, 2), (6, 1)]),
    (16, [(2, 8), (4, 4), (8, 2), (16, 1)]),  # L <= 8: no single node
])
def test_every_split_with_at_most_eight_gpus_per_node(ranks, want):
    assert node_splits(ranks) == want
    assert all(m * l == ranks for m, l in node_splits(ranks))


def test_refuses_no_ranks():
    with pytest.raises(ValueError):
        node_splits(0)


def test_own_host_sets_the_host_id_and_keeps_a_chosen_transport(monkeypatch):
    for var in ("NCCL_HOSTID", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE"):
        monkeypatch.delenv(var, raising=False)
    as_own_host("host-a")
    assert (os.environ["NCCL_HOSTID"], os.environ["NCCL_SOCKET_IFNAME"], os.environ["NCCL_IB_DISABLE"]) == \
        ("host-a", "lo", "1")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth7")
    monkeypatch.setenv("NCCL_IB_DISABLE", "0")
    as_own_host("host-b")
    assert (os.environ["NCCL_HOSTID"], os.environ["NCCL_SOCKET_IFNAME"], os.environ["NCCL_IB_DISABLE"]) == \
        ("host-b", "eth7", "0")


def test_a_subset_of_the_splits_in_the_order_given():
    assert parse_topologies("4x2,1x8", 8) == [(4, 2), (1, 8)]
    assert parse_topologies(" 2X2 ", 4) == [(2, 2)]


@pytest.mark.parametrize("text, ranks, words", [
    ("3x3", 8, "no split of 8 ranks (want one of 1x8, 2x4, 4x2, 8x1)"),
    ("1x16", 16, "no split of 16 ranks"),  # more than eight GPUs on a node
    ("2x2,2x2", 4, "given twice"),
    ("2by2", 4, "want MxL"),
    ("", 4, "want MxL"),
    ("2x2x1", 4, "want MxL"),
])
def test_refuses_what_is_no_split_of_the_ranks(text, ranks, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_topologies(text, ranks)
