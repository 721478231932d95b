"""Benchmark: our math verifier against math-verify (the anchor), same pairs, same run.

    python benchmarks/bench_verifier.py [--repeat N]

Prints, for each verifier: accuracy overall and per category on the labelled set
(tests/data/math_equivalence.jsonl), false "equal" verdicts on the negatives,
pairs/second, the worst single pair; then ours/math-verify ratios, and the time
each takes on a few pathological pairs (sympy hangs) against our time limit.
If the MATH-500 file is present (MARFT_DATA_DIR or ../shared/data), both also
grade its 500 reference solutions against their answers.

Both run one pair at a time in the main thread (math-verify's own timeouts use
signals and need the main thread). Our worker pool is started before timing
(``warmup``), as a trainer's would be after its first batch.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "math_equivalence.jsonl"
DATA_DIR = Path(os.environ.get("MARFT_DATA_DIR", ROOT.parent / "shared" / "data"))
MATH500 = DATA_DIR / "math" / "math500_test.jsonl"
TOWER = "2^{2^{2^{2^{2^{100}}}}}"
PATHOLOGICAL = [  # the first three are settled by size bounds; the last two need sympy, which hangs
    (f"\\boxed{{{TOWER}}}", "3"),
    ("\\boxed{(10^{10^{10}})!}", "5"),
    (f"\\boxed{{{TOWER}}}", f"{TOWER}+1"),
    (f"\\boxed{{{TOWER}}}", "4^{2^{2^{2^{2^{99}}}}}"),
    ("\\boxed{(10^{8})!}", "\\frac{(10^{8}+1)!}{10^{8}+1}"),
]


def ours(pred: str, gold: str, timeout: float) -> bool:
    from marft_envs.math import verify

    return verify(pred, gold, timeout=timeout).correct


def math_verify(pred: str, gold: str, timeout: float) -> bool:
    from math_verify import parse, verify

    from marft_envs.math.extract import is_bare_answer

    # Give math-verify its best inputs: "$gold$" scores best for it on this set, and a
    # bare prediction ("(1,2)", "x=3") is wrapped in $...$ as math-verify expects LaTeX.
    if "$" not in pred and is_bare_answer(pred):
        pred = f"${pred}$"
    try:
        return bool(verify(parse(f"${gold}$"), parse(pred), timeout_seconds=int(timeout)))
    except Exception:  # noqa: BLE001
        return False


def run(name, fn, rows, repeat, timeout):
    times, results = [], []
    for _ in range(repeat):
        results = []
        for r in rows:
            t = time.perf_counter()
            results.append(fn(r["prediction"], r["gold"], timeout))
            times.append(time.perf_counter() - t)
    total = sum(times)
    by_cat = defaultdict(lambda: [0, 0])
    for r, got in zip(rows, results):
        by_cat[r["category"]][0] += got == r["equal"]
        by_cat[r["category"]][1] += 1
    correct = sum(got == r["equal"] for r, got in zip(rows, results))
    false_equal = [r for r, got in zip(rows, results) if got and not r["equal"]]
    return {
        "name": name, "correct": correct, "n": len(rows), "by_cat": by_cat,
        "false_equal": false_equal, "pps": len(times) / total, "worst": max(times),
        "missed": [r for r, got in zip(rows, results) if not got and r["equal"]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeat", type=int, default=1, help="passes over the set (default 1)")
    ap.add_argument("--timeout", type=float, default=5.0, help="time limit per pair, both tools")
    ap.add_argument("--show", action="store_true", help="list every pair each tool gets wrong")
    args = ap.parse_args()

    from marft_envs.math import warmup

    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    t = time.perf_counter()
    warmup()
    print(f"labelled set: {len(rows)} pairs ({sum(not r['equal'] for r in rows)} negatives); "
          f"our worker pool start-up: {time.perf_counter() - t:.2f}s (not timed below)")
    a = run("ours", ours, rows, args.repeat, args.timeout)
    b = run("math-verify", math_verify, rows, args.repeat, args.timeout)

    print(f"\n{'category':<14}{'n':>5}{'ours':>10}{'math-verify':>14}")
    for cat in sorted(a["by_cat"]):
        ok_a, n = a["by_cat"][cat]
        ok_b, _ = b["by_cat"][cat]
        print(f"{cat:<14}{n:>5}{ok_a / n:>10.1%}{ok_b / n:>14.1%}")
    print()
    for res in (a, b):
        print(f"{res['name']:<12} accuracy {res['correct']}/{res['n']} = {res['correct'] / res['n']:.1%}"
              f"  false-equal {len(res['false_equal'])}  missed-equal {len(res['missed'])}"
              f"  {res['pps']:.1f} pairs/s  worst pair {res['worst'] * 1000:.1f} ms")
        if args.show:
            for r in res["false_equal"] + res["missed"]:
                print(f"    [{r['category']}] gold={r['gold']!r} pred={r['prediction'][-60:]!r} "
                      f"label={r['equal']}")
    print(f"\nratio ours/math-verify: throughput {a['pps'] / b['pps']:.1f}x, "
          f"accuracy {a['correct'] - b['correct']:+d} pairs, "
          f"worst pair {a['worst'] / b['worst']:.2f}x, "
          f"false-equal {len(a['false_equal'])} vs {len(b['false_equal'])}")

    if MATH500.exists():  # real data: each reference solution (its last \boxed) vs its answer
        m500 = [json.loads(line) for line in MATH500.read_text().splitlines() if line.strip()]
        m500 = [{"category": r["subject"], "gold": r["answer"], "prediction": r["solution"],
                 "equal": True} for r in m500]
        print(f"\nMATH-500 ({len(m500)} reference solutions vs their answers; all should be equal):")
        for res in (run("ours", ours, m500, 1, args.timeout),
                    run("math-verify", math_verify, m500, 1, args.timeout)):
            print(f"  {res['name']:<12} {res['correct']}/{res['n']} = {res['correct'] / res['n']:.1%}"
                  f"  {res['pps']:.1f} pairs/s  worst pair {res['worst'] * 1000:.1f} ms")

    print(f"\npathological pairs (time limit {args.timeout:g}s):")
    for pred, gold in PATHOLOGICAL:
        line = f"  {pred[7:-1]:<26} vs {gold:<28}"
        for name, fn in (("ours", ours), ("math-verify", math_verify)):
            t = time.perf_counter()
            got = fn(pred, gold, args.timeout)
            line += f"  {name}: {'equal' if got else 'not equal'} in {time.perf_counter() - t:.2f}s"
        print(line)


if __name__ == "__main__":
    main()
