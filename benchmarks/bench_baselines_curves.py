"""MARFT vs MARFT-shared vs IPPO on the relay env, same seeds: learning curves side by side.

    python benchmarks/bench_baselines_curves.py [--iterations 50] [--seeds 1 2 3] [--out runs/bench_curves]

The relay env (baselines/relay.py): only the sender sees the key, only the receiver is graded.
Prints the training team score of every iteration for each method and seed, the final greedy
evaluation, and writes a side-by-side plot.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from baselines.core.config import load_config
from baselines.core.logging import MetricsLogger, plot_side_by_side
from baselines.trainer import Trainer
from baselines.relay import RELAY_CONFIG, register_relay, relay_model

METHODS = ("marft", "marft_shared", "ippo")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="model (and training) seeds")
    p.add_argument("--keys", default="AB")
    p.add_argument("--out", default="runs/bench_curves")
    args = p.parse_args()
    torch.set_num_threads(1)
    env_id = register_relay(f"relay-{args.keys}-2agent", keys=args.keys)
    out = Path(args.out)
    curves: dict[tuple[str, int], list[float]] = {}
    finals: dict[tuple[str, int], float] = {}
    for seed in args.seeds:
        model = relay_model(out / f"model_seed{seed}", keys=args.keys, seed=seed)
        for method in METHODS:
            cfg = load_config(method, overrides=[f"env.id={env_id}", f"model.name={model}",
                                                 f"train.seed={seed}", *RELAY_CONFIG])
            run = out / f"{method}_seed{seed}"
            trainer = Trainer(cfg, run)
            start = time.perf_counter()
            with MetricsLogger(run, console=False, tensorboard=False) as logger:
                trainer.logger = logger
                curves[(method, seed)] = [trainer.step()["train/score"] for _ in range(args.iterations)]
                for i, s in enumerate(curves[(method, seed)]):
                    logger.log(i + 1, {"train/score": s})
            finals[(method, seed)] = trainer.evaluate(greedy=True)["eval/score"]
            print(f"{method:13s} seed {seed}: {time.perf_counter() - start:.0f}s", flush=True)
    cols = [(m, s) for s in args.seeds for m in METHODS]
    print(f"\ntrain team score per iteration (relay, keys {args.keys})")
    print("iter  " + " ".join(f"{m[:12]:>12s}/s{s}" for m, s in cols))
    for i in range(args.iterations):
        print(f"{i + 1:4d}  " + " ".join(f"{curves[c][i]:15.3f}" for c in cols))
    print("final greedy eval " + " ".join(f"{finals[c]:15.3f}" for c in cols))
    for m in METHODS:
        mean = sum(finals[(m, s)] for s in args.seeds) / len(args.seeds)
        print(f"mean final eval {m}: {mean:.3f}")
    plot = plot_side_by_side({f"{m}/s{s}": out / f"{m}_seed{s}" / "metrics.jsonl" for m, s in cols},
                             "train/score", out / "curves.png")
    print(f"plot: {plot}")


if __name__ == "__main__":
    main()
