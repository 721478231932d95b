"""Train one seat of a marft-envs team with TRL's GRPOTrainer; the other seats play fixed policies.

    # CPU smoke run (about a minute): a tiny random model learns nothing, but every part runs
    python examples/trl_grpo_seat.py
    # a real model on a GPU
    python examples/trl_grpo_seat.py --model Qwen/Qwen2.5-0.5B-Instruct --env math-3agent \\
        --seat actor_1 --others echo --steps 200 --generations 8
    # the environment on a server (here or on another machine): marft-envs serve math-3agent
    python examples/trl_grpo_seat.py --url http://127.0.0.1:8000 --env math-3agent

The other seats must leave the seat's action something to decide: with the team reward and an
``oracle`` answerer after the seat (``--others oracle`` for actor_1 of a trio), every completion
earns the same reward, GRPO's group advantage is zero and nothing is learnt. With ``echo`` the
verifier repeats the actor's answer, so the actor's answer is what is graded.

Needs the trl extra: pip install "marft-envs[trl]" (and "marft-envs[serve]" for --url).
"""

from __future__ import annotations

import argparse

import torch
from trl import GRPOConfig, GRPOTrainer

from marft_envs.trl_bridge import (
    TOOL_CAPABLE_CHATML,
    seat_dataset,
    seat_environment_factory,
    seat_reward,
)


def tiny_model():
    """The built-in tiny random model and its character tokenizer (no download)."""
    from baselines.core.models import build_char_tokenizer, build_tiny_model

    tokenizer = build_char_tokenizer()
    tokenizer.chat_template = TOOL_CAPABLE_CHATML  # TRL's environment_factory wants tool calls
    tokenizer.padding_side = "left"
    return build_tiny_model(tokenizer), tokenizer


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--env", default="arith-3agent", help="a registered id (marft-envs list)")
    p.add_argument("--seat", default="actor_1", help="the agent to train")
    p.add_argument(
        "--others", default="echo", help="policy of the other seats: echo, oracle, random"
    )
    p.add_argument(
        "--model", default="tiny-random", help="'tiny-random' or a Hugging Face id / path"
    )
    p.add_argument("--url", default=None, help="a marft-envs serve URL; default: in this process")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--generations", type=int, default=4, help="GRPO group size (rollouts per task)")
    p.add_argument("--episodes", type=int, default=256, help="dataset rows (one episode seed each)")
    p.add_argument("--max-completion-length", type=int, default=256)
    p.add_argument("--output-dir", default="runs/trl-grpo-seat")
    return p


def main() -> None:
    args = build_parser().parse_args()

    if args.model == "tiny-random":
        model, tokenizer = tiny_model()
        max_len = min(args.max_completion_length, 16)
    else:
        model, tokenizer, max_len = args.model, None, args.max_completion_length
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        max_completion_length=max_len,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
    )
    trainer = GRPOTrainer(
        model=model,
        args=config,
        processing_class=tokenizer,
        reward_funcs=seat_reward,
        train_dataset=seat_dataset(args.env, args.seat, n=args.episodes),
        environment_factory=seat_environment_factory(
            args.env, args.seat, args.others, url=args.url
        ),
    )
    trainer.train()
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    print(
        f"{args.env} seat {args.seat}: {trainer.state.global_step} GRPO steps, mean reward per step {rewards}"
    )


if __name__ == "__main__":
    main()
