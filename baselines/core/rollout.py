"""Rollouts through the public vector API of ``marft_envs``.

One batched ``generate`` per agent id serves every environment waiting on that agent (with that
agent's adapter); finished environments auto-reset, so episodes of different lengths never
stall a batch. Evaluations pass a ``plan`` instead: exactly those ``(seed, task_id)`` episodes are
played, once each (what the leaderboard requires of a bundle). Finished episodes are matched to
the environment that played them by ``Episode.env_index``. Each played turn keeps the exact token ids that were generated, which the
trainer scores later (old log-probabilities, values).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
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
    rollout_logprobs: list[float] = field(default_factory=list)  # Generation.logprobs of the turn


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


def _check_matches(episode: Episode, pending: list[tuple]) -> None:
    """Raise unless ``episode`` is what the policy played in its environment.

    The env may shorten an action (max_action_chars), hence the prefix test.
    """
    if len(episode.turns) == len(pending) and all(
        t.agent == p[0] and p[3].startswith(t.action) for t, p in zip(episode.turns, pending)
    ):
        return
    raise RolloutError(
        f"a finished episode of task {episode.task_id!r} ({len(episode.turns)} turns) from "
        f"environment {episode.env_index} does not match the {len(pending)} turn(s) played there: "
        "the vector environment's record differs from what the policy played"
    )


def collect(
    venv: VectorFlexEnv,
    generator: Generator,
    adapter_for: Callable[[str], str | None],
    num_episodes: int | None,
    sampling: SamplingSpec,
    seed: int | None = None,
    *,
    plan: Sequence[tuple[int | None, str]] | None = None,
) -> Rollout:
    """Play a rollout: ``num_episodes`` auto-reset episodes from ``seed``, or exactly ``plan``.

    Without ``plan``: reset ``venv`` with ``seed`` and play until ``num_episodes`` episodes
    finished. Episodes still running when enough have finished are dropped, so the result
    depends only on ``seed``, the policy and the torch RNG (that is how a resumed run replays
    its data).

    With ``plan`` (``(seed, task_id)`` pairs, e.g. ``leaderboard.schema.evaluation_plan``):
    ``venv.reset(plan=plan)`` and play until every planned episode finished (``num_episodes``
    must be ``None`` or ``len(plan)``); episodes are returned in finishing order.

    ``adapter_for(agent)`` names the adapter that plays ``agent`` (``None``: the bare base).
    ``venv`` is a ``VectorFlexEnv`` or a worker group (``baselines.distributed``).
    """
    if plan is not None:
        plan = list(plan)
        if num_episodes is not None and num_episodes != len(plan):
            raise ValueError(f"num_episodes={num_episodes} but the plan has {len(plan)} episodes; "
                             "pass num_episodes=None with a plan")
        venv.reset(plan=plan)
        target = len(plan)
    elif num_episodes is None or seed is None:
        raise ValueError("collect needs num_episodes and seed, or a plan")
    else:
        venv.reset(seed=seed)
        target = num_episodes
    pending: dict[int, list[tuple]] = {i: [] for i in range(venv.num_envs)}
    episodes: list[Episode] = []
    turns: list[list[TurnSample]] = []
    gen_s = env_s = 0.0
    while len(episodes) < target:
        t0 = time.perf_counter()
        batch = venv.next_batch()
        t1 = time.perf_counter()
        out = generator.generate(adapter_for(batch.agent), batch.messages, sampling)
        t2 = time.perf_counter()
        for k, env_index in enumerate(batch.env_indices):
            pending[env_index].append(
                (batch.agent, out.prompt_ids[k], out.action_ids[k], out.texts[k],
                 out.logprobs[k] if out.logprobs else [])
            )
        finished = venv.step(batch, out.texts)
        t3 = time.perf_counter()
        gen_s += t2 - t1
        env_s += (t1 - t0) + (t3 - t2)
        for episode in finished:
            env_index = episode.env_index
            if env_index not in pending:
                raise RolloutError(f"a finished episode of task {episode.task_id!r} names environment "
                                   f"{env_index!r}; valid: 0..{venv.num_envs - 1}")
            played = pending[env_index]
            _check_matches(episode, played)
            if len(episodes) < target:
                e = len(episodes)
                episodes.append(episode)
                turns.append([
                    TurnSample(e, i, t.agent, t.role, t.round, p[1], p[2], p[3], t.state,
                               float(t.reward), p[4])
                    for i, (t, p) in enumerate(zip(episode.turns, played))
                ])
            pending[env_index] = []
    return Rollout(episodes, turns, gen_s, env_s)
