"""Vector rollouts: step many Flex-MG environments together, batched by the agent they wait on.

A policy serves one :class:`Batch` at a time: every environment whose current turn belongs to the
same agent id, so one LLM call (one adapter) covers them all. Finished environments are recorded as
:class:`Episode` and reset at once, so episodes of different lengths never stall the batch.

    venv = make_vec("math-3agent", num_envs=8, seed=0)
    venv.reset()
    episodes = []
    while len(episodes) < 32:
        batch = venv.next_batch()
        episodes += venv.step(batch, policy(batch.agent, batch.observations))
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .episode import Episode
from .errors import EnvOrderError, require_episode
from .flexmg import EnvSnapshot, FlexMGEnv
from .registry import make

Policy = Callable[[str, list[dict[str, Any]]], Sequence[str]]


@dataclass
class Batch:
    """The environments waiting on ``agent``, with what each one shows it."""

    agent: str
    env_indices: list[int]
    observations: list[dict[str, Any]]
    messages: list[list[dict[str, str]]]
    states: list[str]

    def __len__(self) -> int:
        return len(self.env_indices)


class VectorEnv(Protocol):
    """What a rollout loop needs of many environments stepped in per-agent batches.

    :class:`VectorFlexEnv` is one; a trainer's worker groups (environments in other processes or
    on other machines) are others, so one loop drives them all. Indices in a :class:`Batch` run
    over ``0 .. num_envs - 1``.
    """

    possible_agents: list[str]

    @property
    def num_envs(self) -> int: ...

    @property
    def done(self) -> bool:
        """True when a plan was given to :meth:`reset` and every planned episode finished."""
        ...

    def reset(
        self,
        seed: int | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
        *,
        plan: Sequence[tuple[int | None, str]] | None = None,
    ) -> None: ...

    def waiting(self) -> Counter[str]: ...

    def next_batch(self, agent: str | None = None) -> Batch: ...

    def step(self, batch: Batch, actions: Sequence[Any]) -> list[Episode]: ...

    def run(self, policy: Policy, num_episodes: int | None = None) -> list[Episode]: ...

    def close(self) -> None: ...


class VectorScheduler:
    """The scheduling every vector environment shares, wherever its environments live (this
    process, worker processes, Ray actors): the agent the next batch serves (the one most
    environments wait on, ties to the earlier seat), the shape checks of ``reset`` and
    ``step``, and the loop that plays until enough episodes finished. A subclass says how to
    reset, count the waiting environments, build a batch and step; it sets
    :attr:`possible_agents` and ``_ready`` (after its first ``reset``)."""

    possible_agents: list[str]
    _ready: bool = False

    @property
    def num_envs(self) -> int:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        raise NotImplementedError

    @property
    def planned(self) -> bool:
        """Whether the last ``reset`` was given a plan (the episodes are fixed)."""
        raise NotImplementedError

    def reset(self, seed=None, options=None, *, plan=None) -> None:
        raise NotImplementedError

    def waiting(self) -> Counter[str]:
        raise NotImplementedError

    def next_batch(self, agent: str | None = None) -> Batch:
        raise NotImplementedError

    def step(self, batch: Batch, actions: Sequence[Any]) -> list[Episode]:
        raise NotImplementedError

    def choose_agent(self, counts: Counter[str], agent: str | None = None) -> str:
        """``agent``, or the agent most environments wait on (ties: the earlier seat)."""
        if not counts:
            raise EnvOrderError(
                "every episode of the plan given to reset() has finished: call reset() (with a "
                "new plan or none) before next_batch()"
            )
        if agent is None:
            agent = max(counts, key=lambda a: (counts[a], -self.possible_agents.index(a)))
        return agent

    def check_options(self, options: Sequence[Any] | None) -> None:
        """``reset``'s ``options`` give one entry per environment."""
        if options is not None and len(options) != self.num_envs:
            raise ValueError(
                f"options must have one entry per environment ({self.num_envs}), got {len(options)}"
            )

    @staticmethod
    def check_actions(batch: Batch, actions: Sequence[Any]) -> None:
        """``step`` gets one action per environment of the batch."""
        if len(actions) != len(batch.env_indices):
            raise ValueError(
                f"Got {len(actions)} actions for a batch of {len(batch.env_indices)} environments"
            )

    def run(self, policy: Policy, num_episodes: int | None = None) -> list[Episode]:
        """Play until ``num_episodes`` episodes finished (or, after ``reset(plan=...)``, until the
        plan is done); ``policy(agent, observations) -> actions``."""
        if not self._ready:
            self.reset()
        if num_episodes is None and not self.planned:
            raise ValueError("run() needs num_episodes unless reset(plan=...) fixed the episodes")
        episodes: list[Episode] = []
        while (not self.done) if num_episodes is None else len(episodes) < num_episodes:
            batch = self.next_batch()
            episodes += self.step(batch, list(policy(batch.agent, batch.observations)))
        return episodes if num_episodes is None else episodes[:num_episodes]


class VectorFlexEnv(VectorScheduler):
    """Many environments of one team layout, stepped in per-agent batches with auto-reset."""

    def __init__(self, env_fns: Sequence[Callable[[], FlexMGEnv]], *, seed: int | None = None):
        if not env_fns:
            raise ValueError("VectorFlexEnv needs at least one environment")
        self.envs: list[FlexMGEnv] = [fn() for fn in env_fns]
        self.possible_agents = list(self.envs[0].possible_agents)
        for i, env in enumerate(self.envs):
            if list(env.possible_agents) != self.possible_agents:
                raise ValueError(
                    f"Environment {i} has agents {env.possible_agents}, expected "
                    f"{self.possible_agents}: "
                    "a vector environment needs one team layout"
                )
        self.seed = seed
        self._ready = False
        self._plan: deque[tuple[int | None, str]] | None = None
        self._idle: set[int] = set()

    @property
    def num_envs(self) -> int:
        return len(self.envs)

    def reset(
        self,
        seed: int | None = None,
        options: Sequence[dict[str, Any] | None] | None = None,
        *,
        plan: Sequence[tuple[int | None, str]] | None = None,
    ) -> None:
        """Reset every environment; environment ``i`` gets seed ``seed + i`` (per-item seeding).

        With ``plan`` (a sequence of ``(seed, task_id)``), environments play exactly those
        episodes instead: each reset takes the next item, and an environment whose plan ran out
        goes idle. This is how an evaluation covers a fixed task set (``done`` tells when).
        """
        seed = self.seed if seed is None else seed
        self.check_options(options)
        self._plan = deque(plan) if plan is not None else None
        self._idle = set()
        for i, env in enumerate(self.envs):
            if self._plan is not None:
                self._next_planned(i)
            else:
                env.reset(
                    seed=None if seed is None else seed + i,
                    options=None if options is None else options[i],
                )
        self._ready = True

    @property
    def done(self) -> bool:
        """True when a plan was given and every planned episode has finished."""
        return len(self._idle) == self.num_envs

    @property
    def planned(self) -> bool:
        return self._plan is not None

    def _next_planned(self, i: int) -> None:
        if self._plan:
            item_seed, task_id = self._plan.popleft()
            self.envs[i].reset(seed=item_seed, options={"task_id": task_id})
        else:
            self._idle.add(i)

    def waiting(self) -> Counter[str]:
        """How many (non-idle) environments wait on each agent id."""
        self._require_reset("waiting")
        return Counter(
            env.agent_selection for i, env in enumerate(self.envs) if i not in self._idle
        )

    def next_batch(self, agent: str | None = None) -> Batch:
        """The batch for ``agent`` or, by default, for the agent most environments wait on."""
        self._require_reset("next_batch")
        counts = self.waiting()
        agent = self.choose_agent(counts, agent)
        idx = [
            i
            for i, env in enumerate(self.envs)
            if i not in self._idle and env.agent_selection == agent
        ]
        if not idx:
            raise ValueError(f"No environment waits on {agent!r}; waiting: {dict(counts)}")
        return Batch(
            agent=agent,
            env_indices=idx,
            observations=[self.envs[i].observe(agent) for i in idx],
            messages=[self.envs[i].messages(agent) for i in idx],
            states=[self.envs[i].state() for i in idx],
        )

    def step(self, batch: Batch, actions: Sequence[Any]) -> list[Episode]:
        """Apply one action per environment of ``batch``; return the episodes that finished."""
        self._require_reset("step")
        self.check_actions(batch, actions)
        finished: list[Episode] = []
        for i, action in zip(batch.env_indices, actions, strict=True):
            env = self.envs[i]
            if env.agent_selection != batch.agent:
                raise ValueError(
                    f"Environment {i} waits on {env.agent_selection!r}, not {batch.agent!r}: "
                    "stale batch"
                )
            env.step(action)
            if env.terminations[env.agent_selection] or env.truncations[env.agent_selection]:
                episode = env.episode()
                episode.env_index = i
                while env.agents:  # PettingZoo: each finished agent is stepped with None once
                    env.step(None)
                finished.append(episode)
                if self._plan is not None:
                    self._next_planned(i)
                else:
                    env.reset()
        return finished

    def snapshot(self, index: int) -> EnvSnapshot:
        """Environment ``index``'s episode state (:meth:`FlexMGEnv.snapshot`)."""
        self._require_reset("snapshot")
        return self.envs[index].snapshot()

    def restore(self, index: int, snapshot: EnvSnapshot) -> None:
        """Put environment ``index`` into ``snapshot``'s state. Restoring one snapshot into
        ``K`` environments plays ``K`` branches of the same problem together: the next
        :meth:`next_batch` serves them in one call, and their steps never share state."""
        self._require_reset("restore")
        if index in self._idle:
            raise ValueError(f"environment {index} is idle (its plan ran out)")
        self.envs[index].restore(snapshot)

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def _require_reset(self, method: str) -> None:
        # no episode-ended case: a finished environment is reset at once (or goes idle)
        require_episode(method, has_reset=self._ready)


def make_vec(id: str, num_envs: int, *, seed: int | None = None, **overrides: Any) -> VectorFlexEnv:
    """``num_envs`` copies of a registered environment in a :class:`VectorFlexEnv`."""
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    return VectorFlexEnv([lambda: make(id, **overrides) for _ in range(num_envs)], seed=seed)
