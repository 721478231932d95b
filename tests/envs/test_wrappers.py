"""SingleSeat (Gymnasium) and the Parallel view (PettingZoo) of Flex-MG environments."""

import dataclasses
import subprocess
import sys

import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test, parallel_seed_test
from pettingzoo.utils.conversions import aec_to_parallel

import marft_envs
from marft_envs.policies import oracle, play_episode
from marft_envs.workflow import get_workflow, independent_matrix
from marft_envs.wrappers import SingleSeat, parallel_env

INDEPENDENT = dataclasses.replace(
    get_workflow("math-trio"), name="math-trio-independent", dependency=independent_matrix(3)
)


@pytest.mark.parametrize("seat", ["reasoner_0", "actor_1", "verifier_2", 1])
def test_single_seat_passes_gymnasium_check_env(seat):
    env = SingleSeat("arith-3agent", seat=seat, others="echo", render_mode="ansi")
    check_env(env)


def test_single_seat_with_the_random_policy_is_reproducible_by_seed():
    """A stateful named policy restarts each episode: same seed and action, same episode."""
    check_env(SingleSeat("arith-3agent", seat="actor_1", others="random"))
    env = SingleSeat("arith-3agent", seat=0, others="random")
    runs = []
    for _ in range(2):
        env.reset(seed=5)
        env.step("\\boxed{3}")
        runs.append([t.action for t in env.unwrapped_aec.episode().turns])
    assert runs[0] == runs[1]


def test_single_seat_multi_round_passes_check_env():
    check_env(SingleSeat("arith-2agent", seat=0, others="oracle", horizon=3, feedback="verdict"))


def test_single_seat_equals_the_aec_episode_with_the_same_actions():
    """The seat's observations and reward are the AEC ones when the others play the same policy."""
    for seed in range(5):
        aec = marft_envs.make("arith-3agent")
        expected = play_episode(aec, oracle, seed=seed)
        env = SingleSeat("arith-3agent", seat="actor_1", others=oracle)
        obs, info = env.reset(seed=seed)
        assert obs == expected.turns[1].observation and info["task_id"] == expected.task_id
        obs, reward, terminated, truncated, info = env.step(expected.turns[1].action)
        assert (reward, terminated, truncated) == (expected.returns["actor_1"], True, False)
        assert info["verdict"]["correct"] and env.unwrapped_aec.episode().turns == expected.turns


def test_single_seat_reward_follows_reward_to_and_rounds():
    env = SingleSeat("arith-2agent", seat="reasoner_0", others="echo", horizon=2, reward_to="last")
    env.reset(seed=0)
    _, r1, term, _, info = env.step("\\boxed{-12345}")  # echoed by the actor: wrong
    assert (r1, term, info["round"]) == (0.0, False, 1)
    _, r2, term, _, _ = env.step(f"\\boxed{{{env.unwrapped_aec.task.answer}}}")
    assert term and r2 == 0.0  # right, but reward_to="last" pays only the actor
    env = SingleSeat("arith-2agent", seat="actor_1", others="echo", reward_to="last")
    env.reset(seed=0)
    assert env.step(f"\\boxed{{{env.unwrapped_aec.task.answer}}}")[1] == 1.0


def test_single_seat_others_by_agent_and_bad_arguments():
    def second_model(env, agent, obs):
        return "a second model says \\boxed{0}"

    env = SingleSeat(
        "arith-3agent", seat=2, others={"reasoner_0": "oracle", "actor_1": second_model}
    )
    obs, _ = env.reset(seed=0)
    assert [p["action"] for p in obs["predecessors"]][1] == "a second model says \\boxed{0}"
    with pytest.raises(ValueError, match=r"seat 'judge_9' is not an agent .*reasoner_0"):
        SingleSeat("arith-3agent", seat="judge_9", others="echo")
    with pytest.raises(ValueError, match="seat position 3 is out of range"):
        SingleSeat("arith-3agent", seat=3, others="echo")
    with pytest.raises(ValueError, match=r"missing \['actor_1'\]"):
        SingleSeat("arith-3agent", seat=2, others={"reasoner_0": "echo"})
    with pytest.raises(
        ValueError, match=r"one of \['echo', 'human', 'oracle', 'random'\], got 'smart'"
    ):
        SingleSeat("arith-3agent", seat=2, others="smart")
    with pytest.raises(ValueError, match="need a policy"):
        SingleSeat("arith-3agent", seat=2, others=None)
    env = SingleSeat("arith-2agent", seat=1, others="echo")
    env.reset(seed=0)
    env.step("done")
    with pytest.raises(RuntimeError, match=r"the episode has ended: call reset\(\) before step\(\)"):
        env.step("again")


def test_parallel_view_of_an_independent_team_passes_parallel_api_test():
    env = parallel_env("arith-3agent", workflow=INDEPENDENT)
    parallel_api_test(env, num_cycles=20)
    parallel_seed_test(lambda: parallel_env("arith-3agent", workflow=INDEPENDENT))
    multi = parallel_env("arith-3agent", workflow=INDEPENDENT, horizon=3, feedback="verdict")
    parallel_api_test(multi, num_cycles=20)


def test_parallel_step_is_one_round_and_no_one_sees_same_round_actions():
    env = parallel_env("arith-3agent", workflow=INDEPENDENT, horizon=2, stop_on_correct=False)
    obs, _ = env.reset(seed=1)
    assert all(o["predecessors"] == () and o["round"] == 0 for o in obs.values())
    answer = env.unwrapped.task.answer
    obs, rewards, term, trunc, infos = env.step(
        {a: f"{a}: \\boxed{{{answer}}}" for a in env.agents}
    )
    assert rewards == {a: 1.0 for a in env.possible_agents} and not any(term.values())
    assert all(
        o["round"] == 1 and o["predecessors"] == () and len(o["history"]) == 3 for o in obs.values()
    )
    obs, rewards, term, trunc, infos = env.step({a: "\\boxed{x}" for a in env.agents})
    assert not any(trunc.values()) and not infos["actor_1"]["verdict"]["correct"]
    assert all(term.values()) and rewards == {a: 0.0 for a in env.possible_agents}


def test_parallel_view_is_refused_with_a_dependency_matrix():
    assert marft_envs.make("arith-3agent").unwrapped.metadata["is_parallelizable"] is False
    assert (
        marft_envs.make("arith-3agent", workflow=INDEPENDENT).metadata["is_parallelizable"] is True
    )
    with pytest.raises(
        ValueError, match=r"'math-trio' has a non-zero dependency matrix .*independent_matrix"
    ):
        parallel_env("arith-3agent")
    with pytest.raises(AssertionError):  # PettingZoo's own converter refuses it too
        aec_to_parallel(marft_envs.make("arith-3agent"))


def test_views_and_trl_bridge_import_no_heavy_package():
    code = (
        "import sys, marft_envs, marft_envs.wrappers, marft_envs.trl_bridge; "
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'openenv', 'datasets') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
