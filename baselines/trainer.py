"""The trainer: a run's parts put together, each with one job.

One iteration (:meth:`Trainer.step`) reads rollout -> estimate -> update -> log:

* the rollout source of the method (:mod:`baselines.core.sources`: episodes for PPO, trees for
  AT-GRPO, joint groups for MAGRPO) plays the iteration's samples;
* the learner (:mod:`baselines.core.learner`) scores them (old and reference log-probabilities,
  the critics' values);
* the method's estimator (:mod:`baselines.core.estimators`) computes advantages and returns;
* the learner updates (PPO epochs, one optimiser and schedule per adapter and critic);
* the metrics are logged.

What differs between methods is data in their :class:`~baselines.core.methods.MethodSpec`;
the trainer never branches on it. The evaluator (:mod:`baselines.core.evaluator`) plays the
evaluation sets and the checkpointer (:mod:`baselines.core.checkpointer`) saves and resumes.

Determinism: the rollout of iteration ``k`` resets the environments with a seed derived from
``(train.seed, k)``, sampling and dropout draw from the global torch RNG, and minibatch order
from a generator seeded with ``(train.seed, k)``. A checkpoint stores every adapter, value
head, optimiser, scheduler, the RNG states and ``k``, so ``--resume`` continues bit for bit.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import marft_envs
from marft_envs import VectorEnv

from .core import diagnostics
from .core.checkpoint import latest_checkpoint
from .core.checkpointer import Checkpointer, RunPosition
from .core.config import Config, ConfigError
from .core.estimators import check_finite, get_estimator
from .core.evaluator import EVAL_SEED, EvalSet, Evaluator, eval_metrics
from .core.generation import Generator, HFGenerator, SamplingSpec, stop_token_ids
from .core.learner import Learner, build_models
from .core.models import AdapterModel, load_base
from .core.rollout import Rollout
from .core.sources import SourceContext, make_source
from .distributed import make_worker_group
from .methods import get_method

__all__ = [
    "EVAL_SEED",
    "EvalSet",
    "Trainer",
    "env_overrides",
    "eval_metrics",
    "make_generator",
    "resume_path",
    "use_deterministic_algorithms",
]


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"train.device={name!r} but CUDA is not available; use cpu or auto")
    return name


def resolve_dtype(name: str, device: str) -> str:
    if name == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    return name


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


CUBLAS_WORKSPACE = ":4096:8"  # what torch's reproducibility notes ask cuBLAS for


def use_deterministic_algorithms() -> None:
    """``torch.use_deterministic_algorithms(True)`` (``train.deterministic``), with
    ``CUBLAS_WORKSPACE_CONFIG`` set first: on CUDA >= 10.2 deterministic cuBLAS needs it, and
    without it the first matmul raises. cuBLAS (and torch's workspace) read it once, at the
    first GPU matmul, which cannot be seen from here: once CUDA is initialised without it
    (a model already on the GPU), setting it may be too late, so the run stops here with
    what to set instead."""
    if "CUBLAS_WORKSPACE_CONFIG" not in os.environ:
        if torch.cuda.is_initialized():
            raise ConfigError(
                "train.deterministic=true needs CUBLAS_WORKSPACE_CONFIG set before CUDA "
                f"initialises, and CUDA is already initialised: export "
                f"CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} before starting Python"
            )
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    torch.use_deterministic_algorithms(True)


def env_overrides(cfg: Config, for_eval: bool) -> tuple[str, dict[str, Any]]:
    """The environment id (resolved to its version: ``arith-2agent`` -> ``arith-2agent-v1``, the
    id logs, checkpoints and bundles record) and ``make`` overrides of training or evaluation.

    Training uses ``split=train`` when the user set no split and the env's dataset has a
    train split (registered ids default to their test split, which is what evaluation uses).
    """
    env_id = cfg.env.eval_id if (for_eval and cfg.env.eval_id) else cfg.env.id
    if env_id is None:
        raise ConfigError("env.id is required: pass --env ID (see `marft-envs list`)")
    try:
        spec = marft_envs.spec(env_id)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from None
    overrides = dict(cfg.env.overrides)
    try:  # a typo in env.overrides fails here, before any model loads
        marft_envs.check_overrides(spec, overrides)
    except TypeError as exc:
        raise ConfigError(f"env.overrides: {exc}") from None
    if for_eval:
        overrides.pop("split", None)
    elif "split" not in overrides and isinstance(spec.kwargs.get("dataset"), str):
        import tasks

        try:
            if "train" in tasks.dataset_info(spec.kwargs["dataset"]).splits:
                overrides["split"] = "train"
        except (KeyError, ValueError):
            pass
    return spec.id, overrides


def make_generator(
    cfg: Config, model: AdapterModel, adapters: list[str], out_dir: Path
) -> Generator:
    """What rollouts generate with: transformers ``generate`` on ``model`` itself (batches of
    ``env.num_envs``), or a vLLM engine under ``out_dir/vllm`` holding its own copy of
    ``adapters`` (``model.backend``); both stop at ``model.stop`` too."""
    extra_stops = stop_token_ids(model.tokenizer, cfg.model.stop)
    if cfg.model.backend == "vllm":
        from .distributed.vllm_generator import VLLMGenerator

        return VLLMGenerator.build(
            model,
            out_dir / "vllm",
            adapters=adapters,
            max_prompt_tokens=cfg.model.max_prompt_tokens,
            extra_stop_ids=extra_stops,
        )
    return HFGenerator(
        model,
        batch_size=max(cfg.env.num_envs, 1),
        max_prompt_tokens=cfg.model.max_prompt_tokens,
        extra_stop_ids=extra_stops,
    )


class Trainer:
    """Builds a run's parts from its config and method, and trains.

    Args:
        cfg: a :class:`Config` (``env.id`` required); validated here (:class:`ConfigError`).
        out_dir: run directory (config, metrics, checkpoints, plots).
        base: an already loaded ``(model, tokenizer)`` to use instead of ``cfg.model.name``.
        logger: object with ``log(step, metrics)`` and ``close()``; ``None`` keeps metrics in
            :attr:`history` only.

    Parts: :attr:`source`, :attr:`learner` (also :attr:`model`, :attr:`critic_model`,
    :attr:`critics`, :attr:`optimizers`, :attr:`schedulers`), :attr:`estimator`,
    :attr:`evaluator`, :attr:`checkpointer`, and :attr:`generator` (replaceable: the parts
    that generate take it at each call).
    """

    def __init__(self, cfg: Config, out_dir: str | Path, base=None, logger=None):
        cfg.validate()
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.method = get_method(cfg.algo.method)
        self.device = resolve_device(cfg.train.device)
        if cfg.train.deterministic:
            use_deterministic_algorithms()
        seed_everything(cfg.train.seed)
        env_id, overrides = env_overrides(cfg, for_eval=False)
        self.env_id = env_id
        try:
            self.venv = self._make_envs(env_id, cfg.train.seed, overrides)
        except TypeError as exc:  # marft_envs.make: a mistyped env.overrides key is a usage error
            if "unknown override" not in str(exc):
                raise
            raise ConfigError(f"env.overrides: {exc}") from exc
        self.agents = list(self.venv.possible_agents)
        self._train_overrides = overrides

        if base is not None:
            model, tokenizer = base
        elif cfg.model.name is None:
            raise ConfigError(
                "model.name is required (--model): a Hugging Face id, a local path, "
                "or a built-in such as tiny-random"
            )
        else:
            model, tokenizer = load_base(
                cfg.model.name,
                resolve_dtype(cfg.model.dtype, self.device),
                self.device,
                cfg.train.seed,
            )
        model.to(self.device)
        models = build_models(cfg, self.method, self.agents, model, tokenizer)
        self.model, self.critic_model, self.critics = models
        self.policy_names = self.method.policy_adapters(self.agents)
        self.critic_names = self.method.critic_names(self.agents)
        self.generator: Generator = make_generator(cfg, self.model, self.policy_names, self.out_dir)

        self.learner = Learner(cfg, self.method, self.agents, models, self._horizon(), self.device)
        self.optimizers, self.schedulers = self.learner.optimizers, self.learner.schedulers
        self.pad_id = self.learner.pad_id
        self.source = make_source(
            self.method.rollout,
            SourceContext(
                self.venv,
                lambda: marft_envs.make(self.env_id, **self._train_overrides),
                self.method.policy_adapter,
                cfg.train.episodes_per_iteration,
                cfg.algo,
            ),
        )
        self.estimator = get_estimator(self.method.estimator)
        self.evaluator = Evaluator(
            cfg,
            self.model,
            self.method.policy_adapter,
            env_overrides(cfg, for_eval=True),
            self._make_envs,
            self.device,
        )
        self.checkpointer = Checkpointer(self.out_dir, self.learner, cfg.train.keep_checkpoints)
        self.history: list[dict[str, Any]] = []
        self.logger = logger
        # called as hook(iteration, episodes) after every evaluate(): what a caller needs to keep
        # the evaluation transcripts of train() (a result bundle) without re-playing them
        self.on_evaluate: list[Callable[[int, list[marft_envs.Episode]], None]] = []

    @property
    def iteration(self) -> int:
        """Iterations done (the learner's updates)."""
        return self.learner.iteration

    # ------------------------------------------------------------------ public API

    def train(self, progress: bool = False) -> list[dict[str, Any]]:
        """Run until ``train.iterations``; evaluate, checkpoint and log on the way."""
        t = self.cfg.train
        if self.iteration == 0 and self.cfg.env.eval_episodes > 0:
            self.log(0, self.evaluate(prefix="eval"))
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(
                total=t.iterations, initial=self.iteration, desc=f"{self.method.name}", unit="it"
            )
        while self.iteration < t.iterations:
            metrics = self.step()
            self.log(self.iteration, metrics)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(score=f"{metrics['train/score']:.3f}")
            done = self.iteration >= t.iterations
            if (
                t.eval_every
                and self.iteration % t.eval_every == 0
                and not done
                and self.cfg.env.eval_episodes
            ):
                self.log(self.iteration, self.evaluate(prefix="eval"))
            if t.checkpoint_every and self.iteration % t.checkpoint_every == 0 and not done:
                self.save()
        if bar is not None:
            bar.close()
        if (
            self.cfg.env.eval_episodes > 0
            and t.iterations > 0
            and not any(h["step"] == self.iteration and "eval/score" in h for h in self.history)
        ):
            self.log(self.iteration, self.evaluate(prefix="eval"))
        self.save()
        return self.history

    def step(self) -> dict[str, float]:
        """One iteration: rollout -> estimate -> update -> log. Returns its metrics."""
        cfg = self.cfg
        t_start = time.perf_counter()
        self.learner.set_training(False)
        sampling = SamplingSpec(
            cfg.model.max_new_tokens, cfg.model.temperature, cfg.model.top_p, greedy=False
        )
        # infrastructure-error episodes are dropped (and counted) by the source, never trained on
        batch = self.source.collect(self.generator, self.data_seed(self.iteration), sampling)
        t_scored = time.perf_counter()
        scoring = self.learner.score(batch)
        estimate = self.estimator(scoring.scored, cfg.algo)
        t_model = time.perf_counter() - t_scored
        metrics = self.rollout_metrics(batch.rollout)
        metrics.update(estimate.metrics)
        metrics.update(
            self.learner.scoring_metrics(
                batch.rollout,
                batch.samples,
                scoring.old_logp,
                scoring.ref_logp,
                estimate.raw,
                scoring.scored.values,
                estimate.returns,
            )
        )
        check_finite(estimate)

        self.learner.set_training(True)
        t_update = time.perf_counter()
        metrics.update(self.learner.update(scoring, estimate))
        self.sync_generator()
        t_model += time.perf_counter() - t_update
        rollout = batch.rollout
        total = time.perf_counter() - t_start
        metrics.update(
            {
                "time/iteration": total,
                "time/generate": rollout.generate_seconds,
                "time/model": t_model,
                "time/env": rollout.env_seconds,
                "time/other_fraction": max(0.0, total - rollout.generate_seconds - t_model) / total,
            }
        )
        return metrics

    def sync_generator(self) -> None:
        """Give a generator that holds its own copy of the adapters (vLLM) the current weights;
        the transformers generator is the training model itself and needs nothing."""
        sync = getattr(self.generator, "sync_from", None)
        if sync is not None:
            sync(self.model, self.policy_names)

    def close(self) -> None:
        """Release the environments (and their workers: Ray actors, sandboxes)."""
        self.venv.close()
        self.source.close()
        self.evaluator.close()

    def data_seed(self, iteration: int) -> int:
        """The environment seed of iteration ``iteration`` (the data position)."""
        return self.cfg.train.seed * 1_000_000 + iteration * self.cfg.env.num_envs

    @torch.no_grad()
    def evaluate(
        self, episodes: int | None = None, greedy: bool | None = None, prefix: str = "eval"
    ) -> dict[str, float]:
        """Play ``env.eval_episodes`` evaluation episodes; metrics ``<prefix>/score`` etc.
        (:func:`eval_metrics`: infrastructure errors are counted, not scored).

        Runs under a forked RNG so evaluating never changes what training does next. Each hook of
        :attr:`on_evaluate` then receives ``(iteration, episodes)``.
        """
        played = self.evaluator.play(self.generator, episodes, greedy)
        for hook in self.on_evaluate:
            hook(self.iteration, played)
        return eval_metrics(played, self.agents, prefix)

    def eval_set(self, episodes: int | None = None, seed: int = EVAL_SEED) -> EvalSet:
        """What an evaluation plays (:meth:`Evaluator.eval_set`)."""
        return self.evaluator.eval_set(episodes, seed)

    def play_eval(
        self, episodes: int | None = None, greedy: bool | None = None, seed: int = EVAL_SEED
    ) -> list[marft_envs.Episode]:
        """The evaluation episodes themselves (:meth:`Evaluator.play` with :attr:`generator`)."""
        return self.evaluator.play(self.generator, episodes, greedy, seed)

    @property
    def eval_generator(self) -> Generator:
        """What evaluation generates with: :attr:`generator` as it is now."""
        return self.evaluator.generator_for(self.generator)

    # ------------------------------------------------------------------ checkpoints

    def state(self) -> dict[str, Any]:
        """The checkpoint's entries (:meth:`Checkpointer.state`)."""
        return self.checkpointer.state(self._position())

    def save(self) -> Path:
        """Checkpoint everything needed to resume (plus peft-format adapters for reuse)."""
        return self.checkpointer.save(self._position())

    def load(self, path: str | Path) -> int:
        """Restore a checkpoint (a ``step_*`` folder or a run directory); returns its iteration."""
        self.history = self.checkpointer.load(path, self.env_id)
        return self.iteration

    # ------------------------------------------------------------------ internals

    def _position(self) -> RunPosition:
        return RunPosition(
            self.env_id, self.cfg.to_dict(), self.data_seed(self.iteration), self.history
        )

    def _make_envs(
        self, env_id: str, seed: int, overrides: dict[str, Any], num_envs: int | None = None
    ) -> VectorEnv:
        """The vector environment of training or evaluation: a worker group of ``train.workers``
        kind (in-process by default, Ray actors) with ``train.env_workers`` shards of
        ``num_envs`` environments (default ``env.num_envs``)."""
        t = self.cfg.train
        return make_worker_group(
            t.workers,
            env_id,
            num_envs or self.cfg.env.num_envs,
            num_workers=t.env_workers,
            seed=seed,
            **overrides,
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` at ``step`` in :attr:`history` (merged with what that step already
        has) and hand them to the run's ``logger``. :meth:`train` logs through here; a caller
        that drives :meth:`step` and :meth:`evaluate` itself uses it too, and a ``logger`` with
        its own ``log(step, metrics)`` sees every record (e.g. to print progress)."""
        record = {"step": step, **metrics}
        merged = next((h for h in self.history if h["step"] == step), None)
        if merged is None:
            self.history.append(record)
        else:
            merged.update(metrics)
        if self.logger is not None:
            self.logger.log(step, metrics)

    def _horizon(self) -> int:
        """Rounds per training episode (``horizon`` of the env's spec or ``env.overrides``)."""
        spec = marft_envs.spec(self.env_id)
        return int({**spec.kwargs, **self._train_overrides}.get("horizon", 1))

    def rollout_metrics(self, rollout: Rollout) -> dict[str, float]:
        """What was played: scores, dropped infrastructure errors, lengths, truncations."""
        samples = rollout.flat()
        eps = rollout.episodes
        n = max(1, len(eps))
        infra = rollout.stats.get("infra_errors", 0.0)
        out = {
            "train/score": sum(e.score for e in eps) / n,
            "train/correct": sum(e.correct for e in eps) / n,
            "train/episodes": float(len(eps)),
            "train/infra_errors": infra,
            "train/infra_error_rate": infra / max(1.0, infra + len(eps)),
            "train/truncated_episodes": sum(e.truncated for e in eps) / n,
            "train/rounds_per_episode": sum(t[-1].round + 1 for t in rollout.turns if t) / n,
            "train/turns_per_episode": len(samples) / n,
            "train/batch_size_per_generate": rollout.stats.get("mean_batch_size", 0.0),
            # every response generated this iteration (a critic-free method's unselected
            # branches and continuations included): the compute a comparison is sized by
            "train/generated_tokens": rollout.stats.get(
                "generated_tokens", float(sum(len(s.action_ids) for s in samples))
            ),
        }
        for agent in self.agents:
            mine = [s for s in samples if s.agent == agent]
            if mine:
                out[f"agent/{agent}/reward"] = sum(s.reward for s in mine) / len(mine)
                out[f"agent/{agent}/response_tokens"] = sum(len(s.action_ids) for s in mine) / len(
                    mine
                )
                out[f"agent/{agent}/truncated_frac"] = sum(s.truncated for s in mine) / len(mine)
        found = diagnostics.answer_in_predecessors(rollout)
        if "any" in found:
            out["collab/answer_in_predecessor"] = found.pop("any")
        out.update({f"agent/{a}/answer_in_message": v for a, v in found.items()})
        return out


def resume_path(path: str | Path) -> Path:
    """The checkpoint to resume from: ``path`` itself or the newest one of a run directory."""
    p = Path(path)
    if (p / "meta.json").is_file():
        return p
    latest = latest_checkpoint(p)
    if latest is None:
        raise FileNotFoundError(
            f"--resume {str(p)!r}: no checkpoint found (expected "
            f"{p}/checkpoints/step_*/ from an earlier run)"
        )
    return latest
