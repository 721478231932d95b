"""Which worker group a run gets: :func:`make_worker_group` picks in-process or Ray by name.

Its own module so that :mod:`.workers` (the group interface and the in-process group) and
:mod:`.ray_group` (which builds on it) import in one direction only.
"""

from __future__ import annotations

from typing import Any

from .workers import InProcessWorkerGroup, WorkerGroup, env_factory

WORKER_KINDS = ("inprocess", "ray")


def make_worker_group(
    kind: str,
    env_id: str,
    num_envs: int,
    *,
    num_workers: int = 1,
    seed: int | None = None,
    ray_options: dict[str, Any] | None = None,
    **overrides: Any,
) -> WorkerGroup:
    """Build a worker group of ``num_envs`` copies of ``env_id`` (``make`` ``overrides`` applied).

    ``kind`` is ``"inprocess"`` (default, no extra dependencies) or ``"ray"`` (extra ``ray``; joins
    the running Ray cluster or starts a local one). ``ray_options`` go to
    :class:`~baselines.distributed.ray_group.RayWorkerGroup` (timeouts, restarts, resources).
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    env_fn = env_factory(env_id, **overrides)
    if kind == "inprocess":
        if ray_options:
            raise ValueError("ray_options given for an in-process worker group")
        return InProcessWorkerGroup(env_fn, num_envs, num_workers, seed)
    if kind == "ray":
        from .ray_group import RayWorkerGroup

        return RayWorkerGroup(env_fn, num_envs, num_workers, seed, **(ray_options or {}))
    raise ValueError(f"unknown worker group kind {kind!r}; valid: {', '.join(WORKER_KINDS)}")
