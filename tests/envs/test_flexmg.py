import random

import numpy as np
import pytest

import marft_envs
from marft_envs.policies import oracle, play_episode


def play(env, policy, seed=0, options=None):
    return play_episode(env, lambda e, a, o: policy(a, o), seed=seed, options=options)


def test_issue_example_loop_and_oracle_is_rewarded():
    env = marft_envs.make("arith-3agent")
    env.reset(seed=0)
    for _agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else f"\\boxed{{{env.unwrapped.task.answer}}}")
    ep = env.unwrapped.episode()
    assert ep.correct and ep.score == 1.0
    assert ep.returns == {a: 1.0 for a in env.possible_agents}
    assert env.agents == []


def test_observation_structure_and_messages():
    env = marft_envs.make("arith-3agent")
    env.reset(seed=3)
    env.step("R says hi")
    obs = env.observe("actor_1")
    assert set(obs) >= {"prompt", "problem", "role", "round", "position", "predecessors"}
    assert "observation" not in obs  # PettingZoo's api_test would recurse into it
    assert obs["problem"] == env.task.prompt and obs["role"] == "actor" and obs["position"] == 1
    assert obs["predecessors"] == ({"agent": "reasoner_0", "role": "reasoner", "position": 0, "action": "R says hi"},)
    assert env.task.prompt in obs["prompt"] and "R says hi" in obs["prompt"]
    msgs = env.messages("actor_1")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == env.workflow.roles[1].instructions
    assert obs["prompt"] == msgs[0]["content"] + "\n\n" + msgs[1]["content"]
    assert "R says hi" in env.state() and env.task.prompt in env.state()


@pytest.mark.parametrize("reward_to, expected", [
    ("team", {"reasoner_0": 1.0, "actor_1": 1.0, "verifier_2": 1.0}),
    ("last", {"reasoner_0": 0.0, "actor_1": 0.0, "verifier_2": 1.0}),
    ("answerer", {"reasoner_0": 0.0, "actor_1": 0.0, "verifier_2": 1.0}),
])
def test_reward_attribution(reward_to, expected):
    env = marft_envs.make("arith-3agent", reward_to=reward_to)
    ep = play_episode(env, oracle, seed=1)
    assert ep.returns == expected


def test_answerer_attribution_follows_the_workflow():
    wf = marft_envs.Workflow("ans0", (marft_envs.Role("a", "x"), marft_envs.Role("b", "y")), answerer=0)
    env = marft_envs.make("arith-2agent", workflow=wf, reward_to="answerer")
    env.reset(seed=0)
    env.step(f"\\boxed{{{env.task.answer}}}")
    env.step("nonsense 0")
    ep = env.episode()
    assert ep.correct and ep.returns == {"a_0": 1.0, "b_1": 0.0}


def test_horizon_feedback_and_termination():
    env = marft_envs.make("arith-2agent", horizon=3, feedback="verdict")
    env.reset(seed=0)
    answer = env.task.answer
    # round 1 wrong, round 2 right: the episode ends after round 2, terminated (not truncated)
    env.step("thinking"); env.step("\\boxed{999999}")
    obs = env.observe("reasoner_0")
    assert obs["round"] == 1 and "incorrect" in obs["feedback"]
    assert obs["history"][1]["action"] == "\\boxed{999999}"
    env.step("thinking again"); env.step(f"\\boxed{{{answer}}}")
    assert all(env.terminations.values()) and not any(env.truncations.values())
    ep = env.episode()
    assert [v["correct"] for v in ep.verdicts] == [False, True]
    assert ep.returns == {"reasoner_0": 1.0, "actor_1": 1.0}


def test_horizon_without_feedback_shows_no_verdict():
    env = marft_envs.make("arith-2agent", horizon=2, feedback="none")
    env.reset(seed=0)
    env.step("a"); env.step("\\boxed{999999}")
    obs = env.observe("reasoner_0")
    assert obs["feedback"] == "" and "incorrect" not in obs["prompt"]


def test_max_turns_truncates():
    env = marft_envs.make("arith-3agent", horizon=2, max_turns=4)
    ep = play_episode(env, lambda e, a, o: "\\boxed{999999}", seed=0)
    assert ep.truncated and len(ep.turns) == 4


def test_a_truncated_episode_records_where_it_stopped():
    # cut mid-round: the next agent is the round's next one, its view shows the predecessors
    env = marft_envs.make("arith-3agent", horizon=2, max_turns=4)
    ep = play_episode(env, lambda e, a, o: "\\boxed{999999}", seed=0)
    view = ep.final_view
    assert view.agent == "actor_1" and view.role == "actor"
    assert "999999" in view.state and set(view.messages) == set(env.possible_agents)
    assert "[reasoner_0]" in view.messages["actor_1"][-1]["content"]
    # cut at a round's end: the next round's first agent, with the round's feedback in view
    env = marft_envs.make("arith-2agent", horizon=3, max_turns=2, feedback="verdict")
    ep = play_episode(env, lambda e, a, o: "\\boxed{999999}", seed=0)
    assert ep.truncated and ep.final_view.agent == "reasoner_0"
    assert "incorrect" in ep.final_view.messages["reasoner_0"][-1]["content"].lower()
    # a finished episode has none
    ep = play_episode(marft_envs.make("arith-2agent"), lambda e, a, o: "x", seed=0)
    assert not ep.truncated and ep.final_view is None


def test_a_cut_mid_round_shows_an_agent_that_already_acted_its_next_rounds_view():
    # 3 rounds, cut after 4 turns: reasoner_0 acted in round 2, so its next turn is round 3's,
    # with its own round-2 action in the history (no feedback: round 2 was never graded)
    env = marft_envs.make("arith-3agent", horizon=3, max_turns=4, feedback="verdict")
    ep = play_episode(env, lambda e, a, o: f"{a} in round {o['round']}", seed=0)
    mine = ep.final_view.messages["reasoner_0"][-1]["content"]
    assert ep.turns[-1].action in mine and "## Round 2 of 3\n[reasoner_0]" in mine
    assert "Teammates this round" not in mine
    # an agent that has not acted yet in the cut round: the view it would act on now
    actor = ep.final_view.messages["actor_1"][-1]["content"]
    assert "## Teammates this round\n[reasoner_0]" in actor and "## Round 2 of 3" not in actor


def test_infos_carry_the_verdict():
    env = marft_envs.make("arith-2agent")
    env.reset(seed=0)
    env.step("x"); env.step("\\boxed{999999}")
    v = env.infos["reasoner_0"]["verdict"]
    assert v["correct"] is False and v["answer"] == "999999" and v["reason"] and "elapsed" not in v
    assert env.episode().verdicts[0]["elapsed"] >= 0  # timings stay out of infos (replays must match)
    assert env.infos["actor_1"]["answerer"] == "actor_1"


def test_seeding_is_per_instance_and_task_pinning():
    a, b = marft_envs.make("arith-2agent"), marft_envs.make("arith-2agent")
    a.reset(seed=5); b.reset(seed=5)
    assert a.task == b.task
    ids = set()
    for s in range(20):
        a.reset(seed=s)
        ids.add(a.task.id)
    assert len(ids) > 10
    target = a.dataset[17].id
    a.reset(seed=99, options={"task_id": target})
    assert a.task.id == target
    with pytest.raises(KeyError):
        a.reset(options={"task_id": "no-such-task"})


def test_reset_without_seed_advances_deterministically():
    a, b = marft_envs.make("arith-2agent"), marft_envs.make("arith-2agent")
    a.reset(seed=1); b.reset(seed=1)
    seq_a = [a.task.id] + [(a.reset(), a.task.id)[1] for _ in range(5)]
    seq_b = [b.task.id] + [(b.reset(), b.task.id)[1] for _ in range(5)]
    assert seq_a == seq_b and len(set(seq_a)) > 1


def test_global_rng_untouched():
    random.seed(0); np.random.seed(0)
    state = (random.getstate(), np.random.get_state()[1].copy())
    env = marft_envs.make("arith-3agent")
    play_episode(env, oracle, seed=0)
    assert random.getstate() == state[0] and (np.random.get_state()[1] == state[1]).all()


@pytest.mark.parametrize("action", [None, 42, b"\xff", "", "\ud800", "x" * 2_000_000, "😀\\boxed{" * 100],
                         ids=["none", "int", "bytes", "empty", "surrogate", "2MB", "unclosed"])
def test_bad_actions_never_crash_and_are_wrong(action):
    env = marft_envs.make("arith-2agent")
    ep = play_episode(env, lambda e, a, o: action, seed=0)
    assert not ep.correct and ep.verdicts
    for t in ep.turns:
        assert isinstance(t.action, str) and len(t.action) <= env.max_action_chars


def test_render_ansi_transcript():
    env = marft_envs.make("arith-2agent", render_mode="ansi")
    play_episode(env, oracle, seed=0)
    text = env.render()
    assert env.task.prompt in text and "Verdict: CORRECT" in text and "[actor_1]" in text
    assert marft_envs.make("arith-2agent").render() is None


def test_episode_turns_record_what_each_agent_saw():
    env = marft_envs.make("arith-3agent")
    ep = play_episode(env, lambda e, a, o: f"msg from {a}", seed=2)
    assert [t.agent for t in ep.turns] == env.possible_agents
    assert ep.turns[2].observation["predecessors"][1]["action"] == "msg from actor_1"
    assert "msg from actor_1" in ep.turns[2].state and "msg from actor_1" not in ep.turns[1].state
    assert ep.final_output == "msg from verifier_2"
    assert ep.task_id == env.task.id and ep.env_id == "arith-3agent-v1"


def test_role_that_does_not_see_the_problem():
    wf = marft_envs.Workflow("relay", (marft_envs.Role("speaker", "Say the key."),
                                       marft_envs.Role("listener", "Repeat the key.", sees_problem=False)))
    env = marft_envs.make("arith-2agent", workflow=wf)
    env.reset(seed=0)
    env.step("KEY")
    obs = env.observe("listener_1")
    assert obs["problem"] == "" and env.task.prompt not in obs["prompt"] and "KEY" in obs["prompt"]
