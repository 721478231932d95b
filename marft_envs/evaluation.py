"""The evaluation set of an environment: which ``(seed, task_id)`` pairs an evaluation plays.

A trainer's evaluation, a leaderboard bundle and a third-party evaluation loop all use this one
definition, so their numbers are over the same episodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .registry import make


def evaluation_plan(
    env: Any, seeds: Iterable[int] = (0,), size: int | None = None
) -> list[tuple[int, str]]:
    """The ``(seed, task_id)`` pairs of an evaluation, in order: every seed times the first
    ``size`` tasks of the environment's dataset split (all tasks when ``size`` is None).

    Play each with ``env.reset(seed=seed, options={"task_id": task_id})``; a leaderboard bundle
    (``leaderboard.schema.Bundle.from_episodes``) declares the same ``seeds`` and
    ``dataset_size=size``. ``env`` is an environment or a registered env id.
    """
    if isinstance(env, str):
        env = make(env)
    ids = env.unwrapped.dataset.ids[:size]
    return [(int(seed), task_id) for seed in seeds for task_id in ids]
