"""`check`: run a completion against a code task's tests and report a typed outcome.

    report = check(response, task)                 # hidden tests, default sandbox
    report.outcome, report.passed, report.total    # "pass" | "fail" | "timeout" | "memory" | ...
    verdict = report.to_verdict()                  # marft_envs.verdict.Verdict

Function tasks (``entry_point`` + Python ``tests``) go through the trusted harness
(:mod:`marft_envs.code.harness`); stdin/stdout tasks (``io_tests``) run the program once per
test and compare its output on the host with the task's output rule, or with its special judge
(:mod:`marft_envs.code.judge`: a stated float tolerance, any order, a checker program) where the
data or the statement asks for one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tasks import Task

from ..verdict import Verdict
from .compare import outputs_match
from .extract import defines, extract_program
from .harness import counted_tests, run_python_tests
from .judge import OutputChecker, judge_output, select_checker
from .outcome import OUTCOMES, Outcome, UnitResult
from .sandbox.base import Sandbox, SandboxLike
from .version import GRADER_VERSION

__all__ = [
    "DEFAULT_TIMEOUT",
    "OUTCOMES",
    "TestReport",
    "build_program",
    "check",
    "default_sandbox",
    "outputs_match",
    "per_test_timeout",
    "shared_sandbox",
]

REWARDS = ("fraction", "all")
WHICH = ("hidden", "public")
#: Seconds per test when neither the caller nor the task gives a limit.
DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class TestReport:
    """The result of checking one program against one task's tests.

    ``outcome`` is ``pass`` when every test passed, ``infra_error`` when the sandbox failed
    (never the program's fault), else the outcome of the first test that did not pass.
    ``details`` holds one :class:`~marft_envs.code.harness.UnitResult` per test.
    """

    outcome: Outcome
    passed: int
    total: int
    details: tuple[UnitResult, ...] = ()
    reason: str = ""
    backend: str = ""
    elapsed: float = 0.0
    program: str = ""
    reward: str = "fraction"
    which: str = "hidden"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def score(self) -> float:
        """The reward: fraction of tests passed, or 1/0 (``reward="all"``); 0 on infra errors."""
        if self.outcome == "infra_error" or self.total == 0:
            return 0.0
        if self.reward == "all":
            return 1.0 if self.outcome == "pass" else 0.0
        return self.passed / self.total

    def to_dict(self, *, sources: bool = True) -> dict[str, Any]:
        """JSON-friendly form; ``sources=False`` leaves the tests' source text out."""
        details = [d.to_dict() for d in self.details]
        if not sources:
            details = [{k: v for k, v in d.items() if k != "source"} for d in details]
        return {
            "outcome": self.outcome,
            "passed": self.passed,
            "total": self.total,
            "score": self.score,
            "reason": self.reason,
            "backend": self.backend,
            "elapsed": self.elapsed,
            "reward": self.reward,
            "tests": self.which,
            "details": details,
            **self.extra,
        }

    def to_verdict(self) -> Verdict:
        """This report as a :class:`Verdict` (``answer`` is the extracted program).

        ``details`` carries per-test outcomes but not the tests' source, so hidden tests never
        travel in an environment's ``infos``."""
        return Verdict(
            correct=self.outcome == "pass",
            answer=self.program,
            reason=self.reason or self.outcome,
            score=self.score,
            elapsed=self.elapsed,
            infra_error=self.outcome == "infra_error",
            details={k: v for k, v in self.to_dict(sources=False).items() if k != "elapsed"},
            grader_version=GRADER_VERSION,
        )


_SHARED: dict[str, Sandbox] = {}
_SHARED_LOCK = threading.Lock()


def shared_sandbox(name: str | None = None) -> Sandbox:
    """The process-wide sandbox of backend ``name`` (None: chosen automatically), created on
    first use and closed at interpreter exit. Environments and `check` share it, so many
    environments in one process (vector rollouts) use one Docker pool, not one each.
    Raises RuntimeError when ``name`` is None and no isolating backend runs here."""
    key = name or "auto"
    with _SHARED_LOCK:
        if key not in _SHARED:
            import atexit

            from .sandbox import get_sandbox

            sb = get_sandbox(name)
            atexit.register(sb.close)
            _SHARED[key] = sb
        return _SHARED[key]


def default_sandbox() -> Sandbox:
    """The automatically selected shared sandbox (``shared_sandbox(None)``)."""
    return shared_sandbox(None)


def build_program(code: str, task: Task) -> str:
    """The program to run: ``code``, joined to the task's ``metadata["code_prefix"]`` if any.

    HumanEval-style tasks carry their prompt (imports, helpers, the stub to complete) as the
    prefix. A ``code`` that defines the entry point itself is appended after the prefix (the
    prefix still supplies imports and helpers); otherwise ``code`` is taken as the body that
    continues the stub, HumanEval's raw completion format.

    ``metadata["prelude"]`` (LiveCodeBench's star imports) goes before everything. Unlike the
    prefix it is untrusted-side only: it is never executed on the host.
    """
    prelude = str(task.metadata.get("prelude") or "")
    prefix = str(task.metadata.get("code_prefix") or "")
    if prefix:
        code = prefix.rstrip() + "\n\n" + code if defines(code, task.entry_point) else prefix + code
    return prelude + code if prelude else code


def per_test_timeout(task: Task, timeout: float | None = None) -> float:
    """Seconds one test of ``task`` may run: ``timeout`` if given, else the task's own
    ``metadata["time_limit"]`` (CodeContests records carry one), else `DEFAULT_TIMEOUT`."""
    if timeout is not None:
        return float(timeout)
    limit = task.metadata.get("time_limit")
    return float(limit) if isinstance(limit, (int, float)) and limit > 0 else DEFAULT_TIMEOUT


def precheck(program: str, task: Task) -> str | None:
    """Why ``program`` certainly fails without running it, or None.

    A program that does not compile (the sandbox runs the same Python version) fails every
    test; so does an empty program for a function task without setup code. Rejecting them on
    the host saves a sandbox run per garbage response. Compiling never executes anything.
    """
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(program, "solution.py")
    except (SyntaxError, ValueError) as e:
        return f"the program does not compile: {type(e).__name__}: {e}"[:300]
    except (RecursionError, MemoryError):
        return "the program does not compile: it is nested too deeply"
    if not task.io_tests and not tree.body and not task.setup_code:
        return "the program is empty"
    return None


def _io_units(
    program: str,
    task: Task,
    tests: tuple[Any, ...],
    sandbox: SandboxLike,
    timeout: float,
    stop_early: bool,
    checker: OutputChecker,
) -> tuple[list[UnitResult], float, str]:
    units: list[UnitResult] = []
    outcome: Outcome
    elapsed, backend = 0.0, getattr(sandbox, "name", "")
    for i, t in enumerate(tests):
        # one execution per test: a fresh process (a fresh fork on the warm path), so no test
        # can see what the program did on another
        res = sandbox.run(program, stdin=t.stdin, timeout=timeout)
        elapsed += res.elapsed
        backend = getattr(res, "backend", "") or backend
        status = res.status.value
        source = f"stdin: {t.stdin[:200]!r}"
        if status == "ok":
            # the task's rule, else its special judge (marft_envs.code.judge)
            outcome, msg, judged = judge_output(
                checker, t.stdin, res.stdout, t.expected_stdout, sandbox, timeout
            )
            elapsed += judged
        elif status == "infra_error":
            outcome, msg = "infra_error", res.stderr[-300:]
        elif status in ("timeout", "memory"):
            outcome = "timeout" if status == "timeout" else "memory"
            msg = f"{status} limit exceeded"
        elif status == "output_limit":
            outcome, msg = "runtime_error", "output limit exceeded"
        else:
            tail = res.stderr.strip().splitlines()[-1:] if res.stderr.strip() else []
            outcome, msg = (
                "runtime_error",
                f"exit code {res.exit_code}" + (f": {tail[0][:200]}" if tail else ""),
            )
        units.append(UnitResult(i, source, outcome, msg))
        if outcome == "infra_error" or (stop_early and outcome != "pass"):
            break
    return units, elapsed, backend


def check(
    completion: str,
    task: Task,
    *,
    sandbox: SandboxLike | str | None = None,
    reward: str = "fraction",
    tests: str = "hidden",
    timeout: float | None = None,
    extract: bool = True,
) -> TestReport:
    """Run ``completion`` (an LLM response, or a program with ``extract=False``) against ``task``.

    ``sandbox``: a :class:`~marft_envs.code.sandbox.Sandbox`, a backend name, or None for the
    automatically selected one. ``reward``: ``"fraction"`` of tests passed or ``"all"``
    (all-or-nothing; stdin/stdout tests then stop at the first failure). ``tests``:
    ``"hidden"`` (the reward tests) or ``"public"`` (the ones that may be shown as feedback).
    ``timeout``: wall-clock seconds per test (see `per_test_timeout`; None: the task's own
    limit, else 10 s); the Python tests of one check share one sandbox run, whose limit is
    that per-test limit times the number of call-based tests (at least one). Never raises for
    anything the program does; raises ValueError for invalid arguments, a task that is not a
    code task, or a task whose data gives a malformed checker.
    """
    if reward not in REWARDS:
        raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
    if tests not in WHICH:
        raise ValueError(f"tests must be one of {WHICH}, got {tests!r}")
    if task.kind != "code":
        raise ValueError(f"task {task.id!r} is a {task.kind} task, not a code task")
    if sandbox is None or isinstance(sandbox, str):
        sandbox = shared_sandbox(sandbox)
    timeout = per_test_timeout(task, timeout)
    code = extract_program(completion) if extract else str(completion)
    program = build_program(code, task)
    start = time.monotonic()
    extra: dict[str, Any] = {}
    # a malformed checker in the task's data is refused whatever the program
    checker = select_checker(task) if task.io_tests else OutputChecker()
    rejected = precheck(program, task)
    if rejected is not None:
        return _rejected(rejected, code, task, tests, reward, getattr(sandbox, "name", ""), start)
    if task.io_tests:
        n_public = int(task.metadata.get("public_io_tests", 1))
        chosen = task.io_tests if tests == "hidden" else task.io_tests[:n_public]
        units, elapsed, backend = _io_units(
            program, task, chosen, sandbox, timeout, reward == "all", checker
        )
        total = len(chosen)
        if checker.origin != "default":
            extra = checker.describe()
    else:
        py_tests = task.tests if tests == "hidden" else task.public_tests
        # Call-based records (one call per test, all in one run): the limit is per test.
        run_timeout = (
            timeout * max(1, len(py_tests)) if task.metadata.get("call_based") else timeout
        )
        result = run_python_tests(
            program,
            tuple(py_tests),
            sandbox=sandbox,
            entry_point=task.entry_point,
            setup_code=task.setup_code,
            code_prefix=str(task.metadata.get("code_prefix") or ""),
            timeout=run_timeout,
        )
        units, elapsed, backend = (
            result.units,
            result.elapsed,
            result.backend or getattr(sandbox, "name", ""),
        )
        total = len(units)
        extra = {"rounds": result.rounds, "calls": result.calls}
        if result.program_error:
            extra["program_error"] = result.program_error
    passed = sum(u.outcome == "pass" for u in units)
    failing = [u for u in units if u.outcome != "pass"]
    outcome: Outcome
    if any(u.outcome == "infra_error" for u in units):
        outcome, reason = (
            "infra_error",
            next(u.message for u in units if u.outcome == "infra_error"),
        )
    elif total == 0:
        outcome, reason = "fail", "the task has no tests to run"
    elif not failing and passed == total:
        outcome, reason = "pass", f"passed all {total} tests"
    else:
        first = failing[0] if failing else None
        outcome = first.outcome if first else "fail"
        reason = (
            f"passed {passed}/{total} tests; first problem: "
            f"{first.message if first else 'tests not run'}"
        )
    return TestReport(
        outcome=outcome,
        passed=passed,
        total=total,
        details=tuple(units),
        reason=reason,
        backend=backend,
        elapsed=max(elapsed, time.monotonic() - start),
        program=code,
        reward=reward,
        which=tests,
        extra=extra,
    )


def _rejected(
    reason: str, code: str, task: Task, which: str, reward: str, backend: str, start: float
) -> TestReport:
    """The report of a program `precheck` rejected: every test a runtime error."""
    if task.io_tests:
        n = (
            len(task.io_tests)
            if which == "hidden"
            else min(len(task.io_tests), int(task.metadata.get("public_io_tests", 1)))
        )
        sources = [f"stdin: {t.stdin[:200]!r}" for t in task.io_tests[:n]]
    else:
        sources = list(counted_tests(task.tests if which == "hidden" else task.public_tests, task))
    units = tuple(UnitResult(i, src, "runtime_error", reason) for i, src in enumerate(sources))
    outcome: Outcome = "runtime_error" if units else "fail"
    return TestReport(
        outcome=outcome,
        passed=0,
        total=len(units),
        details=units,
        reason=f"passed 0/{len(units)} tests; first problem: {reason}"
        if units
        else "the task has no tests to run",
        backend=backend,
        elapsed=time.monotonic() - start,
        program=code,
        reward=reward,
        which=which,
        extra={"rounds": 0, "calls": 0, "program_error": reason},
    )
