"""Rollout sources: where a method's training samples come from, behind one interface.

A source plays one iteration's episodes and returns a :class:`Batch`: the episodes played to
their end (the training scores are read from them) and the turns to train on, with a critic-free
source's groups. A :class:`~baselines.core.methods.MethodSpec` names its source by
``spec.rollout``; :func:`make_source` builds it.

| name         | plays                                                     | trains on         |
|--------------|-----------------------------------------------------------|-------------------|
| ``episodes`` | ``episodes_per_iteration`` episodes in start order (PPO)  | every played turn |
| ``trees``    | AT-GRPO's K branches per (problem, turn, agent)           | the branches      |
| ``joint``    | MAGRPO's K joint episodes per problem                     | every played turn |

Every source plays on ``ctx.venv`` (in-process or on Ray workers): the tree source's moves go
to it as a :class:`~baselines.core.branching.BranchPool` when it is one (the worker groups).
Both group sources play ``episodes_per_iteration / group_size`` problems, the ``(seed, task)``
that ``reset(seed=seed + p)`` draws for problem ``p``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from marft_envs import FlexMGEnv, VectorEnv

from .branching import BranchPool
from .generation import Generator, SamplingSpec
from .groups import GroupBatch, joint_rollout, pick_tasks, tree_rollout
from .methods import EPISODES, JOINT, TREES
from .rollout import Rollout, TurnSample, collect

__all__ = ["SOURCES", "Batch", "RolloutSource", "SourceContext", "make_source"]


@dataclass
class Batch:
    """One iteration's samples: ``rollout`` (finished episodes), ``samples`` (the turns to train
    on, unique ``(episode, index)``) and, from a group source, ``groups`` (each sample's unit,
    group and score)."""

    rollout: Rollout
    samples: list[TurnSample]
    groups: GroupBatch | None = None


@dataclass
class SourceContext:
    """What a source is built from: the run's training environments and sizes."""

    venv: VectorEnv  # the training vector environment (a worker group: also a BranchPool)
    make_env: Callable[[], FlexMGEnv]  # one more training environment (branching, task draws)
    adapter_for: Callable[[str], str | None]  # the adapter that plays an agent
    episodes: int  # train.episodes_per_iteration
    algo: Any  # the run's AlgoConfig (group_size, branch_select)


class RolloutSource(Protocol):
    """Plays one iteration's samples with ``generator``, its data drawn from ``seed``."""

    def collect(self, generator: Generator, seed: int, sampling: SamplingSpec) -> Batch: ...

    def close(self) -> None: ...


class EpisodeSource:
    """PPO's rollout: the first ``episodes`` episodes to start, each played to its end."""

    def __init__(self, ctx: SourceContext):
        self.ctx = ctx

    def collect(self, generator: Generator, seed: int, sampling: SamplingSpec) -> Batch:
        c = self.ctx
        rollout = collect(c.venv, generator, c.adapter_for, c.episodes, sampling, seed=seed)
        return Batch(rollout, rollout.flat())

    def close(self) -> None:
        """Nothing of its own: the vector environment is the run's."""


@dataclass
class _GroupSource:
    """The problems of a group source and the environments it draws and branches them on."""

    ctx: SourceContext
    envs: list[FlexMGEnv] = field(default_factory=list)

    def problems(self, seed: int, envs_needed: int) -> list[tuple[int, str]]:
        """``episodes / group_size`` problems from ``seed``, with ``envs_needed`` environments."""
        n = self.ctx.episodes // self.ctx.algo.group_size
        while len(self.envs) < max(1, envs_needed):
            self.envs.append(self.ctx.make_env())
        return pick_tasks(self.envs[0], [seed + p for p in range(n)])

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs.clear()


class TreeSource(_GroupSource):
    """AT-GRPO's tree sampling (:func:`~baselines.core.groups.tree_rollout`), continuing along
    ``algo.branch_select``'s branch.

    The moves are played by the run's vector environment when it is a
    :class:`~baselines.core.branching.BranchPool` (the trainer's worker groups, in-process or
    ``train.workers=ray``: the branches step on the workers); otherwise (a plain
    ``VectorFlexEnv``) on environments of this source, one per problem. Either way the tree is
    the same for the same seed.
    """

    def collect(self, generator: Generator, seed: int, sampling: SamplingSpec) -> Batch:
        a = self.ctx.algo
        venv = self.ctx.venv
        pool: BranchPool | list[FlexMGEnv]
        if isinstance(venv, BranchPool):
            problems, pool = self.problems(seed, 1), venv
        else:
            problems = self.problems(seed, self.ctx.episodes // a.group_size)
            pool = self.envs
        group = tree_rollout(
            pool,
            generator,
            self.ctx.adapter_for,
            problems,
            a.group_size,
            sampling,
            select=a.branch_select,
        )
        return Batch(group.rollout, group.samples, group)


class JointSource(_GroupSource):
    """MAGRPO's K joint episodes per problem (:func:`~baselines.core.groups.joint_rollout`)."""

    def collect(self, generator: Generator, seed: int, sampling: SamplingSpec) -> Batch:
        c = self.ctx
        problems = self.problems(seed, 1)
        group = joint_rollout(
            c.venv, generator, c.adapter_for, problems, c.algo.group_size, sampling
        )
        return Batch(group.rollout, group.samples, group)


SOURCES: dict[str, Callable[[SourceContext], RolloutSource]] = {
    EPISODES: EpisodeSource,
    TREES: TreeSource,
    JOINT: JointSource,
}


def make_source(name: str, ctx: SourceContext) -> RolloutSource:
    """The rollout source ``name`` (a ``MethodSpec.rollout``) over ``ctx``."""
    try:
        return SOURCES[name](ctx)
    except KeyError:
        raise ValueError(f"unknown rollout source {name!r}; valid: {sorted(SOURCES)}") from None
