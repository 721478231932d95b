"""Critic-free vs PPO methods on the relay at the same generated-token budget per iteration.

    PYTHONPATH=. python benchmarks/bench_critic_free.py [--methods marft ippo at_grpo magrpo]
        [--seeds 0 1 2] [--max-iterations 24] [--eval-every 4] [key=value ...]

Every method trains the tiny relay model (``baselines.relay``) with ``RELAY_CONFIG`` and the
same seeds. The PPO methods play ``train.episodes_per_iteration`` (32) episodes of n = 2 turns;
the group-relative methods are sized to the same number of generated responses per iteration
(docs/baselines.md, "Comparing at equal compute"): MAGRPO plays the same 32 episodes as 8
problems x K = 4; AT-GRPO generates K * n (n + 1) / 2 = 12 responses per problem, so it gets
round(2 * 32 / (K * (n + 1))) = 5 problems (60 responses). Every ``--eval-every`` iterations
a greedy evaluation runs; a run stops once it scores >= 0.9. Printed per run: generated tokens
per iteration (``train/generated_tokens``), iterations and tokens until the greedy evaluation
first reached 0.9, and the last greedy score; per method, the seeds that reached 0.9, the mean
tokens to get there, and the final score per 1,000 generated tokens.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from baselines.core.config import load_config
from baselines.methods import equal_compute_overrides, preset_of
from baselines.relay import RELAY_CONFIG, register_relay, relay_model
from baselines.trainer import Trainer

K = 4


def run(method: str, seed: int, args, env_id: str) -> dict:
    preset = preset_of(method)
    with tempfile.TemporaryDirectory() as tmp:
        model = relay_model(Path(tmp) / "model", keys=args.keys, seed=seed)
        overrides = [
            f"env.id={env_id}",
            f"model.name={model}",
            f"train.seed={seed}",
            *RELAY_CONFIG,
            f"algo.method={method}",
            *equal_compute_overrides(method, 32, 2, K),
            *args.overrides,
        ]
        trainer = Trainer(load_config(preset, overrides=overrides), Path(tmp) / "run")
        start, tokens, reached, score, it = time.perf_counter(), 0.0, None, 0.0, 0
        per_iteration = []
        while it < args.max_iterations:
            m = trainer.step()
            it += 1
            tokens += m["train/generated_tokens"]
            per_iteration.append(m["train/generated_tokens"])
            if it % args.eval_every == 0 or it == args.max_iterations:
                score = trainer.evaluate(greedy=True)["eval/score"]
                if score >= 0.9:
                    reached = (it, tokens)
                    break
        trainer.close()
    return {
        "method": method,
        "seed": seed,
        "tokens_per_it": sum(per_iteration) / len(per_iteration),
        "iterations": it,
        "tokens": tokens,
        "reached": reached,
        "score": score,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--methods", nargs="+", default=["marft", "ippo", "at_grpo", "magrpo"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--keys", default="AB")
    p.add_argument("--max-iterations", type=int, default=24)
    p.add_argument("--eval-every", type=int, default=4)
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args()
    torch.set_num_threads(1)
    env_id = register_relay(f"relay-{args.keys}-2agent", keys=args.keys)
    results = []
    print(
        f"{'method':<14}{'seed':>5}{'tokens/it':>11}{'iters':>7}{'tokens to 0.9':>15}"
        f"{'greedy eval':>13}{'seconds':>9}",
        flush=True,
    )
    for method in args.methods:
        for seed in args.seeds:
            r = run(method, seed, args, env_id)
            results.append(r)
            to = f"{r['reached'][1]:.0f}" if r["reached"] else "-"
            print(
                f"{method:<14}{seed:>5}{r['tokens_per_it']:>11.1f}{r['iterations']:>7}{to:>15}"
                f"{r['score']:>13.2f}{r['seconds']:>9.1f}",
                flush=True,
            )
    print(
        f"\n{'method':<14}{'reached 0.9':>12}{'mean tokens to 0.9':>20}{'mean final':>12}"
        f"{'score per 1k tokens':>21}"
    )
    for method in args.methods:
        mine = [r for r in results if r["method"] == method]
        hit = [r for r in mine if r["reached"]]
        mean_to = f"{sum(r['reached'][1] for r in hit) / len(hit):.0f}" if hit else "-"
        final = sum(r["score"] for r in mine) / len(mine)
        per_k = sum(r["score"] / r["tokens"] * 1000 for r in mine) / len(mine)
        print(f"{method:<14}{len(hit):>8}/{len(mine):<3}{mean_to:>20}{final:>12.2f}{per_k:>21.2f}")


if __name__ == "__main__":
    main()
