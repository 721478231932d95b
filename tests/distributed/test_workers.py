"""The worker-group interface in-process: sharding never changes what is played."""

from __future__ import annotations

import pytest

import marft_envs
from baselines.distributed import InProcessWorkerGroup, env_factory, make_worker_group, split_evenly

from .conftest import scripted_policy, signature

ENV = "arith-3agent"
OVERRIDES = {"horizon": 2, "feedback": "verdict"}  # episodes of several rounds, with feedback


def reference(num_envs: int, seed: int, n: int):
    venv = marft_envs.make_vec(ENV, num_envs, seed=seed, **OVERRIDES)
    venv.reset()
    return signature(venv.run(scripted_policy, n))


def test_split_evenly_covers_every_index_once():
    assert split_evenly(7, 3) == [(0, 3), (3, 2), (5, 2)]
    with pytest.raises(ValueError, match="num_workers <= num_envs"):
        split_evenly(2, 3)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_in_process_group_plays_what_one_vector_env_plays(workers):
    group = make_worker_group("inprocess", ENV, 5, num_workers=workers, seed=11, **OVERRIDES)
    assert group.num_envs == 5 and group.possible_agents == ["reasoner_0", "actor_1", "verifier_2"]
    assert signature(group.run(scripted_policy, 12)) == reference(5, 11, 12)


def test_batches_carry_global_indices_and_views():
    group = InProcessWorkerGroup(env_factory(ENV, **OVERRIDES), 4, num_workers=2, seed=0)
    venv = marft_envs.make_vec(ENV, 4, seed=0, **OVERRIDES)
    group.reset()
    venv.reset()
    for _ in range(5):
        a, b = group.next_batch(), venv.next_batch()
        assert (a.agent, a.env_indices, a.observations, a.messages, a.states) == (
            b.agent,
            b.env_indices,
            b.observations,
            b.messages,
            b.states,
        )
        actions = scripted_policy(a.agent, a.observations)
        assert signature(group.step(a, actions)) == signature(venv.step(b, actions))
    assert group.waiting() == venv.waiting()


def test_clear_errors():
    group = make_worker_group("inprocess", ENV, 2, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        group.next_batch()
    group.reset()
    batch = group.next_batch()
    with pytest.raises(ValueError, match="1 actions for a batch of 2"):
        group.step(batch, ["x"])
    with pytest.raises(ValueError, match="No environment waits on 'verifier_2'"):
        group.next_batch("verifier_2")
    with pytest.raises(ValueError, match="valid: inprocess, ray"):
        make_worker_group("threads", ENV, 2)
    with pytest.raises(KeyError):
        make_worker_group("inprocess", "no-such-env", 2)
