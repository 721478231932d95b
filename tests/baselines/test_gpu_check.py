"""The GPU check runs end to end on CPU (``--device cpu --model tiny-random``), so it cannot rot
before a GPU machine runs it."""

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


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
    assert 0 < figure(r"MFU ([\d.]+)%") < 100
    assert figure(r"1-agent peak RSS \(CPU\) (\d+) MiB") > 0
    assert figure(r"ratio ([\d.]+) \(target <= 1.2") > 0
    assert "vLLM: not installed here, its check is skipped" in out
