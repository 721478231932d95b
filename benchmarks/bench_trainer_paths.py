"""The trainer's GPU-path correctness on one MARFT iteration of a tiny random model (CPU).

    PYTHONPATH=. python benchmarks/bench_trainer_paths.py [--seed 0] [--repetition-penalty 1.1]
        [--critic-shares-base true|false]

Two trainers are built from the same tiny random model (``build_tiny_model``), the same seed and
the same config, one with ``model.gradient_checkpointing=false`` and one with ``true``; the
model's own ``generation_config`` sets ``repetition_penalty`` (1.1), as a checkpoint's
``generation_config.json`` can. Each runs one MARFT iteration (``Trainer.step``): the same
rollout, one minibatch and one optimiser step per adapter and per critic, so every gradient is
taken at the initial weights (the value heads get random weights first: at their zero
initialisation no gradient reaches a critic's adapter). Printed:

- per policy adapter and per critic: the cosine between the gradient with checkpointing off
  and on (1.000000 when checkpointing recomputes each layer under the adapter that ran it);
- per agent: ``agent/<id>/logprob_mismatch``, the mean ``|generator - trainer|`` log-prob of
  the sampled tokens (~1e-7 in float32 when the rollout samples from exactly the policy the
  PPO ratio is computed for; the leaked repetition penalty of 1.1 showed as 0.04-0.05
  nats/token per agent before the fix, docs/baselines_algorithms.md).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from baselines.core.config import load_config
from baselines.core.gradients import randomise_value_heads, record_step_gradients
from baselines.core.models import build_char_tokenizer, build_tiny_model
from baselines.trainer import Trainer

torch.set_num_threads(1)


def one_iteration(checkpointing: bool, args) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    """``(gradient per optimiser, metrics)`` of one MARFT iteration."""
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, seed=args.seed)
    model.generation_config.repetition_penalty = args.repetition_penalty
    cfg = load_config(
        "marft",
        overrides=[
            "env.id=arith-2agent",
            "model.name=tiny-random",
            f"model.gradient_checkpointing={str(checkpointing).lower()}",
            f"model.critic_shares_base={args.critic_shares_base}",
            "model.max_new_tokens=8",
            "env.num_envs=4",
            "train.episodes_per_iteration=4",
            "env.eval_episodes=0",
            "algo.minibatch_size=8",  # one minibatch: every gradient at the initial weights
            "algo.grad_accum=1",
            "algo.ppo_epochs=1",
            "algo.ent_coef=0.01",
            f"train.seed={args.seed}",
            "train.device=cpu",
            "train.log=[]",
        ],
    )
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, tmp, base=(model, tok))
        randomise_value_heads(trainer.critics.heads.values(), seed=args.seed)
        grads = record_step_gradients(trainer.optimizers)
        torch.manual_seed(args.seed)
        metrics = trainer.step()
        trainer.close()
    return {k: torch.cat([g.flatten() for g in v]) for k, v in grads.items()}, metrics


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repetition-penalty", type=float, default=1.1)
    parser.add_argument("--critic-shares-base", default="true", choices=["true", "false"])
    args = parser.parse_args(argv)
    off, m_off = one_iteration(False, args)
    on, m_on = one_iteration(True, args)
    print(
        f"one MARFT iteration, tiny-random, seed {args.seed}, critic_shares_base="
        f"{args.critic_shares_base}, generation_config.repetition_penalty="
        f"{args.repetition_penalty}"
    )
    print("gradient cosine, checkpointing off vs on:")
    for key in off:
        a, b = off[key], on.get(key, torch.zeros_like(off[key]))
        cos = torch.nn.functional.cosine_similarity(a, b, dim=0).item()
        print(f"  {key:<24} cos={cos:.6f}  |g_off|={a.norm():.4e}  |g_on|={b.norm():.4e}")
    print("generator vs trainer log-prob gap (nats/token):")
    for key in sorted(k for k in m_off if k.endswith("/logprob_mismatch")):
        print(f"  {key:<34} off={m_off[key]:.3e}  on={m_on[key]:.3e}")


if __name__ == "__main__":
    main()
