"""Advantage estimators, registered by name (as verl's ``register_adv_est``).

An estimator is a pure function ``(scored, algo) -> Estimate``: from one iteration's
:class:`Scored` batch (the samples, their groups, the critic's values) and the run's
``AlgoConfig`` it computes each turn's advantages (repeated over its tokens, or per token) and
returns (value targets). A :class:`~baselines.core.methods.MethodSpec` names its estimator;
:func:`get_estimator` finds a registered one, or loads ``"module:function"`` (a researcher's
estimator in its own file, imported when a run needs it).

| name             | methods           | advantages                                        |
|------------------|-------------------|---------------------------------------------------|
| ``sequential_gae`` | MARFT (-shared)   | GAE over the episode, each agent's value chained  |
| ``gae``            | IPPO              | GAE over each agent's own turns                   |
| ``group``          | AT-GRPO, MAGRPO   | score minus the group mean (over its std, or not) |
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch

from tasks import AlreadyRegisteredError

from . import algos
from .advantages import RowKey, compute_advantages, normalize
from .groups import GroupBatch, group_advantages
from .sources import Batch

__all__ = [
    "ESTIMATORS",
    "Estimate",
    "Estimator",
    "Scored",
    "check_finite",
    "get_estimator",
    "group_estimator",
    "group_metrics",
    "register_estimator",
    "require_groups",
]

TurnKey = tuple[int, int]  # (episode, index) of a sample


@dataclass
class Scored:
    """An iteration's batch as the estimators see it: ``values`` are the critic's rollout-time
    values of each turn (empty without a critic), ``bootstrap`` the values that truncated rows
    bootstrap from."""

    batch: Batch
    values: Mapping[TurnKey, torch.Tensor] = field(default_factory=dict)
    bootstrap: Mapping[RowKey, float] = field(default_factory=dict)


@dataclass
class Estimate:
    """What an estimator returns: ``advantages`` to train on; ``raw``, the advantages before
    any normalisation (what ``agent/*/adv_mean`` and ``adv_std`` describe; default
    ``advantages``); ``returns``, the critics' targets (empty without a critic); ``metrics`` of
    its own (e.g. ``group/*``)."""

    advantages: dict[TurnKey, torch.Tensor]
    returns: dict[TurnKey, torch.Tensor] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    raw: dict[TurnKey, torch.Tensor] | None = None

    def __post_init__(self) -> None:
        if self.raw is None:
            self.raw = self.advantages


Estimator = Callable[[Scored, Any], Estimate]

ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(name: str, *, overwrite: bool = False) -> Callable[[Estimator], Estimator]:
    """Decorator: register ``fn`` as estimator ``name``. The same function again is a no-op; a
    different one raises :class:`~tasks.AlreadyRegisteredError` (a ``ValueError``) unless
    ``overwrite`` is true (the rule of every registry, ``docs/architecture.md``)."""

    def add(fn: Estimator) -> Estimator:
        existing = ESTIMATORS.get(name)
        if existing is not None and not overwrite:
            if existing is fn or existing == fn:
                return fn
            raise AlreadyRegisteredError(
                f"Estimator {name!r} is already registered to a different value; pass "
                "overwrite=True to replace it, or choose another name"
            )
        ESTIMATORS[name] = fn
        return fn

    return add


def get_estimator(ref: str) -> Estimator:
    """The estimator ``ref`` names: a registered name, or ``"module:function"`` (imported)."""
    if ref in ESTIMATORS:
        return ESTIMATORS[ref]
    module, sep, attr = ref.partition(":")
    if not sep:
        raise ValueError(
            f"unknown estimator {ref!r}; valid: {sorted(ESTIMATORS)} or 'module:function'"
        )
    fn = getattr(importlib.import_module(module), attr, None)
    if not callable(fn):
        raise ValueError(f"estimator {ref!r}: {module} has no function {attr!r}")
    return fn


def _gae(scored: Scored, algo: Any, *, sequential: bool) -> Estimate:
    """GAE at the action or token level (``algo.level``), then normalised as ``algo.adv_norm``
    says when ``algo.normalize_advantages``."""
    batch = scored.batch
    adv, ret = compute_advantages(
        batch.rollout,
        dict(scored.values),
        sequential=sequential,
        token_level=algo.level == "token",
        gamma=algo.gamma,
        lam=algo.lam,
        token_gamma=algo.token_gamma,
        token_lam=algo.token_lam,
        bootstrap=dict(scored.bootstrap),
    )
    trained = adv
    if algo.normalize_advantages and algo.adv_norm != "none":
        keys = [(s.episode, s.index) for s in batch.samples]
        agent_of = {(s.episode, s.index): s.agent for s in batch.samples}
        trained = normalize(adv, keys, algo.adv_norm, agent_of, algo.adv_std_floor)
    return Estimate(trained, ret, raw=adv)


register_estimator("sequential_gae")(partial(_gae, sequential=True))
register_estimator("gae")(partial(_gae, sequential=False))


def group_metrics(group: GroupBatch, singletons: int) -> dict[str, float]:
    """What a critic-free method's groups looked like: samples trained on, groups, groups of
    one (advantage 0), and the share of groups whose rewards all tie (no signal)."""
    by_group: dict[Hashable, list[float]] = {}
    for g, r in zip(group.groups, group.scores, strict=True):
        by_group.setdefault(g, []).append(r)
    n = max(1, len(by_group))
    return {
        "group/samples": float(len(group.samples)),
        "group/groups": float(len(by_group)),
        "group/singletons": float(singletons),
        "group/tied_fraction": sum(len(set(v)) == 1 for v in by_group.values()) / n,
        "group/reward_mean": sum(group.scores) / max(1, len(group.scores)),
    }


def require_groups(scored: Scored, estimator: str) -> GroupBatch:
    """The batch's groups; a ValueError naming ``estimator`` when its source made none."""
    if scored.batch.groups is None:
        raise ValueError(
            f"estimator {estimator!r} needs groups: pair it with rollout 'trees' or 'joint'"
        )
    return scored.batch.groups


@register_estimator("group")
def group_estimator(scored: Scored, algo: Any) -> Estimate:
    """GRPO: each unit's score minus its group's mean, over the group's std when
    ``algo.scale_by_std`` (Dr. GRPO: not); a group of one gets 0. Not normalised again."""
    group = require_groups(scored, "group")
    adv, singles = group_advantages(group, scale_by_std=algo.scale_by_std)
    return Estimate(adv, metrics=group_metrics(group, singles))


def check_finite(estimate: Estimate) -> None:
    """Raise naming the first turn whose advantages are not finite."""
    for k, v in estimate.advantages.items():
        algos.check_finite(f"advantages of turn {k}", v)
