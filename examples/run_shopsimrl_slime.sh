#!/usr/bin/env bash
# Launch slime's GRPO training with the shopsim dynamic-sampling filter and its monitoring.
#
# A template: run it from a slime checkout (or set SLIME_DIR) after replacing the placeholder paths.
# Every knob can be overridden from the environment; run on its own, --over-sampling-batch-size
# defaults to --rollout-batch-size, as in slime. run_full_train.sh sets the design document's knobs.
#
#   SLIME_DIR=/path/to/slime HF_CHECKPOINT=... bash examples/run_shopsimrl_slime.sh
#   DRY_RUN=1 bash examples/run_shopsimrl_slime.sh     # check, then print the command instead of running it
#
# Before anything starts it runs `shopsim-metrics preflight -- <the train.py arguments>` (the hook paths
# load as slime loads them, the YAML passes check-config, slime's constraints on the knobs hold, W&B
# works with slime, the records have a writable home) and stops on a problem.
#
# Settings of the filter and the monitoring: examples/shopsim.yaml (docs §2).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SLIME_DIR=${SLIME_DIR:-.}

# placeholders: your model, checkpoints and prompts
HF_CHECKPOINT=${HF_CHECKPOINT:-/path/to/hf_checkpoint}
REF_LOAD=${REF_LOAD:-/path/to/ref_torch_dist}
SAVE_DIR=${SAVE_DIR:-/path/to/save}
PROMPT_DATA=${PROMPT_DATA:-/path/to/shopsim_prompts.jsonl}

# the dynamic-sampling knobs (design document §1)
ROLLOUT_BATCH_SIZE=${ROLLOUT_BATCH_SIZE:-16}
N_SAMPLES_PER_PROMPT=${N_SAMPLES_PER_PROMPT:-8}
OVER_SAMPLING_BATCH_SIZE=${OVER_SAMPLING_BATCH_SIZE:-$ROLLOUT_BATCH_SIZE}
GLOBAL_BATCH_SIZE=${GLOBAL_BATCH_SIZE:-64}
NUM_ROLLOUT=${NUM_ROLLOUT:-1000}

# the shopsim hooks and their settings
SHOPSIM_CONFIG=${SHOPSIM_CONFIG:-$HERE/shopsim.yaml}
WANDB_PROJECT=${WANDB_PROJECT:-shopsim-grpo}

CMD=(
  python3 "$SLIME_DIR/train.py"
  --hf-checkpoint "$HF_CHECKPOINT"
  --ref-load "$REF_LOAD"
  --save "$SAVE_DIR"
  --prompt-data "$PROMPT_DATA"
  --input-key prompt
  --label-key label
  --rollout-shuffle
  --num-rollout "$NUM_ROLLOUT"
  --rollout-batch-size "$ROLLOUT_BATCH_SIZE"
  --n-samples-per-prompt "$N_SAMPLES_PER_PROMPT"
  --over-sampling-batch-size "${OVER_SAMPLING_BATCH_SIZE:-$ROLLOUT_BATCH_SIZE}"
  --global-batch-size "$GLOBAL_BATCH_SIZE"
  --advantage-estimator grpo
  --dynamic-sampling-filter-path shopsimrl.slime_runtime.fully_scored_group_filter
  --rollout-all-samples-process-path shopsimrl.slime_runtime.record_all_samples
  --custom-rollout-log-function-path shopsimrl.slime_runtime.log_rollout_step
  --rollout-sample-hook-path shopsimrl.slime_runtime.record_generated_sample  # every generated token, aborted ones included
  --custom-config-path "$SHOPSIM_CONFIG"
  --use-wandb
  --disable-wandb-random-suffix  # slime 624b824 calls wandb.util.generate_id, which wandb 0.31 lacks
  --wandb-project "$WANDB_PROJECT"
  --wandb-group shopsim
  # add your model architecture, parallelism, optimizer and SGLang flags here
)

# Check the launch before anything starts (also under DRY_RUN): slime applies the YAML unchecked and
# loads the hooks only at the first rollout, after the engines started. One line per problem on
# stderr, and the script stops with exit code 2. SHOPSIM_PYTHON: a Python with the package installed.
SHOPSIM_PYTHON=${SHOPSIM_PYTHON:-python3}
if ! "$SHOPSIM_PYTHON" -c "import shopsim_metrics, shopsimrl" 2>/dev/null; then
  echo "shopsim-metrics is not installed for $SHOPSIM_PYTHON: pip install the project (pip install -e .), or set SHOPSIM_PYTHON to a Python that has it" >&2
  exit 2
fi
SHOPSIM_RUN_DIR=${SHOPSIM_RUN_DIR:-} "$SHOPSIM_PYTHON" -m shopsim_metrics preflight -- "${CMD[@]:2}" "$@" >&2

# On a Ray cluster (RAY_ADDRESS set, see run_ray_job.sh): submit the job. The hooks run inside slime's
# rollout actor, on whatever node Ray picks, and see only the environment of --runtime-env-json: the
# path to the code and the records directory (shared storage) go there.
if [[ -n "${RAY_ADDRESS:-}" ]]; then
  RUNTIME_ENV=${RUNTIME_ENV:-$(printf '{"env_vars": {"PYTHONPATH": "%s", "SHOPSIM_RUN_DIR": "%s"}}' \
    "${RAY_PYTHONPATH:-$SLIME_DIR}" "${SHOPSIM_RUN_DIR:-$SAVE_DIR/shopsim}")}
  CMD=(ray job submit --address "$RAY_ADDRESS" --runtime-env-json "$RUNTIME_ENV" -- "${CMD[@]}")
fi

if [[ "${DRY_RUN:-0}" == "1" ]]; then
  printf '%q ' "${CMD[@]}" "$@"
  printf '\n'
  exit 0
fi
exec "${CMD[@]}" "$@"
