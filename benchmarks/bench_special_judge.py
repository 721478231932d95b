"""Special-judge benchmark: APPS reference solutions before and after the special judge.

    python benchmarks/bench_special_judge.py                     # bwrap (else docker, subprocess)
    python benchmarks/bench_special_judge.py --backend bwrap --max-solutions 5 --workers 2

Data: the APPS rows in ``../shared/data/apps`` (train: 120 rows with ``solutions``; test: 10
rows without). None of it was written here; the checker programs of ``tasks/apps_checkers.py``
were.

(a) Selection: which rows get which checker (marft_envs.code.judge.select_checker), by origin
    (the data's ``checker`` field or tasks/apps_checkers.py, else the statement's patterns),
    and the rows whose statement accepts several answers but have no checker program.
(b) Reference solutions: every upstream solution of every selected stdin/stdout train row
    (``--max-solutions`` caps the count per row) runs once per test in the sandbox; each output
    is judged twice, by the task's own rule (``apps``, the grader before the special judge:
    ``before``) and by the selected checker (``after``, the path ``check()`` takes). A solution
    passes when every test passes. Printed: solutions passing before / after, newly passing
    (fail -> pass) and newly failing (pass -> fail; the special judge only adds accepted outputs,
    so this must be 0), per checker and per row.
(c) Perturbations: on every stdin/stdout row, the expected output of each test altered four
    ways, judged by the task's rule alone (``rule only``, before) and by the selected checker
    (``checker``, after; program checkers run in the sandbox): tokens of each line reversed
    (only any-order rows, and program checkers where that is still a valid answer, may accept
    it), every decimal number moved by a relative 1e-7 or printed with 6 decimals (within a
    stated 1e-6: float rows accept both), every decimal moved by a relative 1e-3 (no row may
    accept it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marft_envs.code.check import build_program, precheck
from marft_envs.code.judge import OutputChecker, judge_output, select_checker
from marft_envs.code.sandbox import get_sandbox
from marft_envs.code.sandbox.select import probe
from tasks import Task, load
from tasks.dataset import SHARED_DATA_DIR

_NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?:[eE][+-]?\d+)?(?![\w.])")


def _rows(split: str) -> dict[int, dict[str, Any]]:
    path = SHARED_DATA_DIR / "apps" / f"{split}.jsonl"
    with path.open(encoding="utf-8") as f:
        return {int(r["problem_id"]): r for r in (json.loads(line) for line in f if line.strip())}


def selection(tasks: dict[str, list[Task]]) -> dict[str, list[tuple[str, OutputChecker]]]:
    """``checker name (origin) -> [(task id, checker)]`` over every stdin/stdout task."""
    out: dict[str, list[tuple[str, OutputChecker]]] = defaultdict(list)
    for split, ts in tasks.items():
        for t in ts:
            if not t.io_tests:
                continue
            c = select_checker(t)
            out[f"{c.name} ({c.origin})"].append((f"{split}:{t.id}", c))
            if c.several_answers and c.kind != "program":
                out["several answers, no checker program (default kept)"].append(
                    (f"{split}:{t.id}", c)
                )
    return out


def _solution_verdicts(
    sandbox: Any, task: Task, code: str, timeout: float
) -> tuple[bool, bool, float]:
    """(passes before, passes after, seconds) of one reference solution on every test."""
    program = build_program(code, task)
    if precheck(program, task) is not None:
        return False, False, 0.0
    before = OutputChecker(rule=str(task.metadata.get("output_rule") or "tokens"))
    after = select_checker(task)
    ok_before = ok_after = True
    spent = 0.0
    for t in task.io_tests:
        res = sandbox.run(program, stdin=t.stdin, timeout=timeout)
        spent += res.elapsed
        if res.status.value != "ok":
            return False, False, spent
        if ok_before:
            ok_before = judge_output(before, t.stdin, res.stdout, t.expected_stdout)[0] == "pass"
        if ok_after:
            outcome, _, judged = judge_output(
                after, t.stdin, res.stdout, t.expected_stdout, sandbox, timeout
            )
            spent += judged
            if outcome == "infra_error":
                raise RuntimeError(f"{task.id}: the checker did not run: {_}")
            ok_after = outcome == "pass"
        if not ok_before and not ok_after:
            break
    return ok_before, ok_after, spent


def reference_solutions(
    sandbox: Any, tasks: list[Task], rows: dict[int, dict[str, Any]], args: argparse.Namespace
) -> None:
    jobs = []
    for t in tasks:
        c = select_checker(t)
        if not t.io_tests or c.origin == "default":
            continue
        sols = json.loads(rows[int(t.id.split("/")[1])].get("solutions") or "[]")
        for i, code in enumerate(sols[: args.max_solutions]):
            jobs.append((t, c, i, code))
    print(
        f"\n(b) reference solutions: {len(jobs)} solutions of {len({j[0].id for j in jobs})} "
        f"rows, {args.timeout:g} s per test, {args.workers} workers"
    )
    start = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        results = list(
            pool.map(lambda j: _solution_verdicts(sandbox, j[0], j[3], args.timeout), jobs)
        )
    wall = time.monotonic() - start
    per_kind: dict[str, Counter[str]] = defaultdict(Counter)
    per_row: dict[str, Counter[str]] = defaultdict(Counter)
    for (t, c, _, _), (b, a, _) in zip(jobs, results, strict=True):
        for counter in (per_kind[c.name], per_row[f"{t.id} [{c.name}]"], per_kind["all"]):
            counter["solutions"] += 1
            counter["before"] += b
            counter["after"] += a
            counter["fail->pass"] += a and not b
            counter["pass->fail"] += b and not a
    cols = ("solutions", "before", "after", "fail->pass", "pass->fail")
    print(f"{'checker':34s}" + "".join(f"{c:>12s}" for c in cols))
    for name in sorted(per_kind, key=lambda n: (n == "all", n)):
        print(f"{name:34s}" + "".join(f"{per_kind[name][c]:12d}" for c in cols))
    print("per row:")
    for name in sorted(per_row, key=lambda n: int(n.split("/")[1].split()[0])):
        print(f"  {name:32s}" + "".join(f"{per_row[name][c]:12d}" for c in cols))
    rows_fixed = [n for n, c in per_row.items() if c["before"] == 0 and c["after"] > 0]
    print(
        f"rows with no passing solution before and one after: {len(rows_fixed)} "
        f"{sorted(rows_fixed)}"
    )
    print(f"wall time {wall:.1f} s")


def _scale_numbers(text: str, factor: float) -> str:
    return _NUMBER.sub(lambda m: repr(float(m.group(0)) * factor), text)


def _reverse_lines(text: str) -> str:
    return "\n".join(" ".join(reversed(line.split())) for line in text.splitlines())


def perturbations(tasks: dict[str, list[Task]], sandbox: Any, timeout: float) -> None:
    """(c): accepted counts of altered expected outputs, per checker."""
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    for ts in tasks.values():
        for t in ts:
            if not t.io_tests:
                continue
            c = select_checker(t)
            for test in t.io_tests:
                exp = test.expected_stdout
                rule = OutputChecker(rule=c.rule)
                for what, alt in (
                    ("reversed lines", _reverse_lines(exp)),
                    ("numbers * (1 + 1e-7)", _scale_numbers(exp, 1 + 1e-7)),
                    (
                        "numbers printed %.6f",
                        _NUMBER.sub(lambda m: f"{float(m.group(0)):.6f}", exp),
                    ),
                    ("numbers * (1 + 1e-3)", _scale_numbers(exp, 1 + 1e-3)),
                ):
                    if alt.split() == exp.split():
                        continue  # the alteration changed nothing (one token a line, no floats)
                    key = f"{what}: {c.name}"
                    tally[key]["altered"] += 1
                    tally[key]["rule"] += judge_output(rule, test.stdin, alt, exp)[0] == "pass"
                    tally[key]["accepted"] += (
                        judge_output(c, test.stdin, alt, exp, sandbox, timeout)[0] == "pass"
                    )
    print("\n(c) perturbed expected outputs (tests whose text the alteration changed)")
    print(f"{'alteration: checker':56s}{'altered':>9s}{'rule only':>11s}{'checker':>9s}")
    for key in sorted(tally):
        t = tally[key]
        print(f"{key:56s}{t['altered']:9d}{t['rule']:11d}{t['accepted']:9d}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend", default=None, help="sandbox backend (default: bwrap, docker, subprocess)"
    )
    parser.add_argument(
        "--max-solutions", type=int, default=None, help="solutions per row (default: all)"
    )
    parser.add_argument("--timeout", type=float, default=6.0, help="seconds per test")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    backend = args.backend or next(b for b in ("bwrap", "docker", "subprocess") if probe(b) is None)
    tasks = {split: list(load("apps", split=split).tasks) for split in ("train", "test")}
    print(
        f"special judge benchmark: APPS train {len(tasks['train'])} rows, test "
        f"{len(tasks['test'])} rows; backend {backend}"
    )
    print("\n(a) selection (stdin/stdout rows; call-based rows are graded by value)")
    for name, hits in sorted(selection(tasks).items()):
        shown = "" if name == "default (default)" else "  " + " ".join(sorted(h for h, _ in hits))
        print(f"  {name}: {len(hits)}{shown}")
    sandbox = get_sandbox(backend)
    try:
        perturbations(tasks, sandbox, args.timeout)
        reference_solutions(sandbox, tasks["train"], _rows("train"), args)
    finally:
        sandbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
