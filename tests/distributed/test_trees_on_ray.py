"""AT-GRPO's trees on worker groups: snapshots on Ray workers give independent branches, and a
short AT-GRPO training of the tiny model gives the same trees and numbers on Ray as in-process."""

from __future__ import annotations

import dataclasses
import os
import random
import signal

import pytest
import torch

import marft_envs
from baselines.core.branching import BranchPool, EnvListPool
from baselines.core.config import load_config
from baselines.core.generation import Generation, SamplingSpec
from baselines.core.groups import pick_tasks, tree_rollout
from baselines.distributed import make_worker_group
from baselines.trainer import Trainer

from .conftest import scripted_policy, signature
from .test_trainer_on_ray import digit_share_verifier
from .test_workers import ENV, OVERRIDES

FAST_FAIL = {"call_timeout_s": 20.0, "start_timeout_s": 60.0}
SAMPLING = SamplingSpec(max_new_tokens=1)


class Seeded:
    """A stand-in model answering from its own RNG (a boxed digit, sometimes the right one on
    an arith task): two runs from one seed answer alike, call for call."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def generate(self, adapter, conversations, sampling):
        texts = [f"\\boxed{{{self.rng.randrange(20)}}}" for _ in conversations]
        prompts = [[len(m["content"]) for m in c] for c in conversations]
        return Generation(texts, prompts, [[ord(t[-2])] for t in texts], [False] * len(texts))


def tree(pool, problems, seed: int = 0):
    """Everything a tree rollout produced, comparable with ``==``."""
    batch = tree_rollout(pool, Seeded(seed), lambda a: a, problems, 3, SAMPLING)
    samples = [
        (s.episode, s.index, s.agent, s.round, s.prompt_ids, s.text, s.state, s.reward)
        for s in batch.samples
    ]
    return samples, batch.groups, batch.scores, signature(batch.rollout.episodes), batch.stats


def test_snapshots_on_ray_workers_give_independent_branches(ray_cluster):
    with make_worker_group(
        "ray", ENV, 4, num_workers=2, seed=3, ray_options={**FAST_FAIL, "max_restarts": 1},
        **OVERRIDES,
    ) as group:
        local = marft_envs.make_vec(ENV, 4, seed=3, **OVERRIDES)
        local.reset()
        group.reset()
        # env 0 (worker 0) is snapshotted and restored into envs 1 (worker 0), 2 and 3 (worker 1)
        for venv in (group, local):
            batch = venv.next_batch()
            venv.step(batch, scripted_policy(batch.agent, batch.observations))
            snap = venv.snapshot(0)
            for i in (1, 2, 3):
                venv.restore(i, snap)
        same = group.next_batch()
        assert same.env_indices == [0, 1, 2, 3]
        assert len({m[-1]["content"] for m in same.messages}) == 1
        assert same.states == local.next_batch().states
        # four different actions from one state: four different transcripts, nothing shared
        acts = ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}", "\\boxed{4}"]
        group.step(same, acts)
        after = group.next_batch()
        assert len(set(after.states)) == 4
        assert all(a in s for a, s in zip(acts, after.states, strict=True))
        # the snapshot itself was not changed by the branches: restoring it again gives its state
        group.restore(3, snap)
        assert group.next_batch(same.agent).states[-1] == same.states[0]
        with pytest.raises(TypeError, match="takes an EnvSnapshot"):
            group.restore(0, {"state": {}})

        # as a branch pool: K moves from one node are independent, repeatable, anywhere
        pool: BranchPool = group
        assert isinstance(pool, BranchPool)
        problems = pick_tasks(marft_envs.make(ENV, **OVERRIDES), [5, 6])
        # read back from the workers: branch moves leave the group's own environments alone
        states = [group.snapshot(i) for i in range(group.num_envs)]
        roots = group.start(problems)
        assert [n.home for n in roots] == [0, 1]
        moves = [(roots[1], a) for a in acts]
        nodes = group.advance(moves)
        assert [n.home for n in nodes] == [1] * 4
        assert len({n.state for n in nodes}) == 4 and all(len(n.episode.turns) == 1 for n in nodes)
        assert roots[1].episode.turns == []  # the root's record is its own
        assert [group.snapshot(i) for i in range(group.num_envs)] == states
        envs = EnvListPool([marft_envs.make(ENV, **OVERRIDES) for _ in range(2)])
        root = envs.start(problems)[1]
        here = envs.advance([(root, a) for a in acts])
        assert [n.state for n in here] == [n.state for n in nodes]
        # a worker killed between moves is replaced; the moves replay to the same nodes
        os.kill(group.worker_pids()[1], signal.SIGKILL)
        again = group.advance(moves)
        assert group.restarts == 1
        assert [(n.state, n.messages, n.agent) for n in again] == [
            (n.state, n.messages, n.agent) for n in nodes
        ]
        with pytest.raises(ValueError, match="node home 7 is not a shard"):
            group.advance([(dataclasses.replace(nodes[0], home=7), "x")])


def test_tree_rollouts_are_the_same_on_every_pool(ray_cluster):
    problems = pick_tasks(marft_envs.make(ENV, **OVERRIDES), [10, 11, 12])
    reference = tree(EnvListPool([marft_envs.make(ENV, **OVERRIDES) for _ in range(3)]), problems)
    assert reference[3] and any(reference[2])  # episodes played, some branch scored
    inproc = make_worker_group("inprocess", ENV, 2, num_workers=2, seed=0, **OVERRIDES)
    assert tree(inproc, problems) == reference
    with make_worker_group(
        "ray", ENV, 2, num_workers=2, seed=0, ray_options=FAST_FAIL, **OVERRIDES
    ) as group:
        assert tree(group, problems) == reference


CRITIC_FREE = [
    "model.max_new_tokens=4", "model.max_prompt_tokens=160", "env.num_envs=2",
    "env.eval_episodes=0", "train.iterations=2", "train.episodes_per_iteration=4",
    "train.seed=7", "train.device=cpu", "train.log=[]", "algo.group_size=2",
    "algo.minibatch_size=4", "algo.lr=1e-3", "train.checkpoint_every=0",
]


def train_at_grpo(tmp_path, workers: str):
    env_workers = 2 if workers == "ray" else 1
    cfg = load_config("at_grpo", overrides=[
        "model.name=tiny-random", "env.id=arith-2agent", *CRITIC_FREE,
        f"train.workers={workers}", f"train.env_workers={env_workers}",
    ])
    cfg.env.overrides["verifier"] = digit_share_verifier()
    trainer = Trainer(cfg, tmp_path / workers)
    kinds = {"ray": "RayWorkerGroup", "inprocess": "InProcessWorkerGroup"}
    assert type(trainer.venv).__name__ == kinds[workers]
    assert isinstance(trainer.venv, BranchPool)  # the tree source branches on the workers
    trees = []
    original = trainer.source.collect

    def recording(generator, seed, sampling):  # the trees the steps train on
        batch = original(generator, seed, sampling)
        trees.append(
            [(s.episode, s.index, s.agent, s.action_ids, s.reward) for s in batch.samples]
            + [batch.groups.groups, batch.groups.scores]
        )
        return batch

    trainer.source.collect = recording
    metrics = [trainer.step() for _ in range(cfg.train.iterations)]
    assert len(trainer.source.envs) == 1  # of its own only the one that draws the tasks
    trainer.close()
    numbers = [{k: v for k, v in m.items() if not k.startswith("time/")} for m in metrics]
    return trees, numbers, {n: trainer.model.adapter_state(n) for n in trainer.model.adapters}


def test_at_grpo_trains_on_ray_with_the_in_process_trees_and_numbers(tmp_path, ray_cluster):
    local_trees, local, local_weights = train_at_grpo(tmp_path, "inprocess")
    remote_trees, remote, remote_weights = train_at_grpo(tmp_path, "ray")
    assert local_trees == remote_trees and len(local_trees) == 2
    assert local == remote
    # a real learning signal was compared: branches scored differently, and weights moved
    assert any(len(set(t[-1])) > 1 for t in local_trees)
    assert local[0]["group/samples"] > 0
    for name, state in local_weights.items():
        assert all(torch.equal(state[k], remote_weights[name][k]) for k in state), name
