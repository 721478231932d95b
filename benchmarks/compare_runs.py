"""Same seeds, same metrics: record short runs of every method, and compare two recordings.

    PYTHONPATH=. python benchmarks/compare_runs.py record DIR [--methods marft ...]
        [--env credit-chain-3agent] [--iterations 3] [key=value ...]
    PYTHONPATH=. python benchmarks/compare_runs.py compare BEFORE AFTER [--tolerance 0]

``record`` trains each method through its own command line (``python -m baselines.<module>``,
``algo.method=<name>``) on the tiny model of :func:`baselines.relay.relay_model` (seed 0) with
``baselines.relay.FAST_CONFIG`` for ``--iterations`` iterations, evaluating before and after,
and keeps each run's ``metrics.jsonl`` as ``DIR/<label>.jsonl``. A label ``NAME+token`` trains
``NAME`` with ``algo.level=token``. ``compare`` reads two such directories and prints, per
label, whether every logged number outside ``time/*`` (wall-clock) is equal, and the largest
difference; it exits 1 if any label differs by more than ``--tolerance``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_METHODS = (
    "marft",
    "marft+token",
    "marft_shared",
    "ippo",
    "at_grpo",
    "at_grpo_shared",
    "magrpo",
    "magrpo_shared",
)


def record(out: Path, methods: list[str], env_id: str, iterations: int, extra: list[str]) -> None:
    """Run every method of ``methods`` and keep its metrics as ``out/<label>.jsonl``."""
    from baselines.core.methods import get_method
    from baselines.relay import FAST_CONFIG, relay_model

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model = relay_model(Path(tmp) / "model", seed=0)
        for label in methods:
            name, _, level = label.partition("+")
            spec = get_method(name)
            run = Path(tmp) / label
            cmd = [
                sys.executable,
                "-m",
                f"baselines.{spec.module}",
                "--env",
                env_id,
                "--model",
                str(model),
                "--out",
                str(run),
                "--no-progress",
                *FAST_CONFIG,
                f"algo.method={name}",
                f"train.iterations={iterations}",
                "train.seed=0",
                "train.log=[jsonl]",
                *([f"algo.level={level}"] if level else []),
                *extra,
            ]
            env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd())}
            subprocess.run(cmd, check=True, env=env, stderr=subprocess.DEVNULL)
            (out / f"{label}.jsonl").write_text((run / "metrics.jsonl").read_text())
            print(f"recorded {label}", flush=True)


def read(path: Path) -> dict[tuple[int, str], float]:
    """``(step, key) -> value`` of a ``metrics.jsonl``, wall-clock keys left out."""
    out = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        step = row.pop("step")
        for key, value in row.items():
            if key != "time" and not key.startswith("time/") and isinstance(value, (int, float)):
                out[(step, key)] = float(value)
    return out


def compare(before: Path, after: Path, tolerance: float) -> int:
    """Print one line per label; 1 if any label differs by more than ``tolerance``."""
    failed = 0
    for path in sorted(before.glob("*.jsonl")):
        a, b = read(path), read(after / path.name)
        only = sorted(set(a) ^ set(b))
        worst = max(
            (
                abs(a[k] - b[k])
                for k in set(a) & set(b)
                if not (math.isnan(a[k]) and math.isnan(b[k]))
            ),
            default=0.0,
        )
        same = not only and worst <= tolerance
        failed |= not same
        print(
            f"{path.stem:16s} {'same' if same else 'DIFFERENT'}: {len(a)} numbers, "
            f"max |difference| {worst:.3g}" + (f", keys in one only: {only[:4]}" if only else "")
        )
    return int(failed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
    rec.add_argument("--env", default="credit-chain-3agent")
    rec.add_argument("--iterations", type=int, default=3)
    rec.add_argument("overrides", nargs="*")
    cmp = sub.add_parser("compare")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    cmp.add_argument("--tolerance", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.out, args.methods, args.env, args.iterations, args.overrides)
        return 0
    return compare(args.before, args.after, args.tolerance)


if __name__ == "__main__":
    raise SystemExit(main())
