"""tide.fsdp on GPUs (not collected by pytest): FSDP2 with TIDE on the CUDA
fabric beside stock FSDP2 in the same processes, a few steps per
configuration, losses / gradients / parameters compared.

    torchrun --nproc_per_node 2 tests/python/fsdp_cuda_smoke.py
    torchrun --nproc_per_node 1 tests/python/fsdp_cuda_smoke.py   # one GPU: TIDE stays stock
    torchrun --nproc_per_node 4 tests/python/fsdp_cuda_smoke.py   # + the four-rank scenarios (HSDP 2x2)
    torchrun --nproc_per_node 4 tests/python/fsdp_cuda_smoke.py --ipc   # 4 ranks on any number of GPUs
    torchrun --nproc_per_node 2 tests/python/fsdp_cuda_smoke.py --host-per-rank   # likewise, across "hosts"
    torchrun --nproc_per_node 4 tests/python/fsdp_cuda_smoke.py --ipc --sweep 20   # 20 random configurations
    torchrun --nproc_per_node 4 tests/python/fsdp_cuda_smoke.py --ipc --scenarios a,b   # these scenarios alone
    torchrun --nproc_per_node 2 tests/python/fsdp_cuda_smoke.py --ipc --checked-calls   # TIDE_CHECK_CALLS=1

--ipc: ranks may share GPUs (rank r on GPU r mod count): torch.distributed on
gloo, so stock FSDP2 runs its collectives through gloo on the CUDA tensors,
and TIDE on the CUDA fabric over CUDA IPC ranks (install's fabric
"cuda-ipc"; NCCL refuses two ranks on one GPU). The same configurations and
scenarios as under NCCL, e.g. HSDP on a 2x2 mesh with one GPU.

--host-per-rank: ranks may share GPUs too, each a host of its own as NCCL
and TIDE see it (NCCL_HOSTID per rank, LOCAL_WORLD_SIZE=1): torch.distributed
on gloo, and TIDE on the CUDA fabric with its NCCL bootstrap (install's
default), every shard group M = its size nodes of one GPU, the rails between
the "hosts" by NCCL send/recv over loopback sockets, as across real nodes.

--sweep N: instead of the fixed configurations and scenarios, N random
configurations of fsdp_random_configs (TIDE_FSDP_SWEEP_SEED picks them; the
seed is printed).

On one GPU there is nothing to gather or scatter: the one-rank scenarios of
the CPU suite (fsdp_scenarios.ONE_RANK) check that every group stays stock
with its reason and trains as stock.

Needs libtide built with the CUDA fabric (TIDE_LIBRARY or the installed
package). Prints one line per configuration and exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fsdp_harness  # noqa: E402
import fsdp_random_configs  # noqa: E402
import fsdp_scenarios as S  # noqa: E402

import tide.fsdp  # noqa: E402
from tide.bench.calibration import H200_PAIR  # noqa: E402
from tide.bench.topologies import as_own_host  # noqa: E402

FP32 = {"rtol": 1e-4, "atol": 1e-5}
BF16 = {"rtol": 3e-2, "atol": 3e-2}


class Ctx:
    """What the kit's make_pair and batches read: the rank, the world, the device and the run's seed
    (fsdp_harness.run_seed)."""

    def __init__(self, rank, world, device, seed):
        self.rank, self.world, self.device, self.seed = rank, world, device, seed


def run(ctx, device, *, mode, mp_policy=None, tol, integer=False, topology=None, steps=4, micro=1, raf=None,
        build=S.transformer, loss_fn=None, configure=None, opt="adam", install_kw=None):
    mesh = init_device_mesh("cuda", (ctx.world,))
    kw = {} if mp_policy is None else {"mp_policy": mp_policy}
    if raf is not None:
        kw["raf"] = raf
    torch.set_default_device(device)
    try:
        ms, mt = S.make_pair(build, ctx, mesh, integer=integer, **kw)
    finally:
        torch.set_default_device(None)
    if configure:
        configure(ms)
        configure(mt)
    rep = tide.fsdp.install(mt, mode=mode, topology=topology, timeout_s=60, **(install_kw or {}))
    n_tide = len(S.tide_groups(rep))
    assert rep["installed"] and n_tide == len(rep["groups"]), rep
    # The ncclMemAlloc window: at least the arena, and outside torch's allocator.
    outside = tide.fsdp.arena_bytes(mt)
    assert outside >= sum(a["arena_bytes"] for a in rep["arenas"]) > 0, rep["arenas"]
    opts = S.optimizers(ms, mt, opt, 1e-2)
    d_in = ms.inp.in_features
    for s in range(steps):
        xs = [x.to(device) for x in S.batches(ctx, micro, d_in=d_in, integer=integer, seed=s)]
        S.step_both(ms, mt, opts, xs, tol=tol, micro=micro, what=f"step {s}", loss_fn=loss_fn)
    torch.cuda.synchronize()
    st = S.stats(mt)
    # Three blocks, In-Place, default prefetch: blocks.0's all-gather goes out ahead of blocks.2's reduce-scatter.
    if mode == "in-place" and (install_kw or {}).get("invert_prefetch", True) and raf is None \
            and build is S.transformer:
        assert st.get("prefetch_inversions", 0) > 0, f"no backward all-gather went ahead of a reduce-scatter: {st}"
    if (install_kw or {}).get("check_read_done"):
        assert st.get("rs_inputs_poisoned", 0) == st["reduce_scatters"] > 0, st
    if ctx.rank == 0:
        tide.fsdp.report(mt)
        print(f"[rank 0] torch.cuda.memory_reserved() {torch.cuda.memory_reserved(device)} B "
              f"+ TIDE arenas {outside} B outside it", flush=True)
    tide.fsdp.uninstall(mt)
    return st


def main() -> int:
    # No NVLink multicast on these machines: torch's own NCCL communicator is made below, before TIDE
    # could refuse, so a setting that would allow multicast ends the run here.
    # (Exported by whoever starts the process: TIDE's CUDA fabric refuses a 0 set during it.)
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit(f"refusing to run: NCCL_NVLS_ENABLE is {os.environ.get('NCCL_NVLS_ENABLE', 'unset')}; export "
                 "NCCL_NVLS_ENABLE=0 before starting (no NVLink multicast)")
    for var in ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        os.environ.setdefault(var, "1")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ipc", action="store_true",
                        help="ranks may share GPUs: gloo, and TIDE on the CUDA fabric over CUDA IPC ranks")
    parser.add_argument("--host-per-rank", action="store_true",
                        help="ranks may share GPUs, each a host of its own: gloo, and TIDE on the CUDA fabric "
                             "over NCCL with rails between the 'hosts'")
    parser.add_argument("--sweep", type=int, metavar="N",
                        help="run N random configurations (fsdp_random_configs) instead of the fixed ones")
    parser.add_argument("--scenarios", metavar="A,B",
                        help="run these scenarios of the CPU suite alone (fsdp_scenarios: any rank count's), "
                             "instead of the fixed configurations and this rank count's list")
    parser.add_argument("--checked-calls", action="store_true",
                        help="run fsdp_scenarios.CHECKED_CALLS for this rank count alone, every collective "
                             "compared across the ranks first (TIDE_CHECK_CALLS=1)")
    parser.add_argument("--part", metavar="K/N", default="1/1",
                        help="run the K-th of N parts of the scenario list (every N-th scenario from the K-th; "
                             "the fixed configurations in part 1), so that a long list fits the device's "
                             "command limit in several calls")
    args = parser.parse_args()
    try:
        part, parts = (int(v) for v in args.part.split("/"))
        if not 1 <= part <= parts:
            raise ValueError
    except ValueError:
        parser.error(f"--part must be K/N with 1 <= K <= N, got {args.part!r}")
    if args.checked_calls:
        if args.sweep is not None or args.scenarios:
            parser.error("--checked-calls excludes --sweep and --scenarios")
        world_size = int(os.environ["WORLD_SIZE"])
        if world_size not in S.CHECKED_CALLS:
            parser.error(f"--checked-calls: no list for {world_size} ranks (fsdp_scenarios.CHECKED_CALLS)")
        os.environ["TIDE_CHECK_CALLS"] = "1"  # read when each communicator is made
        args.scenarios = ",".join(S.CHECKED_CALLS[world_size])
    if args.sweep is not None and args.sweep < 1:
        parser.error(f"--sweep must be at least 1, got {args.sweep}")
    if args.sweep is not None and args.scenarios:
        parser.error("--sweep and --scenarios exclude each other")
    if args.sweep is not None and parts > 1:
        parser.error("--sweep and --part exclude each other")
    chosen = [n for n in (args.scenarios or "").split(",") if n]
    unknown = [n for n in chosen if not callable(getattr(S, n, None))]
    if unknown:
        parser.error(f"--scenarios: no such scenario in fsdp_scenarios: {', '.join(unknown)}")
    if args.ipc and args.host_per_rank:
        parser.error("--ipc and --host-per-rank exclude each other")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    if args.host_per_rank:
        # Before the first NCCL communicator; install's default topology (one node per
        # rank here) reads LOCAL_WORLD_SIZE.
        as_own_host(f"tide-smoke-rank-{local}")
        os.environ["LOCAL_WORLD_SIZE"] = "1"
        os.environ["TIDE_FSDP_SWEEP_NODE_PER_RANK"] = "1"  # --sweep: no topology puts two "hosts" on one node
    if args.ipc or args.host_per_rank:
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
        dist.init_process_group("gloo")
        if args.ipc:
            # Every install of this process (the configurations' and the scenarios') on the IPC fabric.
            tide.fsdp.install = functools.partial(tide.fsdp.install, fabric="cuda-ipc")
    else:
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    ctx = Ctx(rank, world, device, fsdp_harness.run_seed())  # every rank, after the process group is up
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    configs = {
        "fp32 in-place": dict(mode="in-place", tol=FP32),
        "fp32 slot-reuse": dict(mode="slot-reuse", tol=FP32),
        "bf16 mp in-place, grad accumulation": dict(mode="in-place", mp_policy=bf16, tol=BF16, micro=2),
        "bf16 mp slot-reuse": dict(mode="slot-reuse", mp_policy=bf16, tol=BF16),
        "fp32 reshard_after_forward=False": dict(mode="in-place", tol=FP32, raf=False),
        "integer exact, SUM": dict(mode="in-place", tol=None, integer=True, build=S.LinearModel,
                                   loss_fn=S.int_loss, configure=S.sum_reduction, opt="sign"),
    }
    if world > 1:
        configs["fp32 in-place, virtual 2 nodes"] = dict(mode="in-place", tol=FP32, topology=(world, 1))
        # Inputs overwritten with NaN at TIDE's read-done point (before the network phase ends).
        configs["fp32 in-place, virtual 2 nodes, read-done check"] = dict(
            mode="in-place", tol=FP32, topology=(world, 1), install_kw={"check_read_done": True})
        configs["bf16 mp slot-reuse, virtual 2 nodes, read-done check"] = dict(
            mode="slot-reuse", mp_policy=bf16, tol=BF16, topology=(world, 1), install_kw={"check_read_done": True})
    if world > 1:
        # The benchmark's plan: four passes (across virtual nodes the sum queue then waits for
        # the previous pass's send), the solver's CTA budgets for this host.
        configs["fp32 in-place, virtual 2 nodes, h200-pair plan"] = dict(
            mode="in-place", tol=FP32, topology=(world, 1), install_kw={"plan_options": H200_PAIR})
        configs["integer exact, SUM, virtual 2 nodes, h200-pair plan"] = dict(
            mode="slot-reuse", tol=None, integer=True, build=S.LinearModel, loss_fn=S.int_loss,
            configure=S.sum_reduction, opt="sign", topology=(world, 1), install_kw={"plan_options": H200_PAIR})
    configs["fp32 in-place, read-done check"] = dict(mode="in-place", tol=FP32, install_kw={"check_read_done": True})
    # One rank: nothing to gather or scatter; TIDE must stay stock, and say so.
    if world == 1 or args.sweep or chosen or part > 1:
        configs = {}
    failed = 0
    for name, kw in configs.items():
        start = time.perf_counter()
        try:
            st = run(ctx, device, **kw)
            verdict = f"PASS {st}"
        except Exception:
            failed += 1
            verdict = "FAIL\n" + traceback.format_exc() + fsdp_harness.seed_note(ctx.seed)
        # Printed before the barrier, which a peer still stuck in this configuration's collectives
        # leaves to the group's timeout (as fsdp_harness.run_scenarios reports first).
        print(f"[rank {rank}] {name}: {verdict} ({time.perf_counter() - start:.1f} s)", flush=True)
        dist.barrier()
    if args.sweep:
        os.environ["TIDE_FSDP_SWEEP_DRAWS"] = str(args.sweep)
        failed += run_scenarios(fsdp_random_configs.SWEEP, rank, world, device, ctx.seed, module=fsdp_random_configs)
    else:
        by_world = {2: CUDA_SCENARIOS, 1: S.ONE_RANK, 4: S.FOUR_RANKS, 8: S.EIGHT_RANKS}
        if not chosen and world not in by_world:  # a run of nothing must not read as a pass
            print(f"[rank {rank}] no scenario list for {world} ranks (lists for {sorted(by_world)}): "
                  "name scenarios with --scenarios", flush=True)
            dist.destroy_process_group()
            return 1
        names = chosen or by_world[world]
        names = names[part - 1::parts]
        if parts > 1:
            print(f"[rank {rank}] part {part}/{parts}: {len(names)} scenarios", flush=True)
        failed += run_scenarios(names, rank, world, device, ctx.seed)
    dist.destroy_process_group()
    return 1 if failed else 0


# The CPU suite's two-rank scenarios (fsdp_scenarios.TWO_RANKS) that the configurations above
# do not already cover, run unchanged on the GPUs: fallbacks, state dicts and distributed
# checkpoints, install/uninstall/install, divide factors, hooks, per-group passes, frozen parameters, the folded
# last block, guards and refusals, activation checkpointing, explicit forward prefetch, a user's
# unshard for evaluation, tied embeddings, compiled blocks, two models with TIDE in one process,
# gradient clipping, parameters with fewer elements than ranks, blocks skipped or run twice in a
# step, an embedding group not gathered in backward, reshard_after_forward changed between steps, a
# custom comm set after install, the root alone sharded, the folded block's forward without its
# backward, reduce dtypes, a tool's wrapper around TIDE's functions, a model dropped without
# uninstall, a use of unsharded parameters after reshard, nested fully_shard, a block whose output
# misses the loss, a dtype changed after install, skipped blocks that must not keep their ring slot
# (a forward prefetch, a block kept unsharded after backward), the prefetch inversion from FSDP2's final
# callback, installs on a block and on its root, a forward that raised, ranks that disagree on
# unused parameters, every module unsharded by hand, a group kept unsharded across a step, a module called through
# a plain attribute, a block called again on an input without grad, methods registered with
# register_fsdp_forward_method, a second backward through a retained graph, two forwards into one backward,
# an input gradient between steps, gradients zeroed in place, ignored parameters, a post-optimizer event
# (recorded for real only here), autocast around an fp32 model's forward, reentrant activation
# checkpointing, a whole block frozen, a no-grad evaluation between micro-batches without sync,
# model.zero_grad() between micro-batches (a kept group resharded by a ring-mate), reshard_after_forward given
# as an int, a user's own per-instance zero_grad and layout setter kept across install and uninstall, prefetches
# the adapter cannot mark, a divide factor pre-multiplied into gradient storage several parameters share, and the
# Parameters that load_state_dict(assign=True) replaced keeping storage of their own, a remapped state dict
# loaded that way, gradient dtypes that differ between ranks after a no-sync micro-batch, an uninstall or a
# layout setter between a forward and its backward, ranks that install differently (their comparison over NCCL),
# the fallbacks for CPU offload, fp16, all-gather extensions and tensor parallelism, a torch too old or lacking an
# attribute, Slot-Reuse freeing the gradients before its collective, the sharded gradients held to a float64
# mean of the ranks' unsharded ones (not to stock), and both collectives on the rail lane (topology (2, 1);
# the CPU suite runs it in test_fsdp_rail_lane.py, outside its two-rank list).
# Ordered from plain training to the adapter's own machinery.
CUDA_SCENARIOS = [
    "transformer_bf16_mixed_precision", "bf16_params_slot_reuse", "integer_exact_bf16",
    "gradient_accumulation_bf16_no_sync", "passes_fit_the_scratch", "frozen_parameters", "last_block_folded_with_eval",
    "reshard_after_backward_false", "skipped_blocks_hold_no_slot", "inversion_after_the_autograd_pass",
    "installs_that_overlap", "forward_that_raised", "fallbacks",
    "state_dict_and_checkpoint", "divide_factors", "hooks",
    "guard_mismatch", "refusals", "shard_group_of_one", "arena_accounting", "prefetch_inversion",
    "read_done_release", "grads_released_with_fsdp_state", "activation_checkpointing", "explicit_forward_prefetch",
    "user_unshard_for_eval", "tied_embeddings", "compiled_blocks", "two_models", "gradient_clipping",
    "params_smaller_than_world", "conditional_execution", "embedding_not_unsharded_in_backward",
    "reshard_after_forward_changed", "custom_comm_after_install", "root_only",
    "a_check_failing_on_one_rank_fails_every_rank", "folded_block_forward_without_its_backward",
    "reduce_dtype_choices", "wrapped_by_another_tool", "dropped_without_uninstall", "kept_arenas_close_once_let_go", "stale_unsharded_use_fails",
    "nested_fully_shard", "grouped_modules_at_both_ends", "shared_module_of_two_parents", "unused_block_output",
    "dtype_changed_after_install",
    "ranks_disagree_on_unused_params", "unshard_every_module", "kept_unsharded_across_a_step",
    "module_called_through_a_plain_attribute", "block_called_again_on_an_input_without_grad",
    "forward_methods_registered_with_fsdp", "backward_twice_through_a_retained_graph", "two_forwards_one_backward",
    "input_gradient_between_steps", "gradients_zeroed_in_place", "ignored_params_left_alone", "post_optimizer_event",
    "autocast_forward_without_mixed_precision", "activation_checkpointing_reentrant", "frozen_middle_block",
    "eval_between_no_sync_micro_batches", "model_zero_grad_mid_accumulation", "reshard_after_forward_as_an_int",
    "users_own_instance_methods_kept", "prefetches_unmarked", "unconsumed_prefetch_between_steps",
    "premul_on_shared_gradient_storage",
    "old_parameters_after_assign_keep_their_storage", "gradient_dtypes_differ_between_ranks",
    "assign_of_a_remapped_state_dict", "uninstall_or_relayout_between_forward_and_backward",
    "pending_backward_refusals_agree", "block_outputs_of_unusual_types", "ranks_install_differently",
    "bad_arguments_on_one_rank",
    "groups_offloaded_fp16_or_extended_stay_stock", "tensor_parallel_group_stays_stock", "torch_too_old_stays_stock",
    "fsdp_objects_missing_an_attribute_stay_stock", "slot_reuse_frees_gradients_before_the_collective",
    "reduce_scatter_against_float64", "rail_lane_plan_option",
]


def run_scenarios(names: list[str], rank: int, world: int, device, seed: int, module=S) -> int:
    """Runs `module`'s (default fsdp_scenarios) functions with models and data on `device` through the CPU suite's
    runner; one line per scenario; returns the number that failed on this rank."""
    import tempfile

    tmp = [tempfile.mkdtemp(prefix="tide-cuda-smoke-") if rank == 0 else None]
    dist.broadcast_object_list(tmp, src=0)  # one directory for the checkpoint round trip
    ctx = fsdp_harness.Context(rank, world, tmp[0], fsdp_harness.capture_logs(), device=str(device), seed=seed)
    failed = []

    def report(name, ok, tb, seconds):
        if not ok:
            failed.append(name)
        verdict = ("SKIP (" + tb[len(fsdp_harness.SKIPPED):] + ")" if ok and tb.startswith(fsdp_harness.SKIPPED)
                   else "PASS" if ok else "FAIL\n" + tb)
        print(f"[rank {rank}] scenario {name}: {verdict} ({seconds:.1f} s)", flush=True)

    fsdp_harness.run_scenarios(module, names, ctx, report)
    return len(failed)


if __name__ == "__main__":
    sys.exit(main())
