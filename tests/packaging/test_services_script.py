"""scripts/services.sh finds the project's interpreter itself (no activated virtualenv needed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_services_status_outside_the_virtualenv_uses_the_checkouts_venv(tmp_path: Path) -> None:
    # a checkout with its .venv, run from a shell whose PATH has only the system python3
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "services.sh", tmp_path / "scripts" / "services.sh")
    for package in ("marft_envs", "tasks"):
        (tmp_path / package).symlink_to(REPO / package)
    venv_python = tmp_path / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    venv_python.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "MARFT_DOCKERD_PIDFILE": str(tmp_path / "none.pid"),
    }
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "services.sh"), "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert "ModuleNotFoundError" not in output, output
    # the project's interpreter ran the image check (it reports the image, or why docker is down)
    assert "docker:" in output and ("image" in output.lower() or "DockerException" in output), (
        output
    )
