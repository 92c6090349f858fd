"""tide.fsdp in random configurations against stock FSDP2 on CPU (gloo, host fabric): each run
draws fresh configurations (fsdp_random_configs: model, mode, topology, install flags, plan
options, precision, reshard and accumulation together) and prints its seed; a failure names
the draw, and TIDE_FSDP_SWEEP_SEED / TIDE_FSDP_SWEEP_ONLY repeat it. The fixed scenarios
(test_fsdp_adapter.py) test each option alone; this tests them together."""

from __future__ import annotations

import pytest
from fsdp_harness import run_job

DRAWS = {2: 10, 4: 5}


@pytest.mark.parametrize("world", sorted(DRAWS))
def test_random_configurations(world, tmp_path, monkeypatch):
    monkeypatch.setenv("TIDE_FSDP_SWEEP_DRAWS", str(DRAWS[world]))
    job = run_job(world, ["random_configurations"], tmp_path, module="fsdp_random_configs")
    print(f"\n{world}-rank sweep: {job.seconds:.1f} s")
    job.check("random_configurations")
