"""Rollout sources: each plays what its rollout function plays, behind one interface."""

from __future__ import annotations

import dataclasses
import random
from types import SimpleNamespace

import pytest
import torch

import marft_envs
from baselines.core.generation import Generation, SamplingSpec
from baselines.core.groups import joint_rollout, pick_tasks, tree_rollout
from baselines.core.methods import EPISODES, JOINT, TREES
from baselines.core.rollout import collect
from baselines.core.sources import (
    EpisodeSource,
    JointSource,
    SourceContext,
    TreeSource,
    make_source,
)
from baselines.relay import register_relay

ENV = "relay-ABCD-sources"
SAMPLING = SamplingSpec(max_new_tokens=1)
ALGO = SimpleNamespace(group_size=2, branch_select="best")


class Seeded:
    """A stand-in model whose answers are drawn from its own RNG: two runs from the same seed
    answer alike, so a source and the function it wraps can be compared call for call."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def generate(self, adapter, conversations, sampling):
        texts = [self.rng.choice("ABCD") for _ in conversations]
        prompts = [[len(c)] for c in conversations]
        return Generation(texts, prompts, [[ord(t)] for t in texts], [False] * len(texts))


def adapter_for(agent: str) -> str:
    return agent


def context(episodes: int = 4) -> SourceContext:
    register_relay(ENV, keys="ABCD")
    made: list = []

    def make_env():
        made.append(marft_envs.make(ENV))
        return made[-1]

    venv = marft_envs.make_vec(ENV, num_envs=2)
    return SourceContext(venv, make_env, adapter_for, episodes, ALGO)


def plain(batch_or_group):
    """What a batch holds, comparable with ``==``: per sample its key, agent, action, reward."""
    return [(s.episode, s.index, s.agent, s.text, s.reward) for s in batch_or_group.samples]


def test_the_episode_source_is_collect_and_trains_on_every_played_turn():
    ctx = context()
    batch = EpisodeSource(ctx).collect(Seeded(), 7, SAMPLING)
    expected = collect(ctx.venv, Seeded(), adapter_for, 4, SAMPLING, seed=7)
    assert batch.groups is None and plain(batch) == plain(SimpleNamespace(samples=expected.flat()))
    assert batch.samples == batch.rollout.flat()


def test_the_joint_source_is_magrpos_rollout_of_the_seeds_problems():
    ctx = context()
    source = JointSource(ctx)
    batch = source.collect(Seeded(), 7, SAMPLING)
    problems = pick_tasks(marft_envs.make(ENV), [7, 8])  # 4 episodes / K=2
    expected = joint_rollout(ctx.venv, Seeded(), adapter_for, problems, 2, SAMPLING)
    assert plain(batch) == plain(expected) and batch.groups.groups == expected.groups
    assert len(source.envs) == 1  # one environment draws the tasks
    source.close()
    assert source.envs == []


def test_the_tree_source_branches_one_environment_per_problem():
    ctx = context(episodes=6)
    source = TreeSource(ctx)
    batch = source.collect(Seeded(), 3, SAMPLING)
    assert len(source.envs) == 3  # 6 episodes / K=2 problems
    envs = [marft_envs.make(ENV) for _ in range(3)]
    problems = pick_tasks(envs[0], [3, 4, 5])
    expected = tree_rollout(envs, Seeded(), adapter_for, problems, 2, SAMPLING, select="best")
    assert plain(batch) == plain(expected) and batch.groups.scores == expected.scores
    played = [(e.task_id, e.seed, e.score) for e in batch.rollout.episodes]
    assert played == [(e.task_id, e.seed, e.score) for e in expected.rollout.episodes]


def test_sources_are_found_by_the_registry_names():
    ctx = context()
    for name, cls in ((EPISODES, EpisodeSource), (TREES, TreeSource), (JOINT, JointSource)):
        assert type(make_source(name, ctx)) is cls
    with pytest.raises(ValueError, match="unknown rollout source 'beams'"):
        make_source("beams", ctx)


def test_a_batch_holds_unique_sample_keys():
    batch = TreeSource(context(episodes=4)).collect(Seeded(), 0, SAMPLING)
    keys = [(s.episode, s.index) for s in batch.samples]
    assert len(keys) == len(set(keys))
    assert dataclasses.is_dataclass(batch) and torch.is_tensor(torch.tensor(batch.groups.scores))
