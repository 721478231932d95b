"""The special judge: how a stdin/stdout test's output is checked when a problem accepts more
than one output.

    checker = select_checker(task)           # OutputChecker: default, tolerance, any order, program
    outcome, message, seconds = judge_output(checker, stdin, actual, expected, sandbox, timeout)

Upstream judges do not compare every problem's output with one expected text: a problem that
says "print any of them" has a checker program, "absolute or relative error 1e-6" a float
comparison (testlib's ``dcmp``), "in any order" an order-free comparison. APPS ships one expected
output per test and grades every problem with one cascade (hendrycks/apps,
eval/testing_util.py: exact lines, then floats under ``np.allclose``, then per-line token sets in
any line order), which both rejects valid alternative answers and accepts reordered ones.

Selection (:func:`select_checker`), first match wins:

1. ``task.metadata["checker"]``, a mapping given by the data (the APPS loader reads a record's
   ``checker`` field, and attaches the checker programs of :mod:`tasks.apps_checkers`):
   ``{"type": "default"}``, ``{"type": "float", "abs_tol": e, "rel_tol": e}``,
   ``{"type": "any_order"}`` (optionally with tolerances) or
   ``{"type": "program", "source": "<python defining check(input, output, answer)>"}``.
2. For APPS tasks (``output_rule == "apps"``) only, the statement: a stated absolute/relative
   error (:data:`TOLERANCE_PATTERN`) gives a tolerance; a sentence that tells the program to
   print something ``in any order`` gives the any-order comparison. A statement that accepts
   several answers (:data:`SEVERAL_ANSWERS_PATTERN`) is flagged (``several_answers``) but keeps
   the default comparison: without a checker program no valid construction can be verified,
   and accepting anything would be a reward a policy could farm.
3. Otherwise the task's own ``output_rule`` (the default; unchanged).

Every relaxed checker accepts what the task's own rule accepts (the expected output is always a
right answer), so selecting one can turn a fail into a pass, never a pass into a fail. A checker
program runs in the sandbox (it is data, and it reads the program's output), once per test whose
output the task's rule rejected, with a per-run nonce in its verdict line so that the program's
output cannot forge a verdict.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from .compare import any_order_match, outputs_match, tolerance_match
from .outcome import Outcome

__all__ = [
    "ANY_ORDER_PATTERN",
    "CHECKER_TYPES",
    "SEVERAL_ANSWERS_PATTERN",
    "TOLERANCE_PATTERN",
    "OutputChecker",
    "checker_from_data",
    "checker_program",
    "judge_output",
    "match_output",
    "select_checker",
    "statement_checker",
]

CheckerType = Literal["default", "float", "any_order", "program"]
CHECKER_TYPES: tuple[str, ...] = ("default", "float", "any_order", "program")

# "10^{-6}", "10^{ - 6}", "10^-6", "10^(-6)", "$10^{-9}$", "1e-6", "1E-06"
_EPS = r"(?:10\s*\^\s*[{(]?\s*-\s*(?P<p1>\d{1,2})\s*[})]?|1\s*[eE]\s*-\s*(?P<p2>\d{1,2}))"
_BOUND = (
    r"(?:does\s+not\s+exceed|doesn't\s+exceed|do\s+not\s+exceed|don't\s+exceed|not\s+exceed"
    r"|should\s+not\s+exceed|must\s+not\s+exceed|is\s+at\s+most|at\s+most|no\s+more\s+than"
    r"|not\s+greater\s+than|less\s+than\s+or\s+equal\s+to|within|\\le|\\leq|<=|≤)"
)
#: A stated error bound: "absolute or relative error ... does not exceed 10^{-6}" (and the
#: "absolute error" / "relative error" forms); ``kind`` says which, ``p1``/``p2`` the exponent.
TOLERANCE_PATTERN = re.compile(
    r"(?P<kind>absolute\s+or\s+relative|relative\s+or\s+absolute|absolute|relative)\s+error"
    r"[^.]{0,120}?" + _BOUND + r"\s*\$?\s*" + _EPS,
    re.IGNORECASE,
)
#: One sentence telling the program to print something in any order ("print k distinct
#: integers ... in any order"); sentences about doing operations in any order do not name
#: printing or output.
ANY_ORDER_PATTERN = re.compile(
    r"^(?=.*\b(?:print|output|write)\b).*\bin\s+(?:an\s+)?(?:any|arbitrary)\s+order\b",
    re.IGNORECASE,
)
#: One sentence accepting several answers: "if there are multiple answers, print any of them",
#: "you may output any", "print any example".
SEVERAL_ANSWERS_PATTERN = re.compile(
    r"(?:(?=.*\b(?:several|multiple|many|more\s+than\s+one)\b)"
    r".*(?:\b(?:print|output|find|choose|write)\s+any\b|\bany\s+of\s+them\b))"
    r"|\b(?:print|output)\s+any\s+(?:example|such)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
_VERDICT_LINE = re.compile(r"^(?P<nonce>[0-9a-f]{32}) (?P<verdict>OK|WA)$")


@dataclass(frozen=True)
class OutputChecker:
    """How one task's stdin/stdout outputs are checked (see the module docs).

    ``rule``: the task's own output rule, always tried first. ``kind``: what else may accept an
    output the rule rejects. ``origin``: ``"data"`` (the task's ``checker`` field),
    ``"statement"`` (a pattern in the statement) or ``"default"``. ``evidence``: the statement
    text that selected it. ``several_answers``: the statement accepts several answers.
    """

    rule: str = "tokens"
    kind: CheckerType = "default"
    abs_tol: float | None = None
    rel_tol: float | None = None
    program: str | None = None
    origin: Literal["default", "data", "statement"] = "default"
    several_answers: bool = False
    evidence: str = ""

    @property
    def name(self) -> str:
        """A short name for verdicts: ``default``, ``float(abs=1e-06,rel=1e-06)``, ..."""
        if self.kind in ("float", "any_order") and (
            self.abs_tol is not None or self.rel_tol is not None
        ):
            return f"{self.kind}(abs={self.abs_tol or 0:g},rel={self.rel_tol or 0:g})"
        return self.kind

    def describe(self) -> dict[str, Any]:
        """JSON-friendly summary (no program source), recorded in a report's details."""
        return {
            "checker": self.name,
            "checker_origin": self.origin,
            "several_answers": self.several_answers,
        }


def _tolerance(value: Any, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: checker {name} must be a number, got {value!r}")
    if not 0 <= value < 1:
        raise ValueError(f"{where}: checker {name} must be in [0, 1), got {value!r}")
    return float(value)


def checker_from_data(spec: Any, rule: str, where: str = "task") -> OutputChecker:
    """The checker a data field describes (see the module docs); ValueError if malformed."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: a checker must be a mapping with a 'type', got {spec!r}")
    kind = spec.get("type")
    if kind not in CHECKER_TYPES:
        raise ValueError(f"{where}: checker type must be one of {CHECKER_TYPES}, got {kind!r}")
    allowed = {
        "default": {"type"},
        "float": {"type", "abs_tol", "rel_tol"},
        "any_order": {"type", "abs_tol", "rel_tol"},
        "program": {"type", "source", "origin"},
    }[kind]
    unknown = set(spec) - allowed
    if unknown:
        raise ValueError(f"{where}: unknown checker field(s) {sorted(unknown)} for {kind!r}")
    if kind == "default":
        return OutputChecker(rule=rule, origin="data")
    if kind == "program":
        source = spec.get("source")
        if not isinstance(source, str) or "def check" not in source:
            raise ValueError(
                f"{where}: a program checker needs 'source', Python that defines "
                "check(input, output, answer)"
            )
        return OutputChecker(rule=rule, kind="program", program=source, origin="data")
    abs_tol = spec.get("abs_tol")
    rel_tol = spec.get("rel_tol")
    if kind == "float" and abs_tol is None and rel_tol is None:
        raise ValueError(f"{where}: a float checker needs abs_tol and/or rel_tol")
    return OutputChecker(
        rule=rule,
        kind=kind,
        abs_tol=None if abs_tol is None else _tolerance(abs_tol, "abs_tol", where),
        rel_tol=None if rel_tol is None else _tolerance(rel_tol, "rel_tol", where),
        origin="data",
    )


def _sentences(statement: str) -> list[str]:
    return [" ".join(s.split()) for s in _SENTENCE.split(statement) if s.strip()]


def statement_checker(statement: str, rule: str = "apps") -> OutputChecker:
    """The checker a problem statement asks for (patterns in the module docs), else default."""
    tol = TOLERANCE_PATTERN.search(" ".join(statement.split()))
    abs_tol = rel_tol = None
    evidence: list[str] = []
    if tol is not None:
        eps = 10.0 ** -int(tol.group("p1") or tol.group("p2"))
        kind = tol.group("kind").lower()
        abs_tol = eps if "absolute" in kind else 0.0
        rel_tol = eps if "relative" in kind else 0.0
        evidence.append(tol.group(0))
    sentences = _sentences(statement)
    order = next((s for s in sentences if ANY_ORDER_PATTERN.search(s)), None)
    several = next((s for s in sentences if SEVERAL_ANSWERS_PATTERN.search(s)), None)
    if order is not None:
        evidence.append(order)
    if several is not None:
        evidence.append(several)
    kind_: CheckerType = "any_order" if order else "float" if tol else "default"
    return OutputChecker(
        rule=rule,
        kind=kind_,
        abs_tol=abs_tol,
        rel_tol=rel_tol,
        origin="statement" if (order or tol or several) else "default",
        several_answers=several is not None,
        evidence=" | ".join(e[:200] for e in evidence),
    )


def select_checker(task: Any) -> OutputChecker:
    """The checker for ``task``'s stdin/stdout tests: its data's, else (APPS) its statement's,
    else its own output rule. ValueError if the data's checker is malformed."""
    meta = task.metadata
    rule = str(meta.get("output_rule") or "tokens")
    spec = meta.get("checker")
    stated = statement_checker(task.prompt, rule) if rule == "apps" else None
    if spec is not None:
        given = checker_from_data(spec, rule, where=f"task {task.id!r}")
        several = stated is not None and stated.several_answers
        return replace(given, several_answers=several) if several else given
    return stated if stated is not None else OutputChecker(rule=rule)


def match_output(checker: OutputChecker, actual: str, expected: str) -> bool:
    """Pure comparison: the task's rule, else the checker's relaxed comparison. A program
    checker is not run here (:func:`judge_output` runs it); this gives the rule's answer."""
    if outputs_match(actual, expected, checker.rule):
        return True
    if checker.kind == "float":
        return tolerance_match(actual, expected, checker.abs_tol or 0.0, checker.rel_tol or 0.0)
    if checker.kind == "any_order":
        return any_order_match(actual, expected, checker.abs_tol, checker.rel_tol)
    return False


_DRIVER = """

import json as __marft_json
import sys as __marft_sys

__marft_case = __marft_json.loads(__marft_sys.stdin.read())
__marft_ok = check(__marft_case["input"], __marft_case["output"], __marft_case["answer"])
__marft_sys.stdout.write("\\n{nonce} " + ("OK" if __marft_ok is True else "WA") + "\\n")
"""


def checker_program(source: str, nonce: str) -> str:
    """The sandbox program that runs a checker's ``check(input, output, answer)`` on the JSON
    case on its stdin and ends its stdout with ``<nonce> OK`` or ``<nonce> WA``."""
    return source.rstrip() + "\n" + _DRIVER.format(nonce=nonce)


def _run_checker(
    checker: OutputChecker,
    stdin: str,
    actual: str,
    expected: str,
    sandbox: Any,
    timeout: float,
) -> tuple[Outcome, str, float]:
    nonce = secrets.token_hex(16)
    case = json.dumps({"input": stdin, "output": actual, "answer": expected})
    res = sandbox.run(checker_program(str(checker.program), nonce), stdin=case, timeout=timeout)
    status = res.status.value
    if status == "ok":
        lines = res.stdout.rstrip("\n").splitlines()
        m = _VERDICT_LINE.match(lines[-1]) if lines else None
        if m is None or m.group("nonce") != nonce:
            return "infra_error", "the checker printed no verdict", res.elapsed
        if m.group("verdict") == "OK":
            return "pass", "", res.elapsed
        return "fail", f"wrong answer (checker): {actual[:200]!r}", res.elapsed
    if status == "error":
        # testlib: output the checker cannot read is a wrong answer (_pe / _wa), not a judge fault
        tail = res.stderr.strip().splitlines()[-1:] if res.stderr.strip() else []
        why = tail[0][:200] if tail else f"exit code {res.exit_code}"
        return "fail", f"wrong answer (the checker rejected the output: {why})", res.elapsed
    return "infra_error", f"the checker did not finish ({status})", res.elapsed


def judge_output(
    checker: OutputChecker,
    stdin: str,
    actual: str,
    expected: str,
    sandbox: Any = None,
    timeout: float = 10.0,
) -> tuple[Outcome, str, float]:
    """``(outcome, message, seconds)`` for a program's stdout ``actual`` on one test.

    ``pass`` or ``fail``; ``infra_error`` only when a checker program did not run to a verdict
    (time-out, sandbox failure: never the graded program's fault). ``sandbox`` is needed only by
    program checkers, which run only when the task's own rule rejects ``actual``.
    """
    if match_output(checker, actual, expected):
        return "pass", "", 0.0
    if checker.kind == "program":
        if sandbox is None:
            raise ValueError("a program checker needs a sandbox to run in")
        return _run_checker(checker, stdin, actual, expected, sandbox, timeout)
    return "fail", f"wrong output: {actual[:200]!r}", 0.0
