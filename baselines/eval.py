"""``python -m baselines.eval RUN_DIR --env ID``: evaluate a trained run and write a result bundle.

    python -m baselines.eval runs/marft-1/ --env math500-3agent            # latest checkpoint
    python -m baselines.eval --model smollm2-135m --env arith-2agent        # the untrained base
    python -m baselines.eval runs/marft-1/ --env math500-3agent env.eval_episodes=500 --sample

The bundle (``leaderboard.schema.Bundle``: env spec, dataset hash, package version, method,
model, config, seeds, the grader version of the claimed score and every episode's transcript
and verdict score) is written to
``--out`` or ``RUN_DIR/eval-<env>/bundle.json``; the leaderboard re-grades it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cli import check_envs, describe, require_model, team_agents
from .core.config import Config, ConfigError, apply_overrides, load_config

if TYPE_CHECKING:
    from .core.evaluator import EvalSet, Evaluator
    from .core.generation import Generator
    from .trainer import Trainer


class EvaluationError(RuntimeError):
    """No evaluation episode could be graded (every verdict was an infrastructure error)."""


@dataclass
class Policy:
    """What an evaluation needs and nothing more: the config, the team, an
    :class:`~baselines.core.evaluator.Evaluator` over the policy adapters, and the generator
    (no critic, no optimiser)."""

    cfg: Config
    agents: list[str]
    evaluator: Evaluator
    generator: Generator

    def eval_set(self) -> EvalSet:
        return self.evaluator.eval_set()

    def play_eval(self, greedy: bool | None = None) -> list:
        return self.evaluator.play(self.generator, greedy=greedy)

    def close(self) -> None:
        self.evaluator.close()


def load_policy(cfg: Config, run_dir: Path | None, out: Path | None) -> tuple[Policy, Path | None]:
    """The policy adapters of ``cfg``'s method on its base model, with the run's latest
    checkpoint's weights (``None``: the untrained adapters, which leave the base unchanged),
    and that checkpoint."""
    from .core.checkpoint import latest_checkpoint
    from .core.checkpointer import read_checkpoint
    from .core.evaluator import Evaluator
    from .core.methods import get_method
    from .core.models import AdapterModel, LoraSpec, load_base
    from .distributed import make_worker_group
    from .trainer import (
        env_overrides,
        make_generator,
        resolve_device,
        resolve_dtype,
        seed_everything,
    )

    spec = get_method(cfg.algo.method)
    device = resolve_device(cfg.train.device)
    seed_everything(cfg.train.seed)
    train_id, train_kw = env_overrides(cfg, for_eval=False)
    agents = team_agents(train_id, train_kw)
    model, tokenizer = load_base(
        require_model(cfg), resolve_dtype(cfg.model.dtype, device), device, cfg.train.seed
    )
    model.to(device)
    m = cfg.model
    lora = LoraSpec(m.lora_r, m.lora_alpha, m.lora_dropout, list(m.target_modules))
    policy = AdapterModel(model, tokenizer, spec.policy_adapters(agents), lora)
    checkpoint = latest_checkpoint(run_dir) if run_dir is not None else None
    if checkpoint is not None:
        state = read_checkpoint(checkpoint, train_id)
        missing = sorted(set(policy.adapters) - set(state["adapters"]))
        if missing:
            raise ValueError(
                f"checkpoint {state['path']} lacks adapters {missing}: "
                f"was it written by another method or environment?"
            )
        for name in policy.adapters:
            policy.load_adapter_state(
                name, {k: v.to(device) for k, v in state["adapters"][name].items()}
            )
    t = cfg.train

    def make_envs(env_id: str, seed: int, overrides: dict, num_envs: int):
        return make_worker_group(
            t.workers, env_id, num_envs, num_workers=t.env_workers, seed=seed, **overrides
        )

    scratch = run_dir if run_dir is not None else Path(out or ".").parent
    evaluator = Evaluator(
        cfg, policy, spec.policy_adapter, env_overrides(cfg, for_eval=True), make_envs, device
    )
    generator = make_generator(cfg, policy, policy.adapters, scratch)
    return Policy(cfg, agents, evaluator, generator), checkpoint


def evaluate_policy(
    policy: Policy,
    checkpoint: Path | None,
    run_dir: Path | None,
    out: Path | None,
    greedy: bool | None = None,
) -> tuple[dict, Path]:
    """Play the evaluation set and write the bundle. Scores are over the gradable episodes;
    infrastructure errors are counted (``infra_errors``), and with no gradable episode at all
    :class:`EvaluationError` is raised and no bundle is written."""
    eval_set = policy.eval_set()
    try:
        episodes = policy.play_eval(greedy=greedy)
    finally:
        policy.close()
    target = out or (run_dir or Path("runs")) / f"eval-{eval_set.env_id}"
    return write_eval_bundle(policy, eval_set, episodes, checkpoint, target)


def write_eval_bundle(
    run: Policy | Trainer,
    eval_set: EvalSet,
    episodes: list,
    checkpoint: Path | None,
    target: Path,
) -> tuple[dict, Path]:
    """Score ``episodes`` of ``run`` (a :class:`Policy` or a trainer: its ``cfg`` and ``agents``;
    the plan of ``eval_set``, as ``play_eval`` returns them)
    and write their bundle to ``target`` (a .json file or a directory); returns the metrics and
    the bundle's path. Raises :class:`EvaluationError` when no episode could be graded."""
    import marft_envs
    from leaderboard.schema import Bundle, write_bundle

    from .core.evaluator import eval_metrics
    from .core.methods import get_method

    cfg = run.cfg
    env_id = eval_set.env_id
    m = eval_metrics(episodes, run.agents, prefix="eval")
    metrics: dict[str, Any] = {
        "score": m["eval/score"],
        "correct": m["eval/correct"],
        "episodes": len(episodes),
        "infra_errors": int(m["eval/infra_errors"]),
        "checkpoint": str(checkpoint) if checkpoint else None,
    }
    if metrics["infra_errors"] == len(episodes):
        last = episodes[0].verdicts[-1] if episodes and episodes[0].verdicts else {}
        first = last.get("reason", "")
        raise EvaluationError(
            f"all {len(episodes)} evaluation episodes on {env_id} ended in an infrastructure error "
            f"(first: {first!r}): nothing could be graded, so no score and no bundle; fix the "
            "verifier or sandbox and evaluate again"
        )
    env = marft_envs.make(env_id, **eval_set.overrides)
    try:
        bundle = Bundle.from_episodes(
            env,
            episodes,
            method=get_method(cfg.algo.method).leaderboard,
            model=require_model(cfg),
            config=cfg.to_dict(),
            seeds=eval_set.seeds,
            claimed_score=metrics["score"],
            dataset_size=eval_set.size,
        )
    finally:
        env.close()
    metrics["grader_version"] = bundle.grader_version
    return metrics, write_bundle(bundle, target)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.eval",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run_dir", nargs="?", help="a training run directory (omit to evaluate --model untrained)"
    )
    parser.add_argument(
        "--env", help="environment id to evaluate on (default: the run's env, test split)"
    )
    parser.add_argument("--model", help="model name when no run directory is given")
    parser.add_argument("--method", default="marft", help="method name for a run-less evaluation")
    parser.add_argument("--out", help="bundle path (.json file or directory)")
    parser.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_intermixed_args(argv)
    if args.run_dir and "=" in args.run_dir and not Path(args.run_dir).exists():
        # without a run directory the first key=value lands in the optional positional
        args.overrides.insert(0, args.run_dir)
        args.run_dir = None
    try:
        extra = list(args.overrides)
        if args.run_dir:
            run_dir = Path(args.run_dir)
            if not (run_dir / "config.yaml").is_file():
                raise ConfigError(f"{run_dir} is not a run directory (no config.yaml)")
            import yaml

            cfg = Config.from_dict(yaml.safe_load((run_dir / "config.yaml").read_text()))
            if args.env:
                extra.append(f"env.eval_id={args.env}")
            apply_overrides(cfg, extra)
            cfg.validate()
        else:
            if not (args.model and args.env):
                raise ConfigError(
                    "give a run directory, or --model and --env to evaluate an untrained model"
                )
            run_dir = None
            cfg = load_config(
                args.method, None, [f"env.id={args.env}", f"model.name={args.model}", *extra]
            )
        require_model(cfg)
        check_envs(cfg)
        print(describe(cfg), file=sys.stderr, flush=True)
        out = Path(args.out) if args.out else None
        policy, checkpoint = load_policy(cfg, run_dir, out)
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # usage errors only: setup
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        metrics, path = evaluate_policy(
            policy, checkpoint, run_dir, out, greedy=False if args.sample else None
        )
    except EvaluationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"score={metrics['score']:.4f} correct={metrics['correct']:.4f} "
        f"episodes={metrics['episodes']} "
        f"infra_errors={metrics['infra_errors']} grader={metrics['grader_version']} "
        f"checkpoint={metrics['checkpoint']}"
    )
    if metrics["infra_errors"]:
        print(
            f"warning: {metrics['infra_errors']} episode(s) ended in an infrastructure error; "
            "the score is over the other episodes, and the leaderboard re-grades them",
            file=sys.stderr,
        )
    print(f"bundle: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
