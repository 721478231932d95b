"""``python -m baselines.eval DIR --env ID``: evaluate a trained run, or a model trained
elsewhere, and write a result bundle.

    python -m baselines.eval runs/marft-1/ --env math500-3agent            # latest checkpoint
    python -m baselines.eval --model smollm2-135m --env arith-2agent        # the untrained base
    python -m baselines.eval runs/marft-1/ --env math500-3agent env.eval_episodes=500 --sample
    python -m baselines.eval my-sft/ --env arith-2agent                     # a causal-LM directory
    python -m baselines.eval my-lora/ --env arith-2agent [--base BASE]      # a PEFT LoRA adapter
    python -m baselines.eval --env arith-2agent --agent-model reasoner_0=A/ --agent-model actor_1=B/
    python -m baselines.eval runs/rloo/ --import rloo.py                    # a method of your own

DIR is a run directory of baselines (``config.yaml``), a Hugging Face causal-LM directory
(``config.json``, weights, tokenizer: what ``save_pretrained`` writes after a full fine-tune) or
a PEFT LoRA adapter directory (``adapter_config.json``; merged into its base, from
``base_model_name_or_path`` or ``--base``). ``--agent-model SEAT=DIR`` gives one seat its own
model directory (DIR, when given, plays the seats not named). Model directories are played
greedily like runs, and their bundle's method is ``other`` unless ``--method`` names one.

A run's bundle records the leaderboard name of the run's method
(:attr:`~baselines.core.methods.MethodSpec.leaderboard`) when the leaderboard lists it, else
``other``; ``--method`` names another (``other`` or a leaderboard method). A run of a method
registered in a researcher's own file needs that file: ``--import rloo.py`` (or a module name,
repeatable) imports it before the run's config is read.

The bundle (``leaderboard.schema.Bundle``: env spec, dataset hash, package version, method,
model, config, seeds, the grader version of the claimed score and every episode's transcript
and verdict score) is written to ``--out`` or ``DIR/eval-<env>/bundle.json``
(``runs/eval-<env>/`` without DIR); the leaderboard re-grades it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .cli import check_envs, describe, import_module_or_file, require_model, team_agents
from .core.config import Config, ConfigError, apply_overrides, load_config
from .core.methods import OTHER, get_method, resolve_method

if TYPE_CHECKING:
    from .core.evaluator import EvalSet, Evaluator
    from .core.generation import Generator
    from .core.models import ModelDir
    from .trainer import Trainer


class EvaluationError(RuntimeError):
    """No evaluation episode could be graded (every verdict was an infrastructure error)."""


@dataclass
class Policy:
    """What an evaluation needs and nothing more: the config, the team, an
    :class:`~baselines.core.evaluator.Evaluator` over the policy adapters (or over models
    trained elsewhere), and the generator (no critic, no optimiser).

    ``method``, ``model`` and ``models`` are what the bundle records when they differ from the
    config's: the leaderboard method name, the model label, and each agent's model directory
    (``ModelDir.describe()``); ``None`` for a run of ours."""

    cfg: Config
    agents: list[str]
    evaluator: Evaluator
    generator: Generator
    method: str | None = None
    model: str | None = None
    models: dict[str, dict[str, Any]] | None = None

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
    from .core.models import AdapterModel, LoraSpec, load_base
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
    scratch = run_dir if run_dir is not None else Path(out or ".").parent
    evaluator = Evaluator(
        cfg,
        policy,
        spec.policy_adapter,
        env_overrides(cfg, for_eval=True),
        _env_maker(cfg),
        device,
    )
    generator = make_generator(cfg, policy, policy.adapters, scratch)
    return Policy(cfg, agents, evaluator, generator), checkpoint


def _env_maker(cfg: Config):
    """``(env_id, seed, overrides, num_envs) -> VectorEnv``: ``train.workers``' worker group."""
    from .distributed import make_worker_group

    t = cfg.train

    def make_envs(env_id: str, seed: int, overrides: dict, num_envs: int):
        return make_worker_group(
            t.workers, env_id, num_envs, num_workers=t.env_workers, seed=seed, **overrides
        )

    return make_envs


def load_external_policy(
    cfg: Config,
    models: Mapping[str, ModelDir],
    method: str = "other",
    label: str | None = None,
) -> Policy:
    """A :class:`Policy` over models trained elsewhere: ``models`` maps every agent of the
    evaluation environment (``cfg``'s ``env.id``) to a causal-LM or PEFT adapter directory
    (:func:`~baselines.core.models.inspect_model_dir`). Each directory is loaded once
    (:func:`~baselines.core.models.load_pretrained`: adapters merged into their base), with
    transformers generation and ``cfg``'s ``model`` decoding settings (``max_new_tokens``,
    ``stop``, ``max_prompt_tokens``); each agent plays with its own directory's model.

    ``method`` is the bundle's leaderboard method and ``label`` its model label. Raises
    :class:`ConfigError` for an agent without a model or ``model.backend=vllm``, and
    ``ModelNotFoundError`` (a ``ValueError``) for a directory that does not load.
    """
    from .core.evaluator import Evaluator
    from .core.generation import HFGenerator, RoutedGenerator, stop_token_ids
    from .core.models import load_pretrained
    from .trainer import env_overrides, resolve_device, resolve_dtype, seed_everything

    if cfg.model.backend != "transformers":
        raise ConfigError(
            f"model.backend={cfg.model.backend!r}: model directories are evaluated with "
            "transformers generation (model.backend=transformers)"
        )
    device = resolve_device(cfg.train.device)
    seed_everything(cfg.train.seed)
    eval_env = env_overrides(cfg, for_eval=True)
    agents = team_agents(*eval_env)
    missing = [a for a in agents if a not in models]
    if missing:
        raise ConfigError(f"no model directory for {missing} of {eval_env[0]} (agents {agents})")
    dtype = resolve_dtype(cfg.model.dtype, device)
    loaded: dict[ModelDir, HFGenerator] = {}
    for agent in agents:
        where = models[agent]
        if where not in loaded:
            model, tokenizer = load_pretrained(where, dtype, device, cfg.train.seed)
            loaded[where] = HFGenerator(
                model,
                batch_size=max(cfg.env.num_envs, 1),
                max_prompt_tokens=cfg.model.max_prompt_tokens,
                extra_stop_ids=stop_token_ids(tokenizer, cfg.model.stop),
                tokenizer=tokenizer,
            )
    generator = RoutedGenerator({a: loaded[models[a]] for a in agents})
    networks = [g.network for g in loaded.values()]
    evaluator = Evaluator(cfg, networks, _seat_route, eval_env, _env_maker(cfg), device)
    described = {a: models[a].describe() for a in agents}
    return Policy(cfg, agents, evaluator, generator, method=method, model=label, models=described)


def _seat_route(agent: str) -> str:
    """Each agent plays with its own route of the :class:`RoutedGenerator` (its id)."""
    return agent


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


# what a bundle of models trained elsewhere records of the config: decoding, environments,
# seed and workers (no algorithm, LoRA or training-length settings: none of ours applied)
EXTERNAL_CONFIG = {
    "model": ("dtype", "backend", "max_prompt_tokens", "max_new_tokens", "temperature", "top_p"),
    "env": None,  # all of it
    "train": ("seed", "device", "workers", "env_workers"),
}


def bundle_config(run: Policy | Trainer) -> dict[str, Any]:
    """The ``config`` a bundle of ``run`` records: the whole config for a run of ours; for
    models trained elsewhere the settings that applied (:data:`EXTERNAL_CONFIG`, the stop
    strings included) and ``models``, each agent's model directory."""
    full = run.cfg.to_dict()
    models = run.models if isinstance(run, Policy) else None
    if models is None:
        return full
    out: dict[str, Any] = {}
    for section, keys in EXTERNAL_CONFIG.items():
        values = full[section]
        out[section] = dict(values) if keys is None else {k: values[k] for k in keys}
    out["model"]["stop"] = full["model"]["stop"]
    out["models"] = models
    return out


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
    the bundle's path. The bundle's method, model and config are the config's, or a
    :class:`Policy`'s own ``method``, ``model`` and :func:`bundle_config`. Raises
    :class:`EvaluationError` when no episode could be graded."""
    import marft_envs
    from leaderboard.schema import Bundle, write_bundle

    from .core.evaluator import eval_metrics

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
    own = run if isinstance(run, Policy) else None
    method = own.method if own and own.method else leaderboard_method(cfg.algo.method)
    model = own.model if own and own.model else require_model(cfg)
    env = marft_envs.make(env_id, **eval_set.overrides)
    try:
        bundle = Bundle.from_episodes(
            env,
            episodes,
            method=method,
            model=model,
            config=bundle_config(run),
            seeds=eval_set.seeds,
            claimed_score=metrics["score"],
            dataset_size=eval_set.size,
        )
    finally:
        env.close()
    metrics["grader_version"] = bundle.grader_version
    return metrics, write_bundle(bundle, target)


def leaderboard_method(method: str) -> str:
    """The method a bundle of a run of ``method`` (any spelling of a registered method)
    records: its :attr:`~baselines.core.methods.MethodSpec.leaderboard` name when the
    leaderboard lists it (``leaderboard.schema.METHODS``), else ``other`` (a researcher's own
    method: the leaderboard's name for every method it does not list)."""
    from leaderboard.schema import METHODS

    name = get_method(method).leaderboard
    return name if name in METHODS else OTHER


def bundle_method(name: str) -> str:
    """The leaderboard method name ``--method`` gives a bundle (of a run or of models trained
    elsewhere): ``other``, a leaderboard method, or any spelling of a registered method that
    has one (``at_grpo``)."""
    from leaderboard.schema import METHODS

    if name in METHODS:
        return name
    try:
        resolved = get_method(name).leaderboard
    except ValueError:
        resolved = None
    if resolved not in METHODS:
        raise ConfigError(
            f"--method {name!r} is not a leaderboard method; valid: {', '.join(METHODS)} "
            "(other: trained by anything else)"
        )
    return str(resolved)


def parse_agent_models(items: Sequence[str]) -> dict[str, str]:
    """``["reasoner_0=DIR", ...]`` (``--agent-model``) as ``{seat: DIR}``; :class:`ConfigError`
    for an item without ``=`` or a seat given twice."""
    out: dict[str, str] = {}
    for item in items:
        seat, sep, where = item.partition("=")
        if not sep or not seat or not where:
            raise ConfigError(f"--agent-model {item!r} is not SEAT=DIR (e.g. reasoner_0=runs/sft/)")
        if seat in out:
            raise ConfigError(f"--agent-model gives {seat!r} twice ({out[seat]!r}, {where!r})")
        out[seat] = where
    return out


def seat_models(
    agents: Sequence[str],
    env_id: str,
    default: str | None,
    per_seat: Mapping[str, str],
    base: str | None = None,
) -> dict[str, ModelDir]:
    """Every agent's model directory: ``per_seat``'s (``--agent-model``), else ``default`` (the
    positional DIR). ``base`` is the base of every PEFT adapter among them (``--base``).
    :class:`ConfigError` for a seat that is not an agent of ``env_id``, an agent without a model,
    a run directory of ours as a seat's model, and ``base`` without any adapter; the directories
    are classified by :func:`~baselines.core.models.inspect_model_dir`."""
    from .core.models import PEFT_ADAPTER, RUN_DIR, inspect_model_dir

    unknown = sorted(set(per_seat) - set(agents))
    if unknown:
        raise ConfigError(
            f"--agent-model names {unknown}, not agents of {env_id}: its agents are {list(agents)}"
        )
    missing = [a for a in agents if a not in per_seat and default is None]
    if missing:
        raise ConfigError(
            f"no model for {missing} of {env_id}: give --agent-model SEAT=DIR for every agent "
            f"of {list(agents)}, or a model directory (DIR) for the seats not named"
        )
    seen: dict[str, ModelDir] = {}
    out: dict[str, ModelDir] = {}
    for agent in agents:
        where = per_seat.get(agent, default)
        assert where is not None  # checked above
        if where not in seen:
            adapter = (Path(where).expanduser() / "adapter_config.json").is_file()
            found = inspect_model_dir(where, base=base if adapter else None)
            if found.kind == RUN_DIR:
                raise ConfigError(
                    f"{where} is a training run directory of baselines: evaluate it on its own "
                    f"(python -m baselines.eval {where} --env {env_id}); a seat can play one of "
                    "its adapters, RUN/checkpoints/step_N/peft/<adapter>, with --base"
                )
            seen[where] = found
        out[agent] = seen[where]
    if base is not None and not any(m.kind == PEFT_ADAPTER for m in out.values()):
        raise ConfigError(f"--base {base!r} is for PEFT adapter directories, and none was given")
    return out


def model_label(models: Mapping[str, ModelDir]) -> str:
    """The bundle's ``model`` for model directories: the directory's name (an adapter's with
    its base: a Hub id or built-in name, a local base directory's name), or ``seat=label`` for
    each seat when the seats differ."""

    def one(m: ModelDir) -> str:
        if not m.base:
            return m.path.name
        base = Path(m.base).name if Path(m.base).is_absolute() else m.base  # a local directory
        return f"{base} + LoRA {m.path.name}"

    dirs = set(models.values())
    if len(dirs) == 1:
        return one(next(iter(dirs)))
    return ", ".join(f"{agent}={one(m)}" for agent, m in models.items())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.eval",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "run_dir",
        nargs="?",
        metavar="DIR",
        help="a training run directory, a causal-LM directory or a PEFT adapter directory "
        "(omit to evaluate --model untrained, or with --agent-model for every seat)",
    )
    parser.add_argument(
        "--env", help="environment id to evaluate on (default: the run's env, test split)"
    )
    parser.add_argument("--model", help="model name when no run directory is given")
    parser.add_argument(
        "--method",
        help="the bundle's leaderboard method for a run directory (default: the run's method "
        "when the leaderboard lists it, else other) or model directories (default other); for a "
        "run-less --model evaluation, the method whose untrained adapters play (default marft)",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE_OR_FILE",
        help="import a module or a .py file first, so the methods it registers are known (a run "
        "of a method in your own file: --import rloo.py); repeat for more",
    )
    parser.add_argument(
        "--base", help="base model of a PEFT adapter (default: its base_model_name_or_path)"
    )
    parser.add_argument(
        "--agent-model",
        action="append",
        default=[],
        metavar="SEAT=DIR",
        help="a causal-LM or adapter directory for one seat (repeat for each; e.g. reasoner_0=DIR)",
    )
    parser.add_argument(
        "--model-name", help="the bundle's model label for model directories (default: their names)"
    )
    parser.add_argument("--out", help="bundle path (.json file or directory)")
    parser.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_intermixed_args(argv)
    if args.run_dir and "=" in args.run_dir and not Path(args.run_dir).exists():
        # without a run directory the first key=value lands in the optional positional
        args.overrides.insert(0, args.run_dir)
        args.run_dir = None
    try:
        for ref in args.imports:
            import_module_or_file(ref)
        extra = list(args.overrides)
        out = Path(args.out) if args.out else None
        kind = None
        if args.run_dir and not args.agent_model:
            from .core.models import RUN_DIR, inspect_model_dir

            adapter = (Path(args.run_dir).expanduser() / "adapter_config.json").is_file()
            kind = inspect_model_dir(args.run_dir, base=args.base if adapter else None).kind
            if kind == RUN_DIR:
                kind = None
        if args.agent_model or kind is not None:
            return _main_external(args, extra, out)
        if args.base or args.model_name:
            raise ConfigError(
                "--base and --model-name are for model directories (a causal LM or a PEFT "
                "adapter), not for a run directory or --model"
            )
        claimed = None  # the bundle's method when --method names one for a run directory
        if args.run_dir:
            run_dir = Path(args.run_dir)
            cfg = read_run_config(run_dir)
            claimed = bundle_method(args.method) if args.method else None
            if args.env:
                extra.append(f"env.eval_id={args.env}")
            apply_overrides(cfg, extra)
            cfg.validate()
        else:
            if not (args.model and args.env):
                raise ConfigError(
                    "give a run directory or a model directory, or --model and --env to evaluate "
                    "an untrained model"
                )
            run_dir = None
            cfg = load_config(
                args.method or "marft",
                None,
                [f"env.id={args.env}", f"model.name={args.model}", *extra],
            )
        require_model(cfg)
        check_envs(cfg)
        print(describe(cfg), file=sys.stderr, flush=True)
        policy, checkpoint = load_policy(cfg, run_dir, out)
        policy.method = claimed
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # usage errors only: setup
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _evaluate_and_report(policy, checkpoint, run_dir, out, args.sample)


def read_run_config(run_dir: Path) -> Config:
    """The config a run directory saved (``config.yaml``). A method that is not registered
    (a researcher's own, whose file was not imported) gets a :class:`ConfigError` saying to
    pass ``--import`` with the file that registers it."""
    import yaml

    data = yaml.safe_load((run_dir / "config.yaml").read_text())
    algo = data.get("algo") if isinstance(data, dict) else None
    method = algo.get("method") if isinstance(algo, dict) else None
    if method is not None:
        try:
            resolve_method(str(method))
        except ValueError:
            raise ConfigError(
                f"{run_dir / 'config.yaml'}: algo.method {method!r} is not a registered method; "
                f"if the run trained a method of your own, pass --import <the file that "
                f"registers it> (e.g. --import {method}.py or --import my_package.methods)"
            ) from None
    return Config.from_dict(data)


def _main_external(args: argparse.Namespace, extra: list[str], out: Path | None) -> int:
    """``main`` for model directories trained elsewhere (``DIR`` and/or ``--agent-model``)."""
    from .trainer import env_overrides

    try:
        if not args.env:
            raise ConfigError(
                "--env ID is required to evaluate a model directory (which environment to play)"
            )
        if args.model:
            raise ConfigError(
                "--model loads a model with untrained adapters of a method; to evaluate model "
                "directories give them as DIR or --agent-model SEAT=DIR (label the bundle with "
                "--model-name)"
            )
        home = Path(args.run_dir) if args.run_dir else Path("runs")
        if out is None and home.is_dir() and not os.access(home, os.W_OK):
            raise ConfigError(f"{home} is not writable: pass --out for the bundle")
        method = bundle_method(args.method or "other")
        cfg = load_config("marft", None, [f"env.id={args.env}", *extra])
        eval_id, eval_kw = env_overrides(cfg, for_eval=True)
        agents = team_agents(eval_id, eval_kw)
        models = seat_models(
            agents, eval_id, args.run_dir, parse_agent_models(args.agent_model), args.base
        )
        label = args.model_name or model_label(models)
        cfg.model.name = label
        print(f"method={method} model={label} env={cfg.env.id}", file=sys.stderr, flush=True)
        for agent, where in models.items():
            base = f" (base {where.base})" if where.base else ""
            print(f"{agent}: {where.kind} {where.path}{base}", file=sys.stderr, flush=True)
        policy = load_external_policy(cfg, models, method=method, label=label)
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # usage errors only: setup
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _evaluate_and_report(policy, None, home, out, args.sample)


def _evaluate_and_report(
    policy: Policy, checkpoint: Path | None, home: Path | None, out: Path | None, sample: bool
) -> int:
    """Play, write the bundle (under ``out``, else ``home/eval-<env>``) and print the result."""
    try:
        metrics, path = evaluate_policy(
            policy, checkpoint, home, out, greedy=False if sample else None
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
