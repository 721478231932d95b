"""The ``docker`` backend: a warm pool of locked-down containers, each serving one run at a time.

Every pooled container has no network, a read-only root file system (the image
built by `image.py`), size-limited tmpfs mounts for /work and /tmp, a memory
limit with no swap, a CPU quota, a pids limit, ``no-new-privileges``, no log
driver, and every capability dropped except SETUID, SETGID and KILL, which only
the trusted supervisor (`supervisor.py`, the container's PID 1, running as
root) uses: it starts each program as uid 65534 (no capabilities at all), kills
it at the time limit, kills anything it left running, collects its files and
wipes the writable dirs, so the next run in the same container starts clean.
Jobs travel over a unix socket the supervisor connects to (bind-mounted from the
host, removed once connected), with the host's memfd and pipes as the program's
stdin, stdout and stderr, so no byte of a run passes through dockerd and a run
costs no ``docker exec`` (runc) start; a daemon that cannot bind-mount this
machine's directories uses the container's attached streams instead
(``transport="attach"``). The host enforces a second, outer
wall-time limit and the output limit by reading the stream with a deadline and
a byte cap; when either fires, or the supervisor's report is missing or says
the wipe failed, the container is discarded and replaced in the background.
"""

from __future__ import annotations

import array
import base64
import json
import os
import queue
import secrets
import select
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import WORK_DIR, ExecResult, ExecStatus, Job, Sandbox, decode, infra_error
from .image import IMAGE
from .outcome import classify
from .rlimits import MB, RESOURCES, for_run, rlimits
from .subprocess_backend import program_env
from .warm_host import WARM_SOURCE, read_outputs, send_with_pipes, warm_config

_SUPERVISOR = (Path(__file__).with_name("supervisor.py")).read_text()
LABEL = "marft.sandbox"
#: Extra seconds the host waits beyond the program's limit (supervisor start, cleanup).
_OUTER_GRACE = 3.0
#: Container memory on top of the program's limit (init, supervisor; tmpfs pages are added
#: separately).
_OVERHEAD_MB = 64
_STDOUT, _STDERR = 1, 2
#: Inodes per tmpfs: enough for any real program, few enough to wipe quickly.
_INODES = 16384
#: Seconds a new container's supervisor has to connect to the control socket.
_CONNECT_TIMEOUT = 30.0
#: Seconds to read a report once its first byte has arrived.
_REPORT_TIMEOUT = 5.0


#: Where the supervisor finds the host's control socket, inside the container.
_CONTROL_DIR = "/marft-control"
TRANSPORTS = ("socket", "attach")


@dataclass
class _Container:
    id: str
    python: str
    # "socket": ``sock`` is the control connection the supervisor made to this process (jobs
    # and fds in, reports out; the program writes into our pipes). "attach": docker-py's attach
    # socket (stdin in, multiplexed stdout/stderr out), relayed by dockerd.
    sock: Any
    raw: socket.socket
    runs: int = 0
    transport: str = "attach"
    control_dir: str = ""  # the host directory the socket was in (removed once connected)


def _docker_client(timeout: int = 60):
    import docker

    return docker.from_env(timeout=timeout)


class DockerSandbox(Sandbox):
    """Runs programs in a warm pool of containers (see the module docstring).

    ``pool_size`` containers are started on the first run (or `start`);
    `close` removes them. Safe to use from several threads: each run takes a
    container from the pool for its duration.
    """

    name = "docker"

    def __init__(
        self,
        limits=None,
        *,
        pool_size: int | None = None,
        image: str = IMAGE,
        client=None,
        warm: bool = True,
        transport: str | None = None,
        **overrides,
    ) -> None:
        super().__init__(limits, **overrides)
        if transport is not None and transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS} or None, got {transport!r}")
        #: How jobs reach the supervisor: "socket" (a unix socket bind-mounted into the
        #: container; the program's stdin/stdout/stderr are our memfd and pipes, so no byte
        #: passes through dockerd) or "attach" (the container's attached streams, relayed by
        #: dockerd). None: "socket" when the daemon is on this machine's unix socket, else
        #: "attach" (a remote daemon cannot bind-mount our directories).
        self.transport = transport
        #: Run programs as children forked by each container's warm parent (no interpreter
        #: start per run); False: the supervisor execs a fresh interpreter per run.
        self.warm = bool(warm)
        self._stats = {"warm_runs": 0, "fallbacks": 0}
        self.pool_size = int(pool_size or max(2, min(4, os.cpu_count() or 2)))
        if self.pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        self.image = image
        self._client = client
        self._pool: queue.Queue[_Container] = queue.Queue()
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._all: dict[str, _Container] = {}
        self._janitor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="marft-docker-pool")
        self._python: str | None = None
        self._last_error: str | None = None

    # ----------------------------------------------------------------- pool
    @property
    def client(self):
        if self._client is None:
            self._client = _docker_client()
        return self._client

    def start(self) -> None:
        """Start the pool now (otherwise the first run does). Raises if docker or the image is
        missing."""
        with self._lock:
            if self._started:
                return
            if self._closed:
                raise RuntimeError("this DockerSandbox is closed")
            labels = self.client.images.get(self.image).labels or {}
            self._python = labels.get("marft.python", "/usr/bin/python3")
            _remove_orphans(self.client)
            futures = [self._janitor.submit(self._spawn) for _ in range(self.pool_size)]
            self._started = True
        errors = [f.exception() for f in futures if f.exception() is not None]
        if len(errors) == len(futures):
            raise RuntimeError(f"cannot start sandbox containers: {errors[0]}")

    def _spawn(self) -> None:
        try:
            if self.transport is None:
                self.transport = "socket" if _daemon_is_local(self.client) else "attach"
            container = self._start_container(self.transport)
        except Exception as exc:
            self._last_error = f"{type(exc).__name__}: {exc}"
            raise
        self._last_error = None
        with self._lock:
            closed = self._closed
            if not closed:
                self._all[container.id] = container
        if closed:  # close() ran while this container was starting
            self._remove(container)
            return
        self._pool.put(container)

    def _create_kwargs(self) -> dict[str, Any]:
        lim = self.limits
        disk = int(lim.disk_mb)
        return {
            # When the owner closes its socket or dies, the supervisor sees EOF, exits, and
            # docker removes the container: no leaks after a crash.
            "auto_remove": True,
            "log_config": {"type": "none"},
            "user": "0:0",
            "network_mode": "none",
            "read_only": True,
            "tmpfs": dict.fromkeys(
                ("/work", "/tmp"),
                f"size={disk}m,mode=1777,nr_inodes={_INODES},noexec,nosuid,nodev",
            ),
            "shm_size": MB,
            "mem_limit": f"{int(lim.memory_mb) + 2 * disk + _OVERHEAD_MB}m",
            "memswap_limit": f"{int(lim.memory_mb) + 2 * disk + _OVERHEAD_MB}m",
            "nano_cpus": int(lim.cpus * 1e9),
            "pids_limit": int(lim.pids) + 8,
            "cap_drop": ["ALL"],
            "cap_add": ["SETUID", "SETGID", "KILL"],
            "security_opt": ["no-new-privileges"],
            "environment": {},
            "working_dir": WORK_DIR,
            "labels": {LABEL: "1", f"{LABEL}.owner": _owner()},
            "stop_signal": "SIGKILL",
        }

    def _start_container(self, transport: str) -> _Container:
        assert self._python is not None  # start() set it before spawning
        # the supervisor checks System V IPC after every job itself
        command = [self._python, "-S", "-c", _SUPERVISOR, WARM_SOURCE, warm_config(sysv=False)]
        if transport == "attach":
            c = self.client.containers.create(
                self.image, command=command, stdin_open=True, **self._create_kwargs()
            )
            sock = self.client.api.attach_socket(
                c.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            c.start()
            return _Container(c.id, self._python, sock, getattr(sock, "_sock", sock))
        # A root-only directory holding a listening socket, bind-mounted read-only: the
        # supervisor (root in the container) connects once, then the socket is unlinked and
        # the listener closed, so nothing else (the program runs as uid 65534) can connect.
        top = tempfile.mkdtemp(prefix="marft-docker-")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            path = os.path.join(top, "control")
            listener.bind(path)
            listener.listen(1)
            listener.settimeout(_CONNECT_TIMEOUT)
            c = self.client.containers.create(
                self.image,
                command=[*command, f"{_CONTROL_DIR}/control"],
                volumes={top: {"bind": _CONTROL_DIR, "mode": "ro"}},
                **self._create_kwargs(),
            )
            c.start()
            try:
                conn, _ = listener.accept()
            except OSError as exc:
                try:
                    self.client.api.kill(c.id)
                except Exception:  # noqa: BLE001 -- already gone: auto_remove did it
                    pass
                raise OSError(
                    f"the sandbox supervisor did not connect to {path} within "
                    f"{_CONNECT_TIMEOUT:.0f} s ({exc}); a daemon that cannot bind-mount this "
                    "machine's directories needs transport='attach'"
                ) from None
        finally:
            listener.close()
            shutil.rmtree(top, ignore_errors=True)
        conn.settimeout(None)
        return _Container(c.id, self._python, conn, conn, transport="socket", control_dir=top)

    def _remove(self, container: _Container) -> None:
        """Stop a container for good. The attach socket goes first: while it holds unread
        output, the daemon cannot finish a kill. Closing it also makes the supervisor exit
        (EOF on stdin), after which docker removes the container (auto_remove)."""
        closers: tuple[Callable[[], object], ...] = (
            lambda: container.raw.shutdown(socket.SHUT_RDWR),
            container.raw.close,
            container.sock.close,
        )
        for close in closers:
            try:
                close()
            except OSError:
                pass
        try:
            self.client.api.kill(container.id)
        except Exception:  # noqa: BLE001 -- never let cleanup or reporting raise
            pass  # already exiting or gone: auto_remove finishes the job

    def _discard(self, container: _Container) -> None:
        """Remove a possibly tainted container and start a fresh one in the background."""
        with self._lock:
            self._all.pop(container.id, None)
            closed = self._closed
        if closed:
            self._remove(container)
            return
        self._janitor.submit(self._remove, container)
        self._janitor.submit(self._spawn)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            containers = list(self._all.values())
            self._all.clear()
        for c in containers:
            self._remove(c)
        self._janitor.shutdown(wait=True)

    # ------------------------------------------------------------------ run
    @property
    def warm_stats(self) -> dict:
        """Counters of the warm path: runs served warm, and fallbacks to a cold run after the
        program killed, stopped or broke its container's warm parent."""
        with self._lock:
            return dict(self._stats)

    def _run(self, job: Job) -> ExecResult:
        try:
            self.start()
        except Exception as exc:  # noqa: BLE001 -- never let cleanup or reporting raise
            return infra_error(_explain(exc), self.name)
        result = self._run_once(job, self.warm)
        if result is None:  # the warm parent failed: the cold path gives the verdict
            with self._lock:
                self._stats["fallbacks"] += 1
            result = self._run_once(job, False)
        elif self.warm:
            with self._lock:
                self._stats["warm_runs"] += 1
        return result  # type: ignore[return-value]

    def _run_once(self, job: Job, warm: bool) -> ExecResult | None:
        container = self._take()
        if container is None:
            return infra_error(
                f"no sandbox container is available (last error: {self._last_error})", self.name
            )
        keep = False
        try:
            result, keep = self._exec(container, job, warm)
            return result
        finally:
            if keep:
                container.runs += 1
                self._pool.put(container)
            else:
                self._discard(container)

    def _take(self, wait: float = 120.0) -> _Container | None:
        """A free container; None when none came within ``wait`` s or none can be started."""
        end = time.monotonic() + wait
        while time.monotonic() < end:
            try:
                return self._pool.get(timeout=0.5)
            except queue.Empty:
                with self._lock:
                    dead = not self._all and self._last_error is not None
                if dead:  # every container is gone and starting new ones fails: do not hang
                    return None
        return None

    def _exec(
        self, container: _Container, job: Job, warm: bool = False
    ) -> tuple[ExecResult | None, bool]:
        """Send one job to a container's supervisor and read its output and report. A None
        result: the job went to the warm parent, which did not answer (run it again cold)."""
        lim = self.limits
        start = time.monotonic()
        if container.transport == "socket":
            report, stdout, err, outcome = self._send_socket(container, job, warm, start)
        else:
            report, stdout, err, outcome = self._send_attached(container, job, warm, start)
        elapsed = time.monotonic() - start
        output_exceeded = outcome == "overflow" or len(stdout) > lim.output_bytes
        if report is None:
            # The supervisor never reported: outer timeout, an output bomb, or a dead container.
            if outcome == "deadline" and warm:
                # The supervisor enforces the limit and waits for a silent warm parent only
                # until limit + 2 s: a missed deadline is the sandbox's trouble, not a verdict.
                return None, False
            if outcome == "deadline":
                return _result(ExecStatus.TIMEOUT, None, stdout, err, elapsed, {}, lim), False
            if output_exceeded:
                return _result(ExecStatus.OUTPUT_LIMIT, None, stdout, err, elapsed, {}, lim), False
            state = _container_state(self.client.api, container.id)
            if state.get("OOMKilled"):
                return _result(ExecStatus.MEMORY, None, stdout, err, elapsed, {}, lim), False
            return infra_error(
                f"the sandbox supervisor did not report (container state {state.get('Status')!r}): "
                f"{decode(err)[-500:]}",
                self.name,
                elapsed,
            ), False
        if report.get("warm_failed"):
            return None, False
        if report.get("error") or not report.get("started"):
            return infra_error(
                f"the sandbox supervisor failed: {report.get('error')}", self.name, elapsed
            ), False
        extra = {name: base64.b64decode(data) for name, data in report.get("files", {}).items()}
        code = None if report["timed_out"] or output_exceeded else report["exit"]
        status = classify(
            code, timed_out=report["timed_out"], output_exceeded=output_exceeded, stderr=err
        )
        keep = bool(report.get("clean")) and not output_exceeded
        return _result(status, code, stdout, err, elapsed, extra, lim), keep

    def _send_attached(
        self, container: _Container, job: Job, warm: bool, start: float
    ) -> tuple[dict | None, bytes, bytes, str]:
        """The job over the attach stream: (report, stdout, stderr, how reading ended)."""
        lim = self.limits
        nonce = secrets.token_hex(16).encode()
        container.raw.setblocking(True)
        container.raw.sendall(_payload(job, lim, nonce.decode(), container.python, warm))
        # base64 of the files + their names (100 paths of up to 4096 bytes) + JSON framing
        trailer_cap = lim.extra_files_bytes * 4 // 3 + 100 * 4096 * 2 + 65536
        out, err, outcome = _read_frames(
            container.raw,
            start + job.timeout + _OUTER_GRACE,
            {_STDOUT: lim.output_bytes + trailer_cap, _STDERR: lim.output_bytes + len(nonce)},
            nonce,
        )
        report, stdout = _split_trailer(out, nonce)
        return report, stdout, err, outcome

    def _send_socket(
        self, container: _Container, job: Job, warm: bool, start: float
    ) -> tuple[dict | None, bytes, bytes, str]:
        """The job over the control socket, with our memfd and pipes as the program's stdin,
        stdout and stderr: (report, stdout, stderr, how reading ended)."""
        head = json.dumps(_header(job, self.limits, "", container.python, warm)).encode()
        body = head + b"".join([job.program, *job.files.values()])
        sock = container.raw

        def send(fds: array.array) -> None:
            rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
            sock.sendmsg([struct.pack(">Q", len(head))], rights)
            sock.sendall(body)

        pipes = send_with_pipes(job.stdin, send)
        if pipes is None:
            return None, b"", b"", "eof"
        reply = read_outputs(
            pipes,
            sock,
            _recv_report,
            start,
            start + job.timeout + _OUTER_GRACE,
            self.limits.output_bytes,
        )
        return reply.report, reply.stdout, reply.stderr, reply.ended


def _recv_report(sock: socket.socket) -> dict | None:
    """The supervisor's length-prefixed JSON report; None on EOF or anything malformed."""
    sock.settimeout(_REPORT_TIMEOUT)  # it writes the whole report at once
    try:
        head = _recv_exact(sock, 8)
        data = _recv_exact(sock, struct.unpack(">Q", head)[0]) if head else b""
        report = json.loads(data) if data else None
    except (OSError, ValueError, struct.error):
        return None
    finally:
        sock.settimeout(None)
    return report if isinstance(report, dict) else None


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left > 0:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise OSError("the control socket closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _daemon_is_local(client) -> bool:
    """True when the docker client talks to a daemon on this machine's unix socket."""
    # docker-py names a unix-socket daemon "http+docker://localhost" (ssh and npipe differ)
    return str(getattr(client.api, "base_url", "")) == "http+docker://localhost"


def _result(status, code, stdout: bytes, stderr: bytes, elapsed: float, extra, lim) -> ExecResult:
    return ExecResult(
        status,
        code,
        decode(stdout[: lim.output_bytes]),
        decode(stderr[: lim.output_bytes]),
        elapsed,
        extra,
        "docker",
    )


def _header(job: Job, lim, nonce: str, python: str, warm: bool) -> dict[str, Any]:
    """The job header the supervisor reads (the files follow it in this order: main.py first)."""
    files = {"main.py": job.program, **job.files}
    return {
        "nonce": nonce,
        "files": [[name, len(data)] for name, data in files.items()],
        "files_size": sum(len(d) for d in files.values()),
        "stdin_size": len(job.stdin),
        "timeout": job.timeout,
        "python": python,
        "argv": list(job.argv),
        "env": program_env(WORK_DIR, "/tmp"),
        # NPROC is left to the container's pids limit: without a user namespace it
        # would count every uid-65534 process on the host.
        "rlimits": [
            [RESOURCES[n], v] for n, v in rlimits(for_run(lim, job.timeout)).items() if n != "nproc"
        ],
        "extra_files_bytes": lim.extra_files_bytes,
        "warm": warm,
    }


def _payload(job: Job, lim, nonce: str, python: str, warm: bool = False) -> bytes:
    """A whole job for the attach stream: header, files, then the program's stdin."""
    head = json.dumps(_header(job, lim, nonce, python, warm)).encode()
    files = b"".join([job.program, *job.files.values()])
    return struct.pack(">Q", len(head)) + head + files + job.stdin


def _read_frames(
    sock: socket.socket, deadline: float, caps: dict[int, int], nonce: bytes
) -> tuple[bytes, bytes, str]:
    """Demultiplex docker's attach stream until the supervisor's trailer, EOF, the deadline,
    or a stream over its cap. Returns (stdout, stderr, outcome), outcome being "report",
    "eof", "deadline" or "overflow". Never holds more than cap + one frame per stream.

    The report is complete when both streams have their end mark: the ``nonce...nonce`` trailer
    on stdout and the nonce on stderr (removed from what is returned). Docker reads the two
    pipes separately, so a program's last stderr bytes can arrive after the stdout trailer; the
    supervisor writes the stderr mark after the program and its children are gone.
    """
    bufs = {_STDOUT: bytearray(), _STDERR: bytearray()}
    pending = bytearray()
    sock.setblocking(False)

    def done(outcome: str) -> tuple[bytes, bytes, str]:
        sock.setblocking(True)
        err = bufs[_STDERR]
        if err.endswith(nonce):  # the supervisor's end mark, never the program's output
            del err[-len(nonce) :]
        return bytes(bufs[_STDOUT]), bytes(err), outcome

    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return done("deadline")
        ready, _, _ = select.select([sock], [], [], left)
        if not ready:
            continue
        try:
            chunk = sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            chunk = b""
        if not chunk:
            return done("eof")
        pending += chunk
        while len(pending) >= 8:
            stream, size = pending[0], struct.unpack(">I", pending[4:8])[0]
            if len(pending) < 8 + size:
                break
            stream = _STDOUT if stream == _STDOUT else _STDERR
            buf, cap = bufs[stream], caps[stream]
            if len(buf) <= cap:
                buf += pending[8 : 8 + min(size, cap + 1 - len(buf))]
            del pending[: 8 + size]
            if len(buf) > cap:
                return done("overflow")
        if len(pending) > 8 + (1 << 20) + max(caps.values()):
            return done("overflow")
        out, err = bufs[_STDOUT], bufs[_STDERR]
        if out.endswith(nonce) and err.endswith(nonce) and out.count(nonce) >= 2:
            return done("report")


def _split_trailer(out: bytes, nonce: bytes) -> tuple[dict | None, bytes]:
    """(supervisor report, program stdout). The report is the ``nonce...nonce`` block at the end."""
    begin = out.find(nonce)
    end = out.find(nonce, begin + 1) if begin >= 0 else -1
    if begin < 0 or end < 0 or out[end + len(nonce) :]:
        return None, out
    try:
        report = json.loads(base64.b64decode(out[begin + len(nonce) : end]))
    except ValueError:
        return None, out
    return report, out[:begin]


def _container_state(api, container_id: str) -> dict:
    try:
        return api.inspect_container(container_id).get("State", {})
    except Exception as exc:  # noqa: BLE001 -- never let cleanup or reporting raise
        return {"Status": f"unknown ({type(exc).__name__})"}


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _remove_orphans(client) -> None:
    """Remove pool containers left by dead processes of this host (a crash skips `close`)."""
    host = socket.gethostname()
    try:
        stale = client.api.containers(all=True, filters={"label": LABEL})
    except Exception:  # noqa: BLE001 -- never let cleanup or reporting raise
        return
    for c in stale:
        owner = (c.get("Labels") or {}).get(f"{LABEL}.owner", "")
        owner_host, _, pid = owner.rpartition(":")
        if owner_host == host and pid.isdigit() and not _alive(int(pid)):
            try:
                if c.get("State") == "running":
                    client.api.kill(c["Id"])  # auto_remove deletes it
                else:
                    client.api.remove_container(c["Id"], force=True)
            except Exception:  # noqa: BLE001 -- never let cleanup or reporting raise
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _explain(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if "ImageNotFound" in type(exc).__name__ or "No such image" in text:
        return (
            f"the sandbox image {IMAGE} is missing; build it with `python -m "
            f"marft_envs.code.sandbox.image build` ({text})"
        )
    if (
        "Connection" in text
        or "FileNotFoundError" in text
        or "DockerException" in type(exc).__name__
    ):
        return f"no docker daemon answers; start one with `scripts/services.sh start` ({text})"
    return text


def probe() -> str | None:
    """None if a docker daemon answers and the sandbox image exists, else why not."""
    client = None
    try:
        client = _docker_client(timeout=10)
        client.ping()
        client.images.get(IMAGE)
    except Exception as exc:  # noqa: BLE001 -- never let cleanup or reporting raise
        return _explain(exc)
    finally:
        if client is not None:
            client.close()
    return None
