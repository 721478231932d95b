"""Where rollout work runs: a :class:`WorkerGroup` of environment shards.

A worker group looks like one :class:`marft_envs.VectorFlexEnv` to the training loop (``reset``,
``next_batch``, ``step``, ``run``, ``num_envs``, ``possible_agents``, ``close``), so
:func:`baselines.core.rollout.collect` never knows where the environments live. Behind it the
``num_envs`` environments are split into contiguous shards; each shard is an :class:`EnvShard`
(its own ``VectorFlexEnv``) that steps its environments, verifiers and sandbox executions
included. :class:`InProcessWorkerGroup` calls the shards one after the other in this process;
:class:`~baselines.distributed.ray_group.RayWorkerGroup` runs each shard in a Ray actor, so
shards step in parallel across cores and machines.

Equivalence: shard ``s`` holds global environments ``offset_s .. offset_s + n_s - 1`` and resets
environment ``i`` with ``seed + i``, exactly as one ``VectorFlexEnv`` would; the group picks the
batch's agent with the same rule over the summed counts. So for the same seeds and policy every
group (any shard count, any transport) plays the same episodes in the same order.

Snapshots and branching: ``snapshot(i)`` / ``restore(i, s)`` work as ``VectorFlexEnv``'s, the
snapshot travelling by value (serialized on Ray). For tree rollouts a group is also a
:class:`~baselines.core.branching.BranchPool` (``start``, ``advance``): each shard plays branch
moves in one extra environment of its own, restoring each move's snapshot first, so branches
share nothing and the same tree comes out of any group.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from marft_envs import (
    Batch,
    EnvSnapshot,
    Episode,
    FlexMGEnv,
    VectorFlexEnv,
    VectorScheduler,
    make,
    spec,
)

from ..core.branching import EnvNode, Move, advance_env, start_env

EnvFn = Callable[[], FlexMGEnv]


class WorkerError(RuntimeError):
    """An environment worker died or stopped answering and the rollout cannot go on.

    Raised instead of returning a partial batch: a rollout either completes with every
    environment stepped, or fails with this error and nothing of it reaches training.
    """


def split_evenly(total: int, parts: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of ``parts`` contiguous shards of ``total`` items, sizes differing by
    <= 1."""
    if parts < 1:
        raise ValueError(f"need at least one shard, got {parts}")
    if total < parts:
        raise ValueError(
            f"cannot split {total} environments over {parts} workers: use num_workers <= num_envs"
        )
    base, extra = divmod(total, parts)
    out, offset = [], 0
    for k in range(parts):
        size = base + (k < extra)
        out.append((offset, size))
        offset += size
    return out


def env_factory(env_id: str, **overrides: Any) -> EnvFn:
    """A picklable factory for ``env_id`` with ``overrides``.

    The spec is resolved here, in the driver, so environments registered only in the driver
    process (``marft_envs.register`` in user code) also build inside remote workers.
    """
    env_spec = spec(env_id)
    return _Factory(env_spec, overrides)


@dataclass
class _Factory:
    env_spec: Any
    overrides: dict[str, Any]

    def __call__(self) -> FlexMGEnv:
        return make(self.env_spec, **self.overrides)


@dataclass(frozen=True)
class View:
    """What one environment shows the agent it waits on (one entry of a :class:`Batch`)."""

    agent: str
    observation: dict[str, Any]
    messages: list[dict[str, str]]
    state: str


@dataclass
class ShardStep:
    """What a shard returns from a step: finished episodes (in index order) and the new views
    of the environments it stepped (local index -> view)."""

    episodes: list[Episode]
    views: dict[int, View]


class EnvShard:
    """A contiguous slice of the group's environments, stepped by one worker.

    Indices at this interface are local (``0 .. num_envs - 1``); the group adds the offset.
    Every reset and step returns the views of the environments it changed, so the group builds
    the next batch without another call (one round trip per batch).
    Plain Python, so the same class runs in-process and inside a Ray actor.
    """

    def __init__(self, env_fn: EnvFn, num_envs: int, offset: int):
        self.offset = offset
        self.env_fn = env_fn
        self.venv = VectorFlexEnv([env_fn] * num_envs)
        self._branch_env: FlexMGEnv | None = None  # built at the first branch move

    def ready(self) -> list[str]:
        """The agent ids (also a cheap liveness probe once the environments are built)."""
        return list(self.venv.possible_agents)

    def pid(self) -> int:
        import os

        return os.getpid()

    def reset(
        self,
        seed: int | None,
        options: Sequence[dict[str, Any] | None] | None,
        plan: Sequence[tuple[int | None, str]] | None = None,
    ) -> dict[int, View]:
        """Reset with the group seed (this shard's environment ``i`` gets ``seed + offset + i``),
        or, with ``plan``, to play exactly this shard's share of the group's plan."""
        if plan is not None:
            self.venv.reset(plan=plan)
        else:
            self.venv.reset(seed=None if seed is None else seed + self.offset, options=options)
        return self.views(range(self.venv.num_envs))

    def step(self, agent: str, indices: list[int], actions: list[Any]) -> ShardStep:
        """Apply ``actions`` to local environments ``indices`` (all waiting on ``agent``)."""
        stub = Batch(agent, list(indices), [], [], [])
        episodes = self.venv.step(stub, actions)
        for ep in episodes:  # global index, as one VectorFlexEnv of the whole group would say
            if ep.env_index is not None:  # always set by VectorFlexEnv.step
                ep.env_index += self.offset
        return ShardStep(episodes, self.views(indices))

    def snapshot(self, index: int) -> EnvSnapshot:
        """Local environment ``index``'s episode state (``VectorFlexEnv.snapshot``)."""
        return self.venv.snapshot(index)

    def restore(self, index: int, snapshot: EnvSnapshot) -> ShardStep:
        """Put local environment ``index`` into ``snapshot``'s state; its new view."""
        self.venv.restore(index, snapshot)
        return ShardStep([], self.views([index]))

    def branch_start(self, problems: Sequence[tuple[int, str]], home: int) -> list[EnvNode]:
        """Root nodes of ``problems`` (``(seed, task_id)``), made at ``home``
        (:func:`~baselines.core.branching.start_env`) in this shard's branching environment:
        one environment of its own, so the vector environments and their views are untouched."""
        env = self._branching_env()
        return [start_env(env, seed, task_id, home) for seed, task_id in problems]

    def branch_advance(self, moves: Sequence[tuple[EnvSnapshot, str]], home: int) -> list[EnvNode]:
        """The node each ``(snapshot, action)`` leads to, in order
        (:func:`~baselines.core.branching.advance_env`); every move restores its snapshot first,
        so the moves are independent of each other and of what this shard played before."""
        env = self._branching_env()
        return [advance_env(env, snapshot, action, home) for snapshot, action in moves]

    def _branching_env(self) -> FlexMGEnv:
        if self._branch_env is None:
            self._branch_env = self.env_fn()
        return self._branch_env

    def views(self, indices) -> dict[int, View]:
        """Current views of local environments ``indices`` that are not idle (a plan ran out),
        built by ``VectorFlexEnv.next_batch``."""
        wanted = set(indices)
        out: dict[int, View] = {}
        for agent in self.venv.waiting():
            b = self.venv.next_batch(agent)
            for k, i in enumerate(b.env_indices):
                if i in wanted:
                    out[i] = View(agent, b.observations[k], b.messages[k], b.states[k])
        return out

    def close(self) -> None:
        self.venv.close()
        if self._branch_env is not None:
            self._branch_env.close()


@dataclass
class _ShardLog:
    """Driver-side record of a shard since its last reset (what a replacement replays).

    ``ops`` are the calls that changed its environments since, in order: ``("step", (agent,
    indices, actions))`` and ``("restore", (index, snapshot))``; each answers a
    :class:`ShardStep`. Branch moves are not logged: they change only the shard's branching
    environment, and each one restores its own snapshot first.
    """

    seed: int | None = None
    options: list | None = None
    plan: list | None = None
    ops: list[tuple[str, tuple]] = field(default_factory=list)
    views: dict[int, View] | None = None  # current view of each active local env; None until reset


def touched(method: str, args: tuple) -> list[int]:
    """The local environments a logged op (``_ShardLog.ops``) changed."""
    if method == "step":
        return list(args[1])
    if method == "restore":
        return [args[0]]
    raise ValueError(f"not a logged shard op: {method!r}")


def apply_step_views(views: dict[int, View], stepped: Sequence[int], new: dict[int, View]) -> None:
    """Update a shard's cached ``views`` after a step of local environments ``stepped``: those
    that went idle (their plan ran out) have no new view and leave the cache."""
    for i in stepped:
        views.pop(i, None)
    views.update(new)


def split_plan(
    plan: Sequence[tuple[int | None, str]], shards: Sequence[tuple[int, int]], num_envs: int
) -> list[list[tuple[int | None, str]]]:
    """Each shard's share of a group plan: item ``k`` goes to the shard holding environment
    ``k % num_envs``, so the first ``num_envs`` items start where one ``VectorFlexEnv`` would
    start them and the rest are dealt out in proportion to shard sizes, in plan order."""
    out: list[list[tuple[int | None, str]]] = [[] for _ in shards]
    for k, item in enumerate(plan):
        i = k % num_envs
        s = next(s for s, (offset, size) in enumerate(shards) if offset <= i < offset + size)
        index, task_id = item  # a list when the plan came from JSON
        out[s].append((index, task_id))
    return out


class WorkerGroup(VectorScheduler, ABC):
    """Environments split over workers, presented as one vector environment.

    Subclasses say only how to call the shards (:meth:`_call`); seeding, index bookkeeping and
    the ordering of finished episodes live here, once, and the scheduling (the batch's agent,
    the play loop) is ``VectorFlexEnv``'s own (:class:`marft_envs.VectorScheduler`).
    """

    def __init__(self, env_fn: EnvFn, num_envs: int, num_workers: int, seed: int | None = None):
        self.env_fn = env_fn
        self.seed = seed
        self.shards = split_evenly(num_envs, num_workers)
        self._logs = [_ShardLog() for _ in self.shards]
        self._ready = False
        self.possible_agents: list[str] = []

    # -- what a subclass provides ------------------------------------------------------------

    @abstractmethod
    def _call(self, calls: dict[int, tuple[str, tuple]]) -> dict[int, Any]:
        """Run ``calls[shard] = (method, args)`` on those shards; return each shard's result.

        Must return a result for every requested shard or raise (never a partial dict).
        """

    def close(self) -> None:  # a no-op default; groups holding workers override it
        """Release the workers."""

    # -- the VectorFlexEnv surface -----------------------------------------------------------

    @property
    def num_envs(self) -> int:
        return sum(size for _, size in self.shards)

    @property
    def num_workers(self) -> int:
        return len(self.shards)

    def reset(
        self,
        seed: int | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
        *,
        plan: Sequence[tuple[int | None, str]] | None = None,
    ) -> None:
        """Reset every environment; global environment ``i`` gets seed ``seed + i``.

        With ``plan`` (``(seed, task_id)`` pairs), play exactly those episodes, as
        ``VectorFlexEnv.reset(plan=...)`` does: the plan is split over the shards
        (:func:`split_plan`), environments whose share ran out go idle, and :attr:`done`
        tells when every planned episode finished. With one shard the episodes and their
        order are ``VectorFlexEnv``'s; with more, the same set of episodes is played.
        """
        seed = self.seed if seed is None else seed
        self.check_options(options)
        shares = None if plan is None else split_plan(plan, self.shards, self.num_envs)
        calls = {}
        for s, (offset, size) in enumerate(self.shards):
            opts = None if options is None else list(options[offset : offset + size])
            share = None if shares is None else shares[s]
            self._logs[s] = _ShardLog(seed, opts, share)
            calls[s] = ("reset", (seed, opts, share))
        for s, views in self._call(calls).items():
            self._logs[s].views = views
        self._ready = True

    @property
    def done(self) -> bool:
        """True when a plan was given and every planned episode has finished (all envs idle)."""
        return self._ready and not any(log.views for log in self._logs)

    @property
    def planned(self) -> bool:
        return any(log.plan is not None for log in self._logs)

    def waiting(self) -> Counter[str]:
        """How many environments wait on each agent id, over all shards."""
        self._require_reset()
        return Counter(view.agent for log in self._logs for view in (log.views or {}).values())

    def next_batch(self, agent: str | None = None) -> Batch:
        """The batch for ``agent`` or for the agent most environments wait on (VectorFlexEnv's
        rule)."""
        counts = self.waiting()
        agent = self.choose_agent(counts, agent)
        merged = Batch(agent, [], [], [], [])
        for s, log in enumerate(self._logs):
            offset = self.shards[s][0]
            views = log.views or {}
            for i in sorted(views):
                view = views[i]
                if view.agent == agent:
                    merged.env_indices.append(offset + i)
                    merged.observations.append(view.observation)
                    merged.messages.append(view.messages)
                    merged.states.append(view.state)
        if not merged.env_indices:
            raise ValueError(f"No environment waits on {agent!r}; waiting: {dict(counts)}")
        return merged

    def step(self, batch: Batch, actions: Sequence[Any]) -> list[Episode]:
        """Apply one action per environment of ``batch``; the finished episodes, in index order."""
        self._require_reset()
        self.check_actions(batch, actions)
        per_shard: dict[int, tuple[list[int], list[Any]]] = {}
        for i, action in zip(batch.env_indices, actions, strict=True):
            s = self._shard_of(i)
            local, acts = per_shard.setdefault(s, ([], []))
            local.append(i - self.shards[s][0])
            acts.append(action)
        results = self._call(
            {s: ("step", (batch.agent, idx, acts)) for s, (idx, acts) in per_shard.items()}
        )
        finished: list[Episode] = []
        for s in sorted(results):
            self._logs[s].ops.append(("step", (batch.agent, *per_shard[s])))
            views = self._logs[s].views
            assert views is not None  # every shard was reset (_require_reset)
            apply_step_views(views, per_shard[s][0], results[s].views)
            finished += results[s].episodes
        return finished

    # -- snapshot / restore, and branching (tree rollouts) ----------------------------------

    def snapshot(self, index: int) -> EnvSnapshot:
        """Environment ``index``'s episode state, as ``VectorFlexEnv.snapshot``: an
        :class:`~marft_envs.EnvSnapshot` that travels from the worker by value (serialized
        on Ray), so it shares nothing with the worker's environment."""
        self._require_reset()
        s = self._shard_of(index)
        return self._call({s: ("snapshot", (index - self.shards[s][0],))})[s]

    def restore(self, index: int, snapshot: EnvSnapshot) -> None:
        """Put environment ``index`` into ``snapshot``'s state, as ``VectorFlexEnv.restore``:
        restoring one snapshot into several environments plays independent branches of one
        state (the next :meth:`next_batch` serves them together). A Ray shard replaced after a
        fault replays the restore with the rest of its log."""
        self._require_reset()
        if not isinstance(snapshot, EnvSnapshot):
            raise TypeError(
                f"restore() takes an EnvSnapshot from snapshot(), got {type(snapshot).__name__}"
            )
        s = self._shard_of(index)
        local = index - self.shards[s][0]
        views = self._logs[s].views
        assert views is not None  # reset (_require_reset)
        if local not in views:
            raise ValueError(f"environment {index} is idle (its plan ran out)")
        result = self._call({s: ("restore", (local, snapshot))})[s]
        self._logs[s].ops.append(("restore", (local, snapshot)))
        apply_step_views(views, [local], result.views)

    def start(self, problems: Sequence[tuple[int, str]]) -> list[EnvNode]:
        """Root nodes of ``problems`` (``(seed, task_id)``) for a tree rollout
        (:class:`~baselines.core.branching.BranchPool`): problem ``p`` starts on shard
        ``p % num_workers`` (its home; its branches are played there), each shard in its own
        branching environment, so the group's vector environments are never touched and need
        no ``reset``. The shards run in parallel."""
        per_shard: dict[int, list[int]] = {}
        for p in range(len(problems)):
            per_shard.setdefault(p % self.num_workers, []).append(p)
        results = self._call(
            {
                s: ("branch_start", ([tuple(problems[p]) for p in ps], s))
                for s, ps in per_shard.items()
            }
        )
        out: dict[int, EnvNode] = {}
        for s, ps in per_shard.items():
            out.update(zip(ps, results[s], strict=True))
        return [out[p] for p in range(len(problems))]

    def advance(self, moves: Sequence[Move]) -> list[EnvNode]:
        """The node each ``(node, action)`` leads to, in order, each move played on its node's
        home shard (all shards in parallel). Only the snapshot and the action travel to the
        worker; the new node (its snapshot included) travels back by value."""
        per_shard: dict[int, list[int]] = {}
        for j, (node, _action) in enumerate(moves):
            if not 0 <= node.home < self.num_workers:
                raise ValueError(
                    f"move {j}: node home {node.home} is not a shard of this group "
                    f"(0..{self.num_workers - 1}); nodes come from this group's start()/advance()"
                )
            per_shard.setdefault(node.home, []).append(j)
        results = self._call(
            {
                s: ("branch_advance", ([(moves[j][0].snapshot, moves[j][1]) for j in js], s))
                for s, js in per_shard.items()
            }
        )
        out: dict[int, EnvNode] = {}
        for s, js in per_shard.items():
            out.update(zip(js, results[s], strict=True))
        return [out[j] for j in range(len(moves))]

    def __enter__(self) -> WorkerGroup:  # noqa: PYI034 - py3.10 has no typing.Self
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers -----------------------------------------------------------------------------

    def _shard_of(self, index: int) -> int:
        for s, (offset, size) in enumerate(self.shards):
            if offset <= index < offset + size:
                return s
        raise IndexError(f"environment index {index} out of range 0..{self.num_envs - 1}")

    def _require_reset(self) -> None:
        if not self._ready:
            raise RuntimeError(f"Call reset() before stepping a {type(self).__name__}")


class InProcessWorkerGroup(WorkerGroup):
    """Every shard in this process, called one after the other (the default; no dependencies).

    With one worker (the default) it behaves exactly like ``VectorFlexEnv``.
    """

    def __init__(self, env_fn: EnvFn, num_envs: int, num_workers: int = 1, seed: int | None = None):
        super().__init__(env_fn, num_envs, num_workers, seed)
        self._shards = [EnvShard(env_fn, size, offset) for offset, size in self.shards]
        self.possible_agents = self._shards[0].ready()

    def _call(self, calls: dict[int, tuple[str, tuple]]) -> dict[int, Any]:
        return {s: getattr(self._shards[s], method)(*args) for s, (method, args) in calls.items()}

    def close(self) -> None:
        for shard in self._shards:
            shard.close()
