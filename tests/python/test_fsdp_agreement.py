"""tide.fsdp.agreement.differences: what the ranks of a shard group are told when their install
decisions differ (the ranks' side: the scenario ranks_install_differently)."""

from __future__ import annotations

from tide.fsdp.agreement import Decisions, differences

SETTINGS = (("mode", "in-place"), ("topology", (1, 2)))
GROUPS = (("<root>", None), ("blocks.0", None), ("blocks.1", "cpu_offload"))
DETAILS = ("", "", "parameter 'blocks.1.w' is offloaded to CPU")


def decisions(settings=SETTINGS, groups=GROUPS, details=DETAILS) -> Decisions:
    return Decisions(settings=settings, groups=groups, details=details)


def test_alike_decisions_agree():
    assert differences([decisions()] * 4) is None


def test_details_are_not_compared():
    """A detail may name the rank's own device: only reasons count."""
    other = decisions(details=("", "", "parameter 'blocks.1.w' is offloaded to CPU (cuda:1)"))
    assert differences([decisions(), other]) is None


def test_the_first_differing_setting_is_named_with_every_ranks_value():
    other = decisions(settings=(("mode", "slot-reuse"), ("topology", (2, 1))))
    assert differences([decisions(), decisions(), other]) == \
        "mode: rank 0 'in-place', rank 1 'in-place', rank 2 'slot-reuse'"


def test_a_group_verdict_that_differs_names_the_group_and_each_ranks_reason():
    other = decisions(groups=(("<root>", None), ("blocks.0", "bad_topology"), ("blocks.1", "cpu_offload")),
                      details=("", "1x4 for a shard group of 2 ranks", DETAILS[2]))
    assert differences([decisions(), other]) == \
        "group 1 ('blocks.0'): rank 0 eligible, rank 1 bad_topology (1x4 for a shard group of 2 ranks)"


def test_another_group_name_is_shown():
    other = decisions(groups=(("<root>", None), ("layers.0", None), ("blocks.1", "cpu_offload")))
    assert differences([decisions(), other]) == "group 1 ('blocks.0'): rank 0 eligible, rank 1 'layers.0' eligible"


def test_another_number_of_groups_is_named():
    other = decisions(groups=GROUPS[:2], details=DETAILS[:2])
    assert differences([decisions(), other]) == "groups: rank 0 has 3, rank 1 has 2"
