#!/usr/bin/env bash
# Build the Python environment in which tests/test_miles_loop.py runs the hooks inside miles' own rollout loop.
#
#   bash tests/miles_loop/setup_env.sh VENV MILES_SRC
#   MILES_SRC=... VENV/bin/python -m pytest tests/test_miles_loop.py -q -p no:cacheprovider -o addopts=
#
# VENV       the virtualenv to create (or update), e.g. /work/miles-venv; not part of the project
# MILES_SRC  a miles checkout (radixark/miles; checked with 31f1ca961), read for its package and its tests'
#            mock-server fixtures; nothing of it is copied or written to (a .pth file puts it on the path)
# PYTHON     the interpreter to build the venv from (default python3.11)
#
# What it installs, from the package index only: this project (editable, with its dev extra); torch 2.13.0 as
# the CPU build (every install is constrained to it; miles' CI pins 2.11.0, whose wheel pulls CUDA here);
# miles' requirements.txt and tests/ci/requirements-ci-cpu.txt less the GPU-only packages (ring_flash_attn,
# nvidia-resiliency-ext, torchft-nightly) and less torch/torchvision (PyPI's torchvision links the CUDA torch:
# tests/slime_train/stubs holds an import-only stand-in, put on the path by the .pth file); sglang 0.5.23 with
# --no-deps (miles' mock server imports a few of its protocol modules; the one module miles imports that the wheel
# lacks, encoding_dsv4, is an import-only stand-in from tests/miles_loop/stubs). Then a byte-level tokenizer is built
# locally into VENV/tokenizer (the tests pass it as --hf-checkpoint instead of downloading Qwen/Qwen3-0.6B;
# they run with HF_HUB_OFFLINE=1). About 4 minutes of installs on 2 cores.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
VENV=$1
MILES_SRC=$(cd "$2" && pwd)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON=${PYTHON:-python3.11}

[[ -d "$MILES_SRC/miles/rollout" && -f "$MILES_SRC/requirements.txt" ]] || {
  echo "MILES_SRC=$MILES_SRC: no miles checkout (miles/rollout, requirements.txt)" >&2; exit 2; }

[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q)
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "torch==2.13.0" > "$WORK/constraints.txt"
# miles' requirements, less what needs a GPU or pins another torch
grep -hv -E '^\s*(#|$)|^(ring_flash_attn|nvidia-resiliency-ext|torchft-nightly|torch|torchvision)\b' \
  "$MILES_SRC/requirements.txt" "$MILES_SRC/tests/ci/requirements-ci-cpu.txt" | sed 's/\s*#.*$//' > "$WORK/requirements.txt"

"${PIP[@]}" --upgrade pip
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" -c "$WORK/constraints.txt" -r "$WORK/requirements.txt" pytest tokenizers -e "$ROOT[dev]"
"${PIP[@]}" --no-deps sglang==0.5.23
# the one module miles imports that this sglang wheel lacks: an import-only stand-in (tests/miles_loop/stubs)
SGLANG_OPENAI=$("$VENV/bin/python" -c "import importlib.util as u; print(u.find_spec('sglang').submodule_search_locations[0])")/srt/entrypoints/openai
cp "$HERE/stubs/encoding_dsv4.py" "$SGLANG_OPENAI/encoding_dsv4.py"

SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
printf '%s\n%s\n' "$MILES_SRC" "$ROOT/tests/slime_train/stubs" > "$SITE/shopsim_miles_harness.pth"

HF_HUB_OFFLINE=1 "$VENV/bin/python" "$HERE/build_tokenizer.py" "$VENV/tokenizer"

# check: CPU torch, miles' rollout and its mock server importable
HF_HUB_OFFLINE=1 "$VENV/bin/python" - <<'PY'
import warnings
warnings.simplefilter("ignore")
import torch
assert "+cpu" in torch.__version__ or not torch.cuda.is_available(), torch.__version__
import miles.rollout.sglang_rollout, miles.rollout.inference_rollout.inference_rollout_train  # noqa: E401
import miles.utils.test_utils.mock_sglang_server  # noqa: F401
print(f"ok: torch {torch.__version__}, miles importable")
PY
echo "run: MILES_SRC=$MILES_SRC $VENV/bin/python -m pytest $ROOT/tests/test_miles_loop.py -q -p no:cacheprovider -o addopts="
