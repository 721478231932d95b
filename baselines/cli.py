"""The command line shared by the method modules (``python -m baselines.marft`` and the others
the registry, :mod:`baselines.core.methods`, names).

    python -m baselines.marft --env ID --model NAME_OR_PATH [--config FILE] [--out DIR]
                              [--resume DIR] [--overwrite] [key=value ...]

``key=value`` overrides any config field (``algo.lr=2e-6``, ``iterations=2``,
``env.overrides.horizon=2``); ``--help`` lists every field with its default under the method's
preset. A method in a researcher's own file runs the same way (``python rloo.py --env ...``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from .core.config import (
    Config,
    ConfigError,
    apply_file,
    apply_overrides,
    config_help,
    load_config,
)
from .core.methods import METHODS, get_method


def build_parser(prog: str, description: str, preset: str | None = None) -> argparse.ArgumentParser:
    """The method command line; its epilog lists every config field with the defaults of
    ``preset``'s method (the dataclass defaults when ``None``)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=config_help(preset),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--env", help="registered environment id (e.g. math-3agent, arith-2agent)")
    parser.add_argument(
        "--model", help="Hugging Face id, local path, or a built-in: tiny-random, smollm2-135m"
    )
    parser.add_argument(
        "--config", help="YAML file with the nested config layout (algo: {lr: 2e-6})"
    )
    parser.add_argument("--out", help="run directory (default runs/<method>-<env>-<time>)")
    parser.add_argument(
        "--resume", help="run directory (or checkpoint folder) to continue bit for bit"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="delete an existing --out run directory and start afresh",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar (it is drawn only on a terminal anyway)",
    )
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return parser


def resolve_config(preset: str, args: argparse.Namespace) -> tuple[Config, Path]:
    """The run's config and directory from a preset and the parsed arguments.

    With ``--resume`` the run directory's saved ``config.yaml`` is the base (so the resumed
    run is the same run); ``--config``/overrides on top may only extend it (e.g. more iterations).
    """
    flags = [f"env.id={args.env}"] if args.env else []
    flags += [f"model.name={args.model}"] if args.model else []
    if args.out:
        flags.append(f"train.out={args.out}")
    if args.resume:
        run_dir = Path(args.resume)
        if (run_dir / "meta.json").is_file():  # a checkpoint folder: run dir is two levels up
            run_dir = run_dir.parent.parent
        saved = run_dir / "config.yaml"
        if not saved.is_file():
            raise ConfigError(f"--resume {args.resume!r}: {saved} not found (not a run directory)")
        import yaml

        cfg = Config.from_dict(yaml.safe_load(saved.read_text()))
        if args.config:
            apply_file(cfg, args.config)
        apply_overrides(cfg, flags + list(args.overrides))
        cfg.train.out = str(run_dir)
        cfg.validate()
        return cfg, run_dir
    cfg = load_config(preset, args.config, flags + list(args.overrides))
    if cfg.env.id is None:
        raise ConfigError("no environment given: pass --env ID (e.g. --env arith-2agent)")
    require_model(cfg)
    out = Path(cfg.train.out or f"runs/{preset}-{cfg.env.id}-{time.strftime('%Y%m%d-%H%M%S')}")
    if out.is_dir() and any(out.iterdir()):
        if not getattr(args, "overwrite", False):
            raise ConfigError(
                f"run directory {out} already exists: continue it with --resume {out}, "
                "start afresh with --overwrite, or choose another --out"
            )
        shutil.rmtree(out)
    cfg.train.out = str(out)
    return cfg, out


def require_model(cfg: Config) -> str:
    """The model the config names; :class:`ConfigError` if none (no silent default)."""
    if cfg.model.name is None:
        raise ConfigError(
            "no model given: pass --model NAME (a Hugging Face id, a local path, or a "
            "built-in: tiny-random, smollm2-135m) or set model.name in the config"
        )
    return cfg.model.name


def team_agents(env_id: str, overrides: dict) -> list[str]:
    """The agent ids of ``env_id`` made with ``overrides``."""
    import marft_envs

    env = marft_envs.make(env_id, **overrides)
    try:
        return list(env.possible_agents)
    finally:
        env.close()


def check_envs(cfg: Config) -> None:
    """Fail before any model loads: the environment ids, the keys of ``env.overrides``, and an
    evaluation team whose every agent has a trained policy adapter."""
    from .trainer import env_overrides

    train_id, train_kw = env_overrides(cfg, for_eval=False)
    eval_id, eval_kw = env_overrides(cfg, for_eval=True)
    if eval_id == train_id:
        return
    method = get_method(cfg.algo.method)
    trained, wanted = team_agents(train_id, train_kw), team_agents(eval_id, eval_kw)
    adapters = method.policy_adapters(trained)
    missing = [a for a in wanted if method.policy_adapter(a) not in adapters]
    if missing:
        raise ConfigError(
            f"{eval_id} is played by {wanted}, but the run trained {trained} on "
            f"{train_id}: no adapter for {missing}; evaluate on an environment with "
            "the same team (same roles and size)"
        )


def describe(cfg: Config) -> str:
    """One line naming what a run is: method, model, environment, run directory."""
    return (
        f"method={cfg.algo.method} model={cfg.model.name} env={cfg.env.id}"
        + (f" eval_env={cfg.env.eval_id}" if cfg.env.eval_id else "")
        + (f" out={cfg.train.out}" if cfg.train.out else "")
    )


def command(module: str) -> str:
    """How the method module ``module`` is run: ``python -m baselines.<module>``, or for a
    method registered in a researcher's own file (no ``baselines.<module>``), the script this
    process runs (``python rloo.py``)."""
    if importlib.util.find_spec(f"baselines.{module}") is not None:
        return f"python -m baselines.{module}"
    script = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else f"{module}.py"
    return f"python {script}"


def import_module_or_file(ref: str) -> str:
    """Import ``ref``, a module name (``my_methods``) or a ``.py`` file path (``rloo.py``), so
    the methods it registers (:func:`~baselines.core.methods.register_method`) are known;
    returns the module's name. A file is imported as the module named by its stem (how a
    ``"module:function"`` estimator of the file is found; the same file again is not run
    twice). :class:`ConfigError` for a file that does not exist, a file whose stem names a
    module imported from elsewhere (``json.py``), or a module that cannot be found."""
    path = Path(ref).expanduser()
    if ref.endswith(".py") or path.is_file():
        if not path.is_file():
            raise ConfigError(f"--import {ref!r}: no such file")
        name = path.stem
        loaded = sys.modules.get(name)
        if loaded is not None:
            where = getattr(loaded, "__file__", None)
            if where and Path(where).resolve() == path.resolve():
                return name
            raise ConfigError(
                f"--import {ref!r}: a module named {name!r} is imported already (from "
                f"{where or 'built-in'}); rename the file"
            )
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has one
            raise ConfigError(f"--import {ref!r}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return name
    try:
        importlib.import_module(ref)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (ref == exc.name or ref.startswith(f"{exc.name}.")):
            raise ConfigError(
                f"--import {ref!r}: no module {exc.name!r} (give a module name on the Python "
                "path or a .py file)"
            ) from None
        raise
    return ref


def descriptions() -> dict[str, str]:
    """The method modules (``python -m baselines.<module>`` or a researcher's own) of the
    registry as it is now, each with its method's summary."""
    return {spec.module: METHODS[spec.module].summary for spec in METHODS.values()}


class MethodMain(Protocol):
    """``main(argv=None) -> exit code`` of a method module."""

    def __call__(self, argv: Sequence[str] | None = None) -> int: ...


def method_main(preset: str) -> MethodMain:
    """The ``main(argv)`` of ``python -m baselines.<preset>``: :func:`train_main` with the
    method's summary (:func:`descriptions`); it runs every method whose ``module`` it is."""
    known = descriptions()
    if preset not in known:
        raise ValueError(f"no method module {preset!r}; the methods are {sorted(known)}")

    def main(argv: Sequence[str] | None = None) -> int:
        return train_main(preset, known[preset], argv)

    return main


def train_main(preset: str, description: str, argv: Sequence[str] | None = None) -> int:
    """Entry point of one method: parse, build the trainer, train (or resume), plot.

    Usage errors (config, environment id, model, checkpoint path) print one line and exit 2;
    they are caught only while the run is being set up. An error during training is a bug or
    a broken environment, and keeps its traceback.
    """
    prog = command(preset)
    parser = build_parser(prog, description, preset)
    args = parser.parse_intermixed_args(argv)  # key=value may come before or after options
    try:
        cfg, out = resolve_config(preset, args)
        # a module also runs the variants registered under it (at_grpo_shared, ...)
        wanted = cfg.algo.method
        module = get_method(wanted).module
        if module != preset:
            raise ConfigError(
                f"algo.method={wanted!r} but this is {prog}; run {command(module)} instead"
            )
        check_envs(cfg)
        print(describe(cfg), file=sys.stderr, flush=True)
        trainer, start = build_trainer(cfg, out, resume=args.resume)
    except (ConfigError, FileNotFoundError, ValueError) as exc:  # unknown model, bad overrides
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # the bar only on a terminal: piped, the console's one metrics line per iteration is the log
    return run_training(trainer, start, progress=not args.no_progress and sys.stderr.isatty())


def build_trainer(cfg: Config, out: Path, resume: str | None = None):
    """The run's :class:`~baselines.trainer.Trainer` (config, environments and model
    resolved), restored from ``resume``'s newest checkpoint when given; returns
    ``(trainer, start iteration)``, start ``None`` for a fresh run."""
    from .trainer import Trainer, resume_path

    out.mkdir(parents=True, exist_ok=True)
    checkpoint = resume_path(resume) if resume else None
    trainer = Trainer(cfg, out)
    start = None
    if checkpoint is not None:
        start = trainer.load(checkpoint)
        print(f"resumed from {checkpoint} at iteration {start}", file=sys.stderr)
    return trainer, start


def run_training(trainer, start: int | None = None, progress: bool = True) -> int:
    """Train ``trainer`` into its run directory (resumed at iteration ``start``, ``None``: fresh);
    write the config, metrics and the plot."""
    from .core.logging import JSONL_NAME, MetricsLogger, plot_learning_curves

    cfg, out = trainer.cfg, trainer.out_dir
    cfg.save(out / "config.yaml")
    sinks = set(cfg.train.log)
    logger = MetricsLogger(
        out,
        console="console" in sinks,
        jsonl="jsonl" in sinks,
        tensorboard="tensorboard" in sinks,
        resume_step=start,
    )
    trainer.logger = logger
    try:
        trainer.train(progress=progress)
    finally:
        logger.close()
    if "jsonl" in sinks and (out / JSONL_NAME).is_file():
        plot = plot_learning_curves(
            out / JSONL_NAME,
            out / "learning_curves.png",
            keys=[
                "train/score",
                "eval/score",
                "agent/*/policy_loss",
                "agent/*/entropy",
                "critic/*/value_loss",
            ],
        )
        print(f"learning curves: {plot}", file=sys.stderr)
    print(f"run directory: {out}", file=sys.stderr)
    return 0
