"""The `tide` command.

    tide plan (--preset NAME | --shapes FILE.json) --nodes M --gpus-per-node L [options]
    tide bench --fabric host --nodes M --gpus-per-node L (--preset NAME | --shapes FILE) [options]

Each subcommand adds its parser in _add_<name>_command and runs in
_run_<name>. Bad input and rejected plans exit with status 2 and one line on
stderr that says why.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import NoReturn

from tide import __version__, _capi, host_bench, presets
from tide.plan import CALIBRATION_KEYS, DTYPES, LANDINGS, MODES, PlanInputError, make_plan
from tide.plan_report import format_plan

EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2  # also a rejected plan
CUDA_JSON_DEFAULT = "tide_bench_cuda.json"  # where `tide bench --fabric cuda --json` writes without --json-out


class InputError(Exception):
    """Bad command-line input; the message is the one line we print."""


class _OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr and status 2."""

    def error(self, message: str) -> NoReturn:
        _fail(self.prog, f"error: {message} (see --help)", EXIT_BAD_INPUT)


def _fail(prog: str, message: str, status: int) -> NoReturn:
    one_line = " ".join(message.split())
    print(f"{prog}: {one_line}", file=sys.stderr)
    sys.exit(status)


# ------------------------------------------------------------------ tide plan

def _add_plan_command(subparsers) -> None:
    cmd = subparsers.add_parser(
        "plan",
        help="print the all-gather / reduce-scatter plan of one parameter group",
        description=(
            "Plan one FSDP2 parameter group on M nodes of L GPUs: layout, all-gather rounds "
            "and descriptors, reduce-scatter waves, rounds and buffers, and memory against "
            "FSDP2's. Status 2 and one line on stderr when the input or the plan is rejected."
        ),
    )
    source = cmd.add_mutually_exclusive_group(required=True)
    source.add_argument("--preset", choices=presets.names(), help="one layer of a known model")
    source.add_argument(
        "--shapes", metavar="FILE.json", type=Path,
        help='JSON list of shapes ([[4096, 4096], [4096]]) or of {"name", "shape", "dtype"} '
             'objects, or an object with such a "params" list',
    )
    cmd.add_argument("--nodes", "-M", type=int, required=True, metavar="M", help="nodes")
    cmd.add_argument("--gpus-per-node", "-L", type=int, required=True, metavar="L",
                     help="GPUs per node (1..8)")
    cmd.add_argument("--dtype", choices=sorted(DTYPES),
                     help="all-gather dtype of every parameter (default: as the shapes say, else bf16)")
    cmd.add_argument("--grad-dtype", choices=sorted(DTYPES),
                     help="gradient dtype (default: the parameters' dtype)")
    cmd.add_argument("--mode", choices=sorted(MODES), default="in-place",
                     help="reduce-scatter memory mode (default: in-place)")
    cmd.add_argument("--wave-width", type=int, default=0, metavar="W",
                     help="contributor nodes per reduce-scatter wave (default: L)")
    cmd.add_argument("--round-width", type=int, default=0, metavar="K",
                     help="rail transfers per network round, above M-1 taken as M-1 (default: sizing solver)")
    cmd.add_argument("--passes", type=int, default=1, metavar="N",
                     help="reduce-scatter passes, 0 taken as 1 (default: 1)")
    cmd.add_argument("--landing", choices=sorted(LANDINGS), default="pull",
                     help="Level 2 landing across nodes: pull through peer addresses or push by copy engine "
                          "(default: pull)")
    cmd.add_argument("--rail-lane", action="store_true",
                     help="one GPU per node across nodes (L = 1, M > 1): put both collectives on the rail lane "
                          "(paper App. F: all-gather rounds put straight into the landings, no receive stage; "
                          "reduce-scatter rows sent from the gradients themselves, no staging, outbox or spares; "
                          "the same bytes and bits); ignored elsewhere (the plan's all_gather.rail_lane and "
                          "reduce_scatter.rail_lane say whether it applies)")
    cmd.add_argument("--calibration", type=Path, metavar="FILE.json",
                     help=f"JSON object with {', '.join(sorted(CALIBRATION_KEYS))}, optionally fabric_gbps "
                          "(GB/s = 1e9 B/s; default: the paper's platform)")
    cmd.add_argument("--json", action="store_true", help="print the plan as JSON")
    cmd.set_defaults(run=_run_plan)


# Far above any shapes or calibration file (256 parameters of 16 extents are a few KiB), and
# small enough that /dev/zero or a wrong path to a checkpoint is refused before it fills memory.
_MAX_JSON_BYTES = 16 << 20


def _read_json(path: Path, what: str):
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_JSON_BYTES + 1)
        if len(raw) > _MAX_JSON_BYTES:
            raise InputError(f"{what} {path} is larger than {_MAX_JSON_BYTES >> 20} MiB: not a {what}")
        return json.loads(raw.decode("utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits, too deep
        raise InputError(f"{what} {path} is not valid JSON: {type(exc).__name__}: {exc}") from None


def _plan_params(args) -> tuple[list, str]:
    """(parameters, title) from --preset or --shapes, with --dtype applied."""
    if args.preset:
        params, title = presets.params(args.preset), args.preset
    else:
        data = _read_json(args.shapes, "shapes file")
        if isinstance(data, dict) and "params" in data:
            # A preset file's shape ({"name", "description", "params"}); other keys are typos, not ignored.
            unknown = sorted(set(data) - {"name", "description", "params"})
            if unknown:
                raise InputError(f"shapes file {args.shapes}: unknown keys {unknown} (allowed: name, description, "
                                 "params)")
            data = data["params"]
        if not isinstance(data, list):
            raise InputError(f"shapes file {args.shapes}: expected a JSON list of shapes")
        # A file name that is not UTF-8 (surrogate-escaped) still prints.
        params, title = data, os.fsencode(args.shapes.name).decode("utf-8", "backslashreplace")
    if args.dtype:
        params = [
            {**p, "dtype": args.dtype} if isinstance(p, dict) else {"shape": p, "dtype": args.dtype}
            for p in params
        ]
    return params, title


def _run_plan(args) -> int:
    params, title = _plan_params(args)
    calibration = _read_json(args.calibration, "calibration file") if args.calibration else None
    plan = make_plan(
        params,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        grad_dtype=args.grad_dtype,
        mode=args.mode,
        wave_width=args.wave_width,
        round_width=args.round_width,
        passes=args.passes,
        landing=args.landing,
        calibration=calibration,
        rail_lane=args.rail_lane,
    )
    if args.json:
        print(json.dumps(plan, indent=2))
    else:
        print(format_plan(plan, f"tide plan: {title}"))
    return 0


# ------------------------------------------------------------------ tide bench

def _add_bench_command(subparsers) -> None:
    cmd = subparsers.add_parser(
        "bench",
        help="run TIDE-AG and TIDE-RS, check every output, report traffic and time",
        description=(
            "Run both collectives on a fabric with fresh random inputs, check every output "
            "against an independent reference (byte-exact gather, float64 sums), and print "
            "traffic, descriptors, rounds, waves, staging and time. Exits 1 when a check fails, "
            "the run stops, an injected fault is detected (with its message) or one that acted "
            "goes undetected; 2 for bad input, or a fault that never acted (nothing to act on)."
        ),
    )
    cmd.add_argument("--fabric", choices=["host", "cuda"], default="host",
                     help="host: CPU ranks as threads, every output checked (default); cuda: TIDE against "
                          "stock FSDP2 and NCCL on this machine's GPUs (torchrun, one process per GPU)")
    cmd.add_argument("--gpus", type=int, metavar="N", help="cuda: GPUs to use (default: all)")
    cmd.add_argument("--native", metavar="PATH", help="cuda: libtide_bench_native.so for the NCCL "
                                                      "copy-engine rows (built by tools/gpu_run.sh)")
    cmd.add_argument("--json-out", metavar="PATH", type=Path,
                     help=f"cuda: where --json writes the rows (default {CUDA_JSON_DEFAULT}); "
                          "python -m tide.bench.plot draws them")
    cmd.add_argument("--allow-missing-baselines", action="store_true",
                     help="cuda: exit 0 even when a baseline the targets divide by could not run (without "
                          "--native: NCCL's copy-engine all-gather and the copy-engine ceiling)")
    # What --fabric cuda would ignore (it runs tide.bench.collectives' own groups and knobs):
    # every option below, with argparse's default (None, or False for a flag). The host fabric's
    # defaults (host_defaults) are applied only once the fabric is known to be the host's, so an
    # option given with its default value (--mode in-place) still counts as given.
    host_only: dict[str, object] = {}
    host_defaults: dict[str, object] = {}

    def host_arg(*names, parser=cmd, **kw):
        default = kw.pop("default", None)
        if default is not None and kw.get("action") != "store_true" and "default" not in kw.get("help", ""):
            kw["help"] = (kw["help"] + " " if "help" in kw else "") + f"(default {default})"
        action = parser.add_argument(*names, **kw)
        host_only[action.dest] = action.default
        if default is not None and kw.get("action") != "store_true":
            host_defaults[action.dest] = default

    host_arg("--list-faults", action="store_true", help="print the injectable faults and exit")
    source = cmd.add_mutually_exclusive_group()
    host_arg("--preset", parser=source, choices=presets.names(), help="one layer of a known model")
    host_arg("--shapes", parser=source, metavar="FILE.json", type=Path, help="as for tide plan")
    host_arg("--nodes", "-M", type=int, metavar="M", help="nodes")
    host_arg("--gpus-per-node", "-L", type=int, metavar="L", help="ranks per node (1..8)")
    host_arg("--dtype", choices=sorted(DTYPES), help="all-gather dtype of every parameter")
    host_arg("--grad-dtype", choices=sorted(DTYPES), help="gradient dtype")
    host_arg("--mode", choices=sorted(MODES), default="in-place")
    host_arg("--wave-width", type=int, default=0, metavar="W", help="as for tide plan (default: L)")
    host_arg("--round-width", type=int, default=0, metavar="K", help="as for tide plan (default: sizing solver)")
    host_arg("--passes", type=int, default=1, metavar="N", help="as for tide plan")
    host_arg("--landing", choices=sorted(LANDINGS), default="pull")
    host_arg("--rail-lane", action="store_true", help="as for tide plan")
    host_arg("--iters", type=int, default=5, metavar="N", help="calls of each collective")
    host_arg("--seed", type=int, help="input seed (default: fresh)")
    host_arg("--inputs", choices=sorted(host_bench.INPUT_KINDS), default="normal")
    host_arg("--timeout", type=float, default=10.0, metavar="S", help="deadline of every wait")
    host_arg("--inject", metavar="FAULT", help="inject a fault (see --list-faults)")
    host_arg("--fault-rank", type=int, default=0, metavar="R", help="the rank the fault acts on, with --inject")
    host_arg("--rails", choices=host_bench.RAILS, default="one-sided",
             help="host fabric: rails as puts with signals (copy engines, default), as two-sided "
                  "send/recv, or as one-sided puts with counted signals and credits (NCCL host RMA); "
                  "the last two are the paths across real nodes")
    cmd.add_argument("--json", action="store_true",
                     help="host: print the report as JSON; cuda: write the rows as JSON (see --json-out)")
    cmd.set_defaults(run=_run_bench, host_only_defaults=host_only, host_defaults=host_defaults)


def _run_cuda_bench(args) -> int:
    """torchrun the GPU driver (tide.bench.collectives) on this machine's GPUs."""
    import subprocess

    given = [dest for dest, default in args.host_only_defaults.items() if getattr(args, dest, default) != default]
    if given:
        raise InputError("--fabric cuda runs tide.bench.collectives' own groups and options; --fabric host only: "
                         + ", ".join("--" + dest.replace("_", "-") for dest in given))
    if args.gpus is not None and args.gpus < 1:
        raise InputError(f"--gpus must be at least 1, got {args.gpus}")
    if args.json_out is not None and not args.json:
        raise InputError("--json-out says where --json writes: give --json too")
    if args.native and not Path(args.native).is_file():
        raise InputError(f"--native {args.native}: no such file")
    try:
        import torch
    except ImportError:
        raise InputError("--fabric cuda needs PyTorch") from None
    if not torch.cuda.is_available():
        raise InputError("--fabric cuda: no CUDA device here (use --fabric host)")
    present = torch.cuda.device_count()
    if args.gpus is not None and args.gpus > present:
        raise InputError(f"--gpus {args.gpus}, but this machine has {present} CUDA device(s)")
    gpus = args.gpus or present
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}",
           "-m", "tide.bench.collectives"]
    if args.native:
        cmd += ["--native", args.native]
    if args.allow_missing_baselines:
        cmd += ["--allow-missing-baselines"]
    json_out = None
    if args.json:
        json_out = args.json_out or Path(CUDA_JSON_DEFAULT)
        try:  # refused now, not after the whole run; and no rows of an earlier run survive a failed one
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.touch()
            json_out.unlink()
        except OSError as e:
            raise InputError(f"--json-out {json_out}: cannot write there ({e.strerror})") from None
        cmd += ["--json", str(json_out)]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", CUDA_DEVICE_MAX_CONNECTIONS="32")
    env.pop("TIDE_ENABLE_MULTICAST", None)  # never multicast on shared machines
    code = subprocess.call(cmd, env=env)
    if json_out is not None:
        if json_out.exists():  # written before the driver's checks: a failed run keeps its rows
            print(f"tide bench: rows as JSON in {json_out} (plot them: python -m tide.bench.plot {json_out})"
                  + ("" if code == 0 else f"; the run failed (the driver exited with code {code}: see its "
                                          "'# FAILED' lines)"),
                  file=sys.stdout if code == 0 else sys.stderr)
        else:
            print(f"tide bench: no rows in {json_out}: the driver exited with code {code}", file=sys.stderr)
    return code


def _run_bench(args) -> int:
    if args.fabric == "cuda":
        return _run_cuda_bench(args)
    cuda_only = [flag for flag, value in (("--gpus", args.gpus), ("--native", args.native),
                                          ("--json-out", args.json_out)) if value is not None]
    if args.allow_missing_baselines:
        cuda_only.append("--allow-missing-baselines")
    if cuda_only:
        raise InputError(f"{', '.join(cuda_only)}: --fabric cuda only (the host fabric runs -M x -L CPU ranks)")
    if args.list_faults:
        # call-order needs two groups issued in different orders, which tide bench's one group cannot.
        print("\n".join(name + ("  (C++ test only: needs two groups)" if name == "call-order" else "")
                        for name in host_bench.fault_names()))
        return 0
    missing = [flag for flag, value in (("--nodes", args.nodes), ("--gpus-per-node", args.gpus_per_node))
               if value is None]
    if not (args.preset or args.shapes):
        missing.append("--preset or --shapes")
    if missing:
        raise InputError(f"missing {', '.join(missing)}")
    if args.inject is not None and args.inject not in host_bench.fault_names():
        raise InputError(f"unknown fault {args.inject!r} (see --list-faults)")
    if args.fault_rank is not None and args.inject is None:
        raise InputError("--fault-rank says which rank --inject's fault acts on: give --inject too")
    for dest, default in args.host_defaults.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
    params, title = _plan_params(args)
    report = host_bench.run_host(
        params, nodes=args.nodes, gpus_per_node=args.gpus_per_node, iters=args.iters, seed=args.seed,
        inputs=args.inputs, timeout_s=args.timeout, fault=args.inject, fault_rank=args.fault_rank,
        rails=args.rails, grad_dtype=args.grad_dtype, mode=args.mode, wave_width=args.wave_width,
        round_width=args.round_width, passes=args.passes, landing=args.landing, rail_lane=args.rail_lane,
    )
    print(json.dumps(report, indent=2) if args.json else host_bench.format_report(report, f"tide bench: {title}"))
    failed = report["error"] or report["all_gather"]["check"] != "ok" or report["reduce_scatter"]["check"] != "ok"
    if not failed:
        if args.inject and report["fault_firings"] == 0:
            # Not a missed detection: e.g. drop-credit on one node (no rail credits), duplicate-put
            # without a second put to one place, skip-stale-zeroing without stale blocks.
            _fail("tide bench", f"fault {args.inject} never acted: this configuration gives it nothing to act on "
                  "(README, `tide bench`: what each fault needs)", EXIT_BAD_INPUT)
        if args.inject:
            _fail("tide bench", f"fault {args.inject} acted {report['fault_firings']} time(s) and was NOT detected",
                  EXIT_FAILURE)
        return 0
    what = report["error"] or (
        f"all_gather {report['all_gather']['check']}, reduce_scatter {report['reduce_scatter']['check']}")
    if args.inject and report["fault_firings"] > 0:
        _fail("tide bench", f"fault {args.inject} detected: {what}", EXIT_FAILURE)
    # A fault that never acted cannot be what failed: say what did (a deadline too short, say).
    never = f" (the injected fault {args.inject} never acted)" if args.inject else ""
    # Every rank is a thread of this process: on a busy machine or at hundreds of ranks (M = 64, L = 8
    # takes about a minute on two cores) a wait can pass the default deadline with nothing wrong.
    longer = (f" -- a run of many ranks, or on a busy machine, may need a longer --timeout (now {args.timeout:g} s)"
              if report["error"] and " timed out after " in report["error"] else "")
    _fail("tide bench", f"{'run failed' if report['error'] else 'check failed'}{never}: {what}{longer}", EXIT_FAILURE)


# ------------------------------------------------------------------ entry point

def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="tide",
        description="TIDE: zero-copy, layout-aware all-gather and reduce-scatter for FSDP2.",
    )
    parser.add_argument("--version", action="version", version=f"tide {__version__}")
    subparsers = parser.add_subparsers(
        title="commands", dest="command", metavar="COMMAND", required=True,
        parser_class=_OneLineParser,
    )
    _add_plan_command(subparsers)
    _add_bench_command(subparsers)
    return parser


def _drop_stdout() -> None:
    """Points stdout at /dev/null: Python flushes it again at exit, and a second
    complaint about the same broken or full output would follow the first."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"tide {args.command}"
    try:
        return args.run(args)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): what it wanted it has.
        _drop_stdout()
        return EXIT_FAILURE
    except InputError as exc:
        _fail(prog, str(exc), EXIT_BAD_INPUT)
    except PlanInputError as exc:
        _fail(prog, f"invalid input: {exc}", EXIT_BAD_INPUT)
    except _capi.TideError as exc:
        if exc.result == _capi.Result.PLAN_REJECTED:
            kind = "rejected"
        elif exc.result == _capi.Result.INVALID_ARGUMENT:
            kind = "invalid argument"
        else:
            _fail(prog, f"{_capi.error_string(exc.result)} ({exc.reason}): {exc.message}", EXIT_FAILURE)
        _fail(prog, f"{kind} ({exc.reason}): {exc.message}", EXIT_BAD_INPUT)
    except _capi.LibraryNotFound as exc:
        _fail(prog, str(exc), EXIT_FAILURE)
    except OSError as exc:  # e.g. stdout on a full disk (what the commands read comes in as InputError)
        _drop_stdout()
        _fail(prog, f"cannot write the output: {exc.strerror or exc}", EXIT_FAILURE)


if __name__ == "__main__":
    sys.exit(main())
