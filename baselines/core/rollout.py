"""Rollouts through the public vector API of ``marft_envs``.

One batched ``generate`` per agent id serves every environment waiting on that agent (with that
agent's adapter); finished environments auto-reset, so episodes of different lengths never
stall a batch. Training rollouts are unbiased: the first ``N`` episodes to START are the batch,
each played to its end (keeping the first ``N`` to *finish* would over-represent short
episodes). Evaluations pass a ``plan`` instead: exactly those ``(seed, task_id)`` episodes are
played, once each (what the leaderboard requires of a bundle). Finished episodes are matched to
the environment that played them by ``Episode.env_index``. Each played turn keeps the exact
token ids that were generated, which the trainer scores later (old log-probabilities, values).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from marft_envs import Batch, Episode, VectorEnv

from .generation import Generator, SamplingSpec


class RolloutError(RuntimeError):
    """The environment returned episodes that do not match what was played."""


class InfraErrorRollout(RolloutError):
    """Every episode of a training rollout ended in an infrastructure error: nothing to learn."""


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
    truncated: bool = False  # the response hit max_new_tokens without a stop token
    rollout_logprobs: list[float] = field(default_factory=list)  # Generation.logprobs of the turn


@dataclass
class Rollout:
    """Finished episodes and their turns in play order (``turns[e][i]`` is episode e's turn i).

    ``stats``: ``episodes`` (kept), ``infra_errors`` (dropped: an infrastructure error is not
    the policy's fault), ``generate_calls``, ``mean_batch_size`` (environments per ``generate``),
    ``turns`` and ``truncated_turns`` (responses cut at ``max_new_tokens``), ``generated_tokens``
    (every response token generated, dropped episodes' included).
    """

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
        t.agent == p[0] and p[3].startswith(t.action)
        for t, p in zip(episode.turns, pending, strict=True)
    ):
        return
    raise RolloutError(
        f"a finished episode of task {episode.task_id!r} ({len(episode.turns)} turns) from "
        f"environment {episode.env_index} does not match the {len(pending)} turn(s) played there: "
        "the vector environment's record differs from what the policy played"
    )


def _batch_for(venv: VectorEnv, wanted: dict[int, int | None]) -> Batch | None:
    """The next batch restricted to environments whose episode is wanted (``None``: none is).

    ``next_batch()``'s agent first; when none of its environments is wanted, the other agents
    in ``waiting()`` order (deterministic), so unwanted environments never stall the rollout.
    """
    default = venv.next_batch()
    for agent in [default.agent, *(a for a in venv.waiting() if a != default.agent)]:
        batch = default if agent == default.agent else venv.next_batch(agent)
        keep = [k for k, i in enumerate(batch.env_indices) if wanted.get(i) is not None]
        if len(keep) == len(batch.env_indices):
            return batch
        if keep:
            return Batch(
                batch.agent,
                [batch.env_indices[k] for k in keep],
                [batch.observations[k] for k in keep],
                [batch.messages[k] for k in keep],
                [batch.states[k] for k in keep],
            )
    return None


def collect(
    venv: VectorEnv,
    generator: Generator,
    adapter_for: Callable[[str], str | None],
    num_episodes: int | None,
    sampling: SamplingSpec,
    seed: int | None = None,
    *,
    plan: Sequence[tuple[int | None, str]] | None = None,
) -> Rollout:
    """Play a rollout: ``num_episodes`` auto-reset episodes from ``seed``, or exactly ``plan``.

    Without ``plan``: reset ``venv`` with ``seed``; the episodes are the first ``num_episodes``
    to start (environment ``i`` starts episode ``i``; a finished environment starts the next
    one), each played to its end, returned in start order. An environment whose new episode is
    beyond ``num_episodes`` is not stepped again. Which episodes are kept never depends on how
    long they are, and the result depends only on ``seed``, the policy and the torch RNG (that
    is how a resumed run replays its data). Episodes with an infrastructure-error verdict are
    dropped and counted (``stats["infra_errors"]``); if every one was, :class:`InfraErrorRollout`.

    With ``plan`` (``(seed, task_id)`` pairs, e.g. ``marft_envs.evaluation_plan``):
    ``venv.reset(plan=plan)`` and play until every planned episode finished (``num_episodes``
    must be ``None`` or ``len(plan)``); episodes are returned in finishing order, the
    infrastructure errors kept (a result bundle covers the whole plan) and counted.

    ``adapter_for(agent)`` names the adapter that plays ``agent`` (``None``: the bare base).
    ``venv`` is any :class:`marft_envs.VectorEnv`: a ``VectorFlexEnv`` or a worker group
    (``baselines.distributed``).
    """
    if plan is not None:
        plan = list(plan)
        if num_episodes is not None and num_episodes != len(plan):
            raise ValueError(
                f"num_episodes={num_episodes} but the plan has {len(plan)} episodes; "
                "pass num_episodes=None with a plan"
            )
        venv.reset(plan=plan)
        target = len(plan)
    elif num_episodes is None or seed is None:
        raise ValueError("collect needs num_episodes and seed, or a plan")
    else:
        venv.reset(seed=seed)
        target = num_episodes
    # wanted[i]: start number of the episode environment i plays, None once it is beyond target.
    # A plan fixes the episodes itself (environments go idle), so every environment is wanted.
    if plan is not None:
        wanted: dict[int, int | None] = dict.fromkeys(range(venv.num_envs), 0)
    else:
        wanted = {i: (i if i < target else None) for i in range(venv.num_envs)}
    next_start = min(target, venv.num_envs)
    pending: dict[int, list[tuple]] = {i: [] for i in range(venv.num_envs)}
    done: list[tuple[int, Episode, list[tuple]]] = []
    gen_s = env_s = 0.0
    calls = sizes = 0
    while len(done) < target:
        t0 = time.perf_counter()
        batch = _batch_for(venv, wanted)
        if batch is None:
            raise RolloutError(
                f"{target - len(done)} wanted episode(s) are unfinished but no "
                "environment playing one waits on an agent"
            )
        t1 = time.perf_counter()
        out = generator.generate(adapter_for(batch.agent), batch.messages, sampling)
        t2 = time.perf_counter()
        truncated = out.truncated or [False] * len(out.texts)
        for k, env_index in enumerate(batch.env_indices):
            pending[env_index].append(
                (
                    batch.agent,
                    out.prompt_ids[k],
                    out.action_ids[k],
                    out.texts[k],
                    truncated[k],
                    out.logprobs[k] if out.logprobs else [],
                )
            )
        finished = venv.step(batch, out.texts)
        t3 = time.perf_counter()
        gen_s += t2 - t1
        env_s += (t1 - t0) + (t3 - t2)
        calls += 1
        sizes += len(batch)
        for episode in finished:
            index = episode.env_index
            if index is None or index not in pending:
                raise RolloutError(
                    f"a finished episode of task {episode.task_id!r} names environment "
                    f"{index!r}; valid: 0..{venv.num_envs - 1}"
                )
            played = pending[index]
            _check_matches(episode, played)
            order = wanted[index] if plan is None else len(done)
            assert order is not None  # only environments whose episode is wanted are stepped
            done.append((order, episode, played))
            pending[index] = []
            if plan is None:
                wanted[index] = next_start if next_start < target else None
                next_start += 1
    done.sort(key=lambda d: d[0])
    return _assemble(
        done,
        drop_infra_errors=plan is None,
        target=target,
        gen_s=gen_s,
        env_s=env_s,
        calls=calls,
        sizes=sizes,
    )


def _assemble(
    done,
    *,
    drop_infra_errors: bool,
    target: int,
    gen_s: float,
    env_s: float,
    calls: int,
    sizes: int,
) -> Rollout:
    """The :class:`Rollout` of ``(order, episode, played turns)`` records in order."""
    episodes: list[Episode] = []
    turns: list[list[TurnSample]] = []
    infra = [ep for _, ep, _ in done if ep.infra_error]
    for _, episode, played in done:
        if drop_infra_errors and episode.infra_error:
            continue
        e = len(episodes)
        episodes.append(episode)
        turns.append(
            [
                TurnSample(
                    e,
                    i,
                    t.agent,
                    t.role,
                    t.round,
                    p[1],
                    p[2],
                    p[3],
                    t.state,
                    float(t.reward),
                    p[4],
                    p[5],
                )
                for i, (t, p) in enumerate(zip(episode.turns, played, strict=True))
            ]
        )
    if drop_infra_errors and not episodes:
        reason = next(
            (v.get("reason") for v in reversed(infra[0].verdicts) if v.get("infra_error")), ""
        )
        raise InfraErrorRollout(
            f"all {target} episodes ended in an infrastructure error (first: task "
            f"{infra[0].task_id!r}, {reason!r}): the verifier or sandbox is not working, so there "
            "is nothing to train on; check it (e.g. `marft-envs play ID`) before training"
        )
    flat = [t for ep in turns for t in ep]
    stats = {
        "episodes": float(len(episodes)),
        "infra_errors": float(len(infra)),
        "generate_calls": float(calls),
        "mean_batch_size": sizes / max(1, calls),
        "turns": float(len(flat)),
        "truncated_turns": float(sum(t.truncated for t in flat)),
        # dropped infrastructure-error episodes' responses were generated too
        "generated_tokens": float(sum(len(p[2]) for _, _, played in done for p in played)),
    }
    return Rollout(episodes, turns, gen_s, env_s, stats)
