"""The systems the end-to-end FSDP2 benchmark compares, built identically, and their data.

  stock            FSDP2 as shipped: fully_shard per decoder layer and on the root, bf16 parameters
                   for compute with fp32 master weights and fp32 reduction
                   (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)), gradient-norm
                   clipping at 1.0, AdamW.
  pg-alloc         the same, with FSDP2's process-group allocation of its communication buffers
                   (FSDPModule.set_allocate_memory_from_process_group_for_comm(True) on every
                   FSDP module: NCCL's allocator, user-buffer registration). Skipped, with the
                   reason, where the running torch lacks the switch.
  tide-in-place    the same model with tide.fsdp.install(model, mode="in-place") (its default
                   release_grads="read-done-polled" since session 16).
  tide-slot-reuse  the same with mode="slot-reuse".
  tide-late-free   In-Place with release_grads="with-fsdp-state": gradients read in place are
                   freed with FSDP2's own reduce-scatter state (not in the default set; for an
                   A/B of the host cost).
  tide-record-stream  In-Place with release_grads="read-done", the default until session 16: one
                   record_stream per gradient read in place, so the caching allocator records and
                   polls one event per gradient (not in the default set; the A/B against the
                   default's one event per call).
  tide-4ctas       In-Place with every group's reduce-scatter sums on 4 CTAs
                   (plan_options={"sum_ctas": 4}) instead of the solver's budget (not in the
                   default set): slower sums that leave the backward's GEMMs their SMs; one GPU's
                   128-CTA GEMM slowed by +4 to +10 % beside 4 sum CTAs, and by +95 % beside 8 or
                   more (BENCHMARKS.md, session 8), so this measures which matters in training.
  tide-no-copy-graphs  In-Place with TIDE_COPY_GRAPHS=0 while its communicators are made (not in the
                   default set): every copy list enqueued copy by copy instead of replayed as a
                   cached graph of memcpy nodes; the A/B of what the graphs save the host-bound
                   4K steps (on the host fabric, which has no graphs, the same as tide-in-place).

Every system draws its weights from the same seed on the same device, so all start from the same
parameters, and trains on the same batches (`SyntheticData`), so their losses match step by step up
to floating-point reduction order.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from tide.bench import models
from tide.bench.scoped_env import scoped_env

log = logging.getLogger("tide.bench.fsdp")

SYSTEMS = ("stock", "pg-alloc", "tide-in-place", "tide-slot-reuse", "tide-late-free", "tide-4ctas",
           "tide-no-copy-graphs", "tide-record-stream")
DEFAULT_SYSTEMS = SYSTEMS[:4]
TIDE_MODES = {"tide-in-place": "in-place", "tide-slot-reuse": "slot-reuse", "tide-late-free": "in-place",
              "tide-4ctas": "in-place", "tide-no-copy-graphs": "in-place", "tide-record-stream": "in-place"}
TIDE_INSTALL_OPTIONS = {"tide-late-free": {"release_grads": "with-fsdp-state"},
                        "tide-4ctas": {"plan_options": {"sum_ctas": 4}},
                        "tide-record-stream": {"release_grads": "read-done"}}
# Environment set while install() makes the system's communicators (the CUDA fabric reads
# TIDE_COPY_GRAPHS when an endpoint is made).
TIDE_INSTALL_ENV = {"tide-no-copy-graphs": {"TIDE_COPY_GRAPHS": "0"}}
PG_ALLOC_API = "set_allocate_memory_from_process_group_for_comm"


@dataclass
class Env:
    """Where the benchmark runs: one process per rank (torchrun)."""

    device: torch.device
    rank: int
    world: int
    _mesh: Any = None

    @property
    def mesh(self):
        """One 1-D device mesh over all ranks, shared by every system."""
        if self._mesh is None:
            from torch.distributed.device_mesh import init_device_mesh

            self._mesh = init_device_mesh(self.device.type, (self.world,))
        return self._mesh

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        if self.cuda:
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()


@dataclass
class TrainConfig:
    lr: float = 3e-4
    lr_warmup: int = 10                # linear warm-up steps of the learning rate
    weight_decay: float = 0.1
    clip: float = 1.0                  # gradient-norm clipping (0: none), as LLM training does
    betas: tuple[float, float] = (0.9, 0.95)
    master_dtype: torch.dtype = torch.float32   # sharded parameters / optimizer (compute is bf16)
    tide_timeout_s: float = 120.0
    tide_plan: dict = field(default_factory=dict)  # install(plan_options=...): calibration.PLAN_OPTIONS
    tide_fabric: str | None = None     # install(fabric=...): None picks by device; "cuda-ipc" for --ipc


def unavailable(name: str) -> str | None:
    """Why system `name` cannot run with this torch (None: it can)."""
    if name not in SYSTEMS:
        return f"unknown system {name!r}"
    if name == "pg-alloc" and not hasattr(FSDPModule, PG_ALLOC_API):
        return f"this torch ({torch.__version__}) has no FSDPModule.{PG_ALLOC_API}"
    return None


# ------------------------------------------------------------------ data

class SyntheticData:
    """Per-rank token batches of a small synthetic language that a model can learn quickly, so a
    loss curve falls: every even position is a Zipf-distributed token, every odd position is a
    fixed function of the token before it (a permutation of the vocabulary, the same for every
    seed). `seed` selects the sample (data order), `rank` the rank's share."""

    LANGUAGE_SEED = 20261130

    def __init__(self, vocab: int, tokens: int, seq_len: int, *, seed: int, rank: int):
        if tokens % seq_len:
            raise ValueError(f"tokens per GPU ({tokens}) must be a multiple of the sequence length ({seq_len})")
        self.vocab, self.batch, self.seq_len = vocab, tokens // seq_len, seq_len
        self.seed, self.rank = seed, rank
        g = torch.Generator().manual_seed(self.LANGUAGE_SEED)
        self.successor = torch.randperm(vocab, generator=g)
        ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
        self.unigram = (1.0 / (ranks + 10.0))[torch.randperm(vocab, generator=g)]

    def batch_at(self, step: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(((self.seed * 1_000_003 + self.rank) * 1_000_033 + step) % 2**63)
        n = self.batch * (self.seq_len + 2) // 2
        first = torch.multinomial(self.unigram, n, replacement=True, generator=g)
        seq = torch.stack((first, self.successor[first]), dim=1).reshape(self.batch, -1)[:, : self.seq_len + 1]
        seq = seq.to(device)
        return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()

    def batches(self, n: int, device: torch.device, start: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [self.batch_at(start + i, device) for i in range(n)]


# ------------------------------------------------------------------ systems

@dataclass
class System:
    name: str
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    clip: float = 0.0
    tide_report: dict | None = None
    notes: list[str] = field(default_factory=list)
    on_phase: Any = None  # called with "forward" / "backward" / "optimizer" after each (memory probe)

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """One training step (forward, backward, AdamW); returns the loss (not synchronized)."""
        logits = self.model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
        del logits
        if self.on_phase is not None:
            self.on_phase("forward")
        loss.backward()
        if self.on_phase is not None:
            self.on_phase("backward")
        if self.clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip, foreach=True)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.on_phase is not None:
            self.on_phase("optimizer")
        return loss.detach()

    @property
    def tide_groups(self) -> tuple[int, int]:
        """(groups on TIDE, groups in all); (0, 0) for stock systems."""
        if self.tide_report is None:
            return 0, 0
        groups = self.tide_report.get("groups", [])
        return sum(g["status"] == "tide" for g in groups), len(groups)

    @property
    def arena_bytes(self) -> int:
        if self.tide_report is None:
            return 0
        return sum(a["arena_bytes"] for a in self.tide_report.get("arenas", []))

    def close(self, env: Env) -> None:
        """Free the model, its optimizer and (TIDE) its arena. Collective for TIDE systems: every
        rank closes the same systems in the same order."""
        if self.tide_report is not None and self.tide_report.get("groups"):
            import tide.fsdp

            env.sync()
            tide.fsdp.uninstall(self.model)
        self.optimizer.zero_grad(set_to_none=True)
        self.model = self.optimizer = self.scheduler = None  # type: ignore[assignment]
        gc.collect()  # FSDP2 modules hold reference cycles
        if env.cuda:
            env.sync()
            torch.cuda.empty_cache()


def build_system(name: str, cfg: models.ModelConfig, env: Env, train: TrainConfig, *, seed: int) -> System:
    """Model from `seed`, sharded with FSDP2 over all ranks, with the system's switch applied."""
    why = unavailable(name)
    if why is not None:
        raise ValueError(why)
    model = models.build(cfg, seed=seed, device=env.device)
    if train.master_dtype != torch.float32:
        model = model.to(train.master_dtype)
    mesh = env.mesh
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    notes = []
    if name == "pg-alloc":
        for module in model.modules():
            if isinstance(module, FSDPModule):
                getattr(module, PG_ALLOC_API)(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train.lr, betas=train.betas,
                                  weight_decay=train.weight_decay)
    warm = max(1, train.lr_warmup)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warm))
    system = System(name, model, optimizer, scheduler, clip=train.clip, notes=notes)
    if name in TIDE_MODES:
        try:
            import tide.fsdp

            options = dict(TIDE_INSTALL_OPTIONS.get(name, {}))
            plan = {**(train.tide_plan or {}), **options.pop("plan_options", {})}
            with scoped_env(TIDE_INSTALL_ENV.get(name, {})):
                system.tide_report = tide.fsdp.install(model, mode=TIDE_MODES[name], fabric=train.tide_fabric,
                                                       timeout_s=train.tide_timeout_s, plan_options=plan or None,
                                                       **options)
        except Exception as e:  # noqa: BLE001 - e.g. no libtide: the same on every rank, reported as a skip
            log.warning("tide.bench: %s: tide.fsdp.install failed: %s: %s", name, type(e).__name__, e)
            system.tide_report = {"installed": False, "reason": "install_failed",
                                  "message": f"{type(e).__name__}: {e}", "groups": [], "arenas": []}
        on, total = system.tide_groups
        if on < total:
            stock = [f"{g['fqn']}: {g['reason']}" for g in system.tide_report["groups"] if g["status"] != "tide"]
            notes.append(f"{total - on} of {total} groups stay stock ({'; '.join(stock[:4])})")
        if on == 0:
            notes.append(f"TIDE not installed: {system.tide_report.get('reason')} "
                         f"({system.tide_report.get('message')})")
    return system


def tide_status(system: System) -> str | None:
    """None when a TIDE system really runs TIDE (some group on it); else why not."""
    if system.name not in TIDE_MODES:
        return None
    on, _ = system.tide_groups
    if on == 0:
        return "; ".join(system.notes) or "no group runs on TIDE"
    return None


def build_running(name: str, cfg, env, train, *, seed: int) -> tuple[System | None, str | None]:
    """build_system, then (system, None) when it runs as asked, or (None, why) with the system
    already closed (a TIDE system on which no group runs on TIDE)."""
    system = build_system(name, cfg, env, train, seed=seed)
    why = tide_status(system)
    if why is not None:
        system.close(env)
        return None, why
    return system, None


def refresh_report(system: System) -> None:
    if system.tide_report is not None and system.tide_report.get("groups"):
        import tide.fsdp

        system.tide_report = tide.fsdp.report(system.model, echo=False)


# ------------------------------------------------------------------ memory probes

class MemoryProbe:
    """Whole-device memory of one CUDA device.

    torch.cuda.max_memory_reserved() sees only the caching allocator; NCCL's buffers, TIDE's arena
    (ncclMemAlloc) and the CUDA context are outside it. cudaMemGetInfo sees everything on the
    device but only at the moment it is called, so the probe samples it at the end of every forward
    (where activations peak) and at the end of the step, and also estimates the device peak as the
    allocator's peak plus the memory outside the allocator at the end of the step (which is static
    once the first step has set up the communicators)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.samples: list[int] = []
        self._hook = None
        # Allocator peaks per step phase: which phase sets the peak decides whether a mode that
        # frees gradients early (Slot-Reuse) can lower it. The allocator's own peak counters are
        # reset at every phase boundary, so the whole-run peaks are kept here.
        self.phase_peaks: dict[str, int] = {}
        self._alloc_peak = 0
        self._reserved_peak = 0
        self._phase_so_far = 0
        # attach(layers=True): allocator peaks between consecutive layer hooks, to name the
        # place in the step (e.g. "backward layers.15 -> after backward layers.15") that sets it.
        self.interval_peaks: dict[str, int] = {}
        self._last_mark = "step start"
        self._layer_hooks: list = []

    def used(self) -> int:
        free, total = torch.cuda.mem_get_info(self.device)
        return total - free

    def sample(self) -> None:
        self.samples.append(self.used())

    def attach(self, model: torch.nn.Module, layers: bool = False) -> None:
        self._hook = model.register_forward_hook(lambda *_: self.sample())
        if layers:
            for name, layer in model.named_children():
                mods = list(layer.named_children()) if isinstance(layer, torch.nn.ModuleList) else [("", layer)]
                for sub, mod in mods:
                    label = f"{name}.{sub}" if sub else name
                    self._layer_hooks += [
                        mod.register_forward_pre_hook(lambda *_, n=label: self.mark(f"forward {n}")),
                        mod.register_full_backward_pre_hook(lambda *_, n=label: self.mark(f"backward {n}")),
                        mod.register_full_backward_hook(lambda *_, n=label: self.mark(f"after backward {n}")),
                    ]

    def _take_peak(self) -> int:
        """The allocator peak since the last boundary, then a fresh count."""
        torch.cuda.synchronize(self.device)
        alloc = torch.cuda.max_memory_allocated(self.device)
        self._phase_so_far = max(self._phase_so_far, alloc)
        self._alloc_peak = max(self._alloc_peak, alloc)
        self._reserved_peak = max(self._reserved_peak, torch.cuda.max_memory_reserved(self.device))
        torch.cuda.reset_peak_memory_stats(self.device)
        return alloc

    def mark(self, label: str) -> None:
        """A layer hook: the allocator peak of the interval since the previous mark."""
        key = f"{self._last_mark} -> {label}"
        self.interval_peaks[key] = max(self.interval_peaks.get(key, 0), self._take_peak())
        self._last_mark = label

    def phase(self, name: str) -> None:
        """End of a step phase (System.on_phase): its allocator peak, then a fresh count."""
        self._take_peak()
        self.phase_peaks[name] = max(self.phase_peaks.get(name, 0), self._phase_so_far)
        self._phase_so_far = 0
        if self._layer_hooks:
            self.mark(f"end of {name}")

    def detach(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        for h in self._layer_hooks:
            h.remove()
        self._layer_hooks.clear()

    def outside_allocator(self) -> int:
        return self.used() - torch.cuda.memory_reserved(self.device)

    def reset(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)
        self.samples.clear()
        self.phase_peaks.clear()
        self.interval_peaks.clear()
        self._alloc_peak = self._reserved_peak = self._phase_so_far = 0
        self._last_mark = "step start"

    def peaks(self) -> dict:
        self.phase("after")  # whatever ran since the last phase boundary
        outside = self.outside_allocator()
        reserved = self._reserved_peak
        sampled = max(self.samples, default=0)
        return {
            "peak_allocated": self._alloc_peak,
            "peak_allocated_by_phase": {k: v for k, v in self.phase_peaks.items() if k != "after"},
            # The three highest intervals between layer hooks (attach(layers=True) only).
            "peak_allocated_intervals": dict(sorted(self.interval_peaks.items(), key=lambda kv: -kv[1])[:3]),
            "peak_reserved": reserved,
            "outside_allocator": outside,
            "device_used_sampled": sampled,
            "device_peak_estimate": reserved + outside,
            "device_peak": max(sampled, reserved + outside),
        }
