"""The order in which a benchmark round runs its systems.

Systems measured in turns must not always follow the same neighbour (a system run right after
a heavy one meets a hotter GPU, a fuller allocator, a busier host) nor always open or close a
round. A plain rotation moves who goes first but keeps every system behind the same one. The
rounds here are rows of a Williams design (a balanced Latin square): with an even number of
systems every ordered pair of neighbours occurs in exactly one of `systems` consecutive rows;
with an odd number, the odd rounds run a row backwards, so that no pair of neighbours recurs in
every round either. Every rank computes the same order (no randomness), as collectives require.
"""

from __future__ import annotations


def _williams_row(systems: int) -> list[int]:
    """0, 1, n-1, 2, n-2, ...: the first row; the others are its shifts modulo n."""
    row, low, high = [0], 1, systems - 1
    while len(row) < systems:
        if len(row) % 2 == 1:
            row.append(low)
            low += 1
        else:
            row.append(high)
            high -= 1
    return row


def round_order(systems: int, r: int, rounds: int | None = None) -> list[int]:
    """System indices in the order round `r` runs them. With `rounds` (the run's number of rounds,
    when known and at most `systems`) the rounds' first systems are spread over all systems;
    without it round r opens with system r mod `systems`."""
    if systems < 1 or r < 0 or (rounds is not None and rounds < 1):
        raise ValueError(f"want systems >= 1, r >= 0 and rounds >= 1, got {systems}, {r}, {rounds}")
    first = (r * systems) // rounds if rounds is not None and rounds <= systems else r % systems
    row = _williams_row(systems)
    if systems % 2 == 1 and r % 2 == 1:
        row.reverse()
    shift = first - row[0]
    return [(i + shift) % systems for i in row]
