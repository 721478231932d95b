"""The trusted test harness: tests run on the host, the program's functions in the sandbox.

The program under test never sees a test, an expected value, or a comparison. Instead:

* The task's test code (trusted task data: ``assert`` lines, or a HumanEval ``def check``) is
  executed **on the host**. Every name it uses that the host cannot resolve trustedly
  (the entry point, ``candidate``, any other name the program or the task's setup code
  defines) is bound to a :class:`RemoteName` proxy.
* Calling a proxy does not run anything on the host: the call (function name and arguments,
  encoded by the strict wire format of :mod:`marft_envs.code.runner`) is sent to the sandbox,
  where the runner executes the program and then each requested call, and returns the
  resulting *values* (only exact builtin data types), never a verdict.
* Calls are gathered in rounds. In the first round each proxy call returns a :data:`PENDING`
  placeholder that lets the test code keep running, so that every call whose arguments do
  not depend on the program's results is collected; then one sandbox run executes all of them.
  The tests are then replayed on the host with the real values; calls that only became known
  (arguments computed from earlier results) are fetched in a further round. A test is judged
  only in a replay in which it touched no placeholder.
* Each top-level statement of the tests that contains an ``assert`` is one test (in a
  HumanEval ``check`` function: each top-level statement of its body). Asserts that use no
  name outside the host's trusted namespace (``assert True``) are not counted.

Helper functions the tests call (HumanEval's ``poly``, ``encode_cyclic``) come from the task's
trusted ``metadata["code_prefix"]`` (the HumanEval prompt), executed on the host: a program
that redefines them cannot change what the tests compute.

See docs/code_envs.md for the threat model and its residual risks.

The harness is split by job: :mod:`.proxies` (remote names, placeholders, the session),
:mod:`.compilation` (the tests compiled for replay), :mod:`.replay` (one host replay) and
:mod:`.rounds` (one sandbox run); this module runs the rounds.
"""

from __future__ import annotations

from ..outcome import Outcome, UnitResult
from ..sandbox.base import SandboxLike
from .compilation import compiled_tests, counted_tests, trusted_namespace
from .proxies import Session
from .replay import replay
from .rounds import HarnessResult, run_round, runner_source

__all__ = [
    "MAX_ROUNDS",
    "HarnessResult",
    "TestOutcome",
    "UnitResult",
    "counted_tests",
    "run_python_tests",
    "runner_source",
]

#: Upper bound on sandbox runs per check (rounds of call collection).
MAX_ROUNDS = 4

#: The outcome of one test (the `Literal` that `check` reports; kept under its old name).
TestOutcome = Outcome


def run_python_tests(
    program: str,
    tests: tuple[str, ...],
    *,
    sandbox: SandboxLike,
    entry_point: str | None = None,
    setup_code: str = "",
    code_prefix: str = "",
    timeout: float = 10.0,
    max_rounds: int = MAX_ROUNDS,
) -> HarnessResult:
    """Run Python ``tests`` against ``program`` (see the module docstring).

    ``setup_code`` runs in the sandbox after the program (MBPP's ``test_setup_code``);
    ``code_prefix`` is trusted code whose definitions the tests may use on the host.
    Raises ValueError only when the tests themselves do not compile (a broken task).
    """
    try:
        compiled = compiled_tests(tuple(tests), code_prefix, entry_point)
    except SyntaxError as e:
        raise ValueError(f"the task's tests do not compile: {e}") from e
    prefix_ns = trusted_namespace(code_prefix, entry_point)
    session = Session()
    result = HarnessResult(units=[])
    outcomes: dict[int, tuple[Outcome, str]] = {}
    for _ in range(max_rounds + 1):
        outcomes = replay(compiled, prefix_ns, entry_point, session)
        if not session.any_pending:
            break  # every call had its value: this replay is final
        new = {k: v for k, v in session.requests.items() if k not in session.replies}
        if session.program_failure is not None or not new or result.rounds >= max_rounds:
            break
        run_round(sandbox, program, setup_code, new, session, timeout, result)
        result.rounds += 1
    if result.rounds == 0 and session.program_failure is None:
        # No test called the program: still run it once, so a crashing program is no pass.
        run_round(sandbox, program, setup_code, {}, session, timeout, result)
        result.rounds += 1
        if session.program_failure is not None:
            outcomes = replay(compiled, prefix_ns, entry_point, session)
    incomplete = session.any_pending  # some value never arrived: no test of this replay may pass
    units: list[UnitResult] = []
    for u in compiled.units:
        if not u.counted:
            continue
        outcome, message = outcomes.get(u.index, ("runtime_error", "not reached"))
        if incomplete and outcome == "pass":
            outcome, message = (
                "runtime_error",
                f"the tests could not be completed within {max_rounds} sandbox rounds",
            )
        units.append(UnitResult(len(units), u.source, outcome, message))
    result.units = units
    return result
