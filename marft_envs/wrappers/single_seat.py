"""One seat of a Flex-MG team as a Gymnasium environment; the other seats play fixed policies.

    from marft_envs.wrappers import SingleSeat
    env = SingleSeat("math-3agent", seat="actor_1", others="oracle")
    obs, info = env.reset(seed=0)             # the reasoner has already played
    obs, reward, terminated, truncated, info = env.step(my_llm(obs["prompt"]))

A step is the seat's whole response; the seats after it (and, with several rounds, the seats
before it in the next round) are played before ``step`` returns. The reward is what the seat
received during that interval, under the environment's ``reward_to`` rule.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import gymnasium

from ..errors import require_episode
from ..policies import ScriptedPolicy, advance, episode_over, resolve_others
from ..registry import make


class SingleSeat(gymnasium.Env):
    """The seat ``seat`` (an agent id or a position) of ``env``; ``others`` play the rest.

    Args:
        env: a Flex-MG AEC environment, or a registered id (``make(env, **overrides)``).
        seat: the learner's agent id (``"actor_1"``) or position (``1``).
        others: who plays every other seat: a policy name (``"oracle"``, ``"echo"``,
            ``"random"``), any callable ``policy(env, agent, observation) -> str`` (a scripted
            policy or a second model), or a mapping from agent id to either.
        **overrides: ``make()`` overrides when ``env`` is an id.
    """

    # gymnasium's Env declares ``metadata`` an attribute, not a ClassVar; it is never mutated
    metadata: dict[str, Any] = {"render_modes": ["ansi"]}  # noqa: RUF012

    def __init__(
        self,
        env: Any,
        seat: str | int,
        others: str | ScriptedPolicy | Mapping[str, Any],
        **overrides: Any,
    ):
        self.aec = make(env, **overrides) if isinstance(env, str) else env
        agents = list(self.aec.possible_agents)
        if isinstance(seat, int) and not isinstance(seat, bool):
            if not 0 <= seat < len(agents):
                raise ValueError(f"seat position {seat} is out of range for agents {agents}")
            seat = agents[seat]
        if not isinstance(seat, str) or seat not in agents:
            raise ValueError(f"seat {seat!r} is not an agent of this team; agents: {agents}")
        self.seat: str = seat
        self.others = others
        self.policies = resolve_others([a for a in agents if a != seat], others)
        self.observation_space = self.aec.observation_space(seat)
        self.action_space = self.aec.action_space(seat)
        self.render_mode = getattr(self.aec, "render_mode", None)
        self.spec = None
        self._has_reset = False  # Gymnasium's OrderEnforcing flag: this view's own reset()

    @property
    def unwrapped_aec(self) -> Any:
        """The Flex-MG environment underneath (its ``episode()``, ``state()``, ``task``)."""
        return self.aec.unwrapped

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        # Named policies start afresh each episode (as on a server), so that the same seed gives
        # the same episode even with a stateful one such as "random"; callables are the caller's.
        self.policies = resolve_others(list(self.policies), self.others)
        self.aec.reset(seed=seed, options=options)
        self._has_reset = True
        advance(self.aec, self.policies, {})  # rewards come only when a round is graded
        if episode_over(self.aec):
            raise ValueError(
                f"the episode ended before {self.seat!r} could act (is max_turns too small?)"
            )
        return self._observe(), dict(self.aec.infos[self.seat])

    def step(self, action: Any):
        require_episode(
            "step", has_reset=self._has_reset, ended=self._has_reset and episode_over(self.aec)
        )
        rewards: dict[str, float] = {}
        self.aec.step(action)
        for a, r in self.aec.rewards.items():
            rewards[a] = rewards.get(a, 0.0) + r
        advance(self.aec, self.policies, rewards)
        seat = self.seat
        terminated, truncated = bool(self.aec.terminations[seat]), bool(self.aec.truncations[seat])
        return (
            self._observe(),
            float(rewards.get(seat, 0.0)),
            terminated,
            truncated,
            dict(self.aec.infos[seat]),
        )

    def _observe(self) -> dict[str, Any]:
        # A fresh copy: the environment caches views, and Gymnasium users keep what they get.
        return copy.deepcopy(self.aec.observe(self.seat))

    def render(self) -> str | None:
        return self.aec.render()

    def close(self) -> None:
        self.aec.close()
