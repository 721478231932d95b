"""Map how a sandboxed process ended to an `ExecStatus` (one rule for every backend)."""

from __future__ import annotations

import signal

from .base import ExecStatus

_MEMORY_MARKERS = (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc", b"out of memory")


def _last_line(stderr: bytes) -> bytes:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else b""


def classify(
    exit_code: int | None,
    *,
    timed_out: bool = False,
    output_exceeded: bool = False,
    oom_killed: bool = False,
    stderr: bytes = b"",
) -> ExecStatus:
    """The status of a finished run.

    Order matters: a kill from outside (timeout, output limit) wins over the exit
    code it caused; an OOM kill or a final ``MemoryError`` line (Python's own
    out-of-memory exception under RLIMIT_AS) is ``memory``; a SIGKILL nobody
    outside sent is the kernel enforcing the memory limit; SIGXCPU is the
    CPU-time backstop, hence ``timeout``.
    """
    if timed_out:
        return ExecStatus.TIMEOUT
    if output_exceeded:
        return ExecStatus.OUTPUT_LIMIT
    if oom_killed:
        return ExecStatus.MEMORY
    if exit_code == 0:
        return ExecStatus.OK
    if exit_code == -signal.SIGXCPU:
        return ExecStatus.TIMEOUT
    if exit_code == -signal.SIGKILL:
        return ExecStatus.MEMORY
    last = _last_line(stderr)
    if any(last.startswith(m) or m in last for m in _MEMORY_MARKERS):
        return ExecStatus.MEMORY
    return ExecStatus.ERROR


def signal_exit_code(code: int | None) -> int | None:
    """Normalise a shell-style exit code (128 + N for signal N) to ``-N``."""
    if code is not None and 128 < code < 128 + 65:
        return -(code - 128)
    return code
