"""Choose a sandbox backend by name, or find the best isolating one (docker, then bwrap)."""

from __future__ import annotations

import importlib
import logging
from typing import Any

from tasks.registry import Registry

from .base import Sandbox

log = logging.getLogger(__name__)

#: name -> ``"module:Class"``, under the one registry rule (tasks.registry).
BACKENDS: Registry[str] = Registry(
    "sandbox backend",
    {
        "docker": f"{__package__}.docker_backend:DockerSandbox",
        "bwrap": f"{__package__}.bwrap:BwrapSandbox",
        "subprocess": f"{__package__}.subprocess_backend:SubprocessSandbox",
    },
)
#: The built-in backend names (``sandbox=`` of ``make``/``CodeVerifier``/``get_sandbox``).
BACKEND_NAMES = tuple(BACKENDS)
#: Backends the automatic choice may pick. subprocess does not isolate: ask for it by name.
AUTO_ORDER = ("docker", "bwrap")


def register_backend(name: str, entry_point: str, *, overwrite: bool = False) -> str:
    """Make ``name`` a backend for ``get_sandbox``/``CodeVerifier``/``make(..., sandbox=name)``.

    ``entry_point`` is ``"module:Class"``: the class takes the `SandboxLimits` fields as keyword
    arguments, and the module defines ``probe() -> str | None`` (None when the backend can run
    here). The automatic choice never picks it. The same entry point under a taken name is a
    no-op; another raises ``AlreadyRegisteredError`` (a ValueError) unless ``overwrite=True``.
    """
    module, sep, cls = entry_point.partition(":")
    if not (module and sep and cls):
        raise ValueError(f"entry point {entry_point!r} is not of the form 'module:Class'")
    return BACKENDS.register(name, entry_point, overwrite=overwrite)


def _module(name: str):
    return importlib.import_module(BACKENDS[name].partition(":")[0])


def probe(name: str) -> str | None:
    """None if backend ``name`` can run programs here, else the reason it cannot."""
    if name not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {name!r}; valid names are {sorted(BACKENDS)}")
    if name == "subprocess":
        return None
    try:
        return _module(name).probe()
    except Exception as exc:  # noqa: BLE001 -- a probe must never take the caller down
        return f"{type(exc).__name__}: {exc}"


def available_backends() -> list[str]:
    """Backends usable on this machine, in order of preference (subprocess always last)."""
    return [name for name in BACKENDS if probe(name) is None]


def get_sandbox(name: str | None = None, **limits: Any) -> Sandbox:
    """A sandbox of backend ``name`` ("docker", "bwrap" or "subprocess") with ``limits``.

    ``limits`` are `SandboxLimits` fields (timeout, memory_mb, cpus, pids,
    output_bytes, disk_mb, extra_files_bytes, nofile). ``name=None`` picks docker
    if a daemon answers and the image exists, else bwrap if it works here, else
    raises RuntimeError listing why each failed; subprocess is never picked
    automatically because it does not isolate. A named backend that cannot run
    here is still returned: its runs report ``infra_error`` with the reason.
    """
    if name is None:
        reasons = {}
        for candidate in AUTO_ORDER:
            reason = probe(candidate)
            if reason is None:
                name = candidate
                break
            reasons[candidate] = reason
        else:
            detail = "; ".join(f"{k}: {v}" for k, v in reasons.items())
            raise RuntimeError(
                f"no isolating sandbox backend is usable ({detail}). Start docker with "
                "`scripts/services.sh start` or install bubblewrap "
                "(`scripts/install_system_deps.sh`); "
                "get_sandbox('subprocess') runs code WITHOUT isolation"
            )
    elif name not in BACKENDS:
        raise ValueError(
            f"unknown sandbox backend {name!r}; valid names are {sorted(BACKENDS)} or None "
            "(automatic)"
        )
    class_name = BACKENDS[name].partition(":")[2]
    sandbox = getattr(_module(name), class_name)(**limits)
    log.info("sandbox backend: %s", sandbox.name)
    return sandbox
