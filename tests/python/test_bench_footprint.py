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


def test_timeline_groups_device_work_by_stream_from_the_first_event():
    from tide.bench.collectives import format_timeline, stream_timeline

    events = [
        {"cat": "kernel", "name": "void tide::k::(anonymous namespace)::landKernel<2, true>(tide::L)", "ts": 1300.0,
         "dur": 375.0, "args": {"stream": 9}},
        {"cat": "kernel", "name": "void tide::k::sumKernel<1>(tide::S)", "ts": 1000.0, "dur": 200.0,
         "args": {"stream": 7}},
        {"cat": "gpu_memcpy", "name": "Memcpy PtoP (Device -> Device)", "ts": 1210.0, "dur": 275.0,
         "args": {"stream": 8}},
        {"cat": "gpu_memset", "name": "Memset (Device)", "ts": 1700.0, "dur": 5.0, "args": {"stream": 9}},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 900.0, "dur": 3.0, "args": {}},
    ]
    timeline = stream_timeline(events)
    assert timeline == {"7": [("sumKernel", 0.0, 200.0)], "8": [("memcpy", 210.0, 275.0)],
                        "9": [("landKernel", 300.0, 375.0), ("memset", 700.0, 5.0)]}
    lines = format_timeline(timeline)
    assert lines[0] == "stream 7 (1 ops, 200 us busy): sumKernel 0+200"
    assert lines[2] == "stream 9 (2 ops, 380 us busy): landKernel 300+375, memset 700+5"
    assert stream_timeline([{"cat": "cuda_runtime", "ts": 1.0}]) == {}
