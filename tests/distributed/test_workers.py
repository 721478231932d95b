"""The worker-group interface in-process: sharding never changes what is played."""

from __future__ import annotations

import inspect

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


def planned(num_envs: int, plan):
    """What one VectorFlexEnv plays for ``plan``: (signature, env_index) per episode, in order."""
    venv = marft_envs.make_vec(ENV, num_envs, **OVERRIDES)
    venv.reset(plan=plan)
    episodes = venv.run(scripted_policy)
    return list(zip(signature(episodes), [e.env_index for e in episodes]))


PLAN = [(s, t) for s in (3, 4) for t in marft_envs.make(ENV).unwrapped.dataset.ids[:4]]  # 8 episodes


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_group_plays_exactly_a_plan(workers):
    group = make_worker_group("inprocess", ENV, 5, num_workers=workers, **OVERRIDES)
    group.reset(plan=PLAN)
    episodes = group.run(scripted_policy)
    assert group.done
    with pytest.raises(RuntimeError, match="has finished: call reset"):
        group.next_batch()
    got = list(zip(signature(episodes), [e.env_index for e in episodes]))
    want = planned(5, PLAN)
    assert sorted((e.seed, e.task_id) for e in episodes) == sorted(PLAN)  # each planned pair once
    if workers == 1:  # one shard is VectorFlexEnv exactly: same order and environment indices
        assert got == want
    else:  # the plan is split over shards: the same episodes, global env indices in range
        assert sorted(sig for sig, _ in got) == sorted(sig for sig, _ in want)
        assert all(0 <= i < 5 for _, i in got)


def test_a_plan_shorter_than_the_group_leaves_environments_idle():
    group = make_worker_group("inprocess", ENV, 5, num_workers=2, **OVERRIDES)
    group.reset(plan=PLAN[:3])  # shard 2 (environments 3, 4) gets nothing
    assert sum(group.waiting().values()) == 3
    assert sorted(signature(group.run(scripted_policy))) == sorted(sig for sig, _ in planned(5, PLAN[:3]))
    with pytest.raises(ValueError, match="needs num_episodes"):
        make_worker_group("inprocess", ENV, 2, seed=0, **OVERRIDES).run(scripted_policy)


def _parameters(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("cls_name", ["VectorFlexEnv", "WorkerGroup", "RayWorkerGroup"])
def test_vector_envs_and_worker_groups_share_the_vector_env_protocol(cls_name):
    """What collect() takes (marft_envs.VectorEnv), member by member with the same parameters;
    mypy checks the same where the trainer hands a worker group to collect()."""
    from baselines.distributed.ray_group import RayWorkerGroup
    from baselines.distributed.workers import WorkerGroup

    classes = {"VectorFlexEnv": marft_envs.VectorFlexEnv, "WorkerGroup": WorkerGroup,
               "RayWorkerGroup": RayWorkerGroup}
    cls, proto = classes[cls_name], marft_envs.VectorEnv
    methods = {n: v for n, v in vars(proto).items() if not n.startswith("_")}
    expected = {"reset", "next_batch", "step", "waiting", "run", "close", "num_envs", "done"}
    assert expected <= set(methods)
    for name, want in methods.items():
        have = inspect.getattr_static(cls, name, None)
        assert have is not None, f"{cls_name} lacks {name}"
        if isinstance(want, property):
            assert isinstance(have, property), f"{cls_name}.{name} is not a property"
        else:
            assert _parameters(have) == _parameters(want), f"{cls_name}.{name} differs"
    # the one data attribute, set by every implementation
    assert "possible_agents" in proto.__annotations__
    group = make_worker_group("inprocess", ENV, 2)
    assert group.possible_agents == marft_envs.make_vec(ENV, 2).possible_agents
