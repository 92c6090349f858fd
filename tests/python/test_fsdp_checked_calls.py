"""tide.fsdp with TIDE_CHECK_CALLS=1: every collective the adapter issues is first compared across the
ranks (kind, group, landing, call number; test_comm_call_agreement.py), so a rank-local choice that
gives the ranks different call sequences (as session 35's rank-local reduce-scatter plan did) fails
with the calls named instead of pairing wrong landings and sums. The scenarios are
fsdp_scenarios.CHECKED_CALLS (those whose call sequence depends on per-rank state), plus a few
random draws. The checks serialize the ranks' host threads at each call, so the unchecked runs
(test_fsdp_adapter.py, test_fsdp_random_sweep.py) stay the primary ones."""

from __future__ import annotations

import os
from pathlib import Path

import fsdp_scenarios
import pytest
from fsdp_harness import run_job

ANNOUNCED = "[tide] TIDE_CHECK_CALLS=1: every collective first compares itself"


@pytest.mark.parametrize("world", sorted(fsdp_scenarios.CHECKED_CALLS))
def test_scenarios_issue_the_same_calls_on_every_rank(world, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TIDE_CHECK_CALLS", "1")  # the spawned ranks inherit it
    job = run_job(world, fsdp_scenarios.CHECKED_CALLS[world], tmp_path)
    # The ranks' communicators did check (rank 0 of each says so on the inherited stderr).
    assert ANNOUNCED in capfd.readouterr().err
    for name in fsdp_scenarios.CHECKED_CALLS[world]:
        job.check(name)


def test_random_draws_issue_the_same_calls_on_every_rank(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TIDE_CHECK_CALLS", "1")
    monkeypatch.setenv("TIDE_FSDP_SWEEP_DRAWS", "4")
    job = run_job(2, ["random_configurations"], tmp_path, module="fsdp_random_configs")
    assert ANNOUNCED in capfd.readouterr().err
    job.check("random_configurations")


HINT = "TORCH_DISTRIBUTED_DEBUG=DETAIL does not check TIDE's collectives; TIDE_CHECK_CALLS=1"


def detail_debug_points_at_the_call_check(ctx) -> None:
    """A scenario (run in the ranks): under TORCH_DISTRIBUTED_DEBUG=DETAIL, whose fingerprints see only
    torch's process groups, install says how to check TIDE's own calls, and not where they are checked.
    (torch reads DETAIL when a process group is made: set after that, it changes nothing of torch's.)"""
    import tide.fsdp
    from fsdp_scenario_kit import batches, install, make_pair, mesh_1d, transformer

    for check in ("", "1"):
        os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
        os.environ["TIDE_CHECK_CALLS"] = check
        try:
            ctx.logs.clear()
            _, mt = make_pair(transformer, ctx, mesh_1d(ctx))
            install(mt, ctx)
            mt(batches(ctx, 1)[0]).sum().backward()
            hinted = any(HINT in m for m in ctx.logs.messages())
            assert hinted == (check == ""), (check, ctx.logs.messages())
            tide.fsdp.uninstall(mt)
        finally:
            del os.environ["TORCH_DISTRIBUTED_DEBUG"], os.environ["TIDE_CHECK_CALLS"]


def test_detail_debug_points_at_the_call_check(tmp_path):
    name = "detail_debug_points_at_the_call_check"
    run_job(2, [name], tmp_path, module=Path(__file__).stem).check(name)
