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
   ``{"type": "any_order"}`` (optionally with tolerances, and ``"scope": "lines"`` to free the
   order of the lines rather than of the tokens within each line) or
   ``{"type": "program", "source": "<python defining check(input, output, answer)>"}`` (it must
   compile: a checker that cannot run would reject every answer).
2. For APPS tasks (``output_rule == "apps"``) only, the statement: a stated absolute/relative
   error (:data:`TOLERANCE_PATTERN`) gives a tolerance; a clause that tells the program to
   print something ``in any order`` (:func:`any_order_clause`) gives the any-order comparison,
   of the tokens within each line or of the lines (:func:`any_order_scope`; where it cannot
   tell which, nothing is selected). A statement that accepts several answers
   (:data:`SEVERAL_ANSWERS_PATTERN`) is flagged (``several_answers``) but keeps the default
   comparison: without a checker program no valid construction can be verified, and accepting
   anything would be a reward a policy could farm.
3. Otherwise the task's own ``output_rule`` (the default; unchanged).

Every relaxed checker accepts what the task's own rule accepts (the expected output is always a
right answer), so selecting one can turn a fail into a pass, never a pass into a fail. A checker
program runs in the sandbox (it is data, and it reads the program's output), once per test whose
output the task's rule rejected, with a per-run nonce in its verdict line so that the program's
output cannot forge a verdict.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from .compare import ANY_ORDER_SCOPES, any_order_match, outputs_match, tolerance_match
from .outcome import Outcome

__all__ = [
    "ANY_ORDER_PATTERN",
    "CHECKER_TYPES",
    "SEVERAL_ANSWERS_PATTERN",
    "TOLERANCE_PATTERN",
    "OutputChecker",
    "any_order_clause",
    "any_order_scope",
    "checker_from_data",
    "checker_program",
    "judge_output",
    "match_output",
    "select_checker",
    "statement_checker",
]

CheckerType = Literal["default", "float", "any_order", "program"]
OrderScope = Literal["within_line", "lines"]
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
#: An output verb, then within the same clause (no ``;``) "in any order" / "in arbitrary order":
#: "print k distinct integers ... in any order", "the edges can be printed in any order". The
#: text between them is ``object``. Sentences about doing operations in any order name no
#: output verb before the phrase. A clause matching this still needs :func:`any_order_clause`'s
#: other conditions (no negation, nothing about the input).
ANY_ORDER_PATTERN = re.compile(
    r"\b(?:print\w*|output\w*|write|writes|writing|written)\b(?P<object>[^;]*?)"
    r"\bin\s+(?:an\s+)?(?:any|arbitrary)\s+order\b",
    re.IGNORECASE,
)
#: Words that make an any-order sentence say the opposite or fix an order: "not in any order",
#: "you cannot output them in any order", "they must be sorted", "in increasing order". A
#: sentence holding one selects nothing ("not necessarily distinct" is no negation).
_ORDER_NEGATION = re.compile(
    r"\b(?:not|never|cannot|nor)\b(?!\s+necessarily)|n['\u2019]t\b|\bsort(?:ed)?\b"
    r"|\b(?:increasing|decreasing|ascending|descending)\b|\blexicographic"
    r"|\bin\s+the\s+(?:same\s+)?order\b",
    re.IGNORECASE,
)
#: The any-order phrase is about what the program reads ("the queries are given in any order").
_ABOUT_INPUT = re.compile(r"\b(?:given|input|read|reads|reading)\b", re.IGNORECASE)
#: The freed items are lines: "print the lines in any order", "... in any order, one per line",
#: "each on a separate line".
_LINE_ITEMS = re.compile(
    r"\blines\b|\bone\s+per\s+line\b"
    r"|\b(?:on|in)\s+(?:a\s+)?(?:separate|different|new|distinct|its\s+own)\s+lines?\b",
    re.IGNORECASE,
)
#: The freed items are single numbers (printed on one line unless the clause says otherwise).
_NUMBER_ITEMS = re.compile(
    r"\b(?:numbers|integers|indices|indexes|values|elements|positions|ids|labels|vertices"
    r"|nodes|digits)\b",
    re.IGNORECASE,
)
#: The statement's output is several lines: "print n-1 lines", "output m lines", "one per
#: line", "each on a separate line" (an input's "each of the next m lines" names no output verb).
_OUTPUT_LINES = re.compile(
    r"\b(?:print|output|write)\w*\b[^.;]{0,60}?\blines\b|\bone\s+per\s+line\b"
    r"|\beach\s+(?:on|in)\s+(?:a\s+)?(?:separate|different|new|its\s+own)\s+line\b",
    re.IGNORECASE,
)
#: Several independent answers in one output (test cases, queries): lines freed over the whole
#: output could move from one answer to another, so the line scope is not selected.
_SEVERAL_CASES = re.compile(r"\btest\s+cases?\b|\bquer(?:y|ies)\b|\btestcases?\b", re.I)
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
    ``scope``: what an any-order checker frees, the order of the tokens within each line
    (``"within_line"``) or the order of the lines (``"lines"``).
    """

    rule: str = "tokens"
    kind: CheckerType = "default"
    abs_tol: float | None = None
    rel_tol: float | None = None
    program: str | None = None
    origin: Literal["default", "data", "statement"] = "default"
    several_answers: bool = False
    evidence: str = ""
    scope: OrderScope = "within_line"

    @property
    def name(self) -> str:
        """A short name for verdicts: ``default``, ``float(abs=1e-06,rel=1e-06)``,
        ``any_order`` (within each line), ``any_order_lines``, ..."""
        lines = self.kind == "any_order" and self.scope == "lines"
        base = "any_order_lines" if lines else self.kind
        if self.kind in ("float", "any_order") and (
            self.abs_tol is not None or self.rel_tol is not None
        ):
            return f"{base}(abs={self.abs_tol or 0:g},rel={self.rel_tol or 0:g})"
        return base

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
        "any_order": {"type", "abs_tol", "rel_tol", "scope"},
        "program": {"type", "source", "origin"},
    }[kind]
    unknown = set(spec) - allowed
    if unknown:
        raise ValueError(f"{where}: unknown checker field(s) {sorted(unknown)} for {kind!r}")
    if kind == "default":
        return OutputChecker(rule=rule, origin="data")
    if kind == "program":
        return OutputChecker(
            rule=rule,
            kind="program",
            program=_checker_source(spec.get("source"), where),
            origin="data",
        )
    abs_tol = spec.get("abs_tol")
    rel_tol = spec.get("rel_tol")
    if kind == "float" and abs_tol is None and rel_tol is None:
        raise ValueError(f"{where}: a float checker needs abs_tol and/or rel_tol")
    scope = spec.get("scope", "within_line")
    if scope not in ANY_ORDER_SCOPES:
        raise ValueError(
            f"{where}: an any_order checker's scope must be one of {ANY_ORDER_SCOPES}, "
            f"got {scope!r}"
        )
    return OutputChecker(
        rule=rule,
        kind=kind,
        abs_tol=None if abs_tol is None else _tolerance(abs_tol, "abs_tol", where),
        rel_tol=None if rel_tol is None else _tolerance(rel_tol, "rel_tol", where),
        origin="data",
        scope=scope,
    )


def _checker_source(source: Any, where: str) -> str:
    """``source`` if it is Python that compiles and defines ``check`` at its top level; else a
    ValueError naming the problem (a checker that cannot run would reject every answer)."""
    usage = "it must be Python that defines check(input, output, answer)"
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{where}: a program checker needs 'source': {usage}")
    filename = f"<checker of {where}>"
    try:
        tree = ast.parse(source, filename)
        compile(tree, filename, "exec")  # what parsing alone does not check (global after use)
    except SyntaxError as exc:
        why = f"{exc.__class__.__name__}: {exc.msg} at line {exc.lineno}"
        raise ValueError(
            f"{where}: the checker program does not compile ({why}); {usage}"
        ) from None
    except ValueError as exc:  # a NUL byte
        raise ValueError(
            f"{where}: the checker program does not compile ({exc}); {usage}"
        ) from None
    if not any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "check"
        for node in tree.body
    ):
        raise ValueError(
            f"{where}: the checker program defines no top-level function check; {usage}"
        )
    return source


def _sentences(statement: str) -> list[str]:
    return [" ".join(s.split()) for s in _SENTENCE.split(statement) if s.strip()]


def _clauses(sentence: str) -> list[str]:
    return [c for c in sentence.split(";") if c.strip()]


def any_order_clause(sentence: str) -> str | None:
    """The clause of ``sentence`` that frees the order of what the program prints, else None.

    A clause (the sentence split on ``;``) where an output verb (print, output, write) comes
    before "in any order" / "in arbitrary order", with nothing between them about the input
    (given, input, read); the sentence must hold no negation (not, cannot, can't, never, ...) and
    nothing that fixes an order (sorted, increasing, descending, lexicographic, "in the order").
    """
    if _ORDER_NEGATION.search(sentence):
        return None
    for clause in _clauses(sentence):
        m = ANY_ORDER_PATTERN.search(clause)
        if m is not None and not _ABOUT_INPUT.search(m.group("object")):
            return " ".join(clause.split())
    return None


def any_order_scope(clause: str, statement: str) -> OrderScope | None:
    """Which order an any-order ``clause`` of ``statement`` frees, or None when it cannot tell.

    ``"lines"`` when the clause says the items are lines ("lines", "one per line", "each on a
    separate line"); ``"within_line"`` when it names single numbers (integers, indices,
    numbers, ...): they are printed on one line, whose tokens may come in any order; ``"lines"``
    when it names other items ("the edges") and the statement prints several lines ("print n-1
    lines p_i c_i"): each item is a line, in any order, its tokens in their order. A line scope
    is never selected for a statement with several test cases or queries (a line could move
    from one answer to another): None, as for a clause that names neither.
    """
    if _LINE_ITEMS.search(clause):
        scope: OrderScope | None = "lines"
    elif _NUMBER_ITEMS.search(clause):
        return "within_line"
    elif _OUTPUT_LINES.search(" ".join(statement.split())):
        scope = "lines"
    else:
        return None
    return None if _SEVERAL_CASES.search(statement) else scope


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
    order: str | None = None
    scope: OrderScope = "within_line"
    for sentence in sentences:
        clause = any_order_clause(sentence)
        found = None if clause is None else any_order_scope(clause, statement)
        if found is not None and clause is not None:
            order, scope = clause, found
            break
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
        scope=scope,
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
        return any_order_match(
            actual, expected, checker.abs_tol, checker.rel_tol, scope=checker.scope
        )
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
