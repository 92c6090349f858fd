#!/usr/bin/env python3
"""The CUDA fabric's NCCL life cycle on the GPU machines, the cases a training job seldom shows:

  - the multicast rule: a communicator is refused, naming NCCL_NVLS_ENABLE, unless that is
    exactly "0". Checked with "00", which NCCL itself reads as 0 (off), so that multicast stays
    off even if TIDE's refusal were broken; then "0" is accepted (one GPU);
  - a rank that never joins (one GPU): rank 0 of a two-rank world starts alone; creating the
    communicator must fail with a timeout naming the world communicator within the host deadline
    (2 T + 10 s) instead of hanging in NCCL's bootstrap, and the process must still make a
    one-rank communicator and use the GPU afterwards;
  - the same for the benchmark's own NCCL baseline communicator (bench/native/nccl_baseline.cpp,
    with --native PATH): alone in a world of two, tbn_create fails within its deadline naming the
    baseline communicator, and a one-rank baseline communicator works afterwards;
  - a peer gone before teardown: rank 1 makes its communicator and exits at once; rank 0's close
    must come back within the host drain deadline (2 T + 10 s at T = 5 s), the NCCL communicators
    aborted, not hang in the teardown barrier, and the GPU must still work. On two GPUs, one node
    of two (M1L2, copy-engine rails); on one GPU, two ranks on hosts of their own as NCCL sees
    them (NCCL_HOSTID per rank; M2L1, NCCL send/recv rails over loopback sockets);
  - a peer gone in the middle of the work (one GPU, two ranks on hosts of their own, NCCL send/recv
    rails over loopback sockets): both ranks all-gather once, so NCCL's connections stand; rank 1
    exits; rank 0's next all-gather (then, afresh, reduce-scatter) must fail stop within the wait deadline T plus slack, not hang in
    a send to nobody: the wait watchdog's error probe sees NCCL's asynchronous error on the rail
    and aborts the process naming it (or the call raises), and a fresh process can use the GPU;
  - ranks that ask for different rails (TIDE_FABRIC_RAILS on one of two hosts of their own): both
    refused, saying that the ranks differ, instead of one left in a split the other never joins;
  - ranks that register different groups (one shape differs; two hosts of their own, one GPU): the
    first all-gather compares their group digests over the world communicator and fails on both
    ranks (reason groups_differ, naming each rank's groups) instead of gathering wrong bytes; and a
    peer that never makes that first collective fails rank 0's within the host deadline;
  - ranks that ask for different arena sizes: both refused at start, naming each size; ranks that
    pass different landing offsets to an all-gather: both fail it (reason landings_differ).

Exits non-zero on any failure. Run with NCCL_NVLS_ENABLE=0 in the environment (tools/gpu_run.sh).
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time

ARENA = 1 << 24
TIMEOUT_S = 5.0  # the communicator's wait deadline T
HOST_DEADLINE_S = 2 * TIMEOUT_S + 10  # every host wait on NCCL (bootstrap, teardown): 2 T + 10 s


def _gpu_usable() -> bool:
    """The GPU still computes right in this process (after an abort or a failed bootstrap). Its
    callers import torch before libtide makes any communicator: imported only after a failed
    world-communicator bootstrap, torch's import aborts in this image (free(): invalid pointer,
    session 24; also with the previous session's libtide), while imported first it works."""
    import torch

    x = torch.ones(1 << 20, device="cuda:0")
    return float(x.sum()) == float(1 << 20)


def _refused_unless_zero(value: str, out) -> None:
    os.environ["NCCL_NVLS_ENABLE"] = value  # before this process's first NCCL communicator
    os.environ.pop("TIDE_ENABLE_MULTICAST", None)
    from tide import _capi
    from tide.comm import Communicator, unique_id

    try:
        comm = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=ARENA, fabric="cuda",
                            unique_id=unique_id(), device=0, timeout_s=TIMEOUT_S)
    except _capi.TideError as e:
        out.put(("refused", str(e)))
        return
    comm.close()
    out.put(("accepted", ""))


def check_multicast_rule() -> list[str]:
    failures = []
    ctx = mp.get_context("spawn")
    # (value set in the child, whether the child starts with NCCL_NVLS_ENABLE=0, verdict, words of a refusal):
    # a 0 set only during the process is refused too, since NCCL may have read the variable before.
    for value, zero_at_start, want, words in (("00", True, "refused", "NCCL_NVLS_ENABLE"),
                                              ("0", True, "accepted", ""),
                                              ("0", False, "refused", "when the process started")):
        out = ctx.Queue()
        p = ctx.Process(target=_refused_unless_zero, args=(value, out))
        saved = os.environ.pop("NCCL_NVLS_ENABLE", None)
        if zero_at_start:
            os.environ["NCCL_NVLS_ENABLE"] = "0"
        try:
            p.start()  # the child's start environment is this one's now
        finally:
            os.environ.pop("NCCL_NVLS_ENABLE", None)
            if saved is not None:
                os.environ["NCCL_NVLS_ENABLE"] = saved
        p.join(120)
        verdict, message = out.get(timeout=5) if not out.empty() else ("no answer", f"exit code {p.exitcode}")
        ok = verdict == want and words in message
        what = f"NCCL_NVLS_ENABLE={value!r} ({'0' if zero_at_start else 'unset'} at the start)"
        print(f"{what}: {verdict} {message[:200]} -> {'ok' if ok else 'FAIL'}", flush=True)
        if not ok:
            failures.append(f"{what}: {verdict} (wanted {want})")
    return failures


def _alone_in_a_world_of_two(out) -> None:
    import torch  # noqa: F401  (before any communicator: _gpu_usable)

    from tide import _capi
    from tide.comm import Communicator, unique_id

    start = time.monotonic()
    try:
        comm = Communicator(nodes=1, gpus_per_node=2, rank=0, arena_bytes=ARENA, fabric="cuda",
                            unique_id=unique_id(), device=0, timeout_s=TIMEOUT_S)
    except _capi.TideError as e:
        took = time.monotonic() - start
        verdict = "timeout" if e.result == _capi.Result.TIMEOUT else f"error {e.result!r}"
        comm = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=ARENA, fabric="cuda",
                            unique_id=unique_id(), device=0, timeout_s=TIMEOUT_S)
        comm.close()
        out.put((verdict if _gpu_usable() else "GPU broken", e.message, took))
        return
    comm.close()
    out.put(("created", "a two-rank communicator was made with one rank", time.monotonic() - start))


def _check_alone(label: str, target, args: tuple, names: str) -> list[str]:
    """Runs `target(*args, out)` in a fresh process, rank 0 alone in a world of two: it must report a
    timeout whose message names `names` and says the wait did not complete, within the deadline
    (2 T + 10 s) plus a margin, and must not hang."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, out))
    p.start()
    deadline = HOST_DEADLINE_S
    p.join(deadline + 90)  # plus process start, the abort and the one-rank communicator
    hung = p.is_alive()
    if hung:
        p.kill()
        p.join()
    verdict, message, took = out.get(timeout=5) if not out.empty() else ("no answer", f"exit code {p.exitcode}",
                                                                          float("nan"))
    ok = (not hung and verdict == "timeout" and names in message and "did not complete" in message
          and took <= deadline + 15)
    print(f"{label}: {verdict} after {took:.1f} s (deadline {deadline:.0f} s){', HUNG' if hung else ''}"
          f": {message[:200]} -> {'ok' if ok else 'FAIL'}", flush=True)
    return [] if ok else [f"{label}: {verdict}, {took:.1f} s, hung={hung}"]


def check_rank_that_never_joins() -> list[str]:
    return _check_alone("a rank that never joins", _alone_in_a_world_of_two, (), "world communicator")


def _baseline_alone_in_a_world_of_two(native_path: str, deadline: float, out) -> None:
    import ctypes

    import torch

    from tide.bench.nccl_native import Native

    torch.cuda.set_device(0)
    native = Native(native_path)
    start = time.monotonic()
    h = native.lib.tbn_create(native.unique_id(), 2, 0, 0, Native.DEFAULT_POLICY, 1 << 20, 1 << 20, deadline)
    took = time.monotonic() - start
    if h:
        native.lib.tbn_destroy(h)
        out.put(("created", "a two-rank baseline communicator was made with one rank", took))
        return
    message = native.lib.tbn_last_error().decode()
    alone = native.lib.tbn_create(native.unique_id(), 1, 0, 0, Native.DEFAULT_POLICY, 1 << 20, 1 << 20, deadline)
    usable = False
    if alone:
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            native.check(native.lib.tbn_all_gather(ctypes.c_void_p(alone), 1 << 20,
                                                   ctypes.c_void_p(stream.cuda_stream)), "ncclAllGather")
        stream.synchronize()
        native.lib.tbn_destroy(alone)
        usable = True
    out.put(("timeout" if usable else "no one-rank communicator afterwards", message, took))


def check_baseline_rank_that_never_joins(native_path: str) -> list[str]:
    return _check_alone("a rank that never joins the NCCL baseline", _baseline_alone_in_a_world_of_two,
                        (native_path, HOST_DEADLINE_S), "baseline communicator")


def _shared_unique_id(rank: int, ids) -> bytes:
    """Rank 0 draws the NCCL unique id and hands it to rank 1 through `ids`."""
    from tide.comm import unique_id

    if rank == 0:
        uid = unique_id()
        ids.put(uid)
        return uid
    return ids.get(timeout=60)


def _teardown_rank(rank: int, ids, out, host_per_rank: bool) -> None:
    if host_per_rank:  # before this process's first NCCL communicator
        from tide.bench.topologies import as_own_host

        as_own_host(f"tide-lifecycle-rank-{rank}")
    import torch

    from tide.comm import Communicator

    uid = _shared_unique_id(rank, ids)
    nodes, gpus = (2, 1) if host_per_rank else (1, 2)
    comm = Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=ARENA, fabric="cuda",
                        unique_id=uid, device=rank % torch.cuda.device_count(), timeout_s=TIMEOUT_S)
    if rank == 1:
        out.put((1, "made", 0.0, ""))
        out.close()
        out.join_thread()  # os._exit would kill the queue's feeder thread before it sent the message
        os._exit(0)  # gone without closing: rank 0's teardown barrier will never be joined
    while out.empty():
        time.sleep(0.1)
    time.sleep(2.0)  # rank 1 is gone by now
    rails = comm.rails
    start = time.monotonic()
    comm.close()
    took = time.monotonic() - start
    out.put((0, "closed" if _gpu_usable() else "GPU broken", took, rails))  # the GPU still works after the abort


def _run_two_ranks(ctx, target, args_of, out) -> tuple[bool, list]:
    """Runs target(*args_of(rank)) for ranks 0 and 1 in processes of their own, each given the
    host deadline plus communicator setup and slack; kills what is left. Returns whether any
    hung and every reply the ranks put on `out`."""
    procs = [ctx.Process(target=target, args=args_of(r)) for r in range(2)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + HOST_DEADLINE_S + 60
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    hung = any(p.is_alive() for p in procs)
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join()
    replies = []
    while not out.empty():
        replies.append(out.get())
    return hung, replies


def check_teardown_with_a_gone_peer(host_per_rank: bool) -> list[str]:
    ctx = mp.get_context("spawn")
    ids, out = ctx.Queue(), ctx.Queue()
    hung, replies = _run_two_ranks(ctx, _teardown_rank, lambda r: (r, ids, out, host_per_rank), out)
    answers = {rank: (what, took, rails) for rank, what, took, rails in replies}
    what, took, rails = answers.get(0, ("no answer", float("nan"), ""))
    # The rails say which path the communicators took: NCCL's between hosts, copy engines on one.
    wanted_rails = "nccl-send-recv" if host_per_rank else "copy-engine"
    ok = not hung and what == "closed" and took <= HOST_DEADLINE_S + 5 and rails.startswith(wanted_rails)
    how = "ranks on hosts of their own, one GPU" if host_per_rank else "one node of two GPUs"
    print(f"teardown with rank 1 gone ({how}; rails {rails}): rank 0 {what} in {took:.1f} s "
          f"(deadline {HOST_DEADLINE_S:.0f} s){', HUNG' if hung else ''} -> {'ok' if ok else 'FAIL'}", flush=True)
    return [] if ok else [f"teardown with a gone peer ({how}): {what}, {took:.1f} s, rails {rails!r}, hung={hung}"]


MID_CALL_SHAPES = [[256, 256], [1024], [37, 5]]
MID_CALL_ARENA = 1 << 26  # the shapes plus the collective scratch their plan asks for


def _mid_call_rank(rank: int, op: str, ids, gathered, out, stderr_path: str) -> None:
    # The wait watchdog reports on stderr and then aborts the process: keep what it says.
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    from tide.bench.topologies import as_own_host

    as_own_host(f"tide-midcall-rank-{rank}")  # before this process's first NCCL communicator
    import torch

    from tide import _capi
    from tide.comm import Communicator

    uid = _shared_unique_id(rank, ids)
    comm = Communicator(nodes=2, gpus_per_node=1, rank=rank, arena_bytes=MID_CALL_ARENA, fabric="cuda",
                        unique_id=uid, device=0, timeout_s=TIMEOUT_S)
    group = comm.register_group(MID_CALL_SHAPES)
    plan = group.plan["group"]
    landing_offset, _ = comm.alloc(plan["unsharded_bytes"])
    shard = torch.randint(0, 256, (plan["shard_bytes"],), dtype=torch.uint8, device="cuda:0")
    comm.all_gather(group, shard.data_ptr(), landing_offset)
    comm.synchronize()  # NCCL's connections between the two ranks stand from here on
    if rank == 1:
        gathered.set()
        os._exit(0)  # gone in the middle of the job, its rails open
    if not gathered.wait(60):
        out.put((0, "no gather from rank 1", ""))
        return
    time.sleep(2.0)  # rank 1 is gone by now
    grads = [torch.randn(shape, device="cuda:0").to(torch.bfloat16) for shape in MID_CALL_SHAPES]
    output = torch.full((plan["out_bytes"] // 4,), float("nan"), device="cuda:0")
    torch.cuda.synchronize()
    out.put((0, "calling", repr(time.time())))  # the parent reads it late: the time travels with it
    try:
        if op == "all-gather":
            comm.all_gather(group, shard.data_ptr(), landing_offset)
        else:
            comm.reduce_scatter(group, [g.data_ptr() for g in grads], output.data_ptr(), alpha=0.5)
        comm.synchronize()
        verdict, message = "completed", f"a {op} with a gone peer completed"
    except _capi.TideError as e:
        verdict, message = "failed", str(e)
    out.put((0, "returned", repr(time.time())))  # before close, whose own deadline is longer
    comm.close()
    out.put((0, verdict, message))
    out.close()
    out.join_thread()


def _gpu_still_works(out) -> None:
    out.put(_gpu_usable())


def check_peer_gone_mid_call(op: str) -> list[str]:
    """Rank 0's next all-gather or reduce-scatter (op) after rank 1 is gone must fail stop within T plus slack: either
    the wait watchdog sees NCCL's asynchronous error on the rail and aborts the process (a GPU
    stream blocked in a wait cannot be released, so the process goes, saying why), or the call
    raises. Hanging, completing, or dying without NCCL's reason fails; so does a GPU that a fresh
    process cannot use afterwards."""
    import tempfile

    ctx = mp.get_context("spawn")
    ids, gathered, out = ctx.Queue(), ctx.Event(), ctx.Queue()
    logs = [tempfile.NamedTemporaryFile(prefix=f"tide-midcall-{r}-", suffix=".err", delete=False).name
            for r in range(2)]
    procs = [ctx.Process(target=_mid_call_rank, args=(r, op, ids, gathered, out, logs[r])) for r in range(2)]
    for p in procs:
        p.start()
    give_up = time.monotonic() + HOST_DEADLINE_S + 60
    replies, exited_at = [], None
    while time.monotonic() < give_up and (procs[0].is_alive() or not out.empty()):
        while not out.empty():
            replies.append(out.get())
        procs[0].join(0.05)
        if exited_at is None and not procs[0].is_alive():
            exited_at = time.time()  # within 50 ms of the exit; one host, so one wall clock
    while not out.empty():
        replies.append(out.get())
    hung = procs[0].is_alive()
    # Rank 0 sends the wall-clock times of its call's start and end with the messages.
    times = {what: float(detail) for rank, what, detail in replies if rank == 0 and what in ("calling", "returned")}
    called_at = times.get("calling")
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join()
    stderr = open(logs[0], errors="replace").read()
    for log in logs:
        os.unlink(log)
    fatal = next((line for line in stderr.splitlines() if "FATAL" in line), "")
    answer = next(((what, message) for rank, what, message in replies
                   if rank == 0 and what not in ("calling", "returned")), None)
    # The call ends where it returned or raised, else where the process went.
    ended_at = times.get("returned", exited_at)
    took = (ended_at - called_at) if called_at is not None and ended_at is not None else float("inf")
    if answer is not None:
        how, reason, ok = answer[0], answer[1], answer[0] == "failed"
    else:
        how, reason = f"exit code {procs[0].exitcode}", fatal
        ok = procs[0].exitcode == -6 and "NCCL reports" in fatal and "rail communicator" in fatal
    ok = ok and not hung and took <= TIMEOUT_S + 5
    gpu_out = ctx.Queue()
    checker = ctx.Process(target=_gpu_still_works, args=(gpu_out,))
    checker.start()
    checker.join(120)
    gpu_ok = not gpu_out.empty() and gpu_out.get() is True
    ok = ok and gpu_ok
    print(f"{op} with rank 1 gone (ranks on hosts of their own, one GPU): rank 0 {how} {took:.1f} s after "
          f"the call (deadline {TIMEOUT_S:.0f} s){', HUNG' if hung else ''}; a fresh process "
          f"{'uses the GPU' if gpu_ok else 'cannot use the GPU'} -> {'ok' if ok else 'FAIL'}\n"
          f"  why: {reason[:600] or stderr[-600:]}", flush=True)
    return [] if ok else [f"peer gone before a {op}: {how}, {took:.1f} s, hung={hung}, gpu_ok={gpu_ok}"]


def _disagreeing_rank(rank: int, ids, out, what: str = "rails") -> None:
    """Rank 1 asks for other rails (what="rails") or a larger arena (what="arena") than rank 0."""
    from tide.bench.topologies import as_own_host

    as_own_host(f"tide-disagree-rank-{rank}")  # before this process's first NCCL communicator
    if rank == 1 and what == "rails":
        os.environ["TIDE_FABRIC_RAILS"] = "send-recv"  # rank 0 leaves the rails to TIDE (auto)
    arena = ARENA + (1 << 20 if rank == 1 and what == "arena" else 0)
    from tide import _capi
    from tide.comm import Communicator

    uid = _shared_unique_id(rank, ids)
    try:
        comm = Communicator(nodes=2, gpus_per_node=1, rank=rank, arena_bytes=arena, fabric="cuda",
                            unique_id=uid, device=0, timeout_s=TIMEOUT_S)
    except _capi.TideError as e:
        out.put((rank, "refused", str(e)))
        return
    comm.close()
    out.put((rank, "accepted", ""))


def check_ranks_that_disagree_on_rails() -> list[str]:
    """Two ranks (hosts of their own, one GPU) asking for different rails: both must be refused
    with a message saying the ranks differ, within the host deadline, not left in a split."""
    ctx = mp.get_context("spawn")
    ids, out = ctx.Queue(), ctx.Queue()
    hung, replies = _run_two_ranks(ctx, _disagreeing_rank, lambda r: (r, ids, out), out)
    answers = {rank: (verdict, message) for rank, verdict, message in replies}
    failures = []
    for rank in range(2):
        verdict, message = answers.get(rank, ("no answer", ""))
        ok = not hung and verdict == "refused" and "the ranks differ in" in message
        print(f"rails asked for differ (rank {rank}): {verdict} {message[:200]} -> {'ok' if ok else 'FAIL'}",
              flush=True)
        if not ok:
            failures.append(f"ranks that disagree on rails: rank {rank} {verdict}, hung={hung}")
    return failures


def check_ranks_that_ask_for_different_arena_sizes() -> list[str]:
    """Two ranks (hosts of their own, one GPU) whose arenas differ by 1 MiB: the collectives' scratch
    sits at the top of each arena, at an offset from its own size, so both must be refused at
    start, naming each rank's size, before the window's registration."""
    ctx = mp.get_context("spawn")
    ids, out = ctx.Queue(), ctx.Queue()
    hung, replies = _run_two_ranks(ctx, _disagreeing_rank, lambda r: (r, ids, out, "arena"), out)
    answers = {rank: (verdict, message) for rank, verdict, message in replies}
    failures = []
    for rank in range(2):
        verdict, message = answers.get(rank, ("no answer", ""))
        ok = not hung and verdict == "refused" and "asked for different arena sizes" in message and \
            f"rank 0: {ARENA} bytes" in message and f"rank 1: {ARENA + (1 << 20)} bytes" in message
        print(f"arena sizes differ (rank {rank}): {verdict} {message[:240]} -> {'ok' if ok else 'FAIL'}", flush=True)
        if not ok:
            failures.append(f"ranks that ask for different arena sizes: rank {rank} {verdict}, hung={hung}")
    return failures


def check_ranks_that_pass_different_landing_offsets() -> list[str]:
    """Two NCCL ranks (hosts of their own, one GPU) whose landing offsets differ: the first
    all-gather at an offset compares it over the world communicator and fails on both ranks
    (reason landings_differ, naming each rank's offset) instead of writing rows in the wrong places."""
    ctx = mp.get_context("spawn")
    ids, out = ctx.Queue(), ctx.Queue()
    hung, replies = _run_two_ranks(ctx, _first_all_gather_rank, lambda r: (r, ids, out, "landing"), out)
    answers = {rank: (verdict, message, took) for rank, verdict, message, took in replies}
    failures = []
    for rank in range(2):
        verdict, message, took = answers.get(rank, ("no answer", "", float("nan")))
        ok = not hung and verdict == "landings_differ" and "rank 0: group 0 at offset 0;" in message and \
            "rank 1: group 0 at offset 4096;" in message
        print(f"landings differ (rank {rank}): {verdict} after {took:.1f} s: {message[:240]} -> "
              f"{'ok' if ok else 'FAIL'}", flush=True)
        if not ok:
            failures.append(f"ranks that pass different landing offsets: rank {rank} {verdict}, hung={hung}")
    return failures


def _first_all_gather_rank(rank: int, ids, out, how: str = "groups") -> None:
    """Both ranks make a communicator and one group and all-gather it once, but, by `how`: "groups",
    rank 1's group differs in one shape; "absent", rank 1 never makes the collective (it sleeps past
    rank 0's deadline); "landing", rank 1's landing sits 4 KiB further into the arena."""
    from tide.bench.topologies import as_own_host

    as_own_host(f"tide-{how}-rank-{rank}")  # before this process's first NCCL communicator
    import torch

    from tide import _capi
    from tide.comm import Communicator

    uid = _shared_unique_id(rank, ids)
    with Communicator(nodes=2, gpus_per_node=1, rank=rank, arena_bytes=ARENA, fabric="cuda", unique_id=uid,
                      device=0, timeout_s=TIMEOUT_S) as comm:
        group = comm.register_group([[64, 8], [17]] if rank == 1 and how == "groups" else [[64, 8], [16]])
        if rank == 1 and how == "landing":
            comm.alloc(4096)
        landing, _ = comm.alloc(group.plan["group"]["unsharded_bytes"])
        if rank == 1 and how == "absent":  # never compares: rank 0's wait ends at its deadline
            time.sleep(HOST_DEADLINE_S + 10)
            out.put((rank, "slept", "", 0.0))
            return
        shard = torch.zeros(group.plan["group"]["shard_bytes"], dtype=torch.uint8, device="cuda")
        start = time.monotonic()
        try:
            comm.all_gather(group, shard.data_ptr(), landing, torch.cuda.current_stream().cuda_stream)
            torch.cuda.synchronize()
            out.put((rank, "completed", "", time.monotonic() - start))
        except _capi.TideError as e:
            out.put((rank, e.reason, e.message, time.monotonic() - start))


def check_ranks_that_register_different_groups() -> list[str]:
    """Two NCCL ranks (hosts of their own, one GPU) whose groups differ in one shape: the first
    all-gather compares the ranks' group digests over the world communicator and fails on both
    ranks, naming each, instead of gathering wrong bytes."""
    ctx = mp.get_context("spawn")
    ids, out = ctx.Queue(), ctx.Queue()
    hung, replies = _run_two_ranks(ctx, _first_all_gather_rank, lambda r: (r, ids, out), out)
    answers = {rank: (verdict, message, took) for rank, verdict, message, took in replies}
    failures = []
    for rank in range(2):
        verdict, message, took = answers.get(rank, ("no answer", "", float("nan")))
        ok = not hung and verdict == "groups_differ" and "rank 0: 1 group(s)" in message and \
            "rank 1: 1 group(s)" in message
        print(f"groups differ (rank {rank}): {verdict} after {took:.1f} s: {message[:240]} -> {'ok' if ok else 'FAIL'}",
              flush=True)
        if not ok:
            failures.append(f"ranks that register different groups: rank {rank} {verdict}, hung={hung}")
    return failures


def check_a_peer_that_never_compares_groups() -> list[str]:
    """Rank 1 makes its communicator and group and never a collective: rank 0's first all-gather
    waits in the comparison under the host deadline (the copy back from the world all-gather once
    blocked without one) and fails naming the comparison."""
    ctx = mp.get_context("spawn")
    ids, out = ctx.Queue(), ctx.Queue()
    hung, replies = _run_two_ranks(ctx, _first_all_gather_rank, lambda r: (r, ids, out, "absent"), out)
    answers = {rank: (verdict, message, took) for rank, verdict, message, took in replies}
    verdict, message, took = answers.get(0, ("no answer", "", float("nan")))
    ok = not hung and verdict == "timeout" and "comparing the registered groups" in message and \
        took <= HOST_DEADLINE_S + 5
    print(f"a peer that never compares groups: rank 0 {verdict} after {took:.1f} s (deadline {HOST_DEADLINE_S:.0f} s)"
          f"{', HUNG' if hung else ''}: {message[:200]} -> {'ok' if ok else 'FAIL'}", flush=True)
    return [] if ok else [f"a peer that never compares groups: {verdict} after {took:.1f} s, hung={hung}"]


def main() -> int:
    import argparse

    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--native", metavar="PATH", help="libtide_bench_native.so: also check its NCCL baseline")
    args = parser.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (no NVLink multicast on these machines)")
    failures = check_multicast_rule()
    failures += check_rank_that_never_joins()
    if args.native:
        failures += check_baseline_rank_that_never_joins(args.native)
    if torch.cuda.device_count() >= 2:
        failures += check_teardown_with_a_gone_peer(host_per_rank=False)
    failures += check_teardown_with_a_gone_peer(host_per_rank=True)
    failures += check_peer_gone_mid_call("all-gather")
    failures += check_peer_gone_mid_call("reduce-scatter")
    failures += check_ranks_that_disagree_on_rails()
    failures += check_ranks_that_register_different_groups()
    failures += check_a_peer_that_never_compares_groups()
    failures += check_ranks_that_ask_for_different_arena_sizes()
    failures += check_ranks_that_pass_different_landing_offsets()
    print("PASS" if not failures else "FAIL: " + "; ".join(failures), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
