"""The ``subprocess`` backend: the host's Python with rlimits and a wall-time kill. NOT isolating.

The program runs as the calling user, in a temporary directory on the host, with
the host's file system, network and process table in reach. Use it only for
trusted code or where neither docker nor bubblewrap exists; it is never chosen
automatically (docs/sandbox.md lists what it does not protect).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from typing import Any

from .base import PROGRAM_FILE, ExecResult, Job, Sandbox, decode
from .outcome import classify
from .process import run_bounded
from .rlimits import for_run, preexec, prlimit_args
from .workdir import collect, populate


def program_env(workdir: str, tmpdir: str) -> dict[str, str]:
    """The whole environment of a sandboxed program: nothing from the parent leaks in."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "PWD": workdir,
        "TMPDIR": tmpdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


class SubprocessSandbox(Sandbox):
    """Runs the program with ``sys.executable`` under rlimits. Isolation: none."""

    name = "subprocess"
    isolating = False

    def __init__(self, limits=None, *, python: str | None = None, **overrides) -> None:
        super().__init__(limits, **overrides)
        self.python = python or sys.executable
        prlimit = shutil.which("prlimit")
        # prlimit(1) rather than a preexec_fn: preexec_fn is unsafe when callers use threads.
        self._prlimit_path = prlimit

    def _run(self, job: Job) -> ExecResult:
        workdir = tempfile.mkdtemp(prefix="marft-sbx-")
        try:
            populate(workdir, job)
            limits = for_run(self.limits, job.timeout)
            prlimit = (
                [self._prlimit_path, *prlimit_args(limits), "--"] if self._prlimit_path else []
            )
            # without prlimit(1) the limits are set in the child, between fork and exec
            popen: dict[str, Any] = {} if prlimit else {"preexec_fn": preexec(limits)}
            raw = run_bounded(
                [*prlimit, self.python, "-B", "-s", PROGRAM_FILE, *job.argv],
                stdin=job.stdin,
                timeout=job.timeout,
                output_bytes=self.limits.output_bytes,
                env=program_env(workdir, workdir),
                cwd=workdir,
                **popen,
            )
            extra = collect(workdir, job.files, self.limits.extra_files_bytes)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        status = classify(
            raw.returncode,
            timed_out=raw.timed_out,
            output_exceeded=raw.output_exceeded,
            stderr=raw.stderr,
        )
        return ExecResult(
            status,
            raw.returncode,
            decode(raw.stdout),
            decode(raw.stderr),
            raw.elapsed,
            extra,
            self.name,
        )
