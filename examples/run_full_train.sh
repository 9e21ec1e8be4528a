#!/usr/bin/env bash
# The full training run at the design document's defaults (dynamic_sampling_filter §1):
# keep 16 groups of 8 siblings per step, submit waves of 32 groups (16 spare slots for dropping
# zero-std groups), and cut the 128 kept episodes into two optimizer updates of 64.
#
# The launch itself (the four shopsim hooks and --custom-config-path examples/shopsim.yaml:
#   --dynamic-sampling-filter-path      shopsimrl.slime_runtime.fully_scored_group_filter
#   --rollout-all-samples-process-path  shopsimrl.slime_runtime.record_all_samples
#   --custom-rollout-log-function-path  shopsimrl.slime_runtime.log_rollout_step
#   --rollout-sample-hook-path          shopsimrl.slime_runtime.record_generated_sample
#   --custom-config-path                examples/shopsim.yaml
# ) is run_shopsimrl_slime.sh beside this file, which first checks the launch with
# `shopsim-metrics preflight` and stops on a problem. DRY_RUN=1 checks, then prints the command instead of running it.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

export ROLLOUT_BATCH_SIZE=${ROLLOUT_BATCH_SIZE:-16}
export N_SAMPLES_PER_PROMPT=${N_SAMPLES_PER_PROMPT:-8}
export OVER_SAMPLING_BATCH_SIZE=${OVER_SAMPLING_BATCH_SIZE:-32}
export GLOBAL_BATCH_SIZE=${GLOBAL_BATCH_SIZE:-64}
export SHOPSIM_CONFIG=${SHOPSIM_CONFIG:-$HERE/shopsim.yaml}

exec bash "$HERE/run_shopsimrl_slime.sh" "$@"
