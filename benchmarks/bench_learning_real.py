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
sample efficiency (delta per 1,000 generated training tokens). Each finished run is appended to
``--out``/results.jsonl as it ends.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import json

import torch

import marft_envs
from baselines.core.config import load_config
from baselines.demo import RECIPE
from baselines.methods import equal_compute_overrides, preset_of
from baselines.trainer import Trainer
from leaderboard.regrade import Z_95, wilson_interval


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
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for env_id in args.envs:
        before: dict[str, float] | None = None
        for method in args.methods:
            pooled_before: dict[str, float] = {}
            pooled_after: dict[str, float] = {}
            per_iter: list[float] = []
            tokens: list[float] = []
            for seed in args.seeds:
                cfg = load_config(
                    preset_of(method), overrides=run_overrides(method, env_id, seed, args)
                )
                with tempfile.TemporaryDirectory() as tmp:
                    trainer = Trainer(cfg, Path(tmp))
                    if before is None:
                        t0 = time.perf_counter()
                        before = scores_by_task(trainer.play_eval(args.eval_episodes))
                        n = len(before)
                        b = sum(before.values()) / n
                        print(
                            f"{env_id}: before {fmt(b, n)} on {n} test problems "
                            f"({time.perf_counter() - t0:.0f}s)",
                            flush=True,
                        )
                    t0 = time.perf_counter()
                    history = trainer.train()
                    train_s = time.perf_counter() - t0
                    after = scores_by_task(trainer.play_eval(args.eval_episodes))
                    trainer.close()
                it_s = [h["time/iteration"] for h in history if "time/iteration" in h]
                run_tokens = sum(h.get("train/generated_tokens", 0.0) for h in history)
                per_iter.extend(it_s)
                tokens.append(run_tokens)
                train_scores = [h["train/score"] for h in history if "train/score" in h]
                n = len(after)
                a = sum(after.values()) / n
                b = sum(before[k] for k in after) / n
                delta = paired_delta(before, after)
                rows.append(
                    (
                        env_id,
                        method,
                        str(seed),
                        fmt(b, n),
                        fmt(a, n),
                        fmt_delta(delta),
                        per_iteration(it_s),
                        f"{run_tokens:.0f}",
                        per_1k_tokens(delta[0], run_tokens),
                        n,
                    )
                )
                print(
                    f"{env_id} {method} seed {seed}: after {fmt(a, n)}, train scores "
                    f"{' '.join(f'{x:.2f}' for x in train_scores)}, {train_s:.0f}s training",
                    flush=True,
                )
                with (out / "results.jsonl").open("a") as f:
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
                        "train_scores": train_scores,
                        "seconds_per_iteration": it_s,
                        "generated_tokens": run_tokens,
                        "overrides": run_overrides(method, env_id, seed, args),
                    }
                    f.write(json.dumps(record) + "\n")
                pooled_before.update({f"{seed}/{k}": v for k, v in before.items() if k in after})
                pooled_after.update({f"{seed}/{k}": v for k, v in after.items()})
            n = len(pooled_after)
            delta = paired_delta(pooled_before, pooled_after)
            mean_tokens = sum(tokens) / len(tokens)
            rows.append(
                (
                    env_id,
                    method,
                    "pooled",
                    fmt(sum(pooled_before.values()) / n, n),
                    fmt(sum(pooled_after.values()) / n, n),
                    fmt_delta(delta),
                    per_iteration(per_iter),
                    f"{mean_tokens:.0f}",
                    per_1k_tokens(delta[0], mean_tokens),
                    n,
                )
            )
    print()
    print(
        f"{args.model}, {args.iterations} iterations, recipe baselines.demo.RECIPE"
        f"{' + ' + ' '.join(args.overrides) if args.overrides else ''}, {args.threads} threads, "
        f"equal generated responses per iteration (K={args.group_size} for critic-free methods)"
    )
    head = (
        "env",
        "method",
        "seed",
        "before [95% CI]",
        "after [95% CI]",
        "delta [95% CI]",
        "s/iter",
        "tokens/run",
        "delta/1k tok",
        "n",
    )
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
