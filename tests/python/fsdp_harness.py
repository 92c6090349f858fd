"""A small launcher for FSDP2 tests on CPU: N spawned processes with gloo run
named scenarios (functions of a module, fsdp_scenarios by default) one after
another and report each one's outcome (ok or the traceback, and its time) to
the parent. One job per world size keeps the cost of starting processes and
importing torch to once per job."""

from __future__ import annotations

import datetime
import logging
import multiprocessing as mp
import os
import queue
import sys
import time
import traceback
from dataclasses import dataclass, field


class ScenarioSkipped(Exception):
    """Raised by a scenario that cannot run here (this torch lacks an API it
    needs): reported as skipped with the reason, never as passed."""


SKIPPED = "SKIPPED: "  # an Outcome's message prefix for a skipped scenario (ok stays True)


@dataclass
class Outcome:
    ok: bool
    message: str
    seconds: float

    @property
    def skipped(self) -> bool:
        return self.ok and self.message.startswith(SKIPPED)


@dataclass
class JobResult:
    world: int
    outcomes: dict[str, dict[int, Outcome]] = field(default_factory=dict)
    crashed: str = ""
    seconds: float = 0.0

    def check(self, name: str) -> None:
        per_rank = self.outcomes.get(name, {})
        failures = [f"rank {r}: {o.message}" for r, o in sorted(per_rank.items()) if not o.ok]
        if failures:
            raise AssertionError(f"scenario {name} failed:\n" + "\n".join(failures))
        if len(per_rank) != self.world:
            raise AssertionError(f"scenario {name}: {len(per_rank)} of {self.world} ranks reported "
                                 f"(job: {self.crashed or 'no crash message'})")
        if self.crashed:  # every rank reported, but the job failed around it
            raise AssertionError(f"scenario {name}: the job failed: {self.crashed}")
        skipped = [o for o in per_rank.values() if o.skipped]
        if skipped:
            import pytest

            if len(skipped) != self.world:
                raise AssertionError(f"scenario {name}: skipped on {len(skipped)} of {self.world} ranks")
            pytest.skip(skipped[0].message[len(SKIPPED):])


class LogCapture(logging.Handler):
    """Records of logger 'tide.fsdp' (level INFO and up)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def messages(self, level: int = logging.INFO) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= level]

    def clear(self):
        self.records.clear()


@dataclass
class Context:
    rank: int
    world: int
    tmp: str
    logs: LogCapture
    device: str = "cpu"  # where the scenarios place models and data ("cuda:<i>" in the CUDA smoke)
    seed: int = 0  # the run's seed (run_seed): weights and batches are drawn from it


SEED_VARIABLE = "TIDE_TEST_SEED"


def run_seed() -> int:
    """One fresh seed per run, the same on every rank (rank 0 draws it; TIDE_TEST_SEED replays a
    run). Collective over the default process group."""
    import random

    import torch.distributed as dist

    box = [int(os.environ[SEED_VARIABLE]) if os.environ.get(SEED_VARIABLE) else
           random.SystemRandom().randrange(2**31)]
    dist.broadcast_object_list(box, src=0)
    return int(box[0])


def seed_note(seed: int) -> str:
    return f"(run seed {seed}: replay with {SEED_VARIABLE}={seed})"


def capture_logs() -> LogCapture:
    """A LogCapture on tide.fsdp's logger, which logs from INFO up."""
    logs = LogCapture()
    logger = logging.getLogger("tide.fsdp")
    logger.addHandler(logs)
    logger.setLevel(logging.INFO)
    return logs


def run_scenarios(module, names: list[str], ctx: Context, report) -> None:
    """Runs module.<name>(ctx) for each name in order on this rank, with the log capture cleared
    before each; after each, leftovers are uninstalled, report(name, ok, traceback or "", seconds)
    is called, and the ranks meet at a barrier (the process group must be up). A scenario whose
    clean-up fails (an arena release, say) fails itself, where an early report once passed it and
    left the error to a job message nobody read. The report comes before the barrier: a scenario
    that failed on one rank while another still waits in its collectives leaves that barrier to the
    group's timeout, and its traceback must not wait for (or die with) it."""
    import torch.distributed as dist

    for name in names:
        ctx.logs.clear()
        start = time.perf_counter()
        ok, message = True, ""
        try:
            getattr(module, name)(ctx)
        except ScenarioSkipped as e:
            message = SKIPPED + str(e)
        except Exception:
            ok, message = False, f"{traceback.format_exc()}{seed_note(ctx.seed)}"
        seconds = time.perf_counter() - start
        try:
            uninstall_all_tide()
        except Exception:
            ok = False
            message += f"the clean-up after the scenario failed:\n{traceback.format_exc()}{seed_note(ctx.seed)}"
        report(name, ok, message, seconds)
        dist.barrier()


def _worker(rank: int, world: int, tmp: str, names: list[str], results, module: str) -> None:
    status = 0
    try:
        import importlib

        import torch.distributed as dist

        scenarios = importlib.import_module(module)
        logs = capture_logs()
        dist.init_process_group("gloo", init_method=f"file://{tmp}/pg-init", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=180))
        run_scenarios(scenarios, names, Context(rank, world, tmp, logs, seed=run_seed()),
                      lambda name, ok, tb, seconds: results.put((name, rank, ok, tb, seconds)))
    except Exception:
        results.put(("<job>", rank, False, traceback.format_exc(), 0.0))
        status = 1
    results.close()
    results.join_thread()  # the queue's feeder thread must deliver before os._exit
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: gloo's threads sometimes abort it (stock FSDP2 too).
    os._exit(status)


def uninstall_all_tide() -> None:
    """Leave no model with TIDE installed (a failed scenario may have), and no arena kept past
    its scenario. Call on every rank at the same point (release_kept_arenas is collective): on
    CUDA, a scenario that uninstalls under a view or drops an installed model keeps its
    communicator, which would otherwise hold its streams to the process's exit."""
    import importlib

    import tide.fsdp
    from tide.fsdp import dispatch, registry

    install = importlib.import_module("tide.fsdp.install")  # the module (tide.fsdp.install is the function)
    for model in list(registry.installed.keys()):
        try:
            install.uninstall(model)
        except Exception:
            inst = registry.installed.pop(model, None)
            for tg in inst.tide_groups if inst else []:
                dispatch.unregister(tg)
    dispatch.deactivate_if_unused()
    # Its gc.collect() first frees what FSDP2's reference cycles hold (host arenas go with them).
    tide.fsdp.release_kept_arenas()


def run_job(world: int, names: list[str], tmp: str, timeout: float = 600.0,
            module: str = "fsdp_scenarios") -> JobResult:
    """Run the scenarios `names` (functions of `module`, importable in the workers) on `world`
    gloo ranks."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(r, world, str(tmp), names, results, module)) for r in range(world)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    job = JobResult(world)
    expected = world * len(names)
    got = 0
    deadline = start + timeout
    while got < expected:
        try:
            name, rank, ok, message, seconds = results.get(timeout=1.0)
        except queue.Empty:
            if time.perf_counter() > deadline:
                job.crashed += f"timed out after {timeout:.0f} s"
                break
            if all(not p.is_alive() for p in procs) and results.empty():
                job.crashed += f"workers exited early: {[p.exitcode for p in procs]}"
                break
            continue
        if name == "<job>":
            job.crashed += f"rank {rank}: {message}\n"
            continue
        job.outcomes.setdefault(name, {})[rank] = Outcome(ok, message, seconds)
        got += 1
    for p in procs:
        p.join(30)
        if p.is_alive():
            p.kill()
            p.join()
    job.seconds = time.perf_counter() - start
    return job
