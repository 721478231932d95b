"""The task's tests compiled for replay on the host (pure: no sandbox, no program).

Each top-level statement that contains an ``assert`` becomes one test, wrapped in
``with __marft_unit__(k):`` so its outcome is recorded and the next test still runs; asserts
become soft (``if not __marft_ok__(t): raise AssertionError``) so that a replay holding
placeholders never stops at a verdict it will discard anyway.
"""

from __future__ import annotations

import ast
import builtins
import sys
import warnings
from dataclasses import dataclass
from functools import lru_cache
from types import CodeType
from typing import Any

from tasks import Task

__all__ = ["TestProgram", "Unit", "compiled_tests", "counted_tests", "trusted_namespace"]


def _quiet() -> None:
    """Ignore the warnings that upstream tests raise when compiled (invalid escapes)."""
    warnings.simplefilter("ignore", SyntaxWarning)
    warnings.simplefilter("ignore", DeprecationWarning)


@dataclass
class Unit:
    """One test: its index, its source, and whether it counts (uses a name of the program)."""

    index: int
    source: str
    counted: bool


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _wrap_units(
    body: list[ast.stmt], source: str, units: list[Unit], trusted: set[str]
) -> list[ast.stmt]:
    """Wrap every top-level statement that contains an assert in ``with __unit__(k):``."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(
            stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ) or not _has_assert(stmt):
            out.append(stmt)
            continue
        k = len(units)
        text = ast.get_source_segment(source, stmt) or ast.unparse(stmt)
        units.append(Unit(k, text, counted=bool(_loaded_names(stmt) - trusted)))
        call = ast.Call(ast.Name("__marft_unit__", ast.Load()), [ast.Constant(k)], [])
        out.append(ast.With([ast.withitem(call)], [stmt]))
    return out


class _SoftAsserts(ast.NodeTransformer):
    """``assert t, m`` -> ``if not __marft_ok__(t): raise AssertionError(m)``.

    While a replay holds placeholders its verdicts are discarded anyway, so a failing assert
    must not stop it: the rest of the tests still runs and reveals the calls they need.
    """

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        test = ast.Call(ast.Name("__marft_ok__", ast.Load()), [node.test], [])
        exc = ast.Call(ast.Name("AssertionError", ast.Load()), [node.msg] if node.msg else [], [])
        return ast.copy_location(
            ast.If(ast.UnaryOp(ast.Not(), test), [ast.Raise(exc, None)], []), node
        )


@dataclass
class TestProgram:
    """The tests of one task, compiled for host replay."""

    modules: list[CodeType]  # in order
    units: list[Unit]
    # (check function name, candidate name) to call after the modules
    check_names: list[tuple[str, str]]
    names: set[str]


def _compile_tests(
    tests: tuple[str, ...], trusted: set[str], entry_point: str | None
) -> TestProgram:
    units: list[Unit] = []
    modules, checks, names = [], [], set()
    for i, src in enumerate(tests):
        with warnings.catch_warnings():  # upstream tests have invalid escapes ('\d' in strings)
            _quiet()
            tree = ast.parse(src, filename=f"<test {i}>")
        check_defs = [
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "check" and n.args.args
        ]
        for node in check_defs:
            # HumanEval style: each top-level statement of check's body is a test; the
            # parameter (``candidate``) is a remote name, not a trusted one.
            param = node.args.args[0].arg
            node.body = _wrap_units(node.body, src, units, trusted - {param})
            checks.append(("check", entry_point or param))
        if not check_defs and _has_assert(tree):
            # An assert-list test string is one test, however many statements it has.
            whole = ast.If(ast.Constant(True), tree.body, [])
            ast.copy_location(whole, tree.body[0])
            whole.end_lineno, whole.end_col_offset = (
                tree.body[-1].end_lineno,
                tree.body[-1].end_col_offset,
            )
            tree.body = _wrap_units([whole], src, units, trusted)
            units[-1].source = src.strip()
        names |= _loaded_names(tree)
        tree = _SoftAsserts().visit(tree)
        ast.fix_missing_locations(tree)
        with warnings.catch_warnings():
            _quiet()
            modules.append(compile(tree, f"<test {i}>", "exec"))
    return TestProgram(modules, units, checks, names)


@lru_cache(maxsize=256)
def _compile_prefix(code_prefix: str) -> CodeType:
    return compile(code_prefix, "<task prefix>", "exec")


def trusted_namespace(code_prefix: str, entry_point: str | None) -> dict[str, Any]:
    """Names the host resolves itself: the task's trusted prefix (minus the entry point)."""
    ns: dict[str, Any] = {"__name__": "marft_tests", "__builtins__": builtins}
    if code_prefix:
        exec(_compile_prefix(code_prefix), ns)
    if entry_point:
        ns.pop(entry_point, None)
    return ns


def _trusted_names(prefix_ns: dict[str, Any], entry_point: str | None) -> set[str]:
    return (set(prefix_ns) | set(dir(builtins)) | set(sys.stdlib_module_names)) - {entry_point}


@lru_cache(maxsize=1024)
def compiled_tests(
    tests: tuple[str, ...], code_prefix: str, entry_point: str | None
) -> TestProgram:
    """The tests compiled for replay, cached: environments grade the same tasks again and again.
    The result is shared and must not be mutated."""
    trusted = _trusted_names(trusted_namespace(code_prefix, entry_point), entry_point)
    return _compile_tests(tests, trusted, entry_point)


def counted_tests(tests: tuple[str, ...], task: Task) -> list[str]:
    """The source of every test `run_python_tests` would count for ``task`` (no sandbox needed)."""
    prefix = str(task.metadata.get("code_prefix") or "")
    return [
        u.source for u in compiled_tests(tuple(tests), prefix, task.entry_point).units if u.counted
    ]
