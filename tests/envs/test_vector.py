import pytest

import marft_envs
from marft_envs import make_vec




def test_batches_group_envs_by_agent_and_auto_reset():
    venv = make_vec("arith-3agent", num_envs=4, seed=0)
    venv.reset()
    batch = venv.next_batch()
    assert batch.agent == "reasoner_0" and batch.env_indices == [0, 1, 2, 3]
    assert len(batch.observations) == len(batch.messages) == len(batch.states) == 4
    episodes = []
    for _ in range(3):
        b = venv.next_batch()
        episodes += venv.step(b, [f"\\boxed{{{venv.envs[i].task.answer}}}" for i in b.env_indices])
    assert len(episodes) == 4 and all(e.correct for e in episodes)
    assert sorted(e.env_index for e in episodes) == [0, 1, 2, 3]
    assert venv.next_batch().agent == "reasoner_0"  # everything auto-reset
    assert len({e.task_id for e in episodes}) > 1


def test_different_episode_lengths_do_not_stall():
    venv = make_vec("arith-2agent", num_envs=4, seed=0, horizon=3)
    venv.reset()
    finished = []
    for _step in range(40):
        b = venv.next_batch()
        acts = []
        for i in b.env_indices:
            env = venv.envs[i]
            # env 0 always answers right in round 1; the others never do (3 rounds)
            acts.append(f"\\boxed{{{env.task.answer}}}" if i == 0 else "\\boxed{999999}")
        finished += venv.step(b, acts)
    lengths = {len(e.turns) for e in finished}
    assert lengths == {2, 6}
    assert sum(1 for e in finished if len(e.turns) == 2) > sum(1 for e in finished if len(e.turns) == 6)


def test_run_and_errors():
    venv = make_vec("arith-2agent", num_envs=3, seed=1)
    with pytest.raises(RuntimeError, match="reset"):
        venv.next_batch()
    eps = venv.run(lambda agent, obs: ["\\boxed{0}"] * len(obs), num_episodes=7)
    assert len(eps) == 7
    b = venv.next_batch()
    with pytest.raises(ValueError, match="actions"):
        venv.step(b, [])
    with pytest.raises(ValueError):
        make_vec("arith-2agent", num_envs=0)


def test_same_seed_same_rollout():
    def rollout():
        venv = make_vec("arith-3agent", num_envs=3, seed=11)
        return [(e.task_id, e.returns) for e in venv.run(lambda a, o: ["\\boxed{1}"] * len(o), 9)]
    assert rollout() == rollout()


def test_mixed_layouts_rejected():
    fns = [lambda: marft_envs.make("arith-2agent"), lambda: marft_envs.make("arith-3agent")]
    with pytest.raises(ValueError, match="team layout"):
        marft_envs.VectorFlexEnv(fns)


def test_plan_plays_exactly_the_planned_episodes():
    venv = make_vec("arith-2agent", num_envs=3)
    ds = venv.envs[0].dataset
    plan = [(seed, task_id) for seed in (0, 1) for task_id in ds.ids[:4]]
    venv.reset(plan=plan)
    episodes = venv.run(lambda agent, obs: ["\\boxed{0}"] * len(obs))
    assert venv.done
    assert sorted((e.seed, e.task_id) for e in episodes) == sorted(plan)
    with pytest.raises(RuntimeError, match="plan"):
        venv.next_batch()
    venv.reset(plan=plan[:1])  # fewer items than environments: the others stay idle
    assert sum(venv.waiting().values()) == 1
