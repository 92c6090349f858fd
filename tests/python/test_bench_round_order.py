"""The benchmarks' round order (tide.bench.round_order): every round runs every system once, the
rounds open with different systems, and no system runs behind the same one (or last) in every
round: the drift a neighbour leaves behind (clocks, allocator, host) then falls on no system
alone. Checked by brute force over small sizes, against the properties, not the construction."""

import pytest

from tide.bench.round_order import round_order


@pytest.mark.parametrize("systems", range(1, 18))
def test_rounds_are_permutations_with_changing_openers_and_neighbours(systems):
    for rounds in range(1, 24):
        orders = [round_order(systems, r, rounds) for r in range(rounds)]
        for order in orders:
            assert sorted(order) == list(range(systems))
        if rounds >= 2 and systems >= 2:
            assert len({o[0] for o in orders}) > 1, (systems, rounds)  # no system always first
            # Nor always last, but for three systems in two rounds ([0, 1, 2], [1, 0, 2]): openers
            # and neighbours differ there, and the one fixed closer is the price of both.
            if (systems, rounds) != (3, 2):
                assert len({o[-1] for o in orders}) > 1, (systems, rounds)
        if rounds <= systems:
            assert len({o[0] for o in orders}) == rounds  # each round opens with another system
        if rounds >= 2 and systems >= 3:
            neighbours = [set(zip(o, o[1:])) for o in orders]
            assert not set.intersection(*neighbours), (systems, rounds)  # no pair in every round


@pytest.mark.parametrize("systems", [2, 4, 6, 8, 16])
def test_even_counts_meet_every_ordered_neighbour_pair_once_in_a_full_square(systems):
    pairs = [p for r in range(systems) for o in [round_order(systems, r)] for p in zip(o, o[1:])]
    assert sorted(pairs) == sorted((a, b) for a in range(systems) for b in range(systems) if a != b)


def test_without_a_round_count_round_r_opens_with_system_r_mod_n():
    for systems in (1, 3, 4, 7):
        for r in range(20):
            assert round_order(systems, r)[0] == r % systems


def test_refuses_bad_arguments():
    for bad in ((0, 0, None), (3, -1, None), (3, 0, 0)):
        with pytest.raises(ValueError, match="want systems >= 1"):
            round_order(*bad)
