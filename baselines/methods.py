"""Helpers over the method registry (:mod:`baselines.core.methods`, re-exported here) that the
comparison benchmarks share."""

from __future__ import annotations

from .core.methods import JOINT, METHODS, MethodSpec, get_method

__all__ = ["METHODS", "MethodSpec", "equal_compute_overrides", "get_method", "preset_of"]


def preset_of(method: str) -> str:
    """The module (``python -m baselines.<module>``) that runs ``method``, whose preset
    :func:`~baselines.core.config.load_config` takes: ``at_grpo_shared`` -> ``at_grpo``."""
    return get_method(method).module


def equal_compute_overrides(
    method: str, episodes: int, agents: int, group_size: int = 4
) -> list[str]:
    """Overrides giving ``method`` the generated responses per iteration of ``episodes`` PPO
    episodes of ``agents`` turns (one round each; docs/baselines.md, "Comparing at equal compute").

    A PPO method plays ``episodes``; MAGRPO plays them as ``episodes / group_size`` problems x K;
    AT-GRPO generates ``K n (n + 1) / 2`` responses per problem (branches plus the round's
    continuations), so it gets ``round(2 episodes / (K (n + 1)))`` problems, at least one.
    """
    spec = get_method(method)
    if agents < 1:
        raise ValueError(f"agents must be >= 1 (the team size), got {agents}")
    if not spec.critic_free:
        return [f"train.episodes_per_iteration={episodes}"]
    if spec.rollout == JOINT:
        problems = episodes // group_size
    else:
        problems = max(1, round(2 * episodes / (group_size * (agents + 1))))
    return [
        f"algo.group_size={group_size}",
        f"train.episodes_per_iteration={problems * group_size}",
    ]
