"""Plan options measured on this project's GPU machines, shared by every GPU
driver (collectives benchmark, GPU correctness checks, end-to-end steps), so
that one number is changed in one place.

H200_PAIR: two H200s on NVLink (nvidia-h200-x2), from BENCHMARKS.md:
- copy-engine rails and pushes: 16 MiB into the peer at 341 GB/s, 208 MiB at
  388 GB/s (fabric test `--perf`; the copy-engine ceiling row);
- the Level 1 sum kernel: the TMA kernel (the default since session 8) 98 GB/s
  per CTA up to 16 CTAs with two bf16 sources, 115 with four (one H200,
  fabric test `--perf`); the register kernel 49-54 GB/s since 3773eb6 (all
  loads in flight), 30 GB/s before;
- the landing kernel: ~20 GB/s per CTA with a remote source (pull), ~900 GB/s
  at most;
- four passes give Level 1 chunks to pipeline; they never change the bits.
With these, the solver gives the Llama-3.1-8B layer on one node half the sum
CTAs it gave the register kernel at 50 GB/s per CTA (47): the sum keeps pace
with bf16 pushes at 390 GB/s (4 bytes of sum traffic per pushed byte, times
the default skew 1.5); the collectives driver also measures the fixed budgets
of RS_CTA_SWEEP (collectives.py) beside it.
"""

from __future__ import annotations

H200_PAIR = {
    "calibration": {"nic_gbps": 390, "fabric_gbps": 390, "sum_gbps_per_cta": 98, "land_gbps_per_cta": 20,
                    "land_cap_gbps": 900, "round_wait_ms": 0.02},
    "passes": 4,
}

# Named plan-option sets for command lines ("default": the library's own, the paper's calibration).
PLAN_OPTIONS = {"default": {}, "h200-pair": H200_PAIR}
