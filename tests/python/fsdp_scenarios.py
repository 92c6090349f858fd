"""Scenarios run inside every rank of a gloo job (see fsdp_harness): each
trains a stock FSDP2 model and a TIDE one built identically, on the same
per-rank data, and compares losses, gradients and parameters.

`ctx.device` (default "cpu") places models, meshes and data: the CUDA smoke
(fsdp_cuda_smoke.py) runs the same scenarios on GPUs under NCCL.

This module is their registry: the lists of scenarios per world size, and
every scenario and helper by name (`fsdp_scenarios.<name>`, as fsdp_harness
and the CUDA smoke look them up). The scenarios live by concern in
fsdp_scenarios_*.py, the models and checks they share in
fsdp_scenario_kit.py."""

from __future__ import annotations

import fsdp_scenario_kit
import fsdp_scenarios_entry_points
import fsdp_scenarios_fallbacks
import fsdp_scenarios_float64
import fsdp_scenarios_four_ranks
import fsdp_scenarios_install
import fsdp_scenarios_order_and_memory
import fsdp_scenarios_schedule
import fsdp_scenarios_training

_MODULES = (fsdp_scenarios_training, fsdp_scenarios_schedule, fsdp_scenarios_install, fsdp_scenarios_four_ranks,
            fsdp_scenarios_order_and_memory, fsdp_scenarios_entry_points, fsdp_scenarios_fallbacks, fsdp_scenarios_float64,
            fsdp_scenario_kit)


def __getattr__(name: str):
    """A scenario or a shared helper by name, from whichever module defines it."""
    for module in _MODULES:
        if name in vars(module):
            return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no scenario or helper {name!r}")


TWO_RANKS = [
    "transformer_fp32_in_place", "transformer_fp32_slot_reuse", "transformer_bf16_mixed_precision",
    "bf16_params_slot_reuse", "integer_exact", "integer_exact_slot_reuse_two_nodes", "integer_exact_plan_options",
    "integer_exact_bf16", "passes_fit_the_scratch",
    "gradient_accumulation", "gradient_accumulation_bf16_no_sync", "gradient_dtypes_differ_between_ranks",
    "reshard_after_forward_false",
    "last_block_folded_with_eval", "folded_block_forward_without_its_backward", "reshard_after_backward_false",
    "skipped_blocks_hold_no_slot", "installs_that_overlap", "inversion_after_the_autograd_pass", "forward_that_raised",
    "fallbacks", "state_dict_and_checkpoint", "old_parameters_after_assign_keep_their_storage",
    "assign_of_a_remapped_state_dict",
    "divide_factors", "reduce_dtype_choices", "hooks", "guard_mismatch", "no_ring_no_adopt_explicit_prefetch",
    "prefetches_unmarked", "unconsumed_prefetch_between_steps", "premul_on_shared_gradient_storage", "refusals",
    "frozen_parameters", "shard_group_of_one", "prefetch_inversion", "read_done_release", "arena_accounting",
    "grads_released_with_fsdp_state", "activation_checkpointing", "checkpointed_region_of_several_blocks",
    "explicit_forward_prefetch",
    "user_unshard_for_eval", "tied_embeddings", "compiled_blocks", "two_models", "gradient_clipping",
    "params_smaller_than_world", "conditional_execution", "embedding_not_unsharded_in_backward",
    "reshard_after_forward_changed", "custom_comm_after_install", "root_only",
    "a_check_failing_on_one_rank_fails_every_rank", "wrapped_by_another_tool", "dropped_without_uninstall", "kept_arenas_close_once_let_go",
    "waits_last_the_process_groups_timeout",
    "stale_unsharded_use_fails", "nested_fully_shard", "grouped_modules_at_both_ends", "shared_module_of_two_parents",
    "module_called_through_a_plain_attribute",
    "unused_block_output", "dtype_changed_after_install",
    "ranks_disagree_on_unused_params", "unshard_every_module", "kept_unsharded_across_a_step",
    "pipeline_schedules_without_a_stale_warning",
    "block_called_again_on_an_input_without_grad", "ignored_params_left_alone",
    "forward_methods_registered_with_fsdp", "backward_twice_through_a_retained_graph", "two_forwards_one_backward",
    "input_gradient_between_steps", "gradients_zeroed_in_place", "post_optimizer_event",
    "autocast_forward_without_mixed_precision", "activation_checkpointing_reentrant", "frozen_middle_block",
    "eval_between_no_sync_micro_batches", "model_zero_grad_mid_accumulation", "reshard_after_forward_as_an_int",
    "users_own_instance_methods_kept", "uninstall_or_relayout_between_forward_and_backward",
    "pending_backward_refusals_agree", "block_outputs_of_unusual_types", "ranks_install_differently",
    "bad_arguments_on_one_rank",
    "groups_offloaded_fp16_or_extended_stay_stock", "tensor_parallel_group_stays_stock", "torch_too_old_stays_stock",
    "fsdp_objects_missing_an_attribute_stay_stock", "slot_reuse_frees_gradients_before_the_collective",
    "reduce_scatter_against_float64",
]
ONE_RANK = ["one_rank_stays_stock", "shard_group_of_one"]
# Run again with every call compared across the ranks (TIDE_CHECK_CALLS=1; test_fsdp_checked_calls.py on
# CPU, fsdp_cuda_smoke.py --checked-calls on GPUs): the scenarios whose call sequence depends on per-rank
# state (accumulation without sync, gradients that differ between ranks, kept or skipped groups, prefetch
# orders, several models).
CHECKED_CALLS = {
    2: ["gradient_accumulation_bf16_no_sync", "gradient_dtypes_differ_between_ranks", "ranks_disagree_on_unused_params",
        "conditional_execution", "kept_unsharded_across_a_step", "reshard_after_backward_false",
        "skipped_blocks_hold_no_slot", "prefetch_inversion", "explicit_forward_prefetch", "two_models",
        "integer_exact_slot_reuse_two_nodes", "eval_between_no_sync_micro_batches"],
    4: ["hsdp_slot_reuse_partial_all_reduce", "fsdp4_push_landing", "params_smaller_than_world"],
}
# Eight ranks (the 8-GPU validation of issue 6; fsdp_cuda_smoke.py on eight GPUs): the reduce-scatter against
# float64 on every split of eight ranks.
EIGHT_RANKS = ["reduce_scatter_against_float64"]
FOUR_RANKS = [
    "fsdp4_two_by_two_in_place", "fsdp4_push_landing", "fsdp4_slot_reuse_bf16", "fsdp4_integer_exact", "hsdp_in_place",
    "hsdp_slot_reuse_partial_all_reduce", "hsdp_integer_exact", "fallbacks", "scratch_estimate_is_enough",
    "prefetch_inversion", "read_done_release", "params_smaller_than_world", "fsdp4_experts_on_a_sub_mesh",
    "entry_points_on_hsdp_and_two_nodes", "reshard_to_a_smaller_mesh_stays_stock", "skipped_blocks_hold_no_slot",
    "hsdp_one_replica_installs_differently", "installs_that_differ_by_sub_mesh_stay_in_step",
    "reduce_scatter_against_float64",
]
