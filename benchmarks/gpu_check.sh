#!/usr/bin/env bash
# GPU check of the baselines (issue 15), for a GPU machine with NO network: it runs from this
# source tree on the torch, transformers and peft already installed there, in a few minutes.
#
#   bash benchmarks/gpu_check.sh --download-wheels   # HERE, with network: fills .gpu-wheels/
#   bash benchmarks/gpu_check.sh [gpu_check.py options, e.g. --device cpu --model tiny-random]
#
# The machine lacks only the small pure-Python packages of the environment suite. They are the
# wheels of WHEELS below (about 4 MB in all; carry .gpu-wheels/ with the source tree, `make
# gpu-wheels` downloads them); on the machine each one whose module does not import is
# installed (no index, no dependencies) into a folder on PYTHONPATH, so nothing preinstalled
# is replaced. No model is downloaded: the check builds random models of real shapes. vLLM is
# used when it is installed and skipped with one line when not. Exit status 0 and "GPU CHECK
# PASSED" mean it ran; the figures are printed on the way (see benchmarks/gpu_check.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEEL_DIR=${GPU_WHEELS:-.gpu-wheels}
SITE=${GPU_SITE:-/tmp/marft-gpu-site}

# "requirement module": the versions this repository's CPU suite runs with (all pure Python).
WHEELS=(
  "gymnasium==1.4.0 gymnasium"
  "farama-notifications==0.0.6 farama_notifications"
  "cloudpickle==3.1.3 cloudpickle"
  "pettingzoo==1.27.0 pettingzoo"
  "rich==15.0.0 rich"
  "markdown-it-py==4.3.0 markdown_it"
  "mdurl==0.1.2 mdurl"
  "pygments==2.21.0 pygments"
)

if [ "${1:-}" = "--download-wheels" ]; then
  mkdir -p "$WHEEL_DIR"
  reqs=()
  for entry in "${WHEELS[@]}"; do reqs+=("${entry%% *}"); done
  "$PY" -m pip download -q --no-deps --only-binary :all: --python-version 3.12 -d "$WHEEL_DIR" "${reqs[@]}"
  du -sh "$WHEEL_DIR"
  exit 0
fi

mkdir -p "$SITE"
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
for entry in "${WHEELS[@]}"; do
  req=${entry%% *}
  module=${entry##* }
  if ! "$PY" -c "import $module" 2>/dev/null; then
    name=${req%%==*}
    wheel=$(ls "$WHEEL_DIR"/"${name//-/_}"-*.whl "$WHEEL_DIR"/"$name"-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$wheel" ]; then
      echo "missing module $module and no wheel for $req in $WHEEL_DIR: run" \
        "'bash benchmarks/gpu_check.sh --download-wheels' where there is network, and carry $WHEEL_DIR"
      exit 2
    fi
    "$PY" -m pip install -q --no-index --no-deps --target "$SITE" "$wheel"
    echo "installed $(basename "$wheel") into $SITE"
  fi
done
"$PY" -c "import marft_envs, baselines.trainer" || {
  echo "the source tree does not import on this machine's packages (see above)"; exit 2; }

# vLLM's engine process must be spawned: the check has already initialised CUDA in this process.
export VLLM_WORKER_MULTIPROC_METHOD=spawn
timeout 470 "$PY" benchmarks/gpu_check.py "$@"
