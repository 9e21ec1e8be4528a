#!/usr/bin/env bash
# Build the Python environment in which tests/test_slime_train.py runs slime's own train.py on CPU.
#
#   bash tests/slime_train/setup_env.sh VENV SLIME_SRC MEGATRON_SRC
#   SLIME_SRC=... MEGATRON_SRC=... VENV/bin/python -m pytest tests/test_slime_train.py -q
#
# VENV          the virtualenv to create (or update), e.g. /work/slime-venv; not part of the project
# SLIME_SRC     a slime checkout (THUDM/slime; checked with 624b824), read for its train.py and imports
# MEGATRON_SRC  a directory holding Megatron-LM's `megatron/` package at the commit slime pins
#               (1dcf0dafa884ad52ffb243625717a3471643e087; the megatron-core wheel lacks
#               megatron.training), e.g. `git archive 1dcf0da megatron | tar -x -C MEGATRON_SRC`
# PYTHON        the interpreter to build the venv from (default python3.11)
#
# What it installs: this project (editable, with its dev extra); torch 2.13.0 as the CPU build (never
# plain `torch`, which pulls CUDA: every install below is constrained to it); ray, transformers,
# tokenizers, wandb at versions that worked; sglang, sglang-router and torch_memory_saver with
# --no-deps (slime only imports names from them) and the few modules their imports need. PyPI's
# torchvision links the CUDA torch: tests/slime_train/stubs holds an import-only stand-in instead
# (the test puts it on PYTHONPATH). Finally a .pth file in the venv's site-packages puts
# tests/slime_train on the path and installs the CPU accelerator hook
# (shopsim_cpu_accelerator.py) in every process of the venv: the test's driver and all Ray workers.
# Nothing of slime or Megatron is copied anywhere: they stay where they are, on PYTHONPATH.
set -euo pipefail

if [[ $# -ne 3 ]]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
VENV=$1
SLIME_SRC=$(cd "$2" && pwd)
MEGATRON_SRC=$(cd "$3" && pwd)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON=${PYTHON:-python3.11}

[[ -f "$SLIME_SRC/train.py" && -d "$SLIME_SRC/slime" ]] || { echo "SLIME_SRC=$SLIME_SRC: no slime checkout (train.py, slime/)" >&2; exit 2; }
[[ -d "$MEGATRON_SRC/megatron/training" ]] || { echo "MEGATRON_SRC=$MEGATRON_SRC: no megatron/training package" >&2; exit 2; }

[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q)
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
echo "torch==2.13.0" > "$CONSTRAINTS"

"${PIP[@]}" --upgrade pip
"${PIP[@]}" -c "$CONSTRAINTS" torch==2.13.0 "ray[default]==2.60.0" transformers==5.12.1 tokenizers wandb==0.31.0 \
  -e "$ROOT[dev]"
"${PIP[@]}" --no-deps sglang==0.5.15.post1 sglang-router==0.3.2 torch_memory_saver==0.0.10
# what importing slime's driver, its Ray actors and sglang's server_args needs (beside the above)
"${PIP[@]}" -c "$CONSTRAINTS" psutil triton starlette fastapi uvicorn ipython pyzmq dill openai \
  partial_json_parser msgspec orjson sentencepiece setproctitle pillow pylatexenc omegaconf blobfile pybase64

SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
printf '%s\nimport shopsim_cpu_accelerator; shopsim_cpu_accelerator.install()\n' "$HERE" > "$SITE/shopsim_slime_harness.pth"

# check: CPU torch, the accelerator hook, and slime's driver importable
PYTHONPATH="$SLIME_SRC:$MEGATRON_SRC:$HERE/stubs" "$VENV/bin/python" - <<'EOF'
import warnings
warnings.simplefilter("ignore")
import torch
assert "+cpu" in torch.__version__ or not torch.cuda.is_available(), torch.__version__
import slime.utils.arguments, slime.ray.placement_group, slime.ray.rollout, slime.backends.megatron_utils.actor  # noqa: E401
from slime.utils import accelerator
assert accelerator.get_accelerator().name == "cpu", accelerator.get_accelerator().name
print(f"ok: torch {torch.__version__}, slime importable, accelerator {accelerator.get_accelerator().name}")
EOF
echo "run: SLIME_SRC=$SLIME_SRC MEGATRON_SRC=$MEGATRON_SRC $VENV/bin/python -m pytest $ROOT/tests/test_slime_train.py -q"
