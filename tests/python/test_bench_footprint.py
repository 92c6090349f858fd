"""CTA-time of one call from a profiler trace (tide.bench.collectives.cta_time_us): the SM
footprint the collectives benchmark reports beside kernel counts."""

import pytest

torch = pytest.importorskip("torch")
from tide.bench.collectives import cta_time_us  # noqa: E402


def test_sums_grid_times_duration_over_kernels_only():
    events = [
        {"cat": "kernel", "name": "sum", "dur": 10.0, "args": {"grid": [24, 1, 1], "block": [512, 1, 1]}},
        {"cat": "kernel", "name": "land", "dur": 2.5, "args": {"grid": [4, 2, 1]}},
        {"cat": "gpu_memcpy", "name": "Memcpy PtoP", "dur": 500.0, "args": {}},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "dur": 3.0, "args": {}},
    ]
    assert cta_time_us(events) == pytest.approx(24 * 10.0 + 8 * 2.5)


def test_no_kernels_is_zero_and_a_kernel_without_grid_is_unknown():
    assert cta_time_us([{"cat": "gpu_memcpy", "dur": 9.0}]) == 0.0
    assert cta_time_us([{"cat": "kernel", "dur": 9.0, "args": {}}]) is None
