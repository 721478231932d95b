"""The host side of a warm parent (`warm.py`): send one execution, read its output and report.

The request travels on a SOCK_SEQPACKET socket with three file descriptors: a memfd holding
the program's stdin and the write ends of two pipes for its stdout and stderr. The host reads
those pipes itself, with byte caps and a deadline, so output never passes through the warm
parent. See docs/sandbox.md ("Warm interpreters").
"""

from __future__ import annotations

import array
import json
import os
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "WARM_SOURCE",
    "WarmReply",
    "exchange",
    "memfd_with",
    "preload_program",
    "read_outputs",
    "send_with_pipes",
    "warm_config",
    "warm_rlimits",
]

#: Source of the warm parent, run inside the sandbox as ``python -B -c WARM_SOURCE ...``.
WARM_SOURCE = Path(__file__).with_name("warm.py").read_text(encoding="utf-8")
_TRUSTED: list[str] = []
#: After the report, wait this long for the pipes to close (they normally already are).
_DRAIN = 0.5
#: The output pipes are watched only after this many seconds without a report: a short run
#: (most runs) then wakes the host once, for its report, instead of once per write (a
#: HumanEval check wrote ~10 records). A pipe that fills before that waits at most this long.
_LAZY_PIPES = 0.02
_CHUNK = 1 << 16


def preload_program(source: str) -> None:
    """Have warm parents started from now on load the trusted program ``source`` once, so that
    runs whose program is exactly ``source`` (the harness's runner) skip compiling it and
    running its module body.

    ``source`` must end its ``__main__`` block with ``main()`` then ``os._exit(0)``: a warm
    child runs exactly that on the module the parent loaded (a ``source`` without ``main``
    is only compiled)."""
    if source not in _TRUSTED:
        _TRUSTED.append(source)


def warm_config(wipe: tuple[str, ...] = (), *, sysv: bool = True) -> str:
    """The warm parent's configuration argument (JSON): dirs to wipe, trusted programs, and
    whether it checks System V IPC after each run (``sysv=False`` where the caller does)."""
    return json.dumps({"wipe": list(wipe), "trusted": list(_TRUSTED), "sysv": sysv})


@dataclass(frozen=True)
class WarmReply:
    """What came back from one execution. ``report`` is None when the warm parent did not
    answer (killed, stopped or broken by the program): the result must not be used.
    ``ended`` says why reading stopped: "report", "eof" (the other side closed or sent
    garbage), "deadline" or "overflow"."""

    report: dict[str, Any] | None
    stdout: bytes
    stderr: bytes
    output_exceeded: bool
    elapsed: float
    ended: str = "report"


def warm_rlimits(
    table: dict[str, int],
    resource_ids: dict[str, int],
    *,
    nproc_extra: int,
    skip: tuple[str, ...] = (),
) -> list[list[int]]:
    """``[[RLIMIT_*, value], ...]`` for a child: ``nproc`` grows by the processes of the uid
    that are not the program's (the warm parent, bwrap's init)."""
    out = []
    for name, value in table.items():
        if name in skip:
            continue
        out.append([resource_ids[name], value + nproc_extra if name == "nproc" else value])
    return out


def memfd_with(data: bytes) -> int:
    """A close-on-exec memfd holding ``data``, positioned at its start (a program's stdin)."""
    fd = os.memfd_create("stdin", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def send_with_pipes(stdin: bytes, send: Callable[[array.array], None]) -> tuple[int, int] | None:
    """Make the program's stdin memfd and stdout/stderr pipes, hand the three fds to ``send``
    (which passes them on with SCM_RIGHTS), and keep only the read ends: returned, or None if
    sending failed (the other side is gone)."""
    stdin_fd = memfd_with(stdin)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        send(array.array("i", [stdin_fd, out_w, err_w]))
    except OSError:
        os.close(out_r)
        os.close(err_r)
        return None
    finally:
        for fd in (stdin_fd, out_w, err_w):
            os.close(fd)
    return out_r, err_r


def exchange(
    sock: socket.socket,
    header: dict[str, Any],
    stdin: bytes,
    *,
    deadline_s: float,
    output_bytes: int,
) -> WarmReply:
    """Run one execution on the warm parent behind ``sock`` (see the module docstring).

    Stops reading at ``deadline_s`` seconds without a report (the parent enforces the
    program's own time limit well before), or as soon as stdout or stderr goes over
    ``output_bytes`` (the caller must then discard the instance: the program may still run).
    """
    start = time.monotonic()
    message = json.dumps(header).encode()

    def send(fds: array.array) -> None:
        sock.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])

    pipes = send_with_pipes(stdin, send)
    if pipes is None:
        return WarmReply(None, b"", b"", False, time.monotonic() - start, "eof")
    return read_outputs(pipes, sock, _recv, start, start + deadline_s, output_bytes)


def read_outputs(
    pipes: tuple[int, int],
    sock: socket.socket,
    recv: Callable[[socket.socket], dict[str, Any] | None],
    start: float,
    deadline: float,
    output_bytes: int,
) -> WarmReply:
    """Read the program's stdout and stderr pipes (closed here) and the report (``recv(sock)``
    once ``sock`` is readable; None: the other side is gone or broken) until the report has
    come and both pipes are closed, the deadline passes, or a pipe goes over ``output_bytes``.
    """
    bufs = {fd: bytearray() for fd in pipes}
    report: dict[str, Any] | None = None
    exceeded = False
    reported_at: float | None = None
    ended = "report"
    sel = selectors.DefaultSelector()
    watching = False  # the pipes are registered (see _LAZY_PIPES)
    try:
        for fd in pipes:
            os.set_blocking(fd, False)
        sel.register(sock, selectors.EVENT_READ)
        while not exceeded:
            now = time.monotonic()
            if not watching and (reported_at is not None or now >= start + _LAZY_PIPES):
                for fd in pipes:
                    sel.register(fd, selectors.EVENT_READ)
                watching = True
            open_pipes = [fd for fd in pipes if fd in sel.get_map()]
            if reported_at is not None and not open_pipes:
                break
            end = deadline if reported_at is None else min(deadline, reported_at + _DRAIN)
            if now >= end:
                ended = "deadline" if reported_at is None else ended
                break
            wait = end - now if watching else min(end, start + _LAZY_PIPES) - now
            for key, _ in sel.select(max(wait, 0.0)):
                if key.fileobj is sock:
                    data = recv(sock)
                    sel.unregister(sock)
                    if data is None:  # the other side died: nothing it said can be trusted
                        return WarmReply(None, b"", b"", False, time.monotonic() - start, "eof")
                    report, reported_at = data, time.monotonic()
                    continue
                fd = key.fd
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
    finally:
        sel.close()
        for fd in pipes:
            os.close(fd)
    out, err = (bytes(bufs[fd][:output_bytes]) for fd in pipes)
    if exceeded:
        ended = "overflow"
    return WarmReply(report, out, err, exceeded, time.monotonic() - start, ended)


def _recv(sock: socket.socket) -> dict[str, Any] | None:
    """The parent's report; None on EOF or anything malformed."""
    try:
        data = sock.recv(65536)
        report = json.loads(data) if data else None
    except (OSError, ValueError):
        return None
    valid = (
        isinstance(report, dict)
        and isinstance(report.get("exit"), int)
        and isinstance(report.get("timed_out"), bool)
        and isinstance(report.get("clean"), bool)
    )
    return report if valid else None
