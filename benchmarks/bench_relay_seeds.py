"""How robustly MARFT learns the relay: one run per seed, iterations to >= 0.9 and final eval.

    python benchmarks/bench_relay_seeds.py [--seeds 0 1 2 ...] [--tied] [key=value ...]

Each seed initialises the tiny relay model and the training (``train.seed``) and trains MARFT
with ``baselines.relay.RELAY_CONFIG`` (plus any overrides) for at most ``--max-iterations``,
stopping once three consecutive training scores reach 0.9, like the learning test. ``--tied``
uses a model whose output head is tied to its input embeddings (the configuration that stalls
on most seeds, see docs/baselines.md).
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
from baselines.trainer import Trainer
from baselines.relay import RELAY_CONFIG, register_relay, relay_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(12)))
    p.add_argument("--keys", default="AB")
    p.add_argument("--max-iterations", type=int, default=40)
    p.add_argument("--tied", action="store_true", help="tie the output head to the input embeddings")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args()
    torch.set_num_threads(1)
    env_id = register_relay(f"relay-{args.keys}-2agent", keys=args.keys)
    learned = 0
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            model = relay_model(Path(tmp) / "model", keys=args.keys, seed=seed, tie_embeddings=args.tied)
            cfg = load_config("marft", overrides=[f"env.id={env_id}", f"model.name={model}",
                                                  f"train.seed={seed}", *RELAY_CONFIG, *args.overrides])
            trainer = Trainer(cfg, Path(tmp) / "run")
            start, scores = time.perf_counter(), []
            while len(scores) < args.max_iterations and not (len(scores) >= 3 and min(scores[-3:]) >= 0.9):
                scores.append(trainer.step()["train/score"])
            after = trainer.evaluate(greedy=True)["eval/score"]
        learned += after >= 0.9
        print(f"seed {seed:3d}: first {scores[0]:.2f}  iterations {len(scores):3d}  greedy eval {after:.2f}  "
              f"{time.perf_counter() - start:5.1f}s", flush=True)
    print(f"learned (greedy eval >= 0.9): {learned}/{len(args.seeds)} seeds"
          f" ({'tied' if args.tied else 'untied'} head{', ' + ' '.join(args.overrides) if args.overrides else ''})")


if __name__ == "__main__":
    main()
