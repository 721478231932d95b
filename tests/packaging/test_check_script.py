"""scripts/check.sh finds the project's interpreter itself, as scripts/services.sh does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_check_script_outside_the_virtualenv_uses_the_checkouts_venv(tmp_path: Path) -> None:
    # a checkout whose .venv interpreter records what it is asked to run, from a shell whose
    # PATH has only the system python3 (no `python`, no ruff or mypy)
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "check.sh", tmp_path / "scripts" / "check.sh")
    calls = tmp_path / "calls.txt"
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n')
    venv_python.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "check.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = calls.read_text().splitlines()
    assert [c.split()[:3] for c in ran] == [
        ["-m", "ruff", "check"],
        ["-m", "ruff", "check"],
        ["-m", "ruff", "format"],
        ["-m", "mypy"],
    ]
