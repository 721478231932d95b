"""A registered Flex-MG environment behind OpenEnv's ``Environment`` interface (one per session)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from ..errors import require_episode
from ..flexmg import deterministic_verdict
from ..policies import POLICIES, advance, episode_over, resolve_others
from ..registry import make, spec
from .models import MarftAction, MarftObservation, MarftState

#: Policies the server may play seats with (``human`` would read the server's terminal).
SERVER_POLICIES = tuple(sorted(p for p in POLICIES if p != "human"))
RESET_KEYS = ("seed", "episode_id", "task_id", "seats", "others")


class MarftEnvironment(Environment[MarftAction, MarftObservation, MarftState]):
    """One session's environment: ``make(env_id, **overrides)`` plus the seat bookkeeping.

    ``reset(seed=, task_id=, seats=, others=)``: ``seats`` are the agents the client plays (default
    all); the rest are played here by the policy named ``others`` (one of ``SERVER_POLICIES``)
    before each reply, so every observation is for one of the client's seats. Bad input raises
    ``ValueError``, a step out of order :class:`~marft_envs.errors.EnvOrderError`; OpenEnv's
    server turns either into an error message and the session lives on.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True  # every session owns its environment and verifier

    def __init__(self, env_id: str, overrides: Mapping[str, Any] | None = None):
        super().__init__()
        self.env_id = env_id
        self.env = make(env_id, **dict(overrides or {}))
        self.agents: list[str] = list(self.env.possible_agents)
        self.seats: list[str] = list(self.agents)
        self.policies: dict[str, Any] = {}
        self.others: str | None = None
        self.episode_id: str | None = None
        self.step_count = 0
        self.closed = False

    # -- OpenEnv interface ---------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        seats: Sequence[str] | None = None,
        others: str | None = None,
        **kwargs: Any,
    ) -> MarftObservation:
        """Start an episode; the client plays ``seats`` (default all), ``others`` the rest."""
        return as_observation(self.reset_reply(seed, episode_id, task_id, seats, others, **kwargs))

    def step(
        self, action: MarftAction, timeout_s: float | None = None, **kwargs: Any
    ) -> MarftObservation:
        """Play ``action`` for the client's seat whose turn it is, then the server's seats."""
        return as_observation(self.step_reply(action))

    def reset_reply(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        seats: Sequence[str] | None = None,
        others: str | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """:meth:`reset`'s reply in OpenEnv's wire format (``serialize_observation``'s dict)."""
        self._check_open()
        if kwargs:
            raise ValueError(f"unknown reset field(s) {sorted(kwargs)}; valid: {list(RESET_KEYS)}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer or null, got {seed!r}")
        # Fields arrive as JSON: check their types here, so that a wrong one is named rather than
        # failing deep inside (or, for episode_id, breaking every later state message).
        for name, value in (("episode_id", episode_id), ("task_id", task_id)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string or null, got {value!r}")
        if seats is not None and (
            isinstance(seats, str)
            or not isinstance(seats, (list, tuple))
            or not all(isinstance(s, str) for s in seats)
        ):
            raise ValueError(
                f"seats must be a list of agent ids (some of {self.agents}) or null, got {seats!r}"
            )
        seats = list(self.agents if seats is None else seats)
        unknown = [s for s in seats if s not in self.agents]
        if not seats or unknown or len(set(seats)) != len(seats):
            raise ValueError(
                f"seats must be a non-empty list of distinct agents of {self.agents}, got {seats!r}"
            )
        policies = resolve_others(
            [a for a in self.agents if a not in seats], others, names=SERVER_POLICIES
        )
        u = self.env.unwrapped
        if task_id is not None:
            try:
                u.dataset.by_id(task_id)
            except KeyError as e:
                raise ValueError(e.args[0]) from None
        self.seats, self.policies, self.others = seats, policies, others
        self.env.reset(seed=seed, options={"task_id": task_id} if task_id is not None else None)
        self.episode_id = episode_id or str(uuid.uuid4())
        self.step_count = 0
        rewards: dict[str, float] = {}
        played = advance(self.env, self.policies, rewards)
        return self._reply(rewards, played, note=None)

    def step_reply(self, action: MarftAction) -> dict[str, Any]:
        """:meth:`step`'s reply in OpenEnv's wire format (``serialize_observation``'s dict)."""
        self._check_open()
        started = self.episode_id is not None
        require_episode("step", has_reset=started, ended=started and episode_over(self.env))
        agent = self.env.agent_selection
        if action.agent != agent:
            who = "the client" if agent in self.seats else f"the server (policy {self.others!r})"
            raise ValueError(f"it is {agent!r}'s turn (played by {who}), not {action.agent!r}")
        limit = self.env.unwrapped.max_action_chars
        if len(action.text) > limit:
            raise ValueError(
                f"action text is {len(action.text):,} characters; this environment takes at "
                f"most {limit:,} (make() override max_action_chars)"
            )
        self.env.step(action.text)
        self.step_count += 1
        rewards = dict(self.env.rewards)
        note = self.env.infos[agent].get("action_note")
        played = [(agent, action.text), *advance(self.env, self.policies, rewards)]
        return self._reply(rewards, played[1:], note=note, acted=[a for a, _ in played])

    # OpenEnv runs a plain reset/step on the session's thread; a thread hop per message costs
    # several times what a turn itself costs. Turns that grade nothing are a few hundred
    # microseconds of Python, so they run on the event loop; a call that may run the verifier
    # (sympy workers, code sandboxes: up to their time limits) goes to a thread, so that it never
    # stalls the other sessions.

    async def reset_async(self, **kwargs: Any) -> MarftObservation:
        return self.reset(**kwargs)  # reset never reaches a round's end: a client seat comes first

    async def step_async(
        self, action: MarftAction, timeout_s: float | None = None, **kwargs: Any
    ) -> MarftObservation:
        if self.may_grade():
            return await asyncio.to_thread(self.step, action)
        return self.step(action)

    def may_grade(self) -> bool:
        """Whether the next step may end a round (its own or through the server's seats)."""
        if self.episode_id is None or episode_over(self.env):
            return False  # step() will refuse it
        i = self.agents.index(self.env.agent_selection)
        return all(a not in self.seats for a in self.agents[i + 1 :])

    @property
    def state(self) -> MarftState:
        u = self.env.unwrapped
        over = episode_over(self.env) if self.episode_id else True
        ep = u.episode() if u.task else None
        verdicts = [deterministic_verdict(v) for v in ep.verdicts] if ep else []
        return MarftState(
            episode_id=self.episode_id,
            step_count=self.step_count,
            env_id=self.env_id,
            task_id=ep.task_id if ep else None,
            seed=ep.seed if ep else None,
            agent=None if over else self.env.agent_selection,
            done=over,
            seats=self.seats,
            transcript=u.state() if u.task else "",
            verdicts=verdicts,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        from .. import __version__

        return EnvironmentMetadata(
            name=self.env_id,
            description=spec(self.env_id).description,
            version=__version__,
            documentation_url="docs/integrations.md",
        )

    def close(self) -> None:
        # OpenEnv's idle reaper (--session-timeout) closes a session whose WebSocket is still
        # connected and frees its slot, yet that connection keeps sending messages here: they
        # get an error instead of an episode on a closed environment.
        if not self.closed:
            self.closed = True
            self.env.close()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(
                "this session was closed by the server (idle longer than its session timeout): "
                "open a new connection"
            )

    # -- helpers -------------------------------------------------------------------------------

    def _reply(
        self,
        rewards: dict[str, float],
        server_turns: list[tuple[str, str]],
        *,
        note: str | None,
        acted: Sequence[str] = (),
    ) -> dict[str, Any]:
        # Built once as plain data in the wire format: the batched endpoint sends it as is, and
        # OpenEnv's path wraps it in a MarftObservation (which OpenEnv dumps back to this).
        env, u = self.env, self.env.unwrapped
        acted = list(acted) + [a for a, _ in server_turns]
        over = episode_over(env)
        agent = None if over else env.agent_selection
        info = env.infos[self.agents[-1]]
        # A round is graded exactly when its last agent acts; at most once between two client turns.
        graded = self.agents[-1] in acted
        per_agent = {a: float(rewards.get(a, 0.0)) for a in self.agents}
        metadata = {
            "task_id": u.task.id,
            "round": u.round,
            "verdict": info.get("verdict") if graded else None,
            "answerer": info.get("answerer"),
            "server_turns": [{"agent": a, "action": t} for a, t in server_turns],
            "terminated": bool(over and env.terminations[env.agent_selection]),
            "truncated": bool(over and env.truncations[env.agent_selection]),
            "action_note": note,
        }
        return {
            "observation": {
                "metadata": metadata,
                "agent": agent,
                "view": env.observe(agent) if agent else {},
                "messages": u.messages(agent) if agent else [],
                "rewards": per_agent,
                "seats": list(self.seats),
                "agents": list(self.agents),
            },
            "reward": sum(per_agent[s] for s in self.seats),
            "done": over,
            "metadata": metadata,
        }


def as_observation(reply: dict[str, Any]) -> MarftObservation:
    """The :class:`MarftObservation` of a reply built by :meth:`MarftEnvironment._reply`
    (validated: skipping that with ``model_construct`` saves about 2 us of a turn's 250)."""
    return MarftObservation(done=reply["done"], reward=reply["reward"], **reply["observation"])
