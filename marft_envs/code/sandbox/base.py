"""The sandbox interface: limits, the typed result of one run, and the `Sandbox` base class.

Every backend (docker, bwrap, subprocess) runs one Python program per `run` call:
the program is saved as ``main.py`` in a fresh, empty work directory (the current
directory of the program), ``files`` are written next to it, and it is started as
``python -B main.py *argv`` with ``stdin`` on its standard input. The result is an
`ExecResult` whose `ExecStatus` says how the run ended. ``run`` never raises for
anything the program does; a broken backend (no daemon, no image, bwrap missing)
gives ``ExecStatus.INFRA_ERROR`` with the reason in ``stderr``.
"""

from __future__ import annotations

import enum
import math
import posixpath
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

#: Name of the program file in the work directory.
PROGRAM_FILE = "main.py"
#: Path of the work directory inside the isolating backends (docker, bwrap).
WORK_DIR = "/work"


class ExecStatus(str, enum.Enum):
    """How a run ended. ``str`` valued so it serialises as its name."""

    OK = "ok"  # exited with code 0
    ERROR = "error"  # non-zero exit, uncaught exception or killed by a signal
    TIMEOUT = "timeout"  # wall-time (or CPU-time) limit hit; killed from outside
    MEMORY = "memory"  # memory limit hit (MemoryError, OOM kill)
    OUTPUT_LIMIT = "output_limit"  # stdout or stderr exceeded the limit; killed
    INFRA_ERROR = "infra_error"  # the sandbox itself failed; not the program's fault


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one run. Every backend applies what it can (see docs/sandbox.md).

    ``timeout`` is the default wall-clock limit (seconds) of `Sandbox.run`;
    ``memory_mb`` bounds the address space / cgroup memory (swap is not allowed);
    ``cpus`` is the CPU share (docker quota; others use it only to size the
    CPU-time backstop); ``pids`` bounds processes + threads; ``output_bytes``
    bounds each of stdout and stderr; ``disk_mb`` is the size of the writable
    work dir (and of /tmp); ``extra_files_bytes`` bounds what comes back in
    `ExecResult.extra_files`; ``nofile`` bounds open file descriptors.
    """

    timeout: float = 10.0
    memory_mb: int = 512
    cpus: float = 1.0
    pids: int = 64
    output_bytes: int = 1_000_000
    disk_mb: int = 64
    extra_files_bytes: int = 1_000_000
    nofile: int = 256

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"SandboxLimits.{f.name} must be a number, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(
                    f"SandboxLimits.{f.name} must be a finite number > 0, got {value!r}"
                )
        if self.memory_mb < 32:
            raise ValueError(
                f"SandboxLimits.memory_mb must be >= 32 (Python needs it), got {self.memory_mb}"
            )
        if self.pids < 4:
            raise ValueError(f"SandboxLimits.pids must be >= 4, got {self.pids}")

    @classmethod
    def from_kwargs(cls, base: SandboxLimits | None = None, **overrides: Any) -> SandboxLimits:
        """``base`` (or the defaults) with ``overrides``; unknown names raise a clear TypeError."""
        valid = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise TypeError(f"unknown sandbox limit(s) {unknown}; valid limits are {sorted(valid)}")
        return replace(base or cls(), **overrides)

    @property
    def cpu_seconds(self) -> int:
        """CPU-time backstop (RLIMIT_CPU) for a run with wall limit ``timeout``."""
        return math.ceil(self.timeout * max(1.0, self.cpus)) + 1


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one `Sandbox.run`.

    ``exit_code`` is the program's exit code, ``-N`` when it died from signal N,
    and None when it never ran or was killed from outside (timeout, output limit).
    ``stdout``/``stderr`` are decoded as UTF-8 with ``errors="replace"`` and are
    truncated at the output limit. ``extra_files`` holds the regular files the
    program created or changed in its work dir (bounded by
    ``SandboxLimits.extra_files_bytes``), keyed by relative path.
    """

    status: ExecStatus
    exit_code: int | None
    stdout: str
    stderr: str
    elapsed: float
    extra_files: Mapping[str, bytes] = field(default_factory=dict)
    backend: str = ""

    @property
    def ok(self) -> bool:
        return self.status is ExecStatus.OK

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (extra files as their sizes)."""
        return {
            "status": self.status.value,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "elapsed": self.elapsed,
            "extra_files": {k: len(v) for k, v in self.extra_files.items()},
            "backend": self.backend,
        }


class SandboxLike(Protocol):
    """What the harness and `check` need of a sandbox: a name and `Sandbox.run`.

    Every `Sandbox` satisfies it; so does any object with the same two members (a test's
    stand-in for a dead daemon, a caller's own backend)."""

    name: str

    def run(
        self, program: str, *, stdin: str | bytes = "", timeout: float | None = None
    ) -> ExecResult:
        """Run ``program`` once with ``stdin`` under a wall-clock ``timeout`` (seconds)."""
        ...


@dataclass(frozen=True)
class Job:
    """A validated run request, as backends receive it."""

    program: bytes
    stdin: bytes
    timeout: float
    files: Mapping[str, bytes]
    argv: tuple[str, ...]


def infra_error(message: str, backend: str, elapsed: float = 0.0) -> ExecResult:
    """An `ExecResult` for a sandbox failure the program is not to blame for."""
    return ExecResult(
        ExecStatus.INFRA_ERROR,
        None,
        "",
        f"sandbox infrastructure error ({backend}): {message}",
        elapsed,
        {},
        backend,
    )


def decode(data: bytes) -> str:
    """Program output as text; invalid UTF-8 never raises."""
    return data.decode("utf-8", errors="replace")


def check_file_name(name: str) -> str:
    """A safe relative path for a file in the work dir, or ValueError saying why not."""
    if not isinstance(name, str) or not name or "\x00" in name:
        raise ValueError(f"file name must be a non-empty string without NUL, got {name!r}")
    norm = posixpath.normpath(name)
    if norm.startswith(("/", "../")) or norm in (".", "..") or "\\" in name:
        raise ValueError(f"file name {name!r} must be a relative path inside the work dir")
    if norm == PROGRAM_FILE:
        raise ValueError(f"file name {name!r} is reserved for the program")
    return norm


class Sandbox(ABC):
    """Runs untrusted Python programs under limits. Use as a context manager or call `close`.

    Subclasses set ``name`` and implement ``_run``; they may be used from several
    threads at once.
    """

    name: str = "abstract"
    #: True when the backend isolates the program from the host (not subprocess).
    isolating: bool = True

    def __init__(self, limits: SandboxLimits | None = None, **overrides: Any) -> None:
        self.limits = SandboxLimits.from_kwargs(limits, **overrides)

    def run(
        self,
        program: str,
        *,
        stdin: str | bytes = "",
        timeout: float | None = None,
        files: Mapping[str, str | bytes] | None = None,
        argv: list[str] | None = None,
    ) -> ExecResult:
        """Run ``program`` (Python source) once; see the module docstring.

        ``timeout`` is the wall-clock limit in seconds (default ``limits.timeout``).
        Raises only for invalid arguments from the caller (TypeError/ValueError).
        """
        job = self._make_job(program, stdin, timeout, files, argv)
        start = time.monotonic()
        try:
            return self._run(job)
        except Exception as exc:  # noqa: BLE001 -- a backend bug or a dying daemon: never the program's fault
            return infra_error(f"{type(exc).__name__}: {exc}", self.name, time.monotonic() - start)

    @abstractmethod
    def _run(self, job: Job) -> ExecResult:
        """Execute a validated job."""

    def close(self) -> None:  # noqa: B027 -- a no-op default; backends holding resources override it
        """Release resources (containers, temp dirs). Idempotent."""

    def __enter__(self) -> Sandbox:  # noqa: PYI034 -- Self needs Python 3.11
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, limits={self.limits})"

    def _make_job(self, program, stdin, timeout, files, argv) -> Job:
        if not isinstance(program, str):
            raise TypeError(f"program must be a str of Python source, got {type(program).__name__}")
        if not isinstance(stdin, (str, bytes)):
            raise TypeError(f"stdin must be str or bytes, got {type(stdin).__name__}")
        timeout = self.limits.timeout if timeout is None else float(timeout)
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        checked: dict[str, bytes] = {}
        for name, content in (files or {}).items():
            if not isinstance(content, (str, bytes)):
                raise TypeError(
                    f"files[{name!r}] must be str or bytes, got {type(content).__name__}"
                )
            checked[check_file_name(name)] = (
                content.encode("utf-8", "surrogatepass")
                if isinstance(content, str)
                else bytes(content)
            )
        args = tuple(argv or ())
        if not all(isinstance(a, str) and "\x00" not in a for a in args):
            raise TypeError(f"argv must be a list of str without NUL, got {argv!r}")
        return Job(
            program=program.encode("utf-8", "surrogatepass"),
            stdin=stdin.encode("utf-8", "surrogatepass") if isinstance(stdin, str) else stdin,
            timeout=timeout,
            files=checked,
            argv=args,
        )
