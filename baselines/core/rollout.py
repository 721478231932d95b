"""Rollouts through the public vector API of ``marft_envs``.

One batched ``generate`` per agent id serves every environment waiting on that agent (with that
agent's adapter); finished environments auto-reset, so episodes of different lengths never
stall a batch. Each played turn keeps the exact token ids that were generated, which the
trainer scores later (old log-probabilities, values).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from marft_envs import Episode, VectorFlexEnv

from .generation import Generator, SamplingSpec


class RolloutError(RuntimeError):
    """The environment returned episodes that do not match what was played."""


@dataclass
class TurnSample:
    """One agent turn of a finished episode, as the trainer needs it."""

    episode: int  # index in the rollout's episode list
    index: int  # turn index inside the episode (play order)
    agent: str
    role: str
    round: int
    prompt_ids: list[int]
    action_ids: list[int]
    text: str
    state: str  # env.state() before the action (centralized critic input)
    reward: float  # what this agent received for the round


@dataclass
class Rollout:
    """Finished episodes and their turns in play order (``turns[e][i]`` is episode e's turn i)."""

    episodes: list[Episode]
    turns: list[list[TurnSample]]
    generate_seconds: float = 0.0
    env_seconds: float = 0.0
    stats: dict[str, float] = field(default_factory=dict)

    def flat(self) -> list[TurnSample]:
        return [t for ep in self.turns for t in ep]


def _matches(episode: Episode, pending: list[tuple]) -> bool:
    # The env may shorten an action (max_action_chars), hence the prefix test.
    return len(episode.turns) == len(pending) and all(
        t.agent == p[0] and p[3].startswith(t.action) for t, p in zip(episode.turns, pending)
    )


def collect(
    venv: VectorFlexEnv,
    generator: Generator,
    adapter_for: Callable[[str], str | None],
    num_episodes: int,
    sampling: SamplingSpec,
    seed: int,
) -> Rollout:
    """Reset ``venv`` with ``seed`` and play until ``num_episodes`` episodes finished.

    Episodes still running when enough have finished are dropped, so the result depends only
    on ``seed``, the policy and the torch RNG (that is how a resumed run replays its data).
    ``adapter_for(agent)`` names the adapter that plays ``agent`` (``None``: the bare base).
    """
    venv.reset(seed=seed)
    pending: dict[int, list[tuple]] = {i: [] for i in range(venv.num_envs)}
    episodes: list[Episode] = []
    turns: list[list[TurnSample]] = []
    gen_s = env_s = 0.0
    while len(episodes) < num_episodes:
        t0 = time.perf_counter()
        batch = venv.next_batch()
        t1 = time.perf_counter()
        out = generator.generate(adapter_for(batch.agent), batch.messages, sampling)
        t2 = time.perf_counter()
        for k, env_index in enumerate(batch.env_indices):
            pending[env_index].append(
                (batch.agent, out.prompt_ids[k], out.action_ids[k], out.texts[k])
            )
        finished = venv.step(batch, out.texts)
        t3 = time.perf_counter()
        gen_s += t2 - t1
        env_s += (t1 - t0) + (t3 - t2)
        # venv.step reports finished episodes in the order of batch.env_indices.
        candidates = iter(batch.env_indices)
        for episode in finished:
            for env_index in candidates:
                if _matches(episode, pending[env_index]):
                    break
            else:
                raise RolloutError(
                    f"a finished episode of task {episode.task_id!r} ({len(episode.turns)} turns) "
                    "matches no environment's played turns: the vector environment's record "
                    "differs from what the policy played"
                )
            if len(episodes) < num_episodes:
                e = len(episodes)
                episodes.append(episode)
                turns.append([
                    TurnSample(e, i, t.agent, t.role, t.round, p[1], p[2], p[3], t.state, float(t.reward))
                    for i, (t, p) in enumerate(zip(episode.turns, pending[env_index]))
                ])
            pending[env_index] = []
    return Rollout(episodes, turns, gen_s, env_s)
