"""Rollouts for the critic-free, group-relative methods: AT-GRPO's tree sampling and MAGRPO's
joint episodes, through the public API of ``marft_envs`` (``env.snapshot()`` / ``restore()``).

Both return a :class:`GroupBatch`: the samples to train on, each with its group key and the
scalar reward its advantage is computed from, plus a :class:`~baselines.core.rollout.Rollout`
of the episodes actually played to the end (what the training scores are read from).

AT-GRPO (PettingLLMs, ``generate_env_idx_rollout``): for each problem, at each node (round,
agent), the acting agent samples ``K`` responses from ``K`` copies of one state. Each branch is
scored by the reward the environment attributes to that agent when its round is graded: the
round's later agents play one sampled response each along the branch to get there (those
continuation turns are generated, counted in ``generated_tokens``, and not trained on: no
sibling shares their prompt). The episode then continues from the selected branch's state right
after its action (best by reward, ties to the first sampled; or the first). Groups are keyed
``(problem, round, agent)``, so a group's ``K`` samples share one prompt. The tree is held as
snapshot nodes and its moves are played by a :class:`~baselines.core.branching.BranchPool`
(environments here, or the worker group's shards: ``train.workers=ray`` branches on Ray).

MAGRPO (CoMLRL, ``joint_mode=aligned``): ``K`` whole episodes per problem, the team reward of
each (the sum of its rounds' verdict scores); every turn of an episode shares its advantage and
groups are keyed by problem.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import torch

from marft_envs import Episode, FlexMGEnv

from . import algos
from .advantages import round_rewards
from .branching import BranchPool, EnvListPool, EnvNode
from .generation import Generator, SamplingSpec
from .rollout import Rollout, TurnSample, collect

AT_GRPO = "at_grpo"  # groups of K branches from one state, keyed (problem, turn, agent)
MAGRPO = "magrpo"  # groups of K joint episodes, keyed by problem

__all__ = [
    "AT_GRPO",
    "MAGRPO",
    "GroupBatch",
    "group_advantages",
    "joint_rollout",
    "pick_tasks",
    "tree_rollout",
]


@dataclass
class GroupBatch:
    """Samples of a group-relative method and the finished episodes.

    Advantages are computed per *unit*: ``scores[u]`` is unit ``u``'s reward and ``groups[u]``
    its group key; sample ``i`` takes the advantage of unit ``units[i]``. An AT-GRPO unit is
    one branch (one sample); a MAGRPO unit is one episode (all its turns), so a long episode
    does not count more than a short one in its group's mean and std. ``(episode, index)`` is
    unique per sample.
    """

    rollout: Rollout
    samples: list[TurnSample]
    units: list[int]
    groups: list[Hashable]
    scores: list[float]
    stats: dict[str, float] = field(default_factory=dict)


def pick_tasks(env: FlexMGEnv, seeds: Sequence[int]) -> list[tuple[int, str]]:
    """The ``(seed, task_id)`` of the first episode after ``reset(seed=s)``, for each seed: the
    problems of an iteration, drawn as a vector environment would draw them."""
    out = []
    for s in seeds:
        env.reset(seed=s)
        assert env.task is not None  # reset always picks one
        out.append((s, env.task.id))
    return out


class _TimedGenerator:
    """Wraps a generator to add up the seconds spent generating."""

    def __init__(self, generator: Generator):
        self.generator, self.seconds = generator, 0.0

    def generate(self, adapter, conversations, sampling):
        start = time.perf_counter()
        try:
            return self.generator.generate(adapter, conversations, sampling)
        finally:
            self.seconds += time.perf_counter() - start


@dataclass
class _Branch:
    problem: int
    k: int
    after: EnvNode  # the state right after the branch's own action
    turn: int  # index of the branch's turn in the episode record
    role: str
    round: int
    graded_before: int  # verdicts before the branch acted
    cursor: EnvNode | None = None  # where its continuation stands
    score: float = 0.0
    infra: bool = False


def _sample(problem, index, agent, role, rnd, out, j, state, reward) -> TurnSample:
    return TurnSample(
        problem,
        index,
        agent,
        role,
        rnd,
        out.prompt_ids[j],
        out.action_ids[j],
        out.texts[j],
        state,
        reward,
        bool(out.truncated[j]) if out.truncated else False,
        out.logprobs[j] if out.logprobs else [],
    )


def tree_rollout(
    pool: BranchPool | Sequence[FlexMGEnv],
    generator: Generator,
    adapter_for: Callable[[str], str | None],
    problems: Sequence[tuple[int, str]],
    group_size: int,
    sampling: SamplingSpec,
    select: str = "best",
) -> GroupBatch:
    """AT-GRPO's tree sampling (module docstring) of ``problems`` (``(seed, task_id)``);
    ``group_size`` = K branches per node.

    ``pool`` plays the moves (:class:`~baselines.core.branching.BranchPool`): a worker group of
    :mod:`baselines.distributed` (in-process or Ray workers), or a list of environments of
    this process, one per problem (:class:`~baselines.core.branching.EnvListPool`). The same
    problems, generator and seed give the same batch on every pool: the tree is scheduled
    here, and a move depends only on its node's snapshot and its action.

    Each node serves the agent the pool's scheduler picks among the active problems
    (:meth:`marft_envs.VectorScheduler.choose_agent`; the problems move in step, so it is the
    agent they all wait on). One ``generate`` per node serves every problem waiting on that
    agent (K copies of each prompt), and one per continuation step; one ``advance`` of the pool
    plays each. A branch whose round ended in an infrastructure error is not trained on and
    never selected while a sibling is not one; an episode that ends in one is dropped and
    counted (``stats["infra_errors"]``), as in :func:`collect`.
    """
    if isinstance(pool, Sequence):
        pool = EnvListPool(pool)
    if not isinstance(pool, BranchPool):
        raise TypeError(
            "tree_rollout plays its moves on a BranchPool (a worker group of "
            f"baselines.distributed, an EnvListPool) or a list of environments, got "
            f"{type(pool).__name__}"
        )
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 (K branches per node), got {group_size}")
    if select not in ("best", "first"):
        raise ValueError(f"select must be 'best' or 'first', got {select!r}")
    K = group_size
    timer = _TimedGenerator(generator)
    generator = timer
    nodes = pool.start(problems)
    if len(nodes) != len(problems):
        raise ValueError(f"the pool started {len(nodes)} of {len(problems)} problems")
    active = list(range(len(problems)))
    counters = [0] * len(problems)
    samples: list[TurnSample] = []
    groups: list[Hashable] = []
    scores: list[float] = []
    main: dict[int, list[TurnSample]] = {p: [] for p in active}
    finished: dict[int, Episode] = {}
    tokens = calls = served = 0
    while active:
        agent = pool.choose_agent(Counter(nodes[p].agent for p in active))
        node = [p for p in active if nodes[p].agent == agent]
        order = [(p, k) for p in node for k in range(K)]
        out = generator.generate(
            adapter_for(agent), [nodes[p].messages for p, _ in order], sampling
        )
        calls, served = calls + 1, served + len(order)
        tokens += sum(len(a) for a in out.action_ids)
        afters = pool.advance([(nodes[p], out.texts[j]) for j, (p, _) in enumerate(order)])
        branches: list[_Branch] = []
        for (p, k), after in zip(order, afters, strict=True):
            at = len(nodes[p].episode.turns)
            played = after.episode.turns[at]
            graded = len(nodes[p].episode.verdicts)
            branches.append(_Branch(p, k, after, at, played.role, played.round, graded, after))
        t, c, n = _continue_to_grading(pool, generator, adapter_for, branches, sampling)
        tokens, calls, served = tokens + t, calls + c, served + n
        for j, (b, (p, _k)) in enumerate(zip(branches, order, strict=True)):
            if b.infra:
                continue
            state = nodes[p].state
            sample = _sample(p, counters[p], agent, b.role, b.round, out, j, state, b.score)
            counters[p] += 1
            samples.append(sample)
            groups.append((p, b.round, agent))
            scores.append(b.score)
        for p in node:
            mine = [b for b in branches if b.problem == p]
            chosen = _select(mine, select)
            j = order.index((p, chosen.k))
            main[p].append(
                _sample(
                    p,
                    len(main[p]),
                    agent,
                    chosen.role,
                    chosen.round,
                    out,
                    j,
                    nodes[p].state,
                    chosen.score,
                )
            )
            nodes[p] = chosen.after  # continue from right after the chosen action
            if chosen.after.done:
                finished[p] = chosen.after.episode
        active = [p for p in active if p not in finished]
    gen_s = timer.seconds
    counts = {"generate_calls": calls, "generated_tokens": tokens, "served": served}
    return _group_batch(problems, finished, main, samples, groups, scores, counts, gen_s)


def _select(branches: list[_Branch], select: str) -> _Branch:
    """The branch to continue along: the first, or the best by score (ties: the first
    sampled); either way infrastructure-error branches only when every branch is one."""
    usable = [b for b in branches if not b.infra] or branches
    if select == "first":
        return usable[0]
    return max(usable, key=lambda b: (b.score, -b.k))


def _continue_to_grading(
    pool: BranchPool, generator, adapter_for, branches: list[_Branch], sampling
) -> tuple[int, int, int]:
    """Play each branch's round to its grading (one sampled response per later agent) and set
    ``score``/``infra`` from the reward attributed to the branch's own turn. Returns the
    generated tokens, the ``generate`` calls and the conversations they served."""
    tokens = calls = served = 0
    pending = list(branches)
    while pending:
        still = []
        for b in pending:
            cursor = b.cursor
            assert cursor is not None  # set until the branch is graded
            verdicts = cursor.episode.verdicts
            if len(verdicts) > b.graded_before or cursor.done:
                b.score = float(cursor.episode.turns[b.turn].reward)
                b.infra = any(v.get("infra_error") for v in verdicts[b.graded_before :])
                b.cursor = None
            else:
                still.append(b)
        if not still:
            break
        by_agent: dict[str, list[tuple[_Branch, EnvNode]]] = {}
        for b in still:
            assert b.cursor is not None
            by_agent.setdefault(b.cursor.agent, []).append((b, b.cursor))
        for agent, group in by_agent.items():
            msgs = [cursor.messages for _, cursor in group]
            out = generator.generate(adapter_for(agent), msgs, sampling)
            calls, served = calls + 1, served + len(msgs)
            tokens += sum(len(a) for a in out.action_ids)
            moves = [(cursor, text) for (_, cursor), text in zip(group, out.texts, strict=True)]
            for (b, _), after in zip(group, pool.advance(moves), strict=True):
                b.cursor = after
        pending = still
    return tokens, calls, served


def _group_batch(problems, finished, main, samples, groups, scores, counts, gen_s) -> GroupBatch:
    episodes: list[Episode] = []
    turns: list[list[TurnSample]] = []
    infra = 0
    for p in range(len(problems)):
        episode = finished[p]
        if episode.infra_error:
            infra += 1
            continue
        e = len(episodes)
        episodes.append(episode)
        # the played turns' rewards are the episode's own: a selected branch was scored by a
        # continuation the episode did not play (its later agents act afresh from it)
        turns.append(
            [
                dataclasses.replace(s, episode=e, reward=float(turn.reward))
                for s, turn in zip(main[p], episode.turns, strict=True)
            ]
        )
    stats = {
        "episodes": float(len(episodes)),
        "infra_errors": float(infra),
        "generate_calls": float(counts["generate_calls"]),
        "generated_tokens": float(counts["generated_tokens"]),
        "mean_batch_size": counts["served"] / max(1, counts["generate_calls"]),
        "turns": float(len(samples)),
    }
    rollout = Rollout(episodes, turns, gen_s, 0.0, stats)
    return GroupBatch(rollout, samples, list(range(len(samples))), groups, scores, stats)


def joint_rollout(
    venv,
    generator: Generator,
    adapter_for: Callable[[str], str | None],
    problems: Sequence[tuple[int, str]],
    group_size: int,
    sampling: SamplingSpec,
) -> GroupBatch:
    """MAGRPO's rollout: ``group_size`` whole episodes of each problem (``(seed, task_id)``,
    seeds distinct) played through :func:`collect`'s plan; each sample's score is its
    episode's team reward and its group the problem. Infrastructure-error episodes are dropped
    and counted."""
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 (episodes per problem), got {group_size}")
    seeds = [s for s, _ in problems]
    if len(set(seeds)) != len(seeds):
        raise ValueError("problem seeds must be distinct: they tell the groups apart")
    plan = [item for item in problems for _ in range(group_size)]
    played = collect(venv, generator, adapter_for, None, sampling, plan=plan)
    problem_of: dict[tuple[int | None, str], int] = {
        (s, task): p for p, (s, task) in enumerate(problems)
    }
    keep = [e for e, ep in enumerate(played.episodes) if not ep.infra_error]
    keep.sort(key=lambda e: problem_of[(played.episodes[e].seed, played.episodes[e].task_id)])
    episodes, turns = [], []
    samples: list[TurnSample] = []
    units: list[int] = []
    groups: list[Hashable] = []
    scores: list[float] = []
    for new, e in enumerate(keep):
        episode = played.episodes[e]
        mine = [dataclasses.replace(t, episode=new) for t in played.turns[e]]
        episodes.append(episode)
        turns.append(mine)
        samples += mine
        units += [new] * len(mine)
        groups.append(problem_of[(episode.seed, episode.task_id)])
        scores.append(sum(round_rewards(played, e)))
    stats = dict(played.stats)
    stats.update(
        episodes=float(len(episodes)),
        infra_errors=float(len(played.episodes) - len(keep)),
    )
    rollout = Rollout(episodes, turns, played.generate_seconds, played.env_seconds, stats)
    return GroupBatch(rollout, samples, units, groups, scores, stats)


def group_advantages(
    batch: GroupBatch, *, scale_by_std: bool = True
) -> tuple[dict[tuple[int, int], torch.Tensor], int]:
    """Each sample's advantage, repeated over its response tokens, keyed ``(episode, index)``,
    and the number of groups of one unit.

    A group of one (its siblings were infrastructure errors, or the episode of a lone branch
    ended early) has no baseline: its advantage is 0, so it is not trained on (the fallback of
    :func:`~baselines.core.algos.group_relative_advantages`, ``singletons="zero"``).
    """
    if not batch.scores:
        return {}, 0
    per_unit = algos.group_relative_advantages(
        torch.tensor(batch.scores, dtype=torch.float32),
        batch.groups,
        scale_by_std=scale_by_std,
        singletons="zero",
    )
    sizes: dict[Hashable, int] = {}
    for g in batch.groups:
        sizes[g] = sizes.get(g, 0) + 1
    singles = sum(1 for n in sizes.values() if n == 1)
    out = {
        (s.episode, s.index): per_unit[u].expand(len(s.action_ids)).clone()
        for s, u in zip(batch.samples, batch.units, strict=True)
    }
    return out, singles
