#!/usr/bin/env bash
# The launch slime users run on a Ray cluster: `ray job submit ... -- python3 train.py ...`, with the
# design document's knobs (run_full_train.sh), the records on shared storage and the environment the
# hooks read passed in --runtime-env-json (an exported variable does not reach slime's rollout actor).
#
#   RAY_ADDRESS=http://head:8265 SAVE_DIR=/shared/ckpt SLIME_DIR=/root/slime \
#   RAY_PYTHONPATH=/root/Megatron-LM:/root/slime bash examples/run_ray_job.sh
#   DRY_RUN=1 bash examples/run_ray_job.sh   # check with preflight, then print the command
#
# SHOPSIM_RUN_DIR (default $SAVE_DIR/shopsim) is where the step records land: on a multi-node run it
# must be shared storage, or the records stay on the node Ray placed the actor on.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export RAY_ADDRESS=${RAY_ADDRESS:-http://127.0.0.1:8265}
exec bash "$HERE/run_full_train.sh" "$@"
