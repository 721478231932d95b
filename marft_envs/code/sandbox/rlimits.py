"""The POSIX resource limits every backend applies to the program (one table, three uses)."""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import replace

from .base import SandboxLimits

MB = 1024 * 1024


def rlimits(limits: SandboxLimits) -> dict[str, int]:
    """``{prlimit option name: value}`` for ``limits``.

    ``as`` turns a memory hog into a Python ``MemoryError``; ``nproc`` stops fork
    and thread bombs (it counts per user namespace, so it works inside bwrap and
    is ignored for uid 0, see docs/sandbox.md); ``fsize`` bounds any one file;
    ``cpu`` is a CPU-time backstop behind the wall-time kill; ``core`` = 0 keeps
    crash dumps off the disk.
    """
    return {
        "as": int(limits.memory_mb) * MB,
        "nproc": int(limits.pids),
        "fsize": int(limits.disk_mb) * MB,
        "cpu": limits.cpu_seconds,
        "nofile": int(limits.nofile),
        "core": 0,
    }


_RESOURCE = {
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "cpu": resource.RLIMIT_CPU,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}


def for_run(limits: SandboxLimits, timeout: float) -> SandboxLimits:
    """``limits`` for one run of wall limit ``timeout``: the CPU-time backstop (RLIMIT_CPU) is
    sized for the longer of ``timeout`` and ``limits.timeout``, so a run given more time than
    the sandbox's default (a call-based check runs all its tests in one run) is not killed by
    a backstop sized for one test."""
    return limits if timeout <= limits.timeout else replace(limits, timeout=timeout)


#: prlimit option name -> ``resource.RLIMIT_*`` id.
RESOURCES = _RESOURCE


def prlimit_args(limits: SandboxLimits) -> list[str]:
    """Options for util-linux ``prlimit`` (soft = hard)."""
    return [f"--{name}={value}:{value}" for name, value in rlimits(limits).items()]


def preexec(limits: SandboxLimits, *, skip: tuple[str, ...] = ()) -> Callable[[], None]:
    """A ``preexec_fn`` that applies ``limits`` in the child before exec."""
    table = [(_RESOURCE[n], v) for n, v in rlimits(limits).items() if n not in skip]

    def apply() -> None:
        for res, value in table:
            resource.setrlimit(res, (value, value))

    return apply
