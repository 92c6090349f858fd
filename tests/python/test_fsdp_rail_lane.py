"""tide.fsdp with plan_options={"rail_lane": True} on CPU (gloo, host fabric): the option reaches
every group's plan on a topology of one rank per node, and the gradients match the staged path's
bit for bit and stock FSDP2's (fsdp_scenarios_training.rail_lane_plan_option, fresh random inputs
each run). Its own jobs, not in the shared two- and four-rank lists: those jobs are near their time
limit on a two-core host; the CUDA smoke runs the scenario in its two-rank list."""

from __future__ import annotations

import pytest
from fsdp_harness import run_job

pytest.importorskip("torch")

SCENARIO = "rail_lane_plan_option"


@pytest.mark.parametrize("world", [2, 4])
def test_rail_lane_plan_option(tmp_path, world):
    """Topology (world, 1): M2L1 (one rail round per wave) and M4L1 (sums of four)."""
    job = run_job(world, [SCENARIO], tmp_path)
    print(f"\n{world}-rank job: {job.seconds:.1f} s")
    job.check(SCENARIO)
