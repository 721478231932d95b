"""Competitive-programming datasets: LiveCodeBench, APPS, CodeContests (upstream layouts).

Each loader reads a local folder in the upstream format, else the Hugging Face Hub (the
``datasets`` package, imported lazily). Hidden tests are every test of the record (public
first); public tests, the ones feedback may show, are the record's public ones only.

* LiveCodeBench code generation (``livecodebench/code_generation_lite``): local files
  ``<data>/livecodebench/test.jsonl``, ``test2.jsonl`` ... ``test6.jsonl`` as in the Hub repo.
  ``release="release_vN"`` reads files 1..N (the Hub's ``version_tag``), ``"vN"`` file N
  only; ``start_date`` / ``end_date`` (``YYYY-MM-DD``, inclusive) keep problems whose
  ``contest_date`` falls in the window, to avoid contamination. ``private_test_cases`` is
  JSON, or base64 of zlib of a pickled JSON string (read by an unpickler that only accepts
  plain data). ``functional`` tests are call-based; ``stdin`` tests use LiveCodeBench's
  output rule. LiveCodeBench's star-import preamble (``import_string``) goes before the program.
* APPS (``codeparrot/apps``): ``<data>/apps/{train,test}.jsonl``; ``difficulty`` keeps
  ``introductory``, ``interview`` or ``competition`` problems. Records with ``fn_name`` in
  ``input_output`` are call-based (expected value, or its first element, as upstream).
  A stdin/stdout record's ``checker`` field (this project's extension), else the checker
  program :mod:`tasks.apps_checkers` has for it, becomes ``metadata["checker"]`` (the special
  judge, marft_envs.code.judge).
* CodeContests (``deepmind/code_contests``): ``<data>/code_contests/{split}.jsonl`` or the Hub
  parquet shards ``<data>/code_contests/[data/]{split}-*.parquet`` (splits train, valid, test).
  Hidden tests: public + private + generated tests (``max_tests`` caps the count); the
  record's ``time_limit`` becomes the per-test limit.

Call-based records become `Task` s whose tests are ``assert f(args) == expected`` lines judged
by the trusted harness (marft_envs.code.harness); a setup snippet run in the sandbox after the
program binds ``f`` to ``Solution().f`` (one instance per run, as LiveCodeBench does) or to the
program's top-level function, and turns a returned tuple into a list (LiveCodeBench and APPS
do not penalise tuples). See docs/code_envs.md.
"""

from __future__ import annotations

import base64
import io
import json
import math
import pickle
import zlib
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

from tasks.apps_checkers import apps_checker
from tasks.code_loaders import read_jsonl, require_field
from tasks.dataset import Loaded, register_dataset
from tasks.errors import DataNotFoundError, MalformedRecordError
from tasks.hub import HubSource, HubUnavailable, load_hub_records
from tasks.math_loaders import read_parquet
from tasks.record import IOTest, Task

__all__ = [
    "APPS_DIFFICULTIES",
    "LCB_IMPORTS",
    "LCB_RELEASES",
    "apps_to_task",
    "call_based_task",
    "codecontests_to_task",
    "decode_lcb_tests",
    "lcb_to_task",
    "load_apps",
    "load_codecontests",
    "load_livecodebench",
    "python3_solutions",
    "python_literal",
]

Record = Mapping[str, Any]
LCB_HUB_REPO = "livecodebench/code_generation_lite"
APPS_HUB_REPO = "codeparrot/apps"
CC_HUB_REPO = "deepmind/code_contests"
#: LiveCodeBench releases: release_vN = the first N files of the Hub repo.
LCB_RELEASES = ("release_v1", "release_v2", "release_v3", "release_v4", "release_v5", "release_v6")
APPS_DIFFICULTIES = ("introductory", "interview", "competition")
#: LiveCodeBench prepends this to every program it grades (``import_string`` upstream).
_LCB_MODULES = (
    "string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
    "statistics", "itertools", "functools", "operator", "io", "sys", "json",
)  # fmt: skip
LCB_IMPORTS = (
    "".join(f"from {m} import *\n" for m in (*_LCB_MODULES, "builtins", "typing"))
    + "".join(f"import {m}\n" for m in _LCB_MODULES)
    + "sys.setrecursionlimit(50000)\n"
)
# CodeContests' Python languages (contest_problem.proto: PYTHON = 1 is Python 2, PYTHON3 = 3).
_CC_PYTHON3 = 3


# ----------------------------------------------------------------------------- call-based tests


def python_literal(value: Any) -> str:
    """Python source for a JSON value (non-finite floats as ``float('inf')``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ", ".join(f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items())
            + "}"
        )
    return repr(value)


def _call_setup(func: str, method: bool) -> str:
    target = "__marft_solution__." + func if method else "__marft_function__"
    bind = "__marft_solution__ = Solution()\n" if method else f"__marft_function__ = {func}\n"
    return (
        f"{bind}def {func}(*args):\n    result = {target}(*args)\n"
        "    return list(result) if isinstance(result, tuple) else result\n"
    )


def _call_assert(func: str, args: Sequence[Any], expected: Any, first_element_too: bool) -> str:
    call = f"{func}({', '.join(python_literal(a) for a in args)})"
    if first_element_too and isinstance(expected, list) and expected:
        return f"assert {call} in ({python_literal(expected)}, {python_literal(expected[0])})"
    return f"assert {call} == {python_literal(expected)}"


def call_based_task(
    task_id: str,
    prompt: str,
    func: str,
    public: Sequence[tuple[Sequence[Any], Any]],
    hidden: Sequence[tuple[Sequence[Any], Any]],
    *,
    method: bool,
    metadata: Mapping[str, Any],
    first_element_too: bool = False,
) -> Task:
    """A call-based task: each ``(args, expected)`` pair is one test ``func(*args) == expected``.

    ``method``: ``func`` is a method of the program's ``class Solution`` (one instance per
    run), else a top-level function. ``hidden`` holds every reward test (public ones
    included), ``public`` the ones feedback may show. ``first_element_too`` also accepts
    ``expected[0]`` (APPS). Returned tuples compare as lists.
    """
    if not func.isidentifier():
        raise ValueError(f"task {task_id}: the function name {func!r} is not a Python identifier")
    tests = tuple(_call_assert(func, a, e, first_element_too) for a, e in hidden)
    shown = tuple(_call_assert(func, a, e, first_element_too) for a, e in public)
    return Task(
        id=task_id,
        kind="code",
        prompt=prompt,
        entry_point=func,
        tests=tests,
        public_tests=shown,
        setup_code=_call_setup(func, method),
        metadata={**metadata, "call_based": True, "style": "method" if method else "function"},
    )


def _stdio_task(
    task_id: str,
    prompt: str,
    public: Sequence[IOTest],
    hidden: Sequence[IOTest],
    metadata: Mapping[str, Any],
) -> Task:
    """hidden = public first, then the rest, so that the first ``public_io_tests`` are public."""
    shown = set(public)
    rest = [t for t in hidden if t not in shown]
    return Task(
        id=task_id,
        kind="code",
        prompt=prompt,
        entry_point=None,
        io_tests=tuple(public) + tuple(rest),
        metadata={**metadata, "public_io_tests": len(public)},
    )


# ----------------------------------------------------------------------------- LiveCodeBench


class _DataOnly(pickle.Unpickler):
    """Unpickles plain data only: any class or function reference is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"refusing to load {module}.{name}: test data holds plain values only"
        )


def decode_lcb_tests(value: Any, where: str, record: str) -> list[dict[str, Any]]:
    """LiveCodeBench test cases: a JSON list, or base64(zlib(pickle(JSON string)))."""
    if isinstance(value, list):
        cases: Any = value
    elif isinstance(value, str):
        try:
            cases = json.loads(value)
        except json.JSONDecodeError:
            try:
                raw = zlib.decompress(base64.b64decode(value.encode("utf-8"), validate=False))
                text = _DataOnly(io.BytesIO(raw)).load()
                cases = json.loads(text) if isinstance(text, (str, bytes)) else text
            except (
                ValueError,
                zlib.error,
                pickle.UnpicklingError,
                EOFError,
                json.JSONDecodeError,
            ) as e:
                raise MalformedRecordError(
                    where,
                    record,
                    f"test cases are neither JSON nor "
                    f"base64/zlib/pickle JSON: {type(e).__name__}: {e}",
                ) from None
    else:
        raise MalformedRecordError(
            where, record, f"test cases must be a string or a list, got {type(value).__name__}"
        )
    if not isinstance(cases, list) or not all(
        isinstance(c, Mapping)
        and isinstance(c.get("input"), str)
        and isinstance(c.get("output"), str)
        for c in cases
    ):
        raise MalformedRecordError(
            where, record, "each test case must be an object with string 'input' and 'output'"
        )
    return [dict(c) for c in cases]


def _lcb_prompt(question: str, starter: str) -> str:
    head = (
        "You are given a programming problem. Write a correct Python program that meets the "
        f"specification and passes all tests.\n\nQuestion: {question.strip()}\n\n"
    )
    if starter.strip():
        return head + (
            "Complete the following starter code and give the whole solution in one "
            f"```python block.\n```python\n{starter.rstrip()}\n```\n"
        )
    return head + (
        "Read the input from standard input, solve the problem and write the answer to "
        "standard output (do not test on the sample inputs yourself). Give the program "
        "in one ```python block.\n"
    )


def _json_field(rec: Record, name: str, where: str, record: str) -> Any:
    value = rec.get(name)
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as e:
            raise MalformedRecordError(
                where, record, f"field {name!r} is not valid JSON: {e}"
            ) from None
    return value if value is not None else {}


def _date(value: Any, where: str, record: str) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).date()
        except ValueError:
            pass
    raise MalformedRecordError(where, record, f"contest_date must be an ISO date, got {value!r}")


def lcb_to_task(rec: Record, *, where: str = "LiveCodeBench") -> Task:
    """One LiveCodeBench code-generation record as a `Task` (call-based or stdin/stdout)."""
    qid = str(rec.get("question_id", "?")) if isinstance(rec, Mapping) else "?"
    record = f"question_id {qid}"
    question = require_field(rec, "question_content", (str,), where, record)
    require_field(rec, "question_id", (str, int), where, record)
    starter = str(rec.get("starter_code") or "")
    public = decode_lcb_tests(
        require_field(rec, "public_test_cases", (str, list), where, record), where, record
    )
    private = decode_lcb_tests(rec.get("private_test_cases") or "[]", where, record)
    meta = _json_field(rec, "metadata", where, record)
    contest = _date(rec.get("contest_date"), where, record)
    metadata = {
        "source": "livecodebench",
        "split": "test",
        "platform": rec.get("platform"),
        "difficulty": rec.get("difficulty"),
        "contest_date": contest.isoformat(),
        "question_title": rec.get("question_title"),
        "prelude": LCB_IMPORTS,
    }
    prompt = _lcb_prompt(question, starter)
    task_id = f"lcb/{qid}"
    if any(c.get("testtype") == "functional" for c in public + private):
        func = meta.get("func_name") if isinstance(meta, Mapping) else None
        if not isinstance(func, str):
            raise MalformedRecordError(where, record, "functional tests need metadata.func_name")

        def pairs(cases: list[dict[str, Any]]) -> list[tuple[list[Any], Any]]:
            try:
                return [
                    ([json.loads(line) for line in c["input"].split("\n")], json.loads(c["output"]))
                    for c in cases
                ]
            except json.JSONDecodeError as e:
                raise MalformedRecordError(
                    where, record, f"a functional test is not JSON lines: {e}"
                ) from None

        pub = pairs(public)
        return call_based_task(
            task_id,
            prompt,
            func,
            pub,
            pub + pairs(private),
            method="class Solution" in starter,
            metadata=metadata,
        )
    pub_io = [IOTest(c["input"], c["output"]) for c in public]
    hidden = pub_io + [IOTest(c["input"], c["output"]) for c in private]
    return _stdio_task(
        task_id, prompt, pub_io, hidden, {**metadata, "output_rule": "livecodebench"}
    )


def _lcb_files(release: str) -> list[str]:
    name = release.removeprefix("release_")
    if not (
        name.startswith("v") and name[1:].isdigit() and 1 <= int(name[1:]) <= len(LCB_RELEASES)
    ):
        raise ValueError(
            f"unknown LiveCodeBench release {release!r}; valid: {LCB_RELEASES} "
            f"or v1..v{len(LCB_RELEASES)} (one file)"
        )
    n = int(name[1:])

    def file(k: int) -> str:
        return "test.jsonl" if k == 1 else f"test{k}.jsonl"

    return [file(k) for k in range(1, n + 1)] if release.startswith("release_") else [file(n)]


def _parse_day(value: str | None, name: str) -> date | None:
    if value is None:
        return None
    try:
        return datetime.strptime(str(value), "%Y-%m-%d").date()
    except ValueError:
        raise ValueError(f"{name} must be a date YYYY-MM-DD, got {value!r}") from None


def load_livecodebench(
    split: str,
    data_dir: Path | None,
    *,
    release: str = "release_v6",
    start_date: str | None = None,
    end_date: str | None = None,
    hub: bool = True,
) -> Loaded:
    """LiveCodeBench code generation (split ``test``) for ``release``, within a date window."""
    files = _lcb_files(release)
    start, end = _parse_day(start_date, "start_date"), _parse_day(end_date, "end_date")
    folder = data_dir / "livecodebench" if data_dir is not None else None
    if folder is not None and all((folder / f).is_file() for f in files):
        pairs = [(r, str(folder / f)) for f in files for r in read_jsonl(folder / f)]
        uri = f"{folder}:{release}"
    else:
        reason = _hub_reason(hub)
        if reason is None:
            source = HubSource(
                LCB_HUB_REPO,
                "test",
                options=(("version_tag", release), ("trust_remote_code", True)),
            )
            try:
                pairs = [(r, source.describe()) for r in load_hub_records(source)]
                uri = f"{source.uri}:{release}"
            except HubUnavailable as e:
                reason = str(e)
        if reason is not None:
            raise DataNotFoundError(
                "livecodebench",
                split,
                expected=[f"livecodebench/{f}" for f in files],
                data_dir=data_dir,
                hub_id=f"{LCB_HUB_REPO} (version_tag {release})",
                hub_reason=reason,
            )
    out = []
    for rec, where in pairs:
        task = lcb_to_task(rec, where=where)
        day = date.fromisoformat(task.metadata["contest_date"])
        if (start is None or start <= day) and (end is None or day <= end):
            out.append(task)
    window = f"[{start or ''}..{end or ''}]" if start or end else ""
    return Loaded(out, uri + window)


# ----------------------------------------------------------------------------- APPS


def apps_to_task(rec: Record, *, split: str = "test", where: str = "APPS") -> Task:
    """One APPS record (problem_id, question, input_output, difficulty, starter_code) as a `Task`.

    APPS has no public/hidden division: the first test is public (its statement usually shows
    it as the example), every test is hidden."""
    pid = rec.get("problem_id", "?") if isinstance(rec, Mapping) else "?"
    record = f"problem_id {pid}"
    question = require_field(rec, "question", (str,), where, record)
    require_field(rec, "problem_id", (int, str), where, record)
    io_spec = _json_field(rec, "input_output", where, record)
    if (
        not isinstance(io_spec, Mapping)
        or not isinstance(io_spec.get("inputs"), list)
        or not isinstance(io_spec.get("outputs"), list)
        or len(io_spec["inputs"]) != len(io_spec["outputs"])
    ):
        raise MalformedRecordError(
            where, record, "input_output must hold 'inputs' and 'outputs' lists of one length"
        )
    if not io_spec["inputs"]:
        raise MalformedRecordError(where, record, "the record has no tests")
    starter = str(rec.get("starter_code") or "")
    metadata = {
        "source": "apps",
        "split": split,
        "difficulty": rec.get("difficulty"),
        "url": rec.get("url"),
    }
    prompt = question.strip() + (
        f"\n\nStarter code:\n```python\n{starter.rstrip()}\n```\n"
        if starter.strip()
        else "\n\nRead from standard input and write to standard output.\n"
    )
    task_id = f"apps/{pid}"
    func = io_spec.get("fn_name")
    if func:
        if not isinstance(func, str):
            raise MalformedRecordError(where, record, f"fn_name must be a string, got {func!r}")
        pairs = []
        # Unchecked upstream lists: an unmatched trailing entry is dropped, as it always was.
        for args, expected in zip(io_spec["inputs"], io_spec["outputs"], strict=False):
            if not isinstance(args, list):
                raise MalformedRecordError(
                    where, record, "call-based inputs must be lists of arguments"
                )
            pairs.append((args, expected))
        return call_based_task(
            task_id,
            prompt,
            func,
            pairs[:1],
            pairs,
            method="class Solution" in starter,
            metadata=metadata,
            first_element_too=True,
        )
    tests = []
    # Unchecked upstream lists: an unmatched trailing entry is dropped, as it always was.
    for stdin, stdout in zip(io_spec["inputs"], io_spec["outputs"], strict=False):
        stdin = "\n".join(stdin) + "\n" if isinstance(stdin, list) else stdin
        stdout = "\n".join(stdout) + "\n" if isinstance(stdout, list) else stdout
        if not isinstance(stdin, str) or not isinstance(stdout, str):
            raise MalformedRecordError(
                where, record, "stdin/stdout tests need string inputs and outputs"
            )
        tests.append(IOTest(stdin, stdout))
    stdio_meta: dict[str, Any] = {**metadata, "output_rule": "apps"}
    checker = _apps_checker(rec, split, where, record)
    if checker is not None:
        stdio_meta["checker"] = checker
    return _stdio_task(task_id, prompt, tests[:1], tests, stdio_meta)


def _apps_checker(rec: Record, split: str, where: str, record: str) -> dict[str, Any] | None:
    """The record's ``checker`` field (a JSON object or its text; this project's extension:
    codeparrot/apps has no such column), else the checker :mod:`tasks.apps_checkers` has for
    the problem, else None. The grader (marft_envs.code.judge) validates its contents."""
    if rec.get("checker") is not None:
        spec = _json_field(rec, "checker", where, record)
        if not isinstance(spec, Mapping) or not isinstance(spec.get("type"), str):
            raise MalformedRecordError(
                where, record, "checker must be an object with a string 'type'"
            )
        return dict(spec)
    return apps_checker(split, rec.get("problem_id"))


def load_apps(
    split: str, data_dir: Path | None, *, difficulty: str | None = None, hub: bool = True
) -> Loaded:
    """APPS ``split`` (train, test) from ``<data>/apps/{split}.jsonl`` or the Hub."""
    if difficulty is not None and difficulty not in APPS_DIFFICULTIES:
        raise ValueError(
            f"APPS difficulty must be one of {APPS_DIFFICULTIES} or None, got {difficulty!r}"
        )
    recs, where, uri = _local_or_hub(
        "apps", split, data_dir, [f"apps/{split}.jsonl"], HubSource(APPS_HUB_REPO, split), hub
    )
    tasks = [
        apps_to_task(r, split=split, where=where)
        for r in recs
        if difficulty is None or (isinstance(r, Mapping) and r.get("difficulty") == difficulty)
    ]
    return Loaded(tasks, uri + (f"[{difficulty}]" if difficulty else ""))


# ----------------------------------------------------------------------------- CodeContests


def _cc_tests(rec: Record, name: str, where: str, record: str) -> list[IOTest]:
    block = rec.get(name) or {}
    if not isinstance(block, Mapping):
        raise MalformedRecordError(
            where, record, f"{name} must be an object with 'input' and 'output' lists"
        )
    ins, outs = block.get("input") or [], block.get("output") or []
    if (
        not isinstance(ins, list)
        or not isinstance(outs, list)
        or len(ins) != len(outs)
        or not all(isinstance(x, str) for x in ins + outs)
    ):
        raise MalformedRecordError(
            where, record, f"{name}: 'input' and 'output' must be string lists of one length"
        )
    return [IOTest(i, o) for i, o in zip(ins, outs, strict=True)]


def _seconds(value: Any) -> float | None:
    """CodeContests' time_limit (a protobuf Duration {seconds, nanos}) in seconds."""
    if isinstance(value, Mapping):
        total = float(value.get("seconds") or 0) + float(value.get("nanos") or 0) / 1e9
        return total if total > 0 else None
    return None


def codecontests_to_task(
    rec: Record, *, split: str = "test", where: str = "CodeContests", max_tests: int | None = None
) -> Task:
    """One CodeContests record as a stdin/stdout `Task` (public, private, generated tests)."""
    name = str(rec.get("name", "?")) if isinstance(rec, Mapping) else "?"
    record = f"name {name!r}"
    description = require_field(rec, "description", (str,), where, record)
    require_field(rec, "name", (str,), where, record)
    public = _cc_tests(rec, "public_tests", where, record)
    hidden = (
        public
        + _cc_tests(rec, "private_tests", where, record)
        + _cc_tests(rec, "generated_tests", where, record)
    )
    if max_tests is not None:
        hidden = hidden[:max_tests]
        public = public[: len(hidden)]
    if not hidden:
        raise MalformedRecordError(where, record, "the record has no tests")
    metadata: dict[str, Any] = {
        "source": "codecontests",
        "split": split,
        "output_rule": "codecontests",
        "difficulty": rec.get("difficulty"),
        "cf_rating": rec.get("cf_rating"),
        "memory_limit_bytes": rec.get("memory_limit_bytes"),
    }
    limit = _seconds(rec.get("time_limit"))
    if limit is not None:
        metadata["time_limit"] = limit
    prompt = description.strip() + "\n\nRead from standard input and write to standard output.\n"
    return _stdio_task(
        f"codecontests/{name.split('.')[0].strip() or name}", prompt, public, hidden, metadata
    )


def python3_solutions(rec: Record) -> list[str]:
    """The record's correct Python 3 solutions (for tests and benchmarks; never in a `Task`)."""
    sols = rec.get("solutions") or {}
    langs, codes = sols.get("language") or [], sols.get("solution") or []
    # Unchecked upstream lists: an unmatched trailing entry is dropped, as it always was.
    return [c for lang, c in zip(langs, codes, strict=False) if lang == _CC_PYTHON3]


def load_codecontests(
    split: str, data_dir: Path | None, *, max_tests: int | None = None, hub: bool = True
) -> Loaded:
    """CodeContests ``split`` (train, valid, test) from ``<data>/code_contests/`` or the Hub."""
    if max_tests is not None and (not isinstance(max_tests, int) or max_tests < 1):
        raise ValueError(f"max_tests must be None or an integer >= 1, got {max_tests!r}")
    folder = data_dir / "code_contests" if data_dir is not None else None
    shards: list[Path] = []
    if folder is not None and folder.is_dir():  # the Hub repo keeps its shards under data/
        shards = sorted(folder.glob(f"{split}-*.parquet")) or sorted(
            folder.glob(f"data/{split}-*.parquet")
        )
    if shards:
        recs: Iterable[Any] = [r for p in shards for r in read_parquet(p)]
        where, uri = str(folder), f"{folder}:{split}"
    else:
        recs, where, uri = _local_or_hub(
            "codecontests",
            split,
            data_dir,
            [f"code_contests/{split}.jsonl"],
            HubSource(CC_HUB_REPO, split),
            hub,
        )
    tasks = [codecontests_to_task(r, split=split, where=where, max_tests=max_tests) for r in recs]
    return Loaded(tasks, uri + (f"[max_tests={max_tests}]" if max_tests else ""))


# ----------------------------------------------------------------------------- shared


def _hub_reason(hub: bool) -> str | None:
    return None if hub else "disabled (hub=False)"


def _local_or_hub(
    dataset: str,
    split: str,
    data_dir: Path | None,
    files: Sequence[str],
    source: HubSource,
    hub: bool,
) -> tuple[Iterable[Any], str, str]:
    """(records, where, uri) of the first local file, else of the Hub source."""
    for rel in files:
        path = data_dir / rel if data_dir is not None else None
        if path is not None and path.is_file():
            return read_jsonl(path), str(path), str(path)
    reason = _hub_reason(hub)
    if reason is None:
        try:
            return load_hub_records(source), source.describe(), source.uri
        except HubUnavailable as e:
            reason = str(e)
    raise DataNotFoundError(
        dataset,
        split,
        expected=list(files),
        data_dir=data_dir,
        hub_id=source.describe(),
        hub_reason=reason,
    )


register_dataset(
    "livecodebench",
    load_livecodebench,
    splits=("test",),
    kind="code",
    description="LiveCodeBench code generation (release_v1..v6, date window): LeetCode call-based "
    "and AtCoder/Codeforces stdin/stdout problems",
)
register_dataset(
    "apps",
    load_apps,
    splits=("test", "train"),
    kind="code",
    description="APPS (Hendrycks et al. 2021): 10,000 problems, stdin/stdout and call-based; by "
    "difficulty",
)
register_dataset(
    "codecontests",
    load_codecontests,
    splits=("test", "valid", "train"),
    kind="code",
    description=(
        "CodeContests (Li et al. 2022): Codeforces-style stdin/stdout, "
        "many hidden tests, time limits"
    ),
)
