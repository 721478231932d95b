"""The Docker daemon the tests need, shared by tests/code (sandboxes) and tests/docs (snippets).

``docker_daemon()`` starts dockerd and the sandbox image with scripts/services.sh when no daemon
answers, and stops the daemon afterwards only if it started it. A test that finds docker unusable
skips, unless MARFT_REQUIRE_SANDBOXES is set (the Makefile / CI sets it): then it fails, so CI
never passes without really exercising docker.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from marft_envs.code.sandbox.select import probe

SERVICES = Path(__file__).resolve().parents[1] / "scripts" / "services.sh"


def require_sandboxes() -> bool:
    """Whether an unusable sandbox backend is an error here (MARFT_REQUIRE_SANDBOXES set)."""
    return os.environ.get("MARFT_REQUIRE_SANDBOXES", "").strip() not in ("", "0")


def daemon_answers() -> bool:
    """Whether a Docker daemon answers ``docker version``."""
    try:
        done = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@contextlib.contextmanager
def docker_daemon() -> Iterator[str | None]:
    """Yield None when docker is usable (daemon + sandbox image), else the reason.

    Starts dockerd with scripts/services.sh if needed; stops it on exit only if it started it.
    """
    answered_before = daemon_answers()
    reason = probe("docker")
    if reason is not None:
        proc = subprocess.run(
            [str(SERVICES), "start"], capture_output=True, text=True, timeout=900, check=False
        )
        reason = probe("docker")
        if reason is not None:
            said = (proc.stdout + proc.stderr).strip()[-800:]
            reason += f"; scripts/services.sh start said: {said}"
    started_here = not answered_before and daemon_answers()
    try:
        yield reason
    finally:
        if started_here:
            subprocess.run([str(SERVICES), "stop"], capture_output=True, timeout=120, check=False)
