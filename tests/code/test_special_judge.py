"""The special judge (marft_envs/code/judge.py): checkers, selection, false-pass guards, and the
real APPS rows of ../shared/data that use it (reference solutions from the data)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import tasks
from marft_envs.code import check
from marft_envs.code.compare import any_order_match, outputs_match, tolerance_match
from marft_envs.code.judge import (
    OutputChecker,
    checker_from_data,
    judge_output,
    match_output,
    select_checker,
    statement_checker,
)
from marft_envs.code.sandbox.select import probe
from tasks import IOTest, Task
from tasks.apps_checkers import APPS_CHECKERS
from tasks.competitive import apps_to_task

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "apps"


@pytest.fixture
def sb(sandbox_factory):
    """The most isolating backend that runs here (every backend must judge alike)."""
    return sandbox_factory(next((b for b in ("bwrap", "docker") if probe(b) is None), "subprocess"))


def _apps_rows(split: str) -> dict[int, dict]:
    assert DATA.is_dir(), f"benchmark data missing at {DATA}"
    with (DATA / f"{split}.jsonl").open(encoding="utf-8") as f:
        return {r["problem_id"]: r for r in map(json.loads, f)}


def _io_task(statement: str, tests: list[tuple[str, str]], **metadata) -> Task:
    return Task(
        id="sj/0",
        kind="code",
        prompt=statement,
        io_tests=tuple(IOTest(i, o) for i, o in tests),
        metadata={"output_rule": "apps", "public_io_tests": 1, **metadata},
    )


# ----------------------------------------------------------------------------- checkers


@pytest.mark.parametrize(
    "actual, expected, abs_tol, rel_tol, want",
    [
        ("0.3333333", "0.333333333333", 1e-6, 1e-6, True),
        ("0.333", "0.333333333333", 1e-6, 1e-6, False),
        ("1000000.5", "1000000.0", 1e-6, 1e-6, True),  # relative: 5e-7
        ("1000000.5", "1000000.0", 1e-6, 0.0, False),  # absolute only
        ("0.0000005", "0.0", 1e-6, 0.0, True),
        ("0.0000005", "0.0", 0.0, 1e-6, False),  # relative to 0: only equality
        ("2.0 abc", "2.0000001 abc", 1e-6, 1e-6, True),
        ("2.0 abd", "2.0000001 abc", 1e-6, 1e-6, False),  # text tokens stay exact
        ("2.0", "2.0 3.0", 1e-6, 1e-6, False),  # token counts must agree
        ("nan", "nan", 1e-6, 1e-6, True),  # equal as text
        ("nan", "1.0", 1e-6, 1e-6, False),
        ("inf", "1e308", 1e-6, 1e-6, False),
        ("1.0000011", "1", 1e-6, 1e-6, False),
        ("-1.0000009", "-1", 1e-6, 1e-6, True),  # a negative b: the interval is ordered
    ],
)
def test_tolerance_match(actual, expected, abs_tol, rel_tol, want):
    assert tolerance_match(actual, expected, abs_tol, rel_tol) is want


def test_tolerance_must_be_a_small_number():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        tolerance_match("1", "1", 2.0, 0.0)
    with pytest.raises(TypeError, match="must be a number"):
        tolerance_match("1", "1", True, 0.0)


@pytest.mark.parametrize(
    "actual, expected, want",
    [
        ("2\n3 1\n", "2\n1 3\n", True),  # within a line
        ("2\n\n1 3", "2\n1 3\n\n", True),  # blank lines do not count
        ("2 1\n3\n", "2\n1 3\n", False),  # a token moved to another line
        ("1 3\n2\n", "2\n1 3\n", False),  # lines in another order
        ("1 1 3\n", "1 3 3\n", False),  # a multiset: repeats count
        ("1 3\n", "1 3 3\n", False),
    ],
)
def test_any_order_match(actual, expected, want):
    assert any_order_match(actual, expected) is want


def test_any_order_with_a_tolerance_sorts_numbers_by_value():
    assert any_order_match("0.5000001 0.25", "0.25 0.5", 1e-6, 1e-6)
    assert not any_order_match("0.51 0.25", "0.25 0.5", 1e-6, 1e-6)


CASES = [
    ("1 2\n3", "1 2 3"),
    ("0.3333333", "0.333333333"),
    ("3 1\n2", "1 3\n2"),
    ("yes", "YES"),
    ("", "0"),
]


@pytest.mark.parametrize(
    "checker",
    [
        OutputChecker(rule="apps", kind="float", abs_tol=1e-6, rel_tol=1e-6),
        OutputChecker(rule="apps", kind="any_order"),
        OutputChecker(rule="tokens", kind="any_order", abs_tol=1e-9, rel_tol=0.0),
    ],
    ids=lambda c: c.name,
)
def test_every_checker_accepts_what_the_rule_accepts(checker):
    """Selecting a checker can turn a fail into a pass, never a pass into a fail."""
    for actual, expected in CASES:
        if outputs_match(actual, expected, checker.rule):
            assert match_output(checker, actual, expected)


# ----------------------------------------------------------------------------- selection


@pytest.mark.parametrize(
    "statement, name, several",
    [
        (
            "Print it. It is right if its absolute or relative error is at most $10^{-6}$.",
            "float(abs=1e-06,rel=1e-06)",
            False,
        ),
        ("The absolute error must not exceed 1e-9.", "float(abs=1e-09,rel=0)", False),
        (
            "Output the value; relative error at most 10^{ - 4} is allowed.",
            "float(abs=0,rel=0.0001)",
            False,
        ),
        ("It is allowed to solve problems in any order.", "default", False),
        (
            "You can perform operations of any type in any order. Print the minimum.",
            "default",
            False,
        ),
        ("In the second line print k distinct integers in any order.", "any_order", False),
        ("If there are multiple answers, print any of them.", "default", True),
        ("Customers, many of them regulars, come in. Print the total.", "default", False),
        ("If there are several ways, find the minimum number.", "default", False),
        ("In the second line print any example of such necklace.", "default", True),
        ("Print the sum.", "default", False),
    ],
)
def test_statement_patterns(statement, name, several):
    c = statement_checker(statement)
    assert (c.name, c.several_answers) == (name, several), c.evidence


def test_a_tolerance_stated_loosely_is_not_guessed():
    """'relative error ... 10^{-4} is allowed' names no bound verb: conservative, no tolerance."""
    assert statement_checker("Relative error 10^{-4} is fine.").kind == "default"


def test_selection_order_data_then_statement_then_rule():
    stated = "Print the numbers in any order. If there are several answers, print any."
    task = _io_task(stated, [("", "1 2")])
    assert select_checker(task).kind == "any_order"
    data = _io_task(stated, [("", "1 2")], checker={"type": "default"})
    chosen = select_checker(data)
    assert (chosen.kind, chosen.origin, chosen.several_answers) == ("default", "data", True)
    other_rule = _io_task(stated, [("", "1 2")], output_rule="codecontests")
    assert select_checker(other_rule) == OutputChecker(rule="codecontests")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("float", "mapping"),
        ({"type": "exact"}, "checker type must be one of"),
        ({"type": "float"}, "needs abs_tol"),
        ({"type": "float", "abs_tol": 1.5}, r"\[0, 1\)"),
        ({"type": "float", "abs_tol": 1e-6, "eps": 1}, "unknown checker field"),
        ({"type": "program", "source": "print(1)"}, "defines"),
    ],
)
def test_malformed_data_checkers_are_refused(spec, message):
    with pytest.raises(ValueError, match=message):
        checker_from_data(spec, "apps")


def test_check_refuses_a_task_with_a_malformed_checker(sb):
    task = _io_task("Print 1.", [("", "1")], checker={"type": "nope"})
    with pytest.raises(ValueError, match="checker type"):
        check("print(1)", task, sandbox=sb, extract=False)


# ----------------------------------------------------------------------------- check(), sandboxed


FLOAT_STATEMENT = (
    "Print the value. Your answer is considered correct if its absolute or relative error does "
    "not exceed 10^{-6}."
)
FLOAT_TESTS = [("A", "0.333333333333333\n"), ("B", "0.0000001\n")]
SIX_DECIMALS = "print('0.333333' if open(0).read() == 'A' else '0.000000')\n"


def test_float_tolerance_in_check(sb):
    task = _io_task(FLOAT_STATEMENT, FLOAT_TESTS)
    report = check(SIX_DECIMALS, task, sandbox=sb, extract=False)
    assert (report.outcome, report.passed) == ("pass", 2), report.reason
    assert report.extra["checker"] == "float(abs=1e-06,rel=1e-06)"
    # |0.000000 - 0.0000001| = 1e-7: within the stated 1e-6; the apps rule alone (np.allclose's
    # 1e-8 + 1e-5 |b|) rejects it, and still does for a statement that states nothing
    silent = check(
        SIX_DECIMALS, _io_task("Print the value.", FLOAT_TESTS), sandbox=sb, extract=False
    )
    assert (silent.outcome, silent.passed) == ("fail", 1) and "checker" not in silent.extra
    off = "print('0.3334' if open(0).read() == 'A' else '0.000002')\n"
    assert check(off, task, sandbox=sb, extract=False).passed == 0


ORDER_TASK = _io_task(
    "In the first line print k, in the second line print the k indices in any order.",
    [("", "2\n1 3\n")],
)
PLAIN_TASK = _io_task(
    "In the first line print k, then the k indices in increasing order.", [("", "2\n1 3\n")]
)


def test_any_order_in_check(sb):
    assert check("print(2)\nprint(3, 1)\n", ORDER_TASK, sandbox=sb, extract=False).outcome == "pass"


@pytest.mark.parametrize(
    "task, program",
    [
        (PLAIN_TASK, "print(2)\nprint(3, 1)\n"),  # order-sensitive task: right tokens, wrong place
        (PLAIN_TASK, "print(1)\nprint(2, 3)\n"),
        (ORDER_TASK, "print(1)\nprint(2, 3)\n"),  # any order within a line, not across lines
        (ORDER_TASK, "print(1, 3)\nprint(2)\n"),
        (ORDER_TASK, "print(2)\nprint(3, 3)\n"),
    ],
)
def test_false_pass_guard(sb, task, program):
    assert check(program, task, sandbox=sb, extract=False).outcome == "fail"


# A problem with several answers: print two numbers whose sum is the input.
SUM_CHECKER = """
def check(input, output, answer):
    a, b = map(int, output.split())
    return a + b == int(input)
"""
SUM_TASK = _io_task(
    "Print two numbers with the given sum. If there are several answers, print any.",
    [("5\n", "2 3\n"), ("4\n", "2 2\n")],
    checker={"type": "program", "source": SUM_CHECKER},
)


@pytest.mark.parametrize(
    "program, outcome, passed",
    [
        ("n = int(input())\nprint(n, 0)\n", "pass", 2),  # a valid answer the data does not hold
        ("n = int(input())\nprint(2, n - 2)\n", "pass", 2),  # the data's answers
        ("n = int(input())\nprint(n, 1)\n", "fail", 0),
        ("print('x y')\n", "fail", 0),  # the checker cannot read it: a wrong answer
        ("print(1, 2, 3)\n", "fail", 0),
    ],
)
def test_checker_program(sb, program, outcome, passed):
    report = check(program, SUM_TASK, sandbox=sb, extract=False)
    assert (report.outcome, report.passed) == (outcome, passed), report.reason
    assert report.extra["checker"] == "program" and report.extra["several_answers"]


def test_program_output_cannot_forge_the_checkers_verdict(sb):
    """The checker's verdict line carries a nonce drawn per run; a program printing verdict-like
    lines (or a checker echoing them) cannot produce it."""
    echo = "def check(input, output, answer):\n    print(output)\n    return False\n"
    task = _io_task("x", [("5\n", "2 3\n")], checker={"type": "program", "source": echo})
    forged = "print('0' * 32 + ' OK')\n"
    assert check(forged, task, sandbox=sb, extract=False).outcome == "fail"


def test_a_checker_that_does_not_finish_is_an_infra_error(sb):
    slow = "def check(input, output, answer):\n    while True:\n        pass\n"
    task = _io_task("x", [("5\n", "2 3\n")], checker={"type": "program", "source": slow})
    report = check("print(1, 4)\n", task, sandbox=sb, extract=False, timeout=0.5)
    assert report.outcome == "infra_error" and "checker did not finish" in report.reason
    # the data's own answer never reaches the checker
    assert check("print(2, 3)\n", task, sandbox=sb, extract=False, timeout=0.5).outcome == "pass"


def test_judge_output_needs_a_sandbox_only_for_programs():
    c = checker_from_data({"type": "program", "source": SUM_CHECKER}, "apps")
    assert judge_output(c, "5", "2 3", "2 3")[0] == "pass"  # the rule accepts: nothing to run
    with pytest.raises(ValueError, match="needs a sandbox"):
        judge_output(c, "5", "5 0", "2 3")


# ----------------------------------------------------------------------------- real APPS rows


def test_apps_rows_select_as_documented():
    """The counts docs/code_envs.md gives for ../shared/data/apps."""
    tasks.clear_cache()
    found: dict[str, list[int]] = {}
    names: set[str] = set()
    for split in ("train", "test"):
        for rec in _apps_rows(split).values():
            task = apps_to_task(rec, split=split)
            if not task.io_tests:
                continue
            c = select_checker(task)
            found.setdefault(c.kind, []).append(rec["problem_id"])
            names.add(c.name)
            if c.several_answers:
                found.setdefault("several", []).append(rec["problem_id"])
    assert sorted(found["float"]) == [2002, 2024, 2040]
    assert sorted(found["any_order"]) == [6, 44]
    assert "any_order_lines" not in names  # both free the numbers of one line, not the lines
    # 2398 says "in any order" of the numbers of one line too; its checker program wins
    stated = statement_checker(apps_to_task(_apps_rows("train")[2398], split="train").prompt)
    assert (stated.name, stated.scope) == ("any_order", "within_line")
    assert sorted(found["program"]) == [2023, 2398, 2400]
    assert len(found["several"]) == 22 and 3040 not in found["several"]
    assert set(APPS_CHECKERS) == {("train", 2023), ("train", 2398), ("train", 2400)}


def test_a_record_checker_field_reaches_the_task():
    rec = dict(_apps_rows("train")[2000])
    rec["checker"] = json.dumps({"type": "float", "abs_tol": 1e-9})
    task = apps_to_task(rec, split="train")
    assert task.metadata["checker"] == {"type": "float", "abs_tol": 1e-9}
    assert select_checker(task).name == "float(abs=1e-09,rel=0)"
    rec["checker"] = "[1]"
    with pytest.raises(tasks.MalformedRecordError, match="checker must be an object"):
        apps_to_task(rec, split="train")
    # the same problem id in the test split is another problem: no checker attached
    other = dict(_apps_rows("train")[2023])
    assert "checker" not in apps_to_task(other, split="test").metadata


@pytest.mark.parametrize("pid", [2023, 2398, 2400])
def test_reference_solutions_rejected_before_now_pass(sb, pid):
    """Data not written here: upstream's first passing reference solution of each row fails
    under the single expected output and passes with the row's checker program."""
    rec = _apps_rows("train")[pid]
    task = apps_to_task(rec, split="train")
    # before: the task's own rule only (the data may say so: {"type": "default"})
    plain = replace(task, metadata={**task.metadata, "checker": {"type": "default"}})
    for solution in json.loads(rec["solutions"])[:3]:
        after = check(solution, task, sandbox=sb, extract=False, reward="all", timeout=10)
        if after.outcome == "runtime_error":
            continue  # a Python 2 or broken upstream solution fails either way
        assert after.outcome == "pass", after.reason
        before = check(solution, plain, sandbox=sb, extract=False, reward="all", timeout=10)
        assert before.outcome == "fail", before.reason
        return
    pytest.fail(f"apps/{pid}: none of the first 3 solutions ran")


def test_checker_programs_reject_wrong_constructions(sb):
    task = apps_to_task(_apps_rows("train")[2023], split="train")
    # n = 4: 1 2 3 4 has LIS + LDS = 5, the optimum is 4; 1 1 2 3 is no permutation
    small = replace(task, io_tests=(IOTest("4\n", "3 4 1 2\n"),))
    assert check("print('2 1 4 3')", small, sandbox=sb, extract=False).outcome == "pass"
    assert check("print('1 2 3 4')", small, sandbox=sb, extract=False).outcome == "fail"
    assert check("print('1 1 2 3')", small, sandbox=sb, extract=False).outcome == "fail"


# ----------------------------------------------------------------------------- any order: review


@pytest.mark.parametrize(
    "statement",
    [
        "Print the k indices in increasing order, not in any order.",
        "Print the k indices; you cannot output them in any order: they must be sorted.",
        "The queries are given in any order; print the answers in the order of the input.",
        "Print the answers to the queries given in any order.",
        "You can't print the numbers in any order.",
        "Print them in any order.",  # which order: the tokens of a line or the lines? not said
        "Print the first n-1 edges in any order, then the sorted rest.",
        # lines freed over several answers would let a line move from one test case to another
        "The first line contains t, the number of test cases. For each test case print n-1 "
        "lines p_i c_i. You may print the edges in any order.",
    ],
)
def test_statements_that_fix_or_do_not_free_the_output_order_select_nothing(statement):
    c = statement_checker(statement)
    assert c.kind == "default", c.evidence


@pytest.mark.parametrize(
    "statement, name",
    [
        ("In the second line print k integers, not necessarily distinct, in any order.", "any_order"),
        ("The indices can be printed in any order.", "any_order"),
        (
            "Print n-1 lines p_i c_i: the parent and the child. You may print the edges in any "
            "order.",
            "any_order_lines",
        ),
        ("Print the pairs in any order, one per line.", "any_order_lines"),
        ("Print k lines in any order.", "any_order_lines"),
    ],
)
def test_what_an_any_order_statement_frees(statement, name):
    c = statement_checker(statement)
    assert c.name == name, c.evidence


@pytest.mark.parametrize(
    "actual, want",
    [
        ("2 3\n1 2\n", True),  # the edges in another order
        ("1 2\n2 3\n", True),
        ("2 1\n3 2\n", False),  # "child parent": each line's tokens keep their order
        ("1 2\n3 2\n", False),
        ("1 2 2\n3\n", False),  # a token moved to another line
        ("1 2\n1 2\n", False),  # a multiset: a repeated line must be repeated
        ("1 2\n2 3\n2 3\n", False),
    ],
)
def test_any_order_of_lines(actual, want):
    assert any_order_match(actual, "1 2\n2 3\n", scope="lines") is want


def test_any_order_of_lines_with_a_tolerance():
    assert any_order_match("0.5000001 1\n0.25 2\n", "0.25 2\n0.5 1\n", 1e-6, 1e-6, "lines")
    assert not any_order_match("1 0.5\n0.25 2\n", "0.25 2\n0.5 1\n", 1e-6, 1e-6, "lines")
    with pytest.raises(ValueError, match="scope must be one of"):
        any_order_match("1", "1", scope="tokens")


def test_a_data_checker_may_free_the_order_of_lines():
    c = checker_from_data({"type": "any_order", "scope": "lines"}, "apps")
    assert (c.name, c.scope) == ("any_order_lines", "lines")
    assert match_output(c, "2 3\n1 2", "1 2\n2 3") and not match_output(c, "2 1\n3 2", "1 2\n2 3")
    tol = checker_from_data({"type": "any_order", "scope": "lines", "abs_tol": 1e-6}, "apps")
    assert tol.name == "any_order_lines(abs=1e-06,rel=0)"
    assert checker_from_data({"type": "any_order"}, "apps").scope == "within_line"
    with pytest.raises(ValueError, match="scope must be one of"):
        checker_from_data({"type": "any_order", "scope": "rows"}, "apps")


EDGES_TASK = _io_task(
    "Print n-1 lines p_i c_i: the parent and the child of each edge. You may print the edges in "
    "any order.",
    [("", "1 2\n1 3\n3 4\n")],
)


@pytest.mark.parametrize(
    "program, outcome",
    [
        ("print('3 4')\nprint('1 2')\nprint('1 3')\n", "pass"),  # a valid order of the edges
        ("print('2 1')\nprint('3 1')\nprint('4 3')\n", "fail"),  # child before parent
        ("print('1 3')\nprint('1 2')\nprint('4 3')\n", "fail"),  # one edge reversed
    ],
)
def test_any_order_of_lines_in_check(sb, program, outcome):
    report = check(program, EDGES_TASK, sandbox=sb, extract=False)
    assert report.outcome == outcome, report.reason
    assert report.extra["checker"] == "any_order_lines"


@pytest.mark.parametrize(
    "source, message",
    [
        ("def check(input, output, answer)\n    return True\n", "does not compile"),
        ("def check(input, output, answer):\nreturn True\n", "does not compile"),
        ("def check(input, output, answer):\n    return x\n    global x\n", "does not compile"),
        ("def check(input, output, answer):\n    return True\0\n", "does not compile"),
        ("# def check(input, output, answer)\nprint(1)\n", "defines no top-level function check"),
        ("   ", "needs 'source'"),
    ],
)
def test_a_program_checker_that_cannot_run_is_refused(source, message):
    """A checker that does not compile would reject every answer (reward 0, no infrastructure
    signal): refused when the checker is read, naming the problem."""
    with pytest.raises(ValueError, match=message):
        checker_from_data({"type": "program", "source": source}, "apps", where="task 'x'")


def test_a_task_with_a_broken_checker_program_is_an_infra_verdict():
    from marft_envs.code import CodeVerifier

    broken = {"type": "program", "source": "def check(input, output, answer)\n    return 1\n"}
    task = _io_task("Print 1.", [("", "1")], checker=broken)
    with pytest.raises(ValueError, match="does not compile"):
        select_checker(task)
    v = CodeVerifier(sandbox="subprocess").grade("```python\nprint(1)\n```", task)
    assert v.infra_error and "does not compile" in str(v.reason)
