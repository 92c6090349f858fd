"""The scenario harness itself (fsdp_harness.run_scenarios, JobResult.check): a scenario whose
clean-up fails is reported failed, a failure is reported before the barrier that may never end,
and a job that failed around reported scenarios fails them."""

from __future__ import annotations

import types

import pytest

torch = pytest.importorskip("torch")
import fsdp_harness  # noqa: E402


@pytest.fixture
def one_rank_group(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _run(monkeypatch, clean_up, scenario=lambda ctx: None):
    reports = []
    module = types.SimpleNamespace(probe=scenario)
    monkeypatch.setattr(fsdp_harness, "uninstall_all_tide", clean_up)
    ctx = fsdp_harness.Context(0, 1, "/tmp", fsdp_harness.LogCapture())
    fsdp_harness.run_scenarios(module, ["probe"], ctx, lambda *report: reports.append(report))
    return reports


def test_a_failed_clean_up_fails_its_scenario(one_rank_group, monkeypatch):
    def clean_up():
        raise RuntimeError("releasing the kept arenas failed")

    (name, ok, message, _seconds), = _run(monkeypatch, clean_up)
    assert name == "probe" and not ok
    assert "clean-up after the scenario failed" in message and "releasing the kept arenas failed" in message

    def skip(ctx):
        raise fsdp_harness.ScenarioSkipped("not here")

    (_name, ok, message, _seconds), = _run(monkeypatch, clean_up, skip)
    assert not ok, "a skipped scenario whose clean-up failed was not a failure"


def test_a_clean_scenario_passes(one_rank_group, monkeypatch):
    (name, ok, message, _seconds), = _run(monkeypatch, lambda: None)
    assert (name, ok, message) == ("probe", True, "")


def test_a_failure_is_reported_before_the_barrier_that_may_never_end(one_rank_group, monkeypatch):
    # A rank whose scenario failed while its peer still waits in the scenario's collectives meets
    # the barrier alone, and the group's timeout ends it with an error: the scenario's own
    # traceback must have been reported by then.
    import torch.distributed as dist

    def barrier_ended_by_the_timeout(*args, **kwargs):
        raise RuntimeError("Timed out waiting 180000ms for recv operation to complete")

    def scenario(ctx):
        raise ValueError("rank-only assertion: 17 != 19")

    monkeypatch.setattr(dist, "barrier", barrier_ended_by_the_timeout)
    reports = []
    module = types.SimpleNamespace(probe=scenario)
    monkeypatch.setattr(fsdp_harness, "uninstall_all_tide", lambda: None)
    ctx = fsdp_harness.Context(0, 1, "/tmp", fsdp_harness.LogCapture())
    with pytest.raises(RuntimeError, match="Timed out waiting"):
        fsdp_harness.run_scenarios(module, ["probe"], ctx, lambda *report: reports.append(report))
    (name, ok, message, _seconds), = reports
    assert name == "probe" and not ok and "rank-only assertion: 17 != 19" in message


def test_a_job_that_failed_fails_its_reported_scenarios():
    job = fsdp_harness.JobResult(2)
    job.outcomes["probe"] = {r: fsdp_harness.Outcome(True, "", 0.1) for r in range(2)}
    job.check("probe")
    job.crashed = "rank 1: Traceback ... RuntimeError: tear-down failed\n"
    with pytest.raises(AssertionError, match="the job failed: rank 1"):
        job.check("probe")
