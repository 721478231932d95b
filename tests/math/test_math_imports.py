"""The fast path is sympy-free in-process, and the package never imports torch."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
import marft_envs
before = "sympy" in sys.modules
from marft_envs.math import verify
pairs = [("\\\\boxed{\\\\frac{2}{4}}", "0.5"), ("(x+1)^2", "x^2+2x+1"), ("[1,2)", "[1,2]")]
assert [verify(p, r).correct for p, r in pairs] == [True, True, False]
print(before, "sympy" in sys.modules, "torch" in sys.modules)
"""


def test_fast_path_imports_neither_sympy_nor_torch():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    sympy_before, sympy_after, torch = out.stdout.split()
    assert torch == "False"
    assert sympy_after == sympy_before  # the math verifier itself did not pull sympy in


def test_math_verify_stage_imports_no_torch():
    # math-verify is a core dependency (a stage in the worker): it must stay torch-free.
    script = "import sys, math_verify; from marft_envs.math import mv_stage; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
