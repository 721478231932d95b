"""Advantage estimators by name: the registry and the group estimator, against values worked
out by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from baselines.core.estimators import (
    ESTIMATORS,
    Scored,
    get_estimator,
    group_estimator,
    register_estimator,
)
from baselines.core.groups import GroupBatch, group_advantages
from baselines.core.methods import METHODS
from baselines.core.rollout import Rollout, TurnSample
from baselines.core.sources import Batch
from tasks import AlreadyRegisteredError

ALGO = SimpleNamespace(scale_by_std=True)


def turn(episode: int, index: int, agent: str, reward: float) -> TurnSample:
    return TurnSample(episode, index, agent, agent, index // 2, [1], [2, 3], "x", "", reward)


def joint(episodes: list[list[tuple[str, float]]], problem_of: list[int]) -> Scored:
    """A MAGRPO-shaped batch: episode ``e``'s turns ``(agent, reward)``, its problem, and its
    team score (the sum of its rewards over the rounds: one reward per round, shared)."""
    samples = [turn(e, i, a, r) for e, ts in enumerate(episodes) for i, (a, r) in enumerate(ts)]
    units = [s.episode for s in samples]
    scores = [sum(r for a, r in ts if a == ts[0][0]) for ts in episodes]
    rollout = Rollout([], [], 0.0, 0.0, {})
    group = GroupBatch(rollout, samples, units, list(problem_of), scores)
    return Scored(Batch(rollout, samples, group))


def values(adv) -> list[float]:
    return [float(v[0]) for v in adv.values()]


def test_every_registered_methods_estimator_is_found():
    for spec in METHODS.values():
        assert callable(get_estimator(spec.estimator))
    assert get_estimator("baselines.core.estimators:group_estimator") is group_estimator


def test_unknown_estimators_name_what_is_valid():
    with pytest.raises(ValueError, match=r"unknown estimator 'vtrace'; valid: \["):
        get_estimator("vtrace")
    with pytest.raises(ValueError, match="has no function 'nope'"):
        get_estimator("baselines.core.estimators:nope")
    assert register_estimator("group")(group_estimator) is group_estimator  # the same: a no-op
    with pytest.raises(AlreadyRegisteredError, match="Estimator 'group' is already registered to a"):
        register_estimator("group")(lambda scored, algo: group_estimator(scored, algo))
    assert ESTIMATORS["group"] is group_estimator


def test_the_group_estimator_is_grpos_advantages_with_the_group_metrics():
    scored = joint([[("a", 1.0), ("b", 1.0)], [("a", 0.0), ("b", 0.0)]], [0, 0])
    est = group_estimator(scored, ALGO)
    expected, singles = group_advantages(scored.batch.groups, scale_by_std=True)
    assert values(est.advantages) == values(expected) and singles == 0
    assert est.raw is est.advantages and est.returns == {}
    assert est.metrics["group/groups"] == 1.0 and est.metrics["group/tied_fraction"] == 0.0


def test_a_group_estimator_without_groups_says_which_sources_have_them():
    rollout = Rollout([], [], 0.0, 0.0, {})
    with pytest.raises(ValueError, match="needs groups: pair it with rollout 'trees' or 'joint'"):
        group_estimator(Scored(Batch(rollout, [])), ALGO)
