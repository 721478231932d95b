"""The literature games (marft_envs.games): payoffs, who sees what, who is graded, the repair
rounds, and the round-grading verdict API they use."""

import pytest

import marft_envs
from marft_envs.games import (
    CLIMBING,
    GAMES,
    OPTIONS,
    PENALTY,
    MatrixGameVerifier,
    game_env_ids,
    joint_payoffs,
)
from marft_envs.verdict import RoundPlay, Verdict, grades_rounds
from marft_envs.wrappers import parallel_env


def play(env_id, actions, task_id=None, **overrides):
    """One episode where the k-th turn plays ``actions[k]``; returns (env, prompts by turn)."""
    env = marft_envs.make(env_id, **overrides)
    env.reset(seed=0, options={"task_id": task_id} if task_id else None)
    moves, prompts = iter(actions), []
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        prompts.append((agent, obs))
        env.step(next(moves))
    return env, prompts


def test_every_game_id_is_registered_needs_no_data_and_serialises():
    for env_id in game_env_ids():
        spec = marft_envs.spec(env_id)
        assert spec.to_json() and spec.team_size == 2
        env = marft_envs.make(env_id)
        assert len(env.possible_agents) == 2 and len(env.dataset) >= 1


@pytest.mark.parametrize("game", sorted(GAMES))
def test_each_joint_action_pays_the_scaled_matrix_entry_to_both_graded_agents(game):
    g = GAMES[game]
    for joint, expected in joint_payoffs(g).items():
        env, _ = play(f"{game}-2agent", list(joint))
        ep = env.episode()
        v = ep.verdicts[-1]
        assert ep.score == pytest.approx(expected) and v["answer"] == joint
        assert v["correct"] == (joint in g.optima())
        # both outputs count: the verdict names both agents, the team reward goes to both
        assert v["agent_scores"] == {a: pytest.approx(expected) for a in env.possible_agents}
        assert ep.returns == {a: pytest.approx(expected) for a in env.possible_agents}


def test_the_matrices_are_claus_and_boutiliers_and_scale_to_the_unit_interval():
    assert CLIMBING.payoff[0] == (11, -30, 0) and CLIMBING.optima() == ["AA"]
    assert PENALTY.optima() == ["AA", "CC"] and PENALTY.payoff[0][2] == -10
    assert joint_payoffs(CLIMBING)["AA"] == 1.0 and joint_payoffs(CLIMBING)["AB"] == 0.0
    assert joint_payoffs(CLIMBING)["CC"] == pytest.approx(35 / 41)
    assert joint_payoffs(PENALTY)["BB"] == pytest.approx(0.6)
    # relative overgeneralisation: against a uniformly random partner the safe row pays most
    for g, safe in ((CLIMBING, "C"), (PENALTY, "B")):
        means = g.expected_against_uniform()
        assert OPTIONS[means.index(max(means))] == safe


@pytest.mark.parametrize("bad", ["", "a", "AB", "D", " A B ", None])
def test_a_response_that_is_not_exactly_one_option_scores_zero(bad):
    env, _ = play("climbing-2agent", ["A", bad])
    v = env.episode().verdicts[-1]
    assert v["score"] == 0.0 and v["reason"] == "invalid" and not v["correct"]


def test_an_option_with_surrounding_spaces_counts():
    env, _ = play("penalty-2agent", [" C\n", "C"])
    assert env.episode().score == 1.0


def test_the_first_seat_picks_the_row():
    # climbing (B, C) = 6 but (C, B) = 0: the matrix is not symmetric
    assert play("climbing-2agent", ["B", "C"])[0].episode().score == pytest.approx(36 / 41)
    assert play("climbing-2agent", ["C", "B"])[0].episode().score == pytest.approx(30 / 41)


def test_chain_shows_the_second_agent_the_first_choice_and_parallel_hides_it():
    _, prompts = play("climbing-2agent", ["B", "A"])
    (_, first), (_, second) = prompts
    assert first["predecessors"] == () and [p["action"] for p in second["predecessors"]] == ["B"]
    env, prompts = play("climbing-2agent", ["B", "A"], dependency="parallel")
    assert all(obs["predecessors"] == () for _, obs in prompts)
    assert env.metadata["is_parallelizable"] and env.episode().score == 0.0
    # the parallel variant is a simultaneous game: PettingZoo's Parallel view accepts it
    par = parallel_env(marft_envs.make("penalty-2agent", dependency="parallel"))
    par.reset(seed=0)
    _, rewards, *_ = par.step(dict.fromkeys(par.agents, "C"))
    assert set(rewards.values()) == {1.0}


def test_graded_reward_pays_each_agent_its_own_score():
    env, _ = play("penalty-2agent", ["A", "A"], reward_to="graded")
    assert env.episode().returns == dict.fromkeys(env.possible_agents, 1.0)
    # a verifier that grades only the answerer: reward_to="graded" pays only the answerer
    env = marft_envs.make("credit-chain-2agent", reward_to="graded")
    env.reset(options={"task_id": "key-A"})
    for _agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        env.step(None if terminated or truncated else "A")
    assert env.episode().returns == {"sender_0": 0.0, "receiver_1": 1.0}


def test_the_matrix_verifier_refuses_to_grade_one_response():
    assert grades_rounds(MatrixGameVerifier())
    task = marft_envs.make("climbing-2agent").dataset[0]
    with pytest.raises(TypeError, match="grade_round"):
        MatrixGameVerifier().grade("A", task)


def test_verdict_dict_carries_agent_scores_only_when_set():
    assert "agent_scores" not in Verdict(correct=True, answer="1", reason="x", score=1).to_dict()
    d = Verdict(True, "1", "x", 1.0, agent_scores={"a_0": 1}).to_dict()
    assert d["agent_scores"] == {"a_0": 1.0}


def test_round_play_knows_the_last_round_and_the_order():
    play_ = RoundPlay({"b_0": "x", "a_1": "y"}, {"b_0": "b", "a_1": "a"}, "a_1", 1, 2)
    assert play_.final and play_.order == ("b_0", "a_1")
    assert not RoundPlay({}, {}, "a_1", 0, 2).final


def _repair(actions, key="A", **overrides):
    return play("repair-2agent", actions, task_id=f"key-{key}", **overrides)


def test_repair_a_round_one_review_lets_the_fixer_repair_in_round_two():
    env, prompts = _repair(["C", "B", "A", "A"], key="A")
    ep = env.episode()
    assert [v["score"] for v in ep.verdicts] == [0.0, 1.0] and ep.score == 1.0
    # round 2: both agents read the review that names the key
    for _agent, obs in prompts[2:]:
        assert obs["round"] == 1 and obs["feedback"] == "Review: the answer is A."
    assert ep.returns == dict.fromkeys(env.possible_agents, 1.0)


def test_repair_without_a_review_the_key_is_never_shown():
    env, prompts = _repair(["B", "A", "B", "B"], key="B")
    ep = env.episode()
    assert ep.score == 1.0  # a lucky guess still scores: the fixer can guess 1 in 2
    for _, obs in prompts:
        assert "Review" not in obs["prompt"]
        assert obs["problem"] == ""  # nobody sees the key
    assert prompts[2][1]["feedback"] == "No review."


def test_repair_only_the_last_round_earns_and_a_late_review_does_not_help():
    env, _ = _repair(["A", "A", "C", "B"], key="A")  # right in round 1, wrong in round 2
    ep = env.episode()
    assert [v["score"] for v in ep.verdicts] == [0.0, 0.0] and not ep.correct
    assert len(ep.turns) == 4  # a right round-1 answer does not end the episode


def test_repair_reversed_order_keeps_the_rules_by_position():
    # the fixer acts first and the drafter is graded: the first seat still asks for review
    env, prompts = _repair(["C", "A", "B", "A"], key="A", order="reversed")
    assert env.possible_agents == ["fixer_0", "drafter_1"]
    assert env.episode().score == 1.0
    assert prompts[3][1]["feedback"] == "Review: the answer is A."
