"""Share of a training iteration spent outside ``generate`` and the model's forward/backward.

    python benchmarks/bench_overhead.py [--models tiny-random smollm2-135m] [--iterations 3]

Target: under 10%. ``time/generate`` is the batched generate calls of the rollout;
``time/model`` is every forward (old log-probs, values) and forward/backward/optimiser step of
the update; the rest (environment steps, tokenisation, batching, advantages) is the overhead.
The first iteration (warm-up) is not counted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from baselines.core.config import load_config
from baselines.trainer import Trainer


def measure(model: str, iterations: int, out: Path) -> dict[str, float]:
    cfg = load_config("marft", overrides=[
        "env.id=arith-2agent", f"model.name={model}", "model.max_new_tokens=32", "env.num_envs=8",
        "train.episodes_per_iteration=8", "algo.minibatch_size=8", "train.log=[]"])
    trainer = Trainer(cfg, out)
    trainer.step()  # warm-up
    totals = {"time/iteration": 0.0, "time/generate": 0.0, "time/model": 0.0, "time/env": 0.0}
    for _ in range(iterations):
        m = trainer.step()
        for k in totals:
            totals[k] += m[k]
    return totals


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["tiny-random", "smollm2-135m"])
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--out", default="runs/bench_overhead")
    args = p.parse_args()
    torch.set_num_threads(2)
    for model in args.models:
        t = measure(model, args.iterations, Path(args.out) / model)
        other = t["time/iteration"] - t["time/generate"] - t["time/model"]
        print(f"{model}: {args.iterations} iterations {t['time/iteration']:.2f}s | generate "
              f"{t['time/generate']:.2f}s | forward/backward {t['time/model']:.2f}s | env "
              f"{t['time/env']:.3f}s | other {other:.3f}s = {100 * other / t['time/iteration']:.2f}% "
              f"of the iteration (target < 10%)", flush=True)


if __name__ == "__main__":
    main()
