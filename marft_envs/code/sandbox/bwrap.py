"""The ``bwrap`` backend: bubblewrap namespaces, read-only binds, rlimits, no network.

Each run gets a fresh sandbox: new user, pid, ipc, uts, network and cgroup
namespaces (``--unshare-all``; further user namespaces disabled), a root file
system that holds only the Python interpreter and the shared libraries
(read-only), a fresh ``/proc`` and ``/dev``, and a writable work dir (``/work``,
the program's cwd) plus ``/tmp``. The program runs as uid 65534 with an empty
environment, under rlimits set by util-linux ``prlimit`` inside the sandbox
(so RLIMIT_NPROC counts only the sandbox's own processes). The wall-time limit
is enforced from outside by killing bwrap, which takes the whole pid namespace
with it (``--die-with-parent``).

Run as root (CI), bwrap itself is started as uid 65534 on the host too, because
the kernel ignores RLIMIT_NPROC for uid 0; the work dir and /tmp live in a
size-limited tmpfs mounted for the run. Run as another user, bwrap runs as that
user and the work dir is a host temp dir bounded only per file (RLIMIT_FSIZE).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .base import PROGRAM_FILE, WORK_DIR, ExecResult, Job, Sandbox, decode, infra_error
from .outcome import classify, signal_exit_code
from .process import run_bounded
from .rlimits import MB, RESOURCES, for_run, prlimit_args, rlimits
from .subprocess_backend import program_env
from .warm_host import WARM_SOURCE, exchange, warm_config, warm_rlimits
from .workdir import collect, populate

#: Seconds the host waits for a warm parent's report beyond the program's own limit.
_WARM_GRACE = 3.0

#: Host uid/gid the sandbox runs as when we are root (the conventional "nobody").
SANDBOX_UID = 65534
_SHM_BYTES = 1 * MB
_MNT_DETACH = 2
_MS_NOSUID, _MS_NODEV = 2, 4


def _is_root() -> bool:
    return os.geteuid() == 0


def _other_can_use(path: str, mode_bit: int) -> bool:
    """True if a uid with no special rights can reach ``path`` (o+x on every parent, ``mode_bit`` on
    it)."""
    path = os.path.realpath(path)
    parts = path.split("/")
    for i in range(2, len(parts)):
        if not os.stat("/".join(parts[:i])).st_mode & stat.S_IXOTH:
            return False
    return bool(os.stat(path).st_mode & mode_bit)


def _usable_by_sandbox(path: str) -> bool:
    try:
        return os.path.exists(path) and (not _is_root() or _other_can_use(path, stat.S_IXOTH))
    except OSError:
        return False


@dataclass(frozen=True)
class PythonLayout:
    """What of the host must be visible for an interpreter to run: found by asking it."""

    executable: str
    prefix: str
    site_dirs: tuple[str, ...]


_LAYOUT_CODE = (
    "import json, os, sys, site, sysconfig; print(json.dumps({'executable': "
    "os.path.realpath(sys.executable), "
    "'prefix': sys.base_prefix, 'site_dirs': site.getsitepackages() + "
    "[sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]}))"
)
_layouts: dict[str, PythonLayout] = {}
_layouts_lock = threading.Lock()


def python_layout(python: str) -> PythonLayout:
    """The (cached) layout of interpreter ``python``."""
    with _layouts_lock:
        if python not in _layouts:
            out = subprocess.run(
                [python, "-S", "-c", _LAYOUT_CODE],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
            info = json.loads(out.stdout)
            _layouts[python] = PythonLayout(
                info["executable"], info["prefix"], tuple(sorted(set(info["site_dirs"])))
            )
        return _layouts[python]


def find_python(explicit: str | None = None) -> str:
    """The interpreter for sandboxed programs: ``explicit``, else the first of this process's
    interpreter, /usr/bin/python3, /usr/local/bin/python3 that the sandbox uid can execute."""
    candidates = (
        [explicit] if explicit else [sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]
    )
    for cand in candidates:
        if cand and _usable_by_sandbox(cand) and _usable_by_sandbox(python_layout(cand).executable):
            return cand
    raise FileNotFoundError(
        f"no Python interpreter usable by uid {SANDBOX_UID} among {candidates} "
        "(as root, the sandbox runs as 'nobody', which cannot enter /root): install python3 "
        "system-wide or pass python=<path readable by everyone>"
    )


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


_found: dict[tuple[str, str], str] = {}


def _which(name: str) -> str | None:
    """``shutil.which``, remembering what was found per PATH (it walks PATH: ~0.3 ms a call)."""
    key = (name, os.environ.get("PATH", os.defpath))
    if key not in _found:
        path = shutil.which(name)
        if path is None:
            return None  # not remembered: an install during the process is seen
        _found[key] = path
    return _found[key]


@functools.lru_cache(maxsize=8)
def _ro_binds(layout: PythonLayout) -> tuple[str, ...]:
    """bwrap options that expose the interpreter and the system libraries read-only, hiding
    site-packages.

    Cached per interpreter: the host's directory layout does not change under a running process.
    """
    dirs = [d for d in ("/usr/lib", "/usr/lib64", "/usr/lib32") if os.path.isdir(d)]
    exe, prefix = os.path.realpath(layout.executable), os.path.realpath(layout.prefix)
    files = []
    if not any(_under(exe, d) for d in dirs):
        if prefix != "/usr" and _under(exe, prefix):
            dirs.append(prefix)  # a pyenv, conda or /usr/local prefix: binary, stdlib and libpython
        else:
            files.append(exe)
    args: list[str] = []
    for d in dirs + files:
        args += ["--ro-bind", d, d]
    for d in ("/lib", "/lib64", "/lib32"):  # merged-/usr symlinks, or real dirs on older systems
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
            dirs.append(d)
    args += ["--ro-bind", _which("prlimit") or "/usr/bin/prlimit", "/usr/bin/prlimit"]
    hidden = {os.path.realpath(s) for s in ("/usr/lib/python3/dist-packages", *layout.site_dirs)}
    for site_dir in sorted(hidden):  # programs get the standard library only: empty, read-only
        if os.path.isdir(site_dir) and any(_under(site_dir, d) for d in dirs):
            args += [
                "--perms",
                "0555",
                "--size",
                "4096",
                "--tmpfs",
                site_dir,
                "--remount-ro",
                site_dir,
            ]
    return tuple(args)


def _as_sandbox_uid(cmd: list[str]) -> tuple[list[str], dict]:
    """``cmd`` started as the sandbox uid: through util-linux ``setpriv`` when present (Popen
    can then vfork; Popen's own ``user=`` forces a full fork of this possibly large process,
    several ms of CPU per run), else with Popen ``user=``/``group=`` (no preexec_fn: thread-safe).
    """
    setpriv = _which("setpriv")
    if setpriv:
        ids = str(SANDBOX_UID)
        return [setpriv, f"--reuid={ids}", f"--regid={ids}", "--clear-groups", "--", *cmd], {}
    return cmd, {"user": SANDBOX_UID, "group": SANDBOX_UID, "extra_groups": []}


class _RunDir:
    """A per-run host dir with ``work/`` and ``tmp/``: a size-limited tmpfs when root."""

    _libc: ctypes.CDLL | None = None

    def __init__(self, disk_mb: int) -> None:
        self.base = tempfile.mkdtemp(prefix="marft-bwrap-")
        self.mounted = False
        if _is_root():
            os.chmod(self.base, 0o755)
            self._mount(disk_mb)
        self.work = os.path.join(self.base, "work")
        self.tmp = os.path.join(self.base, "tmp")
        for d in (self.work, self.tmp):
            os.mkdir(d, 0o700)
            if _is_root():
                os.chown(d, SANDBOX_UID, SANDBOX_UID)

    def _mount(self, disk_mb: int) -> None:
        if _RunDir._libc is None:
            _RunDir._libc = ctypes.CDLL(None, use_errno=True)
        libc = _RunDir._libc
        opts = (
            f"size={int(disk_mb) * MB},nr_inodes=16384,"
            f"uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0755"
        ).encode()
        if libc.mount(b"tmpfs", self.base.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot mount a tmpfs work dir at {self.base}: {os.strerror(err)}")
        self.mounted = True

    def cleanup(self) -> None:
        if self.mounted and _RunDir._libc is not None:  # mounted: libc was loaded
            _RunDir._libc.umount2(self.base.encode(), _MNT_DETACH)
        shutil.rmtree(self.base, ignore_errors=True)


def _empty(path: str) -> None:
    """Remove everything inside ``path`` (never following symlinks)."""
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)


class _WarmInstance:
    """One long-lived bwrap sandbox whose program is the warm parent (`warm.py`)."""

    def __init__(self, sandbox: BwrapSandbox) -> None:
        self.limits = sandbox.limits
        self.runs = 0
        self.run_dir = _RunDir(self.limits.disk_mb)
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            cmd = sandbox.warm_command(self.run_dir, theirs.fileno())
            cmd, popen = _as_sandbox_uid(cmd) if _is_root() else (cmd, {})
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                close_fds=True,
                **popen,
            )
        except BaseException:
            self.sock.close()
            self.run_dir.cleanup()
            raise
        finally:
            theirs.close()
        self.sock.settimeout(30)
        try:
            ready = self.sock.recv(4096)
        except OSError:
            ready = b""
        self.sock.settimeout(None)
        if b"ready" not in ready:
            self.close()
            err = self.proc.stderr.read(4000) if self.proc.stderr else b""
            raise OSError(f"the warm parent did not start: {decode(err).strip()[-500:]}")
        # NPROC counts every process of the sandbox uid in the user namespace: the program's,
        # plus bwrap's init and the warm parent.
        self.failure = ""

    def run(self, job: Job) -> tuple[ExecResult | None, bool]:
        """(result, reusable). A None result: the warm parent did not answer."""
        self.runs += 1
        populate(self.run_dir.work, job, SANDBOX_UID if _is_root() else None)
        limits = warm_rlimits(rlimits(for_run(self.limits, job.timeout)), RESOURCES, nproc_extra=2)
        header = {"argv": list(job.argv), "timeout": job.timeout, "rlimits": limits}
        reply = exchange(
            self.sock,
            header,
            job.stdin,
            deadline_s=job.timeout + _WARM_GRACE,
            output_bytes=self.limits.output_bytes,
        )
        if reply.report is None and not reply.output_exceeded:
            self.failure = self._why_failed()
            return None, False
        extra = collect(self.run_dir.work, job.files, self.limits.extra_files_bytes)
        report = reply.report or {}
        timed_out = bool(report.get("timed_out"))
        code = None if timed_out or reply.output_exceeded else report.get("exit")
        status = classify(
            code, timed_out=timed_out, output_exceeded=reply.output_exceeded, stderr=reply.stderr
        )
        reusable = bool(report.get("clean")) and not reply.output_exceeded
        if reusable:
            try:
                _empty(self.run_dir.work)
                _empty(self.run_dir.tmp)
            except OSError:
                reusable = False
        result = ExecResult(
            status, code, decode(reply.stdout), decode(reply.stderr), reply.elapsed, extra, "bwrap"
        )
        return result, reusable

    def _why_failed(self) -> str:
        """A short account of a warm parent that did not answer (exit status, stderr tail)."""
        code = self.proc.poll()
        tail = b""
        if self.proc.stderr is not None:
            tail = _read_available(self.proc.stderr.fileno(), 2000)
        state = f"exited with {code}" if code is not None else "alive but silent"
        return f"warm parent {state} after {self.runs} runs: {decode(tail).strip()[-300:]}"

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()
        self.sock.close()
        self.run_dir.cleanup()


class _WarmPool:
    """Up to ``size`` warm instances, each serving one run at a time, replaced after ``max_runs``
    runs or whenever a run leaves it unclean, and on any failure of its warm parent."""

    def __init__(self, factory: Callable[[], _WarmInstance], size: int, max_runs: int) -> None:
        self._factory = factory
        self._size = size
        self._max_runs = max_runs
        self._idle: list[_WarmInstance] = []
        self._count = 0
        self._closed = False
        self._cond = threading.Condition()
        self._stats = {"warm_runs": 0, "fallbacks": 0, "started": 0, "discarded": 0}
        self.last_error: str | None = None
        # Instances are started from one long-lived thread: bwrap --die-with-parent kills the
        # sandbox when the *thread* that started it ends (PR_SET_PDEATHSIG), and callers'
        # threads (a ThreadPoolExecutor's) come and go.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="marft-bwrap-warm")

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return dict(self._stats, last_error=self.last_error)

    def _take(self) -> _WarmInstance | None:
        with self._cond:
            while not self._idle and self._count >= self._size and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            instance = self._spawner.submit(self._factory).result()
        except (OSError, subprocess.SubprocessError, ValueError, RuntimeError) as exc:
            with self._cond:
                self._count -= 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                self._cond.notify()
            return None
        with self._cond:
            self._stats["started"] += 1
        return instance

    def _release(self, instance: _WarmInstance, keep: bool) -> None:
        keep = keep and instance.runs < self._max_runs
        with self._cond:
            if keep and not self._closed:
                self._idle.append(instance)
            else:
                self._count -= 1
                self._stats["discarded"] += 0 if self._closed else 1
            self._cond.notify()
        if not keep or self._closed:
            instance.close()

    def run(self, job: Job) -> ExecResult | None:
        """The warm result of ``job``, or None: then the caller runs it cold."""
        instance = self._take()
        if instance is None:
            with self._cond:
                self._stats["fallbacks"] += 1
            return None
        result, keep = None, False
        try:
            result, keep = instance.run(job)
        finally:
            self._release(instance, keep)
        with self._cond:
            self._stats["warm_runs" if result is not None else "fallbacks"] += 1
            if result is None:
                self.last_error = instance.failure
        return result

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._cond.notify_all()
        for instance in idle:
            instance.close()
        self._spawner.shutdown(wait=False)


class BwrapSandbox(Sandbox):
    """Runs each program in a fresh bubblewrap sandbox (see the module docstring)."""

    name = "bwrap"

    def __init__(
        self,
        limits=None,
        *,
        python: str | None = None,
        warm: bool = True,
        pool_size: int | None = None,
        max_runs: int = 1000,
        **overrides,
    ) -> None:
        super().__init__(limits, **overrides)
        self._python = python
        self._layout: PythonLayout | None = None
        #: Serve runs from warm instances (a warm parent forks a child per run); False: a fresh
        #: sandbox and interpreter per run.
        self.warm = bool(warm)
        size = int(pool_size or max(2, min(4, os.cpu_count() or 2)))
        if size < 1 or max_runs < 1:
            raise ValueError(f"pool_size and max_runs must be >= 1, got {pool_size}, {max_runs}")
        self._pool = _WarmPool(lambda: _WarmInstance(self), size, max_runs)

    def _interpreter(self) -> PythonLayout:
        if self._layout is None:
            self._layout = python_layout(find_python(self._python))
        return self._layout

    def _base_command(self, run_dir: _RunDir, extra_mounts: tuple[str, ...] = ()) -> list[str]:
        """The bwrap options shared by cold runs and warm instances (everything before ``--``)."""
        layout = self._interpreter()
        env = program_env(WORK_DIR, "/tmp")
        args = [
            "bwrap",
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--hostname",
            "sandbox",
        ]
        args += _ro_binds(layout)
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--size",
            str(_SHM_BYTES),
            "--tmpfs",
            "/dev/shm",
            *extra_mounts,
            "--remount-ro",
            "/dev",
        ]
        args += [
            "--bind",
            run_dir.work,
            WORK_DIR,
            "--bind",
            run_dir.tmp,
            "/tmp",
            "--chdir",
            WORK_DIR,
        ]
        if not run_dir.mounted:  # no host tmpfs: at least bound /tmp inside
            args += ["--size", str(int(self.limits.disk_mb) * MB), "--tmpfs", "/tmp"]
        # The root is a tmpfs bwrap made to hold the mount points: make it read-only, or
        # /x and /usr/x would be unbounded writable memory.
        args += ["--remount-ro", "/", "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        return args

    def command(self, job: Job, run_dir: _RunDir) -> list[str]:
        """The full bwrap command line of a cold run of ``job``."""
        return [
            *self._base_command(run_dir),
            "--",
            "/usr/bin/prlimit",
            *prlimit_args(for_run(self.limits, job.timeout)),
            "--",
            self._interpreter().executable,
            "-B",
            PROGRAM_FILE,
            *job.argv,
        ]

    def warm_command(self, run_dir: _RunDir, control_fd: int) -> list[str]:
        """The bwrap command line of a warm instance: the warm parent (`warm.py`) as the program."""
        return [
            *self._base_command(run_dir, ("--mqueue", "/dev/mqueue")),
            "--",
            self._interpreter().executable,
            "-B",
            "-c",
            WARM_SOURCE,
            str(control_fd),
            warm_config(("/dev/shm", "/dev/mqueue")),
        ]

    def _run(self, job: Job) -> ExecResult:
        reason = _missing_bwrap()
        if reason:
            return infra_error(reason, self.name)
        try:
            self._interpreter()
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            return infra_error(str(exc), self.name)
        if self.warm:
            result = self._pool.run(job)
            if result is not None:
                return result
            # No warm instance, or the program killed or stopped its warm parent: the cold path
            # gives the verdict, so a broken parent never decides anything.
        return self._run_cold(job)

    def close(self) -> None:
        if self.warm:
            self._pool.close()

    @property
    def warm_stats(self) -> dict[str, Any]:
        """Counters of the warm path: runs served warm, fallbacks to a cold run, instances
        started."""
        return self._pool.stats() if self.warm else {}

    def _run_cold(self, job: Job) -> ExecResult:
        """One fresh bwrap sandbox and one interpreter start for ``job``."""
        run_dir = _RunDir(self.limits.disk_mb)
        status_r, status_w = (
            os.pipe()
        )  # bwrap reports {"exit-code": N} there only if the program started
        try:
            populate(run_dir.work, job, SANDBOX_UID if _is_root() else None)
            cmd = self.command(job, run_dir)
            cmd[1:1] = ["--json-status-fd", str(status_w)]
            cmd, popen = _as_sandbox_uid(cmd) if _is_root() else (cmd, {})
            raw = run_bounded(
                cmd,
                stdin=job.stdin,
                timeout=job.timeout,
                output_bytes=self.limits.output_bytes,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                pass_fds=(status_w,),
                **popen,
            )
            extra = collect(run_dir.work, job.files, self.limits.extra_files_bytes)
        finally:
            os.close(status_w)
            started = b'"exit-code"' in _read_available(status_r)
            os.close(status_r)
            run_dir.cleanup()
        if not (started or raw.timed_out or raw.output_exceeded):
            return infra_error(
                decode(raw.stderr).strip() or f"bwrap exited with {raw.returncode}",
                self.name,
                raw.elapsed,
            )
        code = signal_exit_code(raw.returncode)
        status = classify(
            code, timed_out=raw.timed_out, output_exceeded=raw.output_exceeded, stderr=raw.stderr
        )
        return ExecResult(
            status, code, decode(raw.stdout), decode(raw.stderr), raw.elapsed, extra, self.name
        )


def _read_available(fd: int, limit: int = 65536) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, limit)
    except BlockingIOError:
        return b""


def _missing_bwrap() -> str | None:
    if _which("bwrap") is None:
        return (
            "bubblewrap is not installed (`scripts/install_system_deps.sh` or `apt-get install "
            "-y bubblewrap`)"
        )
    if _which("prlimit") is None:
        return "util-linux prlimit is not installed (`apt-get install -y util-linux`)"
    return None


_probe_ok = False


def probe() -> str | None:
    """None if bwrap can run a program here (checked once per process), else why not."""
    global _probe_ok
    if _probe_ok:
        return None
    reason = _missing_bwrap()
    if reason:
        return reason
    result = BwrapSandbox(timeout=20, warm=False).run("print('ok')")
    if result.status.value != "ok" or result.stdout.strip() != "ok":
        hint = ""
        if any(
            s in result.stderr
            for s in ("uid map", "Permission denied", "Operation not permitted", "No permissions")
        ):
            hint = (
                " -- unprivileged user namespaces look restricted; allow them (e.g. sysctl "
                "kernel.unprivileged_userns_clone=1 or "
                "kernel.apparmor_restrict_unprivileged_userns=0) or use docker"
            )
        return (
            f"bubblewrap does not work here ({result.status.value}): "
            f"{result.stderr.strip()[-500:]}{hint}"
        )
    _probe_ok = True
    return None
