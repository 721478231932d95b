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
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass

from .base import PROGRAM_FILE, WORK_DIR, ExecResult, Job, Sandbox, decode, infra_error
from .outcome import classify, signal_exit_code
from .process import run_bounded
from .rlimits import MB, prlimit_args
from .subprocess_backend import program_env
from .workdir import collect, populate

#: Host uid/gid the sandbox runs as when we are root (the conventional "nobody").
SANDBOX_UID = 65534
_SHM_BYTES = 1 * MB
_MNT_DETACH = 2
_MS_NOSUID, _MS_NODEV = 2, 4


def _is_root() -> bool:
    return os.geteuid() == 0


def _other_can_use(path: str, mode_bit: int) -> bool:
    """True if a uid with no special rights can reach ``path`` (o+x on every parent, ``mode_bit`` on it)."""
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
    "import json, os, sys, site, sysconfig; print(json.dumps({'executable': os.path.realpath(sys.executable), "
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
    """bwrap options that expose the interpreter and the system libraries read-only, hiding site-packages.

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

    _libc = None

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
        opts = f"size={int(disk_mb) * MB},nr_inodes=16384,uid={SANDBOX_UID},gid={SANDBOX_UID},mode=0755".encode()
        if (
            _RunDir._libc.mount(
                b"tmpfs", self.base.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts
            )
            != 0
        ):
            err = ctypes.get_errno()
            raise OSError(err, f"cannot mount a tmpfs work dir at {self.base}: {os.strerror(err)}")
        self.mounted = True

    def cleanup(self) -> None:
        if self.mounted:
            _RunDir._libc.umount2(self.base.encode(), _MNT_DETACH)
        shutil.rmtree(self.base, ignore_errors=True)


class BwrapSandbox(Sandbox):
    """Runs each program in a fresh bubblewrap sandbox (see the module docstring)."""

    name = "bwrap"

    def __init__(self, limits=None, *, python: str | None = None, **overrides) -> None:
        super().__init__(limits, **overrides)
        self._python = python
        self._layout: PythonLayout | None = None

    def _interpreter(self) -> PythonLayout:
        if self._layout is None:
            self._layout = python_layout(find_python(self._python))
        return self._layout

    def command(self, job: Job, run_dir: _RunDir) -> list[str]:
        """The full bwrap command line for ``job``."""
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
        args += [
            "--",
            "/usr/bin/prlimit",
            *prlimit_args(self.limits),
            "--",
            layout.executable,
            "-B",
            PROGRAM_FILE,
            *job.argv,
        ]
        return args

    def _run(self, job: Job) -> ExecResult:
        reason = _missing_bwrap()
        if reason:
            return infra_error(reason, self.name)
        try:
            self._interpreter()
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            return infra_error(str(exc), self.name)
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
        return "bubblewrap is not installed (`scripts/install_system_deps.sh` or `apt-get install -y bubblewrap`)"
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
    result = BwrapSandbox(timeout=20).run("print('ok')")
    if result.status.value != "ok" or result.stdout.strip() != "ok":
        hint = ""
        if any(
            s in result.stderr
            for s in ("uid map", "Permission denied", "Operation not permitted", "No permissions")
        ):
            hint = (
                " -- unprivileged user namespaces look restricted; allow them (e.g. sysctl "
                "kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0) or use docker"
            )
        return f"bubblewrap does not work here ({result.status.value}): {result.stderr.strip()[-500:]}{hint}"
    _probe_ok = True
    return None
