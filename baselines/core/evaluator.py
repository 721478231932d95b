"""The evaluator: plays a run's evaluation set with its policy; no optimiser, no critic.

An evaluation is every seed times the first ``size`` tasks of the evaluation split
(:class:`EvalSet`), as the leaderboard requires of a bundle, played greedily by default, under
a forked RNG so evaluating never changes what training does next. ``baselines.eval`` builds
one from a checkpoint's adapters alone, or over models other trainers saved (one per seat,
:class:`~baselines.core.generation.RoutedGenerator`); the trainer builds one over its training
model.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

import marft_envs
from marft_envs import VectorEnv

from .config import Config
from .generation import Generator, HFGenerator, RoutedGenerator, SamplingSpec
from .models import AdapterModel
from .rollout import collect

__all__ = ["EVAL_SEED", "EvalSet", "Evaluator", "eval_metrics"]

EVAL_SEED = 1_000_003  # evaluation episodes are the same for every run and method


@dataclass(frozen=True)
class EvalSet:
    """An evaluation: environment, seeds, size (first ``size`` tasks of the split) and the
    ``(seed, task_id)`` plan they expand to; a bundle declares the same seeds and size."""

    env_id: str
    overrides: dict[str, Any]
    seeds: list[int]
    size: int
    plan: list[tuple[int, str]]


def eval_metrics(
    episodes: Sequence[marft_envs.Episode], agents: Sequence[str], prefix: str = "eval"
) -> dict[str, float]:
    """Scores of evaluation episodes over the gradable ones only: an infrastructure-error episode
    is counted (``<prefix>/infra_errors``), never scored as a wrong answer. With no gradable
    episode the scores are NaN (logged as null), not 0."""
    graded = [e for e in episodes if not e.infra_error]
    n = len(graded)

    def mean(xs) -> float:
        return sum(xs) / n if n else float("nan")

    out = {
        f"{prefix}/score": mean(e.score for e in graded),
        f"{prefix}/correct": mean(e.correct for e in graded),
        f"{prefix}/episodes": float(len(episodes)),
        f"{prefix}/infra_errors": float(len(episodes) - n),
    }
    for agent in agents:
        out[f"{prefix}/agent/{agent}/return"] = mean(e.returns.get(agent, 0.0) for e in graded)
    return out


MakeEnvs = Callable[[str, int, dict[str, Any], int], VectorEnv]


class Evaluator:
    """Plays evaluation sets of ``eval_env`` (an id and its ``make`` overrides).

    Args:
        cfg: the run's config (``env.eval_*``, ``model`` sampling).
        model: the adapters' model, or the plain models the generator plays with (each put in
            eval mode while playing).
        adapter_for: the adapter (or the :class:`RoutedGenerator` route) that plays an agent.
        eval_env: ``(env_id, overrides)`` of the evaluation environment.
        make_envs: ``(env_id, seed, overrides, num_envs) -> VectorEnv``, e.g. a worker group.
        device: where the model is (``cuda...``: its RNG is forked too).
    """

    def __init__(
        self,
        cfg: Config,
        model: AdapterModel | torch.nn.Module | Sequence[torch.nn.Module],
        adapter_for: Callable[[str], str | None],
        eval_env: tuple[str, dict[str, Any]],
        make_envs: MakeEnvs,
        device: str = "cpu",
    ):
        self.cfg, self.model, self.adapter_for, self.device = cfg, model, adapter_for, device
        self.eval_env, self.make_envs = eval_env, make_envs
        self.venv: Any = None  # built on the first evaluation, widened for a larger plan
        self._sets: dict[tuple[int, int], EvalSet] = {}

    @property
    def num_envs(self) -> int:
        """Environments stepped together (``env.eval_num_envs``, else ``env.num_envs``)."""
        return self.cfg.env.eval_num_envs or self.cfg.env.num_envs

    def eval_set(self, episodes: int | None = None, seed: int = EVAL_SEED) -> EvalSet:
        """Every seed times the first ``size`` tasks of the evaluation split
        (``env.eval_episodes``, capped at the split's size)."""
        n = self.cfg.env.eval_episodes if episodes is None else episodes
        if (n, seed) not in self._sets:  # cached: making an env may start a sandbox
            env_id, overrides = self.eval_env
            env = marft_envs.make(env_id, **overrides)
            try:
                size = min(n, len(env.unwrapped.dataset))
                plan = marft_envs.evaluation_plan(env, seeds=[seed], size=size)
            finally:
                env.close()
            self._sets[(n, seed)] = EvalSet(env_id, overrides, [seed], size, plan)
        return self._sets[(n, seed)]

    def generator_for(self, generator: Generator) -> Generator:
        """``generator`` as evaluation uses it: transformers batching ``num_envs`` prompts per
        call (on a CPU, a batch of 32 greedy replies costs ~1.6x a batch of 8, not 4x); each
        route of a :class:`RoutedGenerator` likewise."""
        if isinstance(generator, RoutedGenerator):
            wide_routes = {id(g): self.generator_for(g) for g in generator.routes.values()}
            return RoutedGenerator({k: wide_routes[id(g)] for k, g in generator.routes.items()})
        if not isinstance(generator, HFGenerator) or generator.batch_size == self.num_envs:
            return generator
        wide = copy.copy(generator)  # shares the model, tokenizer and stop ids
        wide.batch_size = self.num_envs
        return wide

    @torch.no_grad()
    def play(
        self,
        generator: Generator,
        episodes: int | None = None,
        greedy: bool | None = None,
        seed: int = EVAL_SEED,
    ) -> list[marft_envs.Episode]:
        """The evaluation episodes: exactly the plan of :meth:`eval_set`, each ``(seed, task)``
        once, in finishing order."""
        cfg = self.cfg
        greedy = cfg.env.eval_greedy if greedy is None else greedy
        spec = self.eval_set(episodes, seed)
        width = min(self.num_envs, max(1, len(spec.plan)))
        if self.venv is None or self.venv.num_envs < width:
            if self.venv is not None:  # a larger plan than the last: rebuild wider
                self.venv.close()
            self.venv = self.make_envs(spec.env_id, seed, spec.overrides, width)
        sampling = SamplingSpec(
            cfg.model.max_new_tokens, cfg.model.temperature, cfg.model.top_p, greedy=greedy
        )
        device = self.device
        modules = self.modules()
        was_training = [m.training for m in modules]
        for m in modules:
            m.eval()
        try:
            with torch.random.fork_rng(devices=[device] if device.startswith("cuda") else []):
                torch.manual_seed(seed)
                rollout = collect(
                    self.venv,
                    self.generator_for(generator),
                    self.adapter_for,
                    None,
                    sampling,
                    plan=spec.plan,
                )
        finally:
            for m, mode in zip(modules, was_training, strict=True):
                m.train(mode)
        return rollout.episodes

    def modules(self) -> list[torch.nn.Module]:
        """The torch modules that play (the adapters' peft model, or the plain models)."""
        model = self.model
        if isinstance(model, AdapterModel):
            return [model.peft]
        if isinstance(model, torch.nn.Module):
            return [model]
        return [m.peft if isinstance(m, AdapterModel) else m for m in model]

    def close(self) -> None:
        """Release the evaluation environments."""
        if self.venv is not None:
            self.venv.close()
