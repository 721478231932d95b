"""The GPU check runs end to end on CPU (``--device cpu --model tiny-random``), so it cannot rot
before a GPU machine runs it."""

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
# every step of the check at the smallest sizes that still exercise it: on a loaded 2-core
# machine the default CPU sizes took 8 minutes (most of it the two memory processes)
SMALL = [
    *("--prompts", "2", "--new-tokens", "4"),
    *("--update-seqs", "2", "--update-prompt-tokens", "8", "--update-new-tokens", "4"),
    *("--update-steps", "1", "--matmul-size", "256"),
    *("--memory-prompt-tokens", "8", "--memory-new-tokens", "4", "--memory-episodes", "1"),
]


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_float32_anchor_gives_every_tensor_its_dtype_back():
    """The float32 anchor runs the bf16 model in float32 and back; peft keeps the LoRA weights
    of a bf16 base in float32, and they must stay float32 for the PPO update measured next
    (a plain ``.to(bfloat16)`` made them bf16)."""
    import torch

    from baselines.core.models import AdapterModel, LoraSpec, load_base

    gpu_check = load_gpu_check()
    base, tok = load_base("tiny-random", dtype="bfloat16")
    am = AdapterModel(base, tok, ["agent0"], LoraSpec(r=4, alpha=8))
    before = {n: p.dtype for n, p in am.peft.named_parameters()}
    assert {before[n] for n in before if "lora_" in n} == {torch.float32}
    assert torch.bfloat16 in before.values()
    with gpu_check.in_float32(am.peft):
        assert {p.dtype for p in am.peft.parameters()} == {torch.float32}
    assert {n: p.dtype for n, p in am.peft.named_parameters()} == before


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gpu_check_runs_end_to_end_on_cpu(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "benchmarks/gpu_check.py",
            "--device",
            "cpu",
            "--model",
            "tiny-random",
            *SMALL,
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=880,
        check=False,
    )
    out = run.stdout
    assert run.returncode == 0, out + run.stderr[-3000:]
    assert out.rstrip().endswith("GPU CHECK PASSED")

    def figure(pattern: str) -> float:
        match = re.search(pattern, out)
        assert match, f"{pattern!r} not in the output:\n{out}"
        value = float(match.group(1).replace(",", ""))
        assert math.isfinite(value)
        return value

    assert figure(r"generation: .* ([\d,.]+) tokens/s") > 0
    assert figure(r"bfloat16: mean \|diff\| ([\d.]+)") < 0.5
    assert figure(r"float32 \(anchor\): mean \|diff\| ([\d.]+)") < 1e-4  # the same forward twice
    assert figure(r"= ([\d.e+-]+) us per token") > 0
    assert 0 < figure(r"MFU ([\d.e+-]+)%") < 100
    assert figure(r"1-agent peak RSS \(CPU\) (\d+) MiB") > 0
    assert figure(r"ratio ([\d.]+) \(target <= 1.2") > 0
    assert "vLLM: not installed here, its check is skipped" in out
