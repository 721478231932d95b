"""Sandboxes for the code-env tests: one per backend, shared by the whole session.

Every backend that this machine can run is tested: subprocess always, bwrap when it works
here, docker when a daemon answers (started with scripts/services.sh if needed, as CI does).
"""

from __future__ import annotations

import atexit
import subprocess
import threading
from pathlib import Path

from marft_envs.code.sandbox import get_sandbox
from marft_envs.code.sandbox.select import probe

_ROOT = Path(__file__).resolve().parents[2]
_CACHE: dict[str, object] = {}
_LOCK = threading.Lock()


def _docker_ready() -> bool:
    if probe("docker") is None:
        return True
    subprocess.run([str(_ROOT / "scripts" / "services.sh"), "start"], capture_output=True, timeout=600)
    return probe("docker") is None


def backend_names() -> list[str]:
    """subprocess, bwrap (if it runs here) and docker (if a daemon answers or can be started)."""
    names = ["subprocess"]
    if probe("bwrap") is None:
        names.append("bwrap")
    if _docker_ready():
        names.append("docker")
    return names


def sandbox_for(name: str):
    """The session's sandbox of backend ``name`` (closed at exit)."""
    with _LOCK:
        if name not in _CACHE:
            sb = get_sandbox(name)
            _CACHE[name] = sb
            atexit.register(sb.close)
        return _CACHE[name]


BACKENDS = backend_names()
