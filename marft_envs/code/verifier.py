"""`CodeVerifier`: the code tasks' implementation of the Verifier protocol
(docs/architecture.md)."""

from __future__ import annotations

import threading
import time
from typing import Any

from tasks import Task

from ..verdict import Verdict
from .sandbox.select import BACKENDS
from .version import GRADER_VERSION

__all__ = ["CodeVerifier"]

FEEDBACK_MODES = ("none", "verdict", "tests")


class CodeVerifier:
    """Grades a team's response by running its program against the task's hidden tests.

    Args:
        sandbox: a :class:`~marft_envs.code.sandbox.Sandbox`, a backend name (``"docker"``,
            ``"bwrap"``, ``"subprocess"``) or None to pick one automatically. Named and
            automatic sandboxes are shared by the whole process and created on the first
            grade, so building an environment needs no Docker daemon.
        reward: ``"fraction"`` of tests passed, or ``"all"`` (all-or-nothing).
        timeout: wall-clock seconds per test; None (default): the task's own time limit
            (``metadata["time_limit"]``, CodeContests), else 10 s.

    ``grade`` never raises: sandbox failures (no daemon, missing image, no backend at all)
    give ``Verdict(infra_error=True)``. ``verdict.details["backend"]`` names the backend used.
    ``version`` is the grading rules' version (:mod:`marft_envs.code.version`).
    """

    name = "code"
    version = GRADER_VERSION

    def __init__(self, sandbox: Any = None, reward: str = "fraction", timeout: float | None = None):
        if reward not in ("fraction", "all"):
            raise ValueError(f"reward must be 'fraction' or 'all', got {reward!r}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
        ):
            raise ValueError(
                f"timeout must be None or a positive number of seconds, got {timeout!r}"
            )
        if sandbox is not None and not isinstance(sandbox, str) and not hasattr(sandbox, "run"):
            raise TypeError(
                f"sandbox must be None, a backend name or a Sandbox, got {type(sandbox).__name__}"
            )
        if isinstance(sandbox, str) and sandbox not in BACKENDS:  # a typo fails here, not per grade
            raise ValueError(
                f"unknown sandbox backend {sandbox!r}; valid names are "
                f"{list(BACKENDS)} or None (automatic)"
            )
        self.reward = reward
        self.timeout = None if timeout is None else float(timeout)
        self._spec = sandbox
        self._sandbox: Any = (
            sandbox if sandbox is not None and not isinstance(sandbox, str) else None
        )
        self._lock = threading.Lock()

    def fingerprint_settings(self) -> dict[str, Any]:
        """The settings that change verdicts (part of an environment's fingerprint); the sandbox
        backend is not one (every backend grades alike)."""
        return {"reward": self.reward, "timeout": self.timeout}

    @property
    def backend(self) -> str:
        """The backend name: the one in use, else the one asked for, else ``"auto"``."""
        if self._sandbox is not None:
            return getattr(self._sandbox, "name", type(self._sandbox).__name__)
        return self._spec if isinstance(self._spec, str) else "auto"

    def sandbox(self) -> Any:
        """The sandbox: the one given, or the process-wide shared sandbox of the named backend
        (or of the automatic choice), created on first use. Raises RuntimeError if none can
        run here."""
        with self._lock:
            if self._sandbox is None:
                from .check import shared_sandbox

                self._sandbox = shared_sandbox(self._spec)
            return self._sandbox

    def _check(self, response: Any, task: Task, tests: str) -> Any:
        from .check import check

        return check(
            response,
            task,
            sandbox=self.sandbox(),
            reward=self.reward,
            tests=tests,
            timeout=self.timeout,
        )

    def _infra(self, message: str, response: Any, start: float) -> Verdict:
        from .extract import extract_program

        return Verdict(
            correct=False,
            answer=extract_program(response),
            reason=f"infrastructure error: {message}",
            score=0.0,
            elapsed=time.monotonic() - start,
            infra_error=True,
            details={"outcome": "infra_error", "backend": self.backend, "passed": 0, "total": 0},
            grader_version=GRADER_VERSION,
        )

    def grade(self, response: str, task: Task) -> Verdict:
        """Run the response's program against the hidden tests; never raises."""
        start = time.monotonic()
        try:
            return self._check(response, task, "hidden").to_verdict()
        # The Verifier contract: grade() never raises. No backend, a broken task: an
        # infrastructure verdict, never the policy's fault.
        except Exception as e:  # noqa: BLE001
            return self._infra(f"{type(e).__name__}: {e}", response, start)

    def feedback(self, response: str, task: Task, verdict: Verdict, mode: str) -> str:
        """The message shown to the team between rounds.

        ``"verdict"``: whether the program was judged correct, and its outcome.
        ``"tests"``: the result of every *public* test (never the hidden ones).
        """
        if mode not in FEEDBACK_MODES:
            raise ValueError(f"feedback mode must be one of {FEEDBACK_MODES}, got {mode!r}")
        if mode == "none":
            return ""
        if verdict.infra_error:
            return (
                "The team's program could not be checked (infrastructure error); this round is "
                "not scored."
            )
        if mode == "verdict":
            outcome = verdict.details.get("outcome", "pass" if verdict.correct else "fail")
            judged = "correct" if verdict.correct else f"incorrect (outcome: {outcome})"
            return f"Feedback: the team's program was judged {judged}."
        return self._public_tests_feedback(response, task)

    def _public_tests_feedback(self, response: str, task: Task) -> str:
        n_public = (
            len(task.public_tests)
            if not task.io_tests
            else min(len(task.io_tests), int(task.metadata.get("public_io_tests", 1)))
        )
        if n_public == 0:
            return "Feedback: this task has no public tests to show."
        try:
            report = self._check(response, task, "public")
        except Exception as e:  # noqa: BLE001 -- feedback() never raises, as grade()
            return f"The public tests could not be run (infrastructure error: {type(e).__name__})."
        if report.outcome == "infra_error":
            return "The public tests could not be run (infrastructure error)."
        lines = [f"Feedback: the program passed {report.passed} of {report.total} public tests."]
        for unit in report.details:
            lines.append(f"- test {unit.index + 1}: {unit.outcome.upper()}")
            if task.io_tests:
                t = task.io_tests[unit.index]
                lines.append(
                    f"  input: {t.stdin[:300]!r}\n  expected output: {t.expected_stdout[:300]!r}"
                )
            else:
                lines.append("  " + unit.source.strip().replace("\n", "\n  ")[:600])
            if unit.message and unit.outcome != "pass":
                lines.append(f"  {unit.message[:300]}")
        return "\n".join(lines)

    def close(self) -> None:
        """Nothing to release: a given sandbox belongs to the caller, a shared one lives until
        interpreter exit (it serves every environment of the process)."""
