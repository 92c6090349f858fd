"""The SM footprint the collectives benchmark reports (tide.bench.kernel_footprint): CTA- and SM-time
from a profiler trace, the per-call counts after the ranks' alignment barrier, the log line."""

import pytest

torch = pytest.importorskip("torch")
from tide.bench.kernel_footprint import cta_time_us  # noqa: E402


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
    from tide.bench.kernel_footprint import format_timeline, stream_timeline

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


def test_sm_time_caps_a_kernels_ctas_at_the_sm_count():
    from tide.bench.kernel_footprint import sm_time_us

    events = [
        {"cat": "kernel", "name": "chunk_cat", "dur": 600.0, "args": {"grid": [400000, 1, 1]}},  # many waves
        {"cat": "kernel", "name": "sum", "dur": 10.0, "args": {"grid": [8, 1, 1]}},
        {"cat": "gpu_memcpy", "name": "Memcpy PtoP", "dur": 500.0, "args": {}},
    ]
    assert sm_time_us(events, 132) == pytest.approx(132 * 600.0 + 8 * 10.0)
    assert sm_time_us([{"cat": "kernel", "dur": 9.0, "args": {}}], 132) is None


def _kernel(name, ts, dur, grid):
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"grid": [grid, 1, 1], "stream": 7}}


def test_footprint_counts_per_call_after_the_alignment_barrier_from_one_source():
    """The kernel count came from the profiler's event list with copy kernels filtered out, the
    CTA-time from the trace with them in: a TIDE-AG row read "0 kernels, 5.4e6 CTA*us". And the
    profiled call's NCCL kernel counted the other rank's late start as its own time."""
    from tide.bench.kernel_footprint import after_alignment, footprint_from_trace

    barrier = _kernel("ncclDevKernel_AllReduce_Sum_u8_RING_LL(x)", 100.0, 5000.0, 1)  # waits for the peer
    before = _kernel("ncclDevKernel_AllGather_RING_LL(x)", 50.0, 40.0, 24)  # ran before the barrier ended
    calls = 4
    events = [barrier, before, {"cat": "cpu_op", "name": "aten::copy_", "ts": 10.0, "dur": 1.0}]
    for c in range(calls):
        t = 6000.0 + 100.0 * c
        events.append(_kernel("void tide::sumKernel<1>(S)", t, 20.0, 9))
        events.append(_kernel("memcpy32_post", t + 30.0, 10.0, 264))  # a device-local copy the driver ran on SMs
        events.append({"cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": t + 50.0, "dur": 30.0, "args": {}})
    assert barrier not in after_alignment(events) and before not in after_alignment(events)
    fp = footprint_from_trace(events, calls, 132)
    assert fp["kernels"] == 1 and fp["driver_copy_kernels"] == 1 and fp["calls"] == calls
    assert fp["kernel_us"] == pytest.approx(20.0 + 10.0)
    assert fp["cta_us"] == pytest.approx(9 * 20.0 + 264 * 10.0)
    assert fp["sm_us"] == pytest.approx(9 * 20.0 + 132 * 10.0)
    assert fp["names"] == ["memcpy32_post", "void tide::sumKernel<1>(S)"]
    # No barrier kernel in the trace (e.g. no process group): every event counts.
    alone = footprint_from_trace([_kernel("k", 1.0, 2.0, 3)], 1, 132)
    assert alone["kernels"] == 1 and alone["cta_us"] == pytest.approx(6.0)
    with pytest.raises(ValueError, match="want calls and sms >= 1"):
        footprint_from_trace(events, 0, 132)


def test_footprint_line_tells_own_kernels_from_driver_copies():
    from tide.bench.kernel_footprint import footprint_line

    fp = {"kernels": 0.0, "driver_copy_kernels": 2.0, "kernel_us": 12.5, "cta_us": 5400.0, "sm_us": 1320.0,
          "names": ["memcpy32_post"], "calls": 20}
    assert footprint_line(fp) == ("0 kernels (+2 driver copy kernels), 12.5 us of kernels, 5400 CTA*us, "
                                  "1320 SM*us per call of 20 ['memcpy32_post']")
    fp.update(kernels=None)
    assert footprint_line(fp) == "no readable profiler trace (20 calls)"


def test_the_gemms_launch_shape_leaves_the_alignment_barrier_out():
    """gemm_launch_profile unpacked the profiler helper's old (kernels, events) pair: every GPU run of
    the bench would have stopped there, before its JSON."""
    from tide.bench.kernel_footprint import launch_shapes

    gemm = {"cat": "kernel", "name": "sm90_xmma_gemm_bf16", "ts": 9000.0, "dur": 180.0,
            "args": {"grid": [132, 1, 1], "block": [384, 1, 1], "registers per thread": 168,
                     "shared memory": 232448, "blocks per SM": 1.0, "stream": 7}}
    events = [_kernel("ncclDevKernel_AllReduce_Sum_u8_RING_LL(x)", 100.0, 50.0, 1), gemm,
              {"cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 9500.0, "dur": 3.0, "args": {}}]
    assert launch_shapes(events, 132) == [{"name": "sm90_xmma_gemm_bf16", "grid": [132, 1, 1], "block": [384, 1, 1],
                                           "registers_per_thread": 168, "shared_memory": 232448,
                                           "blocks_per_sm": 1.0, "dur_us": 180.0, "sms": 132}]
