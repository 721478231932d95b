"""Servers for the docs snippet test: a free loopback port, and waiting until a server answers.

The test module uses these for the servers it starts itself; the bash prelude of a block calls
``python docs_services.py port`` and ``python docs_services.py wait URL PID LOG`` around every
documented server command it runs in the background (docs/docs_tests.md).
"""

from __future__ import annotations

import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

#: seconds a documented server may take to answer its first request
READY_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (an exited child not yet reaped is a zombie: not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def answers(url: str) -> bool:
    """Whether an HTTP server answers ``url`` (any status: the server is up)."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def wait_until_answers(url: str, pid: int, log: Path, timeout: float = READY_TIMEOUT_S) -> None:
    """Return once ``url`` answers; raise RuntimeError (with the log's tail) if process ``pid``
    exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not answers(url):
        if not running(pid):
            raise RuntimeError(f"the server (pid {pid}) exited before {url} answered:\n{tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer within {timeout:.0f} s:\n{tail(log)}")
        time.sleep(0.2)


def tail(log: Path, chars: int = 3000) -> str:
    """The end of a server's log file ('' if it has none)."""
    try:
        return log.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def main(argv: list[str]) -> int:
    """``port``: print a free port; ``wait URL PID LOG``: wait until the server answers."""
    if argv[:1] == ["port"]:
        print(free_port())
        return 0
    if argv[:1] == ["wait"] and len(argv) == 4:
        try:
            wait_until_answers(argv[1], int(argv[2]), Path(argv[3]))
        except RuntimeError as e:
            print(f"docs test: {e}", file=sys.stderr)
            return 1
        return 0
    print("usage: docs_services.py port | wait URL PID LOG", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
