"""Branching pools: environments whose states are held as snapshots, for tree rollouts.

A tree rollout (AT-GRPO, :func:`~baselines.core.groups.tree_rollout`) plays ``K`` alternatives
from one state, keeps one, and goes on. It never keeps an environment in the state of a
branch: it holds :class:`EnvNode` records (a snapshot of the state plus what the tree reads of
it) and asks a :class:`BranchPool` to start problems and to advance nodes by one action each.
Every move restores its node's snapshot before it steps, so a move depends on nothing but its
node and its action: branches never share mutable state, a pool may run a move in any of its
environments, and the same nodes and actions give the same results in this process or on
workers (the snapshots travel with the nodes, serialized).

Pools: :class:`EnvListPool` (a list of environments in this process) and the worker groups of
:mod:`baselines.distributed` (in-process shards or Ray actors, one extra environment per
shard). The agent a node batch serves is chosen by the pool's
:meth:`marft_envs.VectorScheduler.choose_agent`, the rule of every vector environment.

This module imports no torch: worker processes import it.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from marft_envs import EnvSnapshot, Episode, FlexMGEnv, VectorScheduler

__all__ = [
    "BranchPool",
    "EnvListPool",
    "EnvNode",
    "Move",
    "advance_env",
    "node_of",
    "start_env",
]


@dataclass(frozen=True)
class EnvNode:
    """One state of a tree: its snapshot and what the tree reads of it.

    ``home`` is the slot of the pool that made it (an environment of an :class:`EnvListPool`,
    a shard of a worker group); its branches are played there. The fields are the pool's own
    copies: nothing in a node is shared with an environment or with another node.
    """

    snapshot: EnvSnapshot
    home: int
    agent: str  # agent_selection: the agent that acts next (meaningless once done)
    done: bool  # the episode has ended (terminated or truncated)
    messages: list[dict[str, str]]  # what ``agent`` is shown as chat messages ([] when done)
    state: str  # the global view (``env.state()``) a centralized critic would read
    episode: Episode  # the record so far: turns (with their rewards) and verdicts


Move = tuple[EnvNode, str]  # a node and the action its acting agent plays from it


def _ended(env: FlexMGEnv) -> bool:
    a = env.agent_selection
    return not env.agents or env.terminations[a] or env.truncations[a]


def node_of(env: FlexMGEnv, home: int) -> EnvNode:
    """``env``'s current state as a node made at ``home``; the snapshot and the episode record
    are deep copies, so stepping ``env`` later never changes the node."""
    done = _ended(env)
    agent = env.agent_selection
    return EnvNode(
        env.snapshot(),
        home,
        agent,
        done,
        [] if done else env.messages(agent),
        env.state(),
        copy.deepcopy(env.episode()),
    )


def start_env(env: FlexMGEnv, seed: int, task_id: str, home: int) -> EnvNode:
    """Reset ``env`` to problem ``(seed, task_id)`` (``reset(seed=seed, options={"task_id":
    task_id})``, as a plan item is played) and return the root node."""
    env.reset(seed=seed, options={"task_id": task_id})
    return node_of(env, home)


def advance_env(env: FlexMGEnv, snapshot: EnvSnapshot, action: str, home: int) -> EnvNode:
    """Restore ``snapshot`` into ``env``, play ``action`` and return the node it leads to.

    What ``env`` played before does not matter: ``restore`` replaces every episode field with
    fresh copies of the snapshot's, which stays unchanged for more branches.
    """
    env.restore(snapshot)
    if _ended(env):
        raise ValueError("cannot advance a node whose episode has ended (EnvNode.done)")
    env.step(action)
    return node_of(env, home)


@runtime_checkable
class BranchPool(Protocol):
    """Where a tree rollout's moves are played (module docstring).

    ``start`` gives one root node per ``(seed, task_id)``; ``advance`` plays one action from
    each node and gives the nodes they lead to, in order. Results depend only on the nodes and
    actions (never on where they ran). ``choose_agent`` is
    :meth:`marft_envs.VectorScheduler.choose_agent`.
    """

    possible_agents: list[str]

    def choose_agent(self, counts: Counter[str], agent: str | None = None) -> str: ...

    def start(self, problems: Sequence[tuple[int, str]]) -> list[EnvNode]: ...

    def advance(self, moves: Sequence[Move]) -> list[EnvNode]: ...


class EnvListPool:
    """A :class:`BranchPool` over environments of this process: problem ``p`` starts in
    ``envs[p]`` (at least one environment per problem), and every branch is played in the
    environment its root started in. Environments beyond the problems are never touched."""

    def __init__(self, envs: Sequence[FlexMGEnv]):
        if not envs:
            raise ValueError("EnvListPool needs at least one environment")
        self.envs = list(envs)
        self.possible_agents = list(self.envs[0].possible_agents)
        self._scheduler = VectorScheduler()
        self._scheduler.possible_agents = self.possible_agents

    def choose_agent(self, counts: Counter[str], agent: str | None = None) -> str:
        """:meth:`marft_envs.VectorScheduler.choose_agent` over this pool's agents."""
        return self._scheduler.choose_agent(counts, agent)

    def start(self, problems: Sequence[tuple[int, str]]) -> list[EnvNode]:
        """Reset ``envs[p]`` to problem ``p``; the root nodes, in order."""
        if len(self.envs) < len(problems):
            raise ValueError(
                f"{len(problems)} problems need as many environments, got {len(self.envs)}"
            )
        return [start_env(self.envs[p], s, t, p) for p, (s, t) in enumerate(problems)]

    def advance(self, moves: Sequence[Move]) -> list[EnvNode]:
        """Each move played in its node's home environment, in order."""
        for j, (node, _) in enumerate(moves):
            if not 0 <= node.home < len(self.envs):
                raise ValueError(
                    f"move {j}: node home {node.home} is not an environment of this pool "
                    f"(0..{len(self.envs) - 1}); nodes come from this pool's start()/advance()"
                )
        return [advance_env(self.envs[n.home], n.snapshot, a, n.home) for n, a in moves]
