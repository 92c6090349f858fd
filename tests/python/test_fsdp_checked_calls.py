"""tide.fsdp with TIDE_CHECK_CALLS=1: every collective the adapter issues is first compared across the
ranks (kind, group, landing, call number; test_comm_call_agreement.py), so a rank-local choice that
gives the ranks different call sequences (as session 35's rank-local reduce-scatter plan did) fails
with the calls named instead of pairing wrong landings and sums. The scenarios chosen here are those
whose call sequence depends on per-rank state: accumulation without sync, gradients that differ
between ranks, kept or skipped groups, prefetch orders, several models; plus a few random draws. The
checks serialize the ranks' host threads at each call, so the unchecked runs
(test_fsdp_adapter.py, test_fsdp_random_sweep.py) stay the primary ones."""

from __future__ import annotations

import pytest
from fsdp_harness import run_job

CHECKED = {
    2: ["gradient_accumulation_bf16_no_sync", "gradient_dtypes_differ_between_ranks", "ranks_disagree_on_unused_params",
        "conditional_execution", "kept_unsharded_across_a_step", "reshard_after_backward_false",
        "skipped_blocks_hold_no_slot", "prefetch_inversion", "explicit_forward_prefetch", "two_models",
        "integer_exact_slot_reuse_two_nodes", "eval_between_no_sync_micro_batches"],
    4: ["hsdp_slot_reuse_partial_all_reduce", "fsdp4_push_landing", "params_smaller_than_world"],
}
ANNOUNCED = "[tide] TIDE_CHECK_CALLS=1: every collective first compares itself"


@pytest.mark.parametrize("world", sorted(CHECKED))
def test_scenarios_issue_the_same_calls_on_every_rank(world, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TIDE_CHECK_CALLS", "1")  # the spawned ranks inherit it
    job = run_job(world, CHECKED[world], tmp_path)
    # The ranks' communicators did check (rank 0 of each says so on the inherited stderr).
    assert ANNOUNCED in capfd.readouterr().err
    for name in CHECKED[world]:
        job.check(name)


def test_random_draws_issue_the_same_calls_on_every_rank(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("TIDE_CHECK_CALLS", "1")
    monkeypatch.setenv("TIDE_FSDP_SWEEP_DRAWS", "4")
    job = run_job(2, ["random_configurations"], tmp_path, module="fsdp_random_configs")
    assert ANNOUNCED in capfd.readouterr().err
    job.check("random_configurations")
