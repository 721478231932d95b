"""Does MARFT improve a real model on a registered environment? SmolLM2-135M on CPU.

    PYTHONPATH=. python benchmarks/bench_learning_real.py [--envs arith0-2agent arith0-3agent]
        [--methods marft ippo at_grpo magrpo] [--seeds 0 1 2] [--iterations 4]
        [--eval-episodes 200] [--threads 2] [--out DIR] [key=value ...]

For each environment: the untrained team is evaluated once, greedily, on the first
``--eval-episodes`` problems of the test split (the untrained model is the same for every seed
and method: LoRA adapters start as the identity, and greedy decoding is deterministic); then per
method and seed it trains ``--iterations`` iterations with the recipe of
``baselines.demo.RECIPE`` (plus any overrides) on the train split, and the team is evaluated
again on the same test problems. Every method gets the generated responses per iteration of the
recipe's PPO episodes (``baselines.methods.equal_compute_overrides``). Grading is the project's
math verifier. The table gives before, after and the paired delta with 95% intervals (Wilson for
scores; the normal interval of the mean per-problem difference for deltas), per seed and pooled
over seeds, the wall clock per iteration, the tokens generated in training per run, and the
sample efficiency (delta per 1,000 generated training tokens). The pooled row's delta interval
treats every (seed, problem) pair as independent (``n`` counts pairs), so it leaves out the
seed-to-seed variance and must not be used to rank methods; the ``seeds`` column (3 seeds or
more) is the 95% t-interval of the mean per-seed delta, which carries that variance. The pooled
``before`` is the one untrained evaluation, which every seed shares. Each finished
run is appended to ``--out``/results.jsonl as it ends; ``--from-results FILE ...`` prints the
table again from such files.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

import marft_envs
from baselines.core.config import load_config
from baselines.demo import RECIPE
from baselines.methods import equal_compute_overrides, preset_of
from baselines.trainer import Trainer
from benchmarks.bench_credit import mean_ci
from leaderboard.regrade import Z_95, wilson_interval

HEAD = (
    "env",
    "method",
    "seed",
    "before [95% CI]",
    "after [95% CI]",
    "delta [95% CI]",
    "seeds [95% CI]",
    "s/iter",
    "tokens/run",
    "delta/1k tok",
    "n",
)


def scores_by_task(episodes) -> dict[str, float]:
    """Each evaluation episode's team score, keyed by task id (one episode per task)."""
    return {e.task_id: e.score for e in episodes}


def paired_delta(before: dict[str, float], after: dict[str, float]) -> tuple[float, float, float]:
    """Mean of ``after - before`` over the shared tasks, with its normal 95% interval."""
    d = [after[k] - before[k] for k in before if k in after]
    if not d:
        raise ValueError("no task was evaluated both before and after")
    mean = sum(d) / len(d)
    var = sum((x - mean) ** 2 for x in d) / max(1, len(d) - 1)
    half = Z_95 * math.sqrt(var / len(d))
    return mean, mean - half, mean + half


def fmt(p: float, n: int) -> str:
    low, high = wilson_interval(p, n)
    return f"{p:.3f} [{low:.3f}, {high:.3f}]"


def fmt_delta(d: tuple[float, float, float]) -> str:
    return f"{d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]"


def per_iteration(seconds: list[float]) -> str:
    return f"{sum(seconds) / len(seconds):.1f}" if seconds else "n/a"


def per_1k_tokens(delta: float, tokens: float) -> str:
    """Sample efficiency: the score gained per 1,000 tokens generated in training."""
    return f"{1000 * delta / tokens:+.4f}" if tokens else "n/a"


def run_overrides(method: str, env_id: str, seed: int, args: argparse.Namespace) -> list[str]:
    """The recipe, sized so ``method`` generates as many responses per iteration as MARFT (the
    sizing comes last: ``--group-size``, not an ``algo.group_size=`` override, sets K)."""
    base = [
        *RECIPE,
        f"env.id={env_id}",
        f"model.name={args.model}",
        f"train.seed={seed}",
        f"train.iterations={args.iterations}",
        "env.eval_episodes=0",  # evaluated here, on the same plan before and after
        *args.overrides,
    ]
    episodes = load_config("marft", overrides=base).train.episodes_per_iteration
    env = marft_envs.make(env_id)
    try:
        agents = len(env.possible_agents)
    finally:
        env.close()
    return [
        *base,
        f"algo.method={method}",
        *equal_compute_overrides(method, episodes, agents, args.group_size),
    ]


def train_and_evaluate(
    method: str, env_id: str, seed: int, args: argparse.Namespace, before: dict[str, float] | None
) -> dict:
    """One run: the untrained evaluation when ``before`` is None, training, the evaluation
    after; returns the run's record (what results.jsonl stores)."""
    overrides = run_overrides(method, env_id, seed, args)
    cfg = load_config(preset_of(method), overrides=overrides)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp))
        if before is None:
            t0 = time.perf_counter()
            before = scores_by_task(trainer.play_eval(args.eval_episodes))
            b = sum(before.values()) / len(before)
            print(
                f"{env_id}: before {fmt(b, len(before))} on {len(before)} test problems "
                f"({time.perf_counter() - t0:.0f}s)",
                flush=True,
            )
        t0 = time.perf_counter()
        history = trainer.train()
        train_s = time.perf_counter() - t0
        after = scores_by_task(trainer.play_eval(args.eval_episodes))
        trainer.close()
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "model": args.model,
        "eval_episodes": args.eval_episodes,
        "iterations": args.iterations,
        "env": env_id,
        "method": method,
        "seed": seed,
        "before": {k: before[k] for k in after},
        "after": after,
        "train_scores": [h["train/score"] for h in history if "train/score" in h],
        "seconds_per_iteration": [h["time/iteration"] for h in history if "time/iteration" in h],
        "generated_tokens": sum(h.get("train/generated_tokens", 0.0) for h in history),
        "overrides": overrides,
    }
    n = len(after)
    print(
        f"{env_id} {method} seed {seed}: after {fmt(sum(after.values()) / n, n)}, train scores "
        f"{' '.join(f'{x:.2f}' for x in record['train_scores'])}, {train_s:.0f}s training",
        flush=True,
    )
    return record


def grouped(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Records by (env, method), in their order; a seed recorded twice for the same env and
    method (e.g. two results files holding the same run) is an error, not a second sample."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        runs = groups.setdefault((r["env"], r["method"]), [])
        if any(other["seed"] == r["seed"] for other in runs):
            raise ValueError(
                f"{r['env']} {r['method']} seed {r['seed']} is recorded twice; pass each run's "
                "record once"
            )
        runs.append(r)
    return groups


def table_rows(records: list[dict]) -> list[tuple]:
    """Per (env, method): one row per seed, then the pooled row, in the records' order.

    The pooled row pools (seed, problem) pairs (``n`` counts pairs); its ``before`` is the one
    untrained evaluation when every seed shares it (scored over its own problems, not once per
    seed). The ``seeds`` column, the t-interval of the mean per-seed delta, needs 3 seeds or more
    (with 2 the t-value is 12.7 and the interval says nothing)."""
    rows: list[tuple] = []
    for (env_id, method), runs in grouped(records).items():
        pooled_before: dict[str, float] = {}
        pooled_after: dict[str, float] = {}
        deltas = []
        for r in runs:
            before, after = r["before"], r["after"]
            n = len(after)
            delta = paired_delta(before, after)
            deltas.append(delta[0])
            rows.append(
                (
                    env_id,
                    method,
                    str(r["seed"]),
                    fmt(sum(before[k] for k in after) / n, n),
                    fmt(sum(after.values()) / n, n),
                    fmt_delta(delta),
                    "",
                    per_iteration(r["seconds_per_iteration"]),
                    f"{r['generated_tokens']:.0f}",
                    per_1k_tokens(delta[0], r["generated_tokens"]),
                    n,
                )
            )
            pooled_before.update({f"{r['seed']}/{k}": before[k] for k in after})
            pooled_after.update({f"{r['seed']}/{k}": v for k, v in after.items()})
        n = len(pooled_after)
        delta = paired_delta(pooled_before, pooled_after)
        mean, half = mean_ci(deltas)
        seeds = f"[{mean - half:+.3f}, {mean + half:+.3f}]" if len(deltas) >= 3 else "-"
        shared = all(r["before"] == runs[0]["before"] for r in runs)
        untrained = runs[0]["before"] if shared else pooled_before
        mean_tokens = sum(r["generated_tokens"] for r in runs) / len(runs)
        rows.append(
            (
                env_id,
                method,
                "pooled",
                fmt(sum(untrained.values()) / len(untrained), len(untrained)),
                fmt(sum(pooled_after.values()) / n, n),
                fmt_delta(delta),
                seeds,
                per_iteration([s for r in runs for s in r["seconds_per_iteration"]]),
                f"{mean_tokens:.0f}",
                per_1k_tokens(delta[0], mean_tokens),
                n,
            )
        )
    return rows


def print_table(rows: list[tuple]) -> None:
    widths = [max(len(str(r[i])) for r in [HEAD, *rows]) for i in range(len(HEAD))]
    for r in [HEAD, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--envs", nargs="+", default=["arith0-2agent", "arith0-3agent"])
    p.add_argument("--methods", nargs="+", default=["marft"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--eval-episodes", type=int, default=200)
    p.add_argument("--group-size", type=int, default=4, help="K of the critic-free methods")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--out", default="runs/bench_learning_real")
    p.add_argument(
        "--from-results",
        nargs="+",
        metavar="JSONL",
        help="print the table from results.jsonl files instead of training",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args()
    if args.from_results:
        records = [
            json.loads(line)
            for path in args.from_results
            for line in Path(path).read_text().splitlines()
            if line.strip()
        ]
        print_table(table_rows(records))
        return
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for env_id in args.envs:
        before: dict[str, float] | None = None
        for method in args.methods:
            for seed in args.seeds:
                record = train_and_evaluate(method, env_id, seed, args, before)
                before = before or record["before"]
                records.append(record)
                with (out / "results.jsonl").open("a") as f:
                    f.write(json.dumps(record) + "\n")
    print()
    print(
        f"{args.model}, {args.iterations} iterations, recipe baselines.demo.RECIPE"
        f"{' + ' + ' '.join(args.overrides) if args.overrides else ''}, {args.threads} threads, "
        f"equal generated responses per iteration (K={args.group_size} for critic-free methods)"
    )
    print_table(table_rows(records))


if __name__ == "__main__":
    main()
