"""Committed snapshots of the graders' verdicts, one per grader, keyed by its ``GRADER_VERSION``.

A snapshot holds the verdict (``correct``, ``score``) of the current grader on a fixed set of
inputs: for math, every pair of tests/data/math_equivalence.jsonl and
tests/data/verifier_external/{pairs,completions}.jsonl; for code, a few small programs (right,
wrong, crashing, partial, missing) on tasks of the data-free ``code`` dataset. The tests in
tests/envs/test_grader_snapshot.py and tests/code/test_code_grader_snapshot.py fail when a
verdict differs while the version stays the same: bump the version and re-record with

    .venv/bin/python -m tests.grader_snapshots --write math      # or: code

Recording refuses to overwrite a snapshot of the *same* version whose verdicts differ, so the
only way past a changed verdict is a version bump.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
SNAPSHOTS = DATA / "grader_snapshots"
#: Generous, so a loaded machine does not turn a verdict into a time-out.
MATH_TIMEOUT = 20.0


def snapshot_path(grader: str) -> Path:
    return SNAPSHOTS / f"{grader}.json"


def load_snapshot(grader: str) -> dict[str, Any]:
    """``{"grader_version", "verdicts": {case id: {"correct", "score"}}}``."""
    return json.loads(snapshot_path(grader).read_text(encoding="utf-8"))


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def math_cases() -> list[tuple[str, str, str]]:
    """(case id, prediction, reference) for every pair the math snapshot covers."""
    cases = [
        (f"equivalence-{i}", r["prediction"], r["gold"])
        for i, r in enumerate(_jsonl(DATA / "math_equivalence.jsonl"))
    ]
    ext = DATA / "verifier_external"
    cases += [(r["id"], r["pred"], r["gold"]) for r in _jsonl(ext / "pairs.jsonl")]
    cases += [(r["id"], r["completion"], r["gold"]) for r in _jsonl(ext / "completions.jsonl")]
    return cases


def math_verdicts() -> tuple[str, dict[str, dict[str, Any]]]:
    """(GRADER_VERSION, verdict per case) of the math grader as it is now. A verdict that timed
    out is recorded as ``None``: a time-out depends on the machine's load, not on the rules."""
    from marft_envs.math import verify_many
    from marft_envs.math.version import GRADER_VERSION

    cases = math_cases()
    verdicts = verify_many([(p, r) for _, p, r in cases], timeout=MATH_TIMEOUT)
    out: dict[str, dict[str, Any] | None] = {}
    for (case_id, pred, ref), v in zip(cases, verdicts, strict=True):
        out[case_id] = (
            None
            if v.reason == "timeout" or v.infra_error
            else {"correct": v.correct, "score": v.score, "input": _input_digest(pred, ref)}
        )
    return GRADER_VERSION, out  # type: ignore[return-value]


_WRONG_FUNCTION = "def {name}(*args, **kwargs):\n    return None\n"
_CRASH = "raise SystemExit(3)\n"
_PARTIAL = {  # right on some tests only: the fraction reward shows
    "code/add": "def add(a, b):\n    return a + b if a < 10 else 0\n",
}


def code_cases() -> list[tuple[str, str, str]]:
    """(case id, task id, response) for the code snapshot."""
    from tasks.code_tasks import CODE_TASKS, REFERENCE_SOLUTIONS

    out: list[tuple[str, str, str]] = []
    for task in CODE_TASKS[:3] + CODE_TASKS[-2:]:
        ref = REFERENCE_SOLUTIONS[task.id]
        out.append((f"{task.id}/right", task.id, f"```python\n{ref}```"))
        if task.entry_point:
            wrong = _WRONG_FUNCTION.format(name=task.entry_point)
        else:
            wrong = "print('no')\n"
        out.append((f"{task.id}/wrong", task.id, f"```python\n{wrong}```"))
        out.append((f"{task.id}/crash", task.id, f"```python\n{_CRASH}```"))
        out.append((f"{task.id}/syntax", task.id, "```python\ndef (:\n```"))
        out.append((f"{task.id}/no-code", task.id, "I would write a loop."))
    for task_id, prog in _PARTIAL.items():
        out.append((f"{task_id}/partial", task_id, f"```python\n{prog}```"))
    return out


def code_verdicts(sandbox: Any) -> tuple[str, dict[str, dict[str, Any] | None]]:
    """(GRADER_VERSION, verdict per case) of the code grader, run in ``sandbox``, with both
    reward modes. An infrastructure error or a time-out is ``None`` (not the rules' doing)."""
    from marft_envs.code import CodeVerifier
    from marft_envs.code.version import GRADER_VERSION
    from tasks.code_tasks import CODE_TASKS

    by_id = {t.id: t for t in CODE_TASKS}
    out: dict[str, dict[str, Any] | None] = {}
    for reward in ("fraction", "all"):
        verifier = CodeVerifier(sandbox=sandbox, reward=reward)
        for case_id, task_id, response in code_cases():
            v = verifier.grade(response, by_id[task_id])
            timed_out = "timeout" in str(v.reason).lower()
            out[f"{case_id}/{reward}"] = (
                None
                if v.infra_error or timed_out
                else {"correct": v.correct, "score": v.score, "input": _input_digest(response)}
            )
    return GRADER_VERSION, out


def _input_digest(*texts: str) -> str:
    """A short digest of a case's inputs: an edited data row is a new case, not a new verdict."""
    return hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:16]


def compared_cases(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The cases both sides graded on the same inputs (``None``, a time-out, is not graded)."""
    return [
        c
        for c in sorted(set(recorded) & set(now))
        if recorded[c] is not None
        and now[c] is not None
        and recorded[c].get("input") == now[c].get("input")
    ]


def changed_verdicts(recorded: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(case id, recorded, now) for every compared case (:func:`compared_cases`) whose verdict
    (``correct``, ``score``) differs. Cases added to or dropped from the data, edited rows and
    time-outs are not verdict changes."""
    return [
        (c, recorded[c], now[c])
        for c in compared_cases(recorded, now)
        if (recorded[c]["correct"], recorded[c]["score"]) != (now[c]["correct"], now[c]["score"])
    ]


def snapshot_message(grader: str, recorded: dict, version: str, now: dict) -> str | None:
    """The test failure message when ``now`` breaks the committed snapshot, else None."""
    if recorded["grader_version"] != version:
        return (
            f"the {grader} grader is now {version!r} but its snapshot records "
            f"{recorded['grader_version']!r}: re-record it with "
            f"`.venv/bin/python -m tests.grader_snapshots --write {grader}` in the same commit"
        )
    diffs = changed_verdicts(recorded["verdicts"], now)
    if not diffs:
        return None
    shown = "; ".join(f"{c}: {a} -> {b}" for c, a, b in diffs[:5])
    return (
        f"{len(diffs)} {grader} verdict(s) changed while GRADER_VERSION stays {version!r} "
        f"({shown}): bump GRADER_VERSION in marft_envs/{grader}/version.py, then re-record "
        f"the snapshot with `.venv/bin/python -m tests.grader_snapshots --write {grader}`"
    )


def write_snapshot(grader: str, version: str, verdicts: dict[str, Any]) -> Path:
    """Record ``verdicts`` as ``grader``'s snapshot; refuses when a snapshot of the same version
    has other verdicts (that needs a version bump)."""
    path = snapshot_path(grader)
    if path.is_file():
        old = load_snapshot(grader)
        if old["grader_version"] == version:
            diffs = changed_verdicts(old["verdicts"], verdicts)
            if diffs:
                raise SystemExit(
                    f"{len(diffs)} {grader} verdict(s) changed while GRADER_VERSION stays "
                    f"{version!r} (e.g. {diffs[0]}): bump the version first"
                )
    path.parent.mkdir(parents=True, exist_ok=True)
    # one case a line, so a re-recorded snapshot's diff shows exactly the verdicts that moved
    lines = [
        f" {json.dumps(k, ensure_ascii=False)}: {json.dumps(verdicts[k], sort_keys=True)}"
        for k in sorted(verdicts)
    ]
    text = (
        f'{{"grader_version": {json.dumps(version)}, "verdicts": {{\n'
        + ",\n".join(lines)
        + "\n}}\n"
    )
    path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.grader_snapshots")
    parser.add_argument("--write", choices=("math", "code"), required=True)
    args = parser.parse_args(argv)
    if args.write == "math":
        version, verdicts = math_verdicts()
    else:
        from marft_envs.code.sandbox import get_sandbox
        from marft_envs.code.sandbox.select import probe

        name = next((b for b in ("docker", "bwrap") if probe(b) is None), "subprocess")
        version, verdicts = code_verdicts(get_sandbox(name))
    skipped = sum(v is None for v in verdicts.values())
    path = write_snapshot(args.write, version, verdicts)
    print(f"{path}: {version}, {len(verdicts)} cases ({skipped} timed out, not recorded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
