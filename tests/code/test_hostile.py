"""Hostile programs against every backend: exact status, and the host (and the sandbox) unharmed.

Every case runs on docker and bwrap. Cases marked ``subprocess_ok`` also run on
the subprocess backend; the others would harm or read the host there (it does not
isolate: that is why it is never chosen automatically, see docs/sandbox.md).

After each hostile run the test checks that no process of that run is left on the
host (each run gets a unique marker in argv, visible in /proc/*/cmdline) and that
the same sandbox still runs a canary program.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from marft_envs.code.sandbox import ExecResult, ExecStatus
from tests.code.conftest import TEST_LIMITS

OK, ERROR, TIMEOUT = ExecStatus.OK, ExecStatus.ERROR, ExecStatus.TIMEOUT
MEMORY, OUTPUT = ExecStatus.MEMORY, ExecStatus.OUTPUT_LIMIT
SHORT = 1.5  # seconds, for programs that must time out
SECRET = "marft-secret-" + secrets.token_hex(8)


@dataclass
class Host:
    """What a case may need from the host side of the test."""

    marker: str
    secret_file: Path  # a host file holding SECRET
    target_dir: Path  # a host dir the program tries to write into
    port: int  # a listening loopback TCP port on the host
    accepted: list  # connections the listener accepted


@dataclass(frozen=True)
class Case:
    name: str
    program: str
    status: ExecStatus
    subprocess_ok: bool = False
    timeout: float = 5.0
    check: Callable[[ExecResult, Host], None] | None = None


def _nothing_leaked(r: ExecResult, host: Host) -> None:
    assert SECRET not in r.stdout and SECRET not in r.stderr


def _no_host_write(r: ExecResult, host: Host) -> None:
    assert list(host.target_dir.iterdir()) == [], "the program wrote into a host directory"
    assert "WROTE" not in r.stdout, r.stdout


def _no_connection(r: ExecResult, host: Host) -> None:
    time.sleep(0.2)
    assert host.accepted == [], "the host listener accepted a connection from the sandbox"


def _stdout_is(text: str) -> Callable[[ExecResult, Host], None]:
    def check(r: ExecResult, host: Host) -> None:
        assert r.stdout == text, (r.stdout, r.stderr)

    return check


CASES = [
    # ---- process and thread bombs
    Case(
        "fork_bomb",
        "import os, time\nn = 0\nwhile True:\n    if os.fork() == 0:\n        time.sleep(1000)\n    n += 1\n",
        ERROR,
    ),
    Case(
        "fork_bomb_classic",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
        TIMEOUT,
        timeout=SHORT,
    ),
    Case(
        "thread_bomb",
        "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()\n",
        ERROR,
        subprocess_ok=True,
    ),
    Case(
        "cpu_burn_children",
        "import os\nfor _ in range(8):\n    if os.fork() == 0:\n        break\nwhile True:\n    pass\n",
        TIMEOUT,
        timeout=SHORT,
    ),
    # ---- memory
    Case("memory_hog_at_once", "x = bytearray(4 * 1024**3)\n", MEMORY, subprocess_ok=True),
    Case(
        "memory_hog_gradual",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024**2))\n",
        MEMORY,
        subprocess_ok=True,
    ),
    Case(
        "memory_mmap",
        "import mmap\nm = mmap.mmap(-1, 8 * 1024**3)\nm[-1] = 1\n",
        MEMORY,
        subprocess_ok=True,
    ),
    Case("memory_string", "s = 'x' * (10 ** 10)\n", MEMORY, subprocess_ok=True),
    # ---- disk
    Case(
        "disk_hog_one_file",
        "with open('big', 'wb') as f:\n    while True:\n        f.write(b'x' * 2**20)\n        f.flush()\n",
        ERROR,
        subprocess_ok=True,
    ),
    Case(
        "disk_hog_many_files",
        "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * 2**20)\n    i += 1\n",
        ERROR,
    ),
    Case(
        "tmp_hog",
        "import tempfile, os\nd = tempfile.gettempdir()\ni = 0\nwhile True:\n"
        "    open(os.path.join(d, f't{i}'), 'wb').write(b'x' * 2**20)\n    i += 1\n",
        ERROR,
    ),
    Case(
        "shm_hog",
        "i = 0\nwhile True:\n    open(f'/dev/shm/s{i}', 'wb').write(b'x' * 2**20)\n    i += 1\n",
        ERROR,
    ),
    Case(
        "inode_exhaustion",
        "i = 0\nwhile True:\n    open(f'e{i}', 'w').close()\n    i += 1\n",
        ERROR,
        timeout=20,
    ),
    Case(
        "fd_exhaustion",
        "fs = []\nwhile True:\n    fs.append(open('main.py'))\n",
        ERROR,
        subprocess_ok=True,
    ),
    # ---- state that could outlive a run in a pooled container (docker must discard it)
    Case(
        "sysv_shm_left_behind",
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('created' if libc.shmget(0x4D41, 4096, 0o1666) >= 0 else 'refused')\n",
        OK,
        check=lambda r, h: _assert(r.stdout in ("created\n", "refused\n"), r.stdout),
    ),
    Case(
        "mqueue_left_behind",
        "try:\n    open('/dev/mqueue/q', 'w').close()\nexcept OSError:\n    pass\n",
        OK,
    ),
    Case(
        "shm_file_left_behind",
        "try:\n    open('/dev/shm/left', 'w').write('x')\nexcept OSError:\n    pass\n",
        OK,
    ),
    # ---- time
    Case("infinite_loop", "while True:\n    pass\n", TIMEOUT, subprocess_ok=True, timeout=SHORT),
    Case("c_level_loop", "sum(range(10 ** 18))\n", TIMEOUT, subprocess_ok=True, timeout=SHORT),
    Case(
        "regex_backtracking",
        "import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')\n",
        TIMEOUT,
        subprocess_ok=True,
        timeout=SHORT,
    ),
    Case(
        "sleep_forever",
        "import time\ntime.sleep(10 ** 6)\n",
        TIMEOUT,
        subprocess_ok=True,
        timeout=SHORT,
    ),
    Case(
        "ignore_signals",
        "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass\n",
        TIMEOUT,
        subprocess_ok=True,
        timeout=SHORT,
    ),
    Case(
        "close_stdout_and_hang",
        "import os, time\nos.close(1)\nos.close(2)\ntime.sleep(1000)\n",
        TIMEOUT,
        subprocess_ok=True,
        timeout=SHORT,
    ),
    # ---- reading the host
    Case("read_etc_shadow", "print(open('/etc/shadow').read())\n", ERROR, check=_stdout_is("")),
    Case(
        "read_host_secret_file",
        "import sys\nprint(open(sys.argv[2]).read())\n",
        ERROR,
        check=_nothing_leaked,
    ),
    Case(
        "search_fs_for_secret",
        "import os\nfor d, dirs, files in os.walk('/'):\n"
        "    dirs[:] = [x for x in dirs if os.path.join(d, x) not in ('/proc', '/sys', '/dev', '/usr')]\n"
        "    for f in files:\n        p = os.path.join(d, f)\n        try:\n"
        "            text = open(p, errors='replace').read(100000)\n        except OSError:\n            continue\n"
        "        if 'marft-secret-' in text and p != '/work/main.py':\n            print(p, text)\n",
        OK,
        timeout=20,
        check=_nothing_leaked,
    ),
    Case(
        "environment_secret",
        "import os\nprint(dict(os.environ))\n",
        OK,
        subprocess_ok=True,
        check=_nothing_leaked,
    ),
    Case(
        "proc_environ_of_others",
        "import os\nfor pid in os.listdir('/proc'):\n    if pid.isdigit():\n        try:\n"
        "            print(pid, open(f'/proc/{pid}/environ', 'rb').read())\n        except OSError as e:\n            print(pid, e)\n",
        OK,
        check=_nothing_leaked,
    ),
    Case(
        "proc_cmdline_of_others",
        "import os\nfor pid in os.listdir('/proc'):\n    if pid.isdigit():\n        try:\n"
        "            print(pid, open(f'/proc/{pid}/cmdline', 'rb').read())\n        except OSError as e:\n            print(pid, e)\n",
        OK,
        check=_nothing_leaked,
    ),
    Case(
        "docker_socket",
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('/var/run/docker.sock')\n",
        ERROR,
    ),
    # ---- writing the host
    Case(
        "write_outside_work_dir",
        "import sys, os\nfor p in ('/etc/x', '/usr/x', '/x', '/root/x', '/dev/x', '/usr/lib/x', os.path.join(sys.argv[3], 'x')):\n"
        "    try:\n        open(p, 'w').write('x')\n        print('WROTE', p)\n    except OSError:\n        pass\n",
        OK,
        check=_no_host_write,
    ),
    Case(
        "symlink_escape_in_results",
        "import os\nos.symlink('/etc/passwd', 'leak.txt')\nos.symlink('/', 'root')\n",
        OK,
        subprocess_ok=True,
        check=lambda r, h: _assert(not r.extra_files, r.extra_files),
    ),
    # ---- network
    Case(
        "network_external",
        "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=3)\n",
        ERROR,
    ),
    Case("network_dns", "import socket\nsocket.getaddrinfo('pypi.org', 443)\n", ERROR),
    Case(
        "network_host_loopback",
        "import socket, sys\nsocket.create_connection(('127.0.0.1', int(sys.argv[4])), timeout=3)\n",
        ERROR,
        check=_no_connection,
    ),
    # ---- processes outside the program
    Case(
        "kill_parent",
        "import os, signal\ntry:\n    os.kill(os.getppid(), signal.SIGKILL)\nexcept OSError:\n    pass\n"
        "print('alive')\n",
        OK,
        check=_stdout_is("alive\n"),
    ),
    Case(
        "kill_everything",
        "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass\nprint('alive')\n",
        OK,
        check=_stdout_is("alive\n"),
    ),
    Case(
        "daemon_left_behind",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        time.sleep(1000)\n    os._exit(0)\nprint('parent done')\n",
        OK,
        check=_stdout_is("parent done\n"),
    ),
    Case("become_root", "import os\nos.setuid(0)\n", ERROR),
    Case(
        "new_user_namespace",
        "import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "sys.exit(7 if libc.unshare(0x10000000) == 0 else 0)\n",
        OK,
    ),
    Case("chroot", "import os\nos.chroot('/tmp')\n", ERROR),
    # ---- output
    Case(
        "huge_stdout",
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
        OUTPUT,
        subprocess_ok=True,
    ),
    Case(
        "huge_stderr",
        "import sys\nwhile True:\n    sys.stderr.write('e' * 65536)\n",
        OUTPUT,
        subprocess_ok=True,
    ),
    Case("one_huge_line", "print('y' * 10 ** 7)\n", OUTPUT, subprocess_ok=True),
    Case(
        "invalid_utf8",
        "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\x80 ok \\xed\\xa0\\x80')\nsys.stderr.buffer.write(b'\\xc3')\n",
        OK,
        subprocess_ok=True,
        check=lambda r, h: _assert(
            r.stdout == "\ufffd\ufffd\ufffd ok \ufffd\ufffd\ufffd" and r.stderr == "\ufffd", r
        ),
    ),
    Case("close_stdout", "import os\nos.close(1)\nos.close(2)\n", OK, subprocess_ok=True),
    # ---- crashing the interpreter
    Case(
        "abort",
        "import os\nos.abort()\n",
        ERROR,
        subprocess_ok=True,
        check=lambda r, h: _assert(r.exit_code == -6, r.exit_code),
    ),
    Case(
        "segfault",
        "import ctypes\nctypes.string_at(0)\n",
        ERROR,
        subprocess_ok=True,
        check=lambda r, h: _assert(r.exit_code == -11, r.exit_code),
    ),
    # Through a C call (map) every level uses C stack, so the unlimited recursion crashes the interpreter.
    Case(
        "deep_recursion",
        "import sys\nsys.setrecursionlimit(10 ** 9)\ndef f(n):\n    return list(map(f, [n + 1]))\nf(0)\n",
        ERROR,
        subprocess_ok=True,
        check=lambda r, h: _assert(r.exit_code == -11, r.exit_code),
    ),
    Case(
        "self_sigkill_is_not_a_pass",
        "import os, signal\nprint('PASS')\nos.kill(os.getpid(), signal.SIGTERM)\n",
        ERROR,
        subprocess_ok=True,
    ),
]


#: Runs after every hostile program: the sandbox works and nothing of the last run is visible.
CANARY = (
    "import os\n"
    "left = [p for d in ('.', '/tmp', '/dev/shm', '/dev/mqueue') if os.path.isdir(d) "
    "for p in os.listdir(d) if p != 'main.py']\n"
    "ipc = [l for f in ('shm', 'sem', 'msg') if os.path.exists('/proc/sysvipc/' + f) "
    "for l in open('/proc/sysvipc/' + f).read().splitlines()[1:]]\n"
    "print('canary' if not left and not ipc else f'left: {left} {ipc}')\n"
)

SUBPROCESS_CANARY = "import os\nleft = [p for p in os.listdir('.') if p != 'main.py']\nprint('canary' if not left else left)\n"


def _assert(cond: bool, detail: object) -> None:
    assert cond, detail


def _params():
    for case in CASES:
        for backend in ("docker", "bwrap", "subprocess"):
            if backend == "subprocess" and not case.subprocess_ok:
                continue
            yield pytest.param(backend, case, id=f"{backend}-{case.name}")


@pytest.fixture(scope="module")
def listener():
    """A loopback TCP server on the host; records every connection it accepts."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    accepted: list = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, addr = srv.accept()
            except OSError:
                continue
            accepted.append(addr)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1], accepted
    stop.set()
    t.join()
    srv.close()


def _leftover_pids(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("backend, case", list(_params()))
def test_hostile(backend, case, sandbox_factory, listener, tmp_path, monkeypatch):
    sandbox = sandbox_factory(backend)
    monkeypatch.setenv("MARFT_TEST_SECRET", SECRET)
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET)
    secret_file.chmod(0o644)
    target = tmp_path / "target"
    target.mkdir()
    target.chmod(0o777)
    host = Host("marker-" + secrets.token_hex(8), secret_file, target, listener[0], listener[1])

    r = sandbox.run(
        case.program,
        timeout=case.timeout,
        argv=[host.marker, str(secret_file), str(target), str(host.port)],
    )

    assert r.status is case.status, (
        f"{case.name} on {backend}: {r.status} (exit {r.exit_code}) stderr={r.stderr[-800:]!r}"
    )
    assert (
        len(r.stdout) <= TEST_LIMITS["output_bytes"]
        and len(r.stderr) <= TEST_LIMITS["output_bytes"]
    )
    if case.check:
        case.check(r, host)
    deadline = time.monotonic() + 5
    while _leftover_pids(host.marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _leftover_pids(host.marker) == [], f"{case.name} left processes running on the host"
    # subprocess shares the host's /tmp and IPC namespace: only its own work dir can be checked
    canary = sandbox.run(CANARY if backend != "subprocess" else SUBPROCESS_CANARY)
    assert (canary.status, canary.stdout) == (OK, "canary\n"), (canary.stdout, canary.stderr)


def test_there_are_enough_hostile_cases():
    assert len(CASES) >= 30 and len({c.name for c in CASES}) == len(CASES)
