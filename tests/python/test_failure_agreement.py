"""tide.bench.failure_agreement through tide.bench.fsdp_steps on two gloo ranks: a configuration
that fails on every rank is recorded and the driver goes on to the next; one that fails on one rank
only, while the other waits in a collective, ends the failed rank (status 1, the JSON of what
finished saved) instead of hanging the job; so does a loss curve that fails on one rank only. The
configurations and the curve are stand-ins (run_config and loss_curve replaced): what is under test is
the driver's handling of their failures, not the training."""

from __future__ import annotations

import datetime
import json
import time

import pytest
from spawned_ranks import run_ranks

pytest.importorskip("torch")

AGREEMENT_S = 3.0
# The main group's own timeout: far above the agreement's, so a rank that ends within it was ended
# by the agreement (or by its peer's end), not by the group giving up.
GROUP_TIMEOUT_S = 120


def _rank(rank: int, tmp: str, results) -> None:
    import torch.distributed as dist

    from tide.bench import failure_agreement, fsdp_steps

    dist.init_process_group("gloo", init_method=f"file://{tmp}/pg", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))
    failure_agreement.AGREEMENT_TIMEOUT_S = AGREEMENT_S

    def stand_in_config(env, args, kind, tokens, out):
        results.put((rank, "started", kind, time.monotonic()))
        if kind == "llama":
            raise RuntimeError(f"rank {rank}: every rank fails the first configuration")
        if rank == 1:
            raise RuntimeError("rank 1 alone fails the second configuration")
        dist.barrier()  # rank 0 waits in a collective of the configuration, as a healthy rank would
        raise AssertionError("rank 0 got through a barrier that rank 1 never entered")

    fsdp_steps.run_config = stand_in_config
    rc = fsdp_steps.main(["--tiny", "--device", "cpu", "--model", "llama", "moe", "--tokens", "64",
                          "--json", f"{tmp}/steps.json"])
    results.put((rank, "returned", rc, time.monotonic()))


def test_a_failure_on_every_rank_goes_on_and_one_on_a_single_rank_ends_it(tmp_path):
    started = time.monotonic()
    got, codes = run_ranks(_rank, 2, (str(tmp_path),), timeout=GROUP_TIMEOUT_S / 2)
    events = {(r, what, kind): t for r, what, kind, t in got}
    # Both ranks failed the first configuration and both went on to the second.
    for r in (0, 1):
        assert (r, "started", "llama") in events and (r, "started", "moe") in events, got
    # Rank 1 failed the second alone: once the agreement's deadline passed it ended with status 1
    # (os._exit) instead of returning (a rank still running at run_ranks' timeout reads None).
    assert codes[1] == 1, (codes, got)
    assert not any(what == "returned" for _, what, _ in events), got
    # Rank 0, left waiting in the barrier, ended too (its peer's end broke the collective, and its
    # own agreement then found rank 1 gone), long before the group's timeout would have.
    assert codes[0] == 1, (codes, got)
    assert time.monotonic() - started < GROUP_TIMEOUT_S / 2
    # The JSON that rank 0 saved before ending holds the first configuration's failure, as a run.
    report = json.loads((tmp_path / "steps.json").read_text())
    runs = [(r["model"], "error" in r) for r in report["runs"]]
    assert runs[0] == ("llama", True), runs
    assert "every rank fails the first configuration" in report["runs"][0]["error"]


def _loss_curve_rank(rank: int, tmp: str, results) -> None:
    import torch.distributed as dist

    from tide.bench import failure_agreement, fsdp_steps

    dist.init_process_group("gloo", init_method=f"file://{tmp}/pg", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))
    failure_agreement.AGREEMENT_TIMEOUT_S = AGREEMENT_S

    def stand_in_curve(env, args, out):
        results.put((rank, "started", "curve", time.monotonic()))
        if rank == 1:
            raise RuntimeError("rank 1 alone fails the loss curve")
        dist.barrier()  # rank 0 waits in one of the curve's collectives
        raise AssertionError("rank 0 got through a barrier that rank 1 never entered")

    fsdp_steps.loss_curve = stand_in_curve
    rc = fsdp_steps.main(["--tiny", "--device", "cpu", "--model", "llama", "--loss-curve", "8",
                          "--json", f"{tmp}/curve.json"])
    results.put((rank, "returned", rc, time.monotonic()))


def test_a_loss_curve_failed_on_a_single_rank_ends_the_job(tmp_path):
    got, codes = run_ranks(_loss_curve_rank, 2, (str(tmp_path),), timeout=GROUP_TIMEOUT_S / 2)
    assert sorted(r for r, what, *_ in got if what == "started") == [0, 1], got
    assert not any(what == "returned" for _, what, *_ in got), got
    assert codes == [1, 1], (codes, got)
    report = json.loads((tmp_path / "curve.json").read_text())
    assert "error" in report["loss_curve"], report["loss_curve"]
