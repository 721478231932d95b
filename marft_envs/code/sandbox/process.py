"""Run a host process with a wall-time limit and bounded output capture.

Shared by the subprocess and bwrap backends. The child starts in a new session
(its own process group), so a timeout or an output bomb kills the whole group
with SIGKILL. Output beyond the limit is never read into memory: capture stops
at ``output_bytes + 1`` bytes per stream and the process group is killed.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_CHUNK = 65536
#: After the main process exits, how long to wait for pipes held open by escaped
#: descendants before giving up on them.
_DRAIN_GRACE = 0.2


@dataclass(frozen=True)
class RawRun:
    """What happened to one host process (``returncode`` as in `subprocess`: -N = signal N)."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    output_exceeded: bool
    elapsed: float


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_bounded(
    cmd: Sequence[str],
    *,
    stdin: bytes,
    timeout: float,
    output_bytes: int,
    env: Mapping[str, str],
    cwd: str | None = None,
    pass_fds: Sequence[int] = (),
    **popen: Any,
) -> RawRun:
    """Start ``cmd``, feed ``stdin``, capture bounded output, kill on timeout/overflow.

    ``popen`` passes extra `subprocess.Popen` options (``user``, ``group``, ...).
    """
    start = time.monotonic()
    deadline = start + timeout
    proc = subprocess.Popen(
        list(cmd),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
        close_fds=True,
        **popen,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # PIPE
    out_fd, err_fd, in_fd = proc.stdout.fileno(), proc.stderr.fileno(), proc.stdin.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    timed_out = exceeded = False
    pidfd = os.pidfd_open(proc.pid)
    sel = selectors.DefaultSelector()
    try:
        for fd in bufs:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        sel.register(pidfd, selectors.EVENT_READ)
        pending = memoryview(stdin)
        if pending:
            os.set_blocking(in_fd, False)
            sel.register(in_fd, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        exited_at: float | None = None
        while True:
            streams_open = any(fd in sel.get_map() for fd in bufs)
            if exited_at is not None and not streams_open:
                break
            now = time.monotonic()
            end = deadline if exited_at is None else min(deadline, exited_at + _DRAIN_GRACE)
            if now >= end:
                # Past the deadline while running: timeout. Past the grace after the
                # exit: an escaped descendant holds the pipes; stop waiting for it.
                timed_out = exited_at is None
                break
            for key, _ in sel.select(end - now):
                fd = key.fd
                if fd == pidfd:
                    sel.unregister(pidfd)
                    exited_at = time.monotonic()
                elif fd == in_fd:
                    try:
                        pending = pending[os.write(fd, pending[:_CHUNK]) :]
                    except BlockingIOError:
                        continue
                    except OSError:  # the program closed its stdin
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(fd)
                        proc.stdin.close()
                else:
                    try:
                        chunk = os.read(fd, _CHUNK)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        sel.unregister(fd)
                        continue
                    buf = bufs[fd]
                    buf += chunk[: output_bytes + 1 - len(buf)]
                    exceeded = exceeded or len(buf) > output_bytes
            if exceeded:
                break
    finally:
        sel.close()
        _killpg(proc.pid)  # leftovers of the group, or the whole run on timeout/overflow
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
        returncode = proc.wait()
        os.close(pidfd)
    killed = timed_out or exceeded
    return RawRun(
        returncode=None if killed else returncode,
        stdout=bytes(bufs[out_fd][:output_bytes]),
        stderr=bytes(bufs[err_fd][:output_bytes]),
        timed_out=timed_out,
        output_exceeded=exceeded,
        elapsed=time.monotonic() - start,
    )
