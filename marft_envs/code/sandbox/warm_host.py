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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["WARM_SOURCE", "WarmReply", "exchange", "preload_program", "warm_config", "warm_rlimits"]

#: Source of the warm parent, run inside the sandbox as ``python -B -c WARM_SOURCE ...``.
WARM_SOURCE = Path(__file__).with_name("warm.py").read_text(encoding="utf-8")
_TRUSTED: list[str] = []
#: After the report, wait this long for the pipes to close (they normally already are).
_DRAIN = 0.5
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


def warm_config(wipe: tuple[str, ...] = ()) -> str:
    """The warm parent's configuration argument (JSON): dirs to wipe, trusted programs."""
    return json.dumps({"wipe": list(wipe), "trusted": list(_TRUSTED)})


@dataclass(frozen=True)
class WarmReply:
    """What came back from one execution. ``report`` is None when the warm parent did not
    answer (killed, stopped or broken by the program): the result must not be used."""

    report: dict[str, Any] | None
    stdout: bytes
    stderr: bytes
    output_exceeded: bool
    elapsed: float


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


def _send(sock: socket.socket, header: dict[str, Any], stdin: bytes) -> tuple[int, int] | None:
    """Send the request; the read ends of stdout and stderr, or None if the parent is gone."""
    stdin_fd = os.memfd_create("stdin", os.MFD_CLOEXEC)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        view = memoryview(stdin)
        while view:
            view = view[os.write(stdin_fd, view) :]
        os.lseek(stdin_fd, 0, os.SEEK_SET)
        fds = array.array("i", [stdin_fd, out_w, err_w])
        sock.sendmsg([json.dumps(header).encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
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
    pipes = _send(sock, header, stdin)
    if pipes is None:
        return WarmReply(None, b"", b"", False, time.monotonic() - start)
    bufs = {fd: bytearray() for fd in pipes}
    report: dict[str, Any] | None = None
    exceeded = False
    deadline = start + deadline_s
    reported_at: float | None = None
    sel = selectors.DefaultSelector()
    try:
        for fd in pipes:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        sel.register(sock, selectors.EVENT_READ)
        while not exceeded:
            open_pipes = [fd for fd in pipes if fd in sel.get_map()]
            if reported_at is not None and not open_pipes:
                break
            now = time.monotonic()
            end = deadline if reported_at is None else min(deadline, reported_at + _DRAIN)
            if now >= end:
                break
            for key, _ in sel.select(end - now):
                if key.fileobj is sock:
                    data = _recv(sock)
                    sel.unregister(sock)
                    if data is None:  # the parent died: nothing it said can be trusted
                        return WarmReply(None, b"", b"", False, time.monotonic() - start)
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
    return WarmReply(report, out, err, exceeded, time.monotonic() - start)


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
