"""MemoryProbe's layer intervals (fsdp_steps --memory-intervals) on CPU: the CUDA allocator's
counters are replaced by a fake that follows the bytes the test allocates, so the interval
that holds the largest allocation must be the one reported, with hooks on every decoder layer
firing in forward and backward order."""

from __future__ import annotations

import pytest
import torch

from tide.bench import fsdp_systems, models


class FakeAllocator:
    """max_memory_allocated since the last reset; bump() records an allocation's size."""

    def __init__(self):
        self.peak = 0

    def bump(self, nbytes: int) -> None:
        self.peak = max(self.peak, nbytes)

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
        monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a, **k: self.peak)
        monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda *a, **k: self.peak)
        monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a, **k: setattr(self, "peak", 0))
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a, **k: (0, 0))


@pytest.mark.parametrize("kind", ["llama", "moe"])
def test_interval_with_the_largest_allocation_is_reported(monkeypatch, kind):
    fake = FakeAllocator()
    fake.install(monkeypatch)
    model = models.build(models.tiny_config(kind), seed=0)
    probe = fsdp_systems.MemoryProbe(torch.device("cpu"))
    probe.reset()
    probe.attach(model, layers=True)
    # Registered after the probe's hooks, so they run just after its marks: the second layer's
    # backward allocates the most, so its interval must come first.
    sizes = {0: 100, 1: 7000}
    for i, layer in enumerate(model.layers):
        layer.register_full_backward_pre_hook(lambda *_, i=i: fake.bump(sizes[i]))
        layer.register_forward_hook(lambda *_, i=i: fake.bump(10 * (i + 1)))
    tokens = torch.randint(0, 256, (2, 16))
    model(tokens).float().pow(2).mean().backward()
    probe.phase("backward")
    probe.detach()
    peaks = probe.peaks()
    intervals = list(peaks["peak_allocated_intervals"].items())
    assert intervals[0] == ("backward layers.1 -> after backward layers.1", 7000), intervals
    assert intervals[1][1] == 100 and intervals[1][0].endswith("after backward layers.0"), intervals
    assert peaks["peak_allocated"] == 7000 and peaks["peak_allocated_by_phase"] == {"backward": 7000}
    # Every layer hook fired: both forwards and both backwards, in order.
    keys = list(probe.interval_peaks)
    assert any(k.endswith("-> forward layers.0") for k in keys) and any("-> forward layers.1" in k for k in keys)
    assert keys.index("backward layers.1 -> after backward layers.1") < \
        [i for i, k in enumerate(keys) if k.endswith("-> after backward layers.0")][0]
    # detach() removes every hook: no more marks.
    before = dict(probe.interval_peaks)
    model(tokens).float().sum().backward()
    assert probe.interval_peaks == before
