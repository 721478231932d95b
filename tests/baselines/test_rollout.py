"""Rollouts through the marft_envs vector API, and advantages laid out from played turns."""

import pytest
import torch

import marft_envs
from baselines.core.advantages import compute_advantages, round_rewards
from baselines.core.generation import Generation, SamplingSpec
from baselines.core.rollout import Rollout, TurnSample, collect
from baselines.relay import register_relay


class ScriptedGenerator:
    """A real Generator implementation without a model: answers from a rule, records calls."""

    def __init__(self, rule):
        self.rule = rule
        self.calls = []

    def generate(self, adapter, conversations, sampling):
        self.calls.append((adapter, len(conversations)))
        texts = [self.rule(adapter, conv) for conv in conversations]
        return Generation(texts, [[1, 2]] * len(texts), [[ord(t[0]) if t else 3] for t in texts],
                          [False] * len(texts))


def test_one_generate_per_agent_batch_and_turns_line_up():
    env_id = register_relay()
    venv = marft_envs.make_vec(env_id, num_envs=4, seed=0)

    def rule(adapter, conv):  # the sender copies the key, the receiver copies the sender
        user = conv[-1]["content"]
        return user.split("## Problem\n")[1][0] if adapter == "sender_0" else user.split("[sender_0]\n")[1][0]

    gen = ScriptedGenerator(rule)
    ro = collect(venv, gen, lambda agent: agent, num_episodes=6, sampling=SamplingSpec(1), seed=3)
    assert len(ro.episodes) == 6 and all(e.correct for e in ro.episodes)
    # batched per agent: the first two calls serve all 4 environments
    assert gen.calls[:2] == [("sender_0", 4), ("receiver_1", 4)]
    for ep, turns in zip(ro.episodes, ro.turns):
        assert [t.agent for t in turns] == ["sender_0", "receiver_1"]
        assert [t.text for t in turns] == [t.action for t in ep.turns]
        assert turns[1].state == ep.turns[1].state and turns[0].reward == 1.0
    # same seed, same episodes
    again = collect(venv, ScriptedGenerator(rule), lambda a: a, 6, SamplingSpec(1), seed=3)
    assert [e.task_id for e in again.episodes] == [e.task_id for e in ro.episodes]


def _rollout(rounds_per_episode, n_agents=2, rewards=None):
    """A synthetic rollout: episode e has rounds_per_episode[e] rounds of n_agents turns."""
    from marft_envs import Episode

    episodes, turns = [], []
    for e, rounds in enumerate(rounds_per_episode):
        scores = rewards[e] if rewards else [1.0] * rounds
        verdicts = [{"round": r, "score": scores[r]} for r in range(rounds)]
        episodes.append(Episode(env_id="x", task_id=f"t{e}", seed=0, verdicts=verdicts))
        ts, i = [], 0
        for r in range(rounds):
            for a in range(n_agents):
                ts.append(TurnSample(e, i, f"ag_{a}", "ag", r, [1], [5] * (a + 1), "x", "s", scores[r]))
                i += 1
        turns.append(ts)
    return Rollout(episodes, turns)


def test_sequential_action_level_chains_agents_and_handles_ragged_episodes():
    ro = _rollout([2, 1], rewards=[[0.0, 1.0], [1.0]])
    values = {(t.episode, t.index): torch.tensor([0.1 * (t.index + 1)]) for t in ro.flat()}
    adv, ret = compute_advantages(ro, values, sequential=True, token_level=False, gamma=0.5, lam=1.0)
    # episode 0: rewards only at round ends (turns 1 and 3): returns = discounted team reward
    assert [round(float(ret[(0, i)]), 6) for i in range(4)] == [0.5, 0.5, 1.0, 1.0]
    assert [round(float(ret[(1, i)]), 6) for i in range(2)] == [1.0, 1.0]
    # advantages are per token: turn of agent 1 has 2 tokens
    assert adv[(0, 1)].shape == (2,) and torch.allclose(adv[(0, 1)], torch.full((2,), 0.5 - 0.2))
    assert round_rewards(ro, 0) == [0.0, 1.0]


def test_token_level_with_unit_in_action_discount_equals_action_level():
    ro = _rollout([2, 1], rewards=[[0.0, 1.0], [1.0]])
    torch.manual_seed(0)
    token_values = {(t.episode, t.index): torch.rand(len(t.action_ids)) for t in ro.flat()}
    action_values = {k: v[:1] for k, v in token_values.items()}
    for seq in (True, False):
        _, ret_a = compute_advantages(ro, action_values, sequential=seq, token_level=False, gamma=0.9, lam=1.0)
        _, ret_t = compute_advantages(ro, token_values, sequential=seq, token_level=True, gamma=0.9, lam=1.0)
        for k in ret_a:
            torch.testing.assert_close(ret_t[k][0], ret_a[k][0])


def test_independent_rows_use_each_agents_own_reward():
    ro = _rollout([1])
    ro.turns[0][0].reward = 0.0  # reward_to="last": only the last agent is paid
    values = {(t.episode, t.index): torch.zeros(1) for t in ro.flat()}
    _, ret = compute_advantages(ro, values, sequential=False, token_level=False, gamma=1.0, lam=1.0)
    assert float(ret[(0, 0)]) == 0.0 and float(ret[(0, 1)]) == 1.0
    _, ret_seq = compute_advantages(ro, values, sequential=True, token_level=False, gamma=1.0, lam=1.0)
    assert float(ret_seq[(0, 0)]) == 1.0  # the team chain credits agent 0 through its successor


def test_token_values_must_match_token_count():
    ro = _rollout([1])
    values = {(t.episode, t.index): torch.zeros(7) for t in ro.flat()}
    with pytest.raises(ValueError, match="token values"):
        compute_advantages(ro, values, sequential=True, token_level=True, gamma=1.0, lam=1.0)


def _solve_a_only(adapter, conv):
    """The sender relays the key; the receiver answers right only when the key is A."""
    user = conv[-1]["content"]
    if adapter == "sender_0":
        return user.split("## Problem\n")[1][0]
    return "A" if "[sender_0]\nA" in user else "wrong"


def test_batch_is_the_first_episodes_to_start_not_the_first_to_finish():
    # horizon 3, verdict feedback: key A is solved in round 1, key B plays all 3 rounds
    env_id = register_relay("relay-AB-h3", keys="AB")
    venv = marft_envs.make_vec(env_id, num_envs=32, seed=0, horizon=3, feedback="verdict")
    short_in_batch, short_started = [], []
    for seed in range(0, 400, 40):
        ro = collect(venv, ScriptedGenerator(_solve_a_only), lambda a: a, 48, SamplingSpec(1), seed=seed)
        assert len(ro.episodes) == 48 and all(ep.turns for ep in ro.episodes)
        rounds = [max(t.round for t in turns) + 1 for turns in ro.turns]
        assert set(rounds) == {1, 3}  # every episode was played to its end
        short_in_batch += [ep.task_id == "key-A" for ep in ro.episodes]
        # started but never played: the environments' current episodes beyond the first 48
        short_started += short_in_batch[-48:] + [env.task.id == "key-A" for env in venv.envs]
    frac_batch = sum(short_in_batch) / len(short_in_batch)
    frac_started = sum(short_started) / len(short_started)
    assert 0.2 < frac_started < 0.8, frac_started  # both keys are played (the ids are right)
    # the first-to-finish rule gave ~0.71 here (benchmarks/bench_rollout_bias.py)
    assert abs(frac_batch - frac_started) < 0.05, (frac_batch, frac_started)


def test_episodes_come_in_start_order_and_replay_identically():
    env_id = register_relay("relay-AB-h3", keys="AB")
    venv = marft_envs.make_vec(env_id, num_envs=4, seed=0, horizon=3, feedback="verdict")
    ro = collect(venv, ScriptedGenerator(_solve_a_only), lambda a: a, 10, SamplingSpec(1), seed=7)
    # environment i starts episode i; each environment's episodes keep their own order
    assert [ep.env_index for ep in ro.episodes[:4]] == [0, 1, 2, 3]
    again = collect(venv, ScriptedGenerator(_solve_a_only), lambda a: a, 10, SamplingSpec(1), seed=7)
    assert [(e.env_index, e.task_id) for e in again.episodes] == [(e.env_index, e.task_id) for e in ro.episodes]
    assert [t.index for t in ro.turns[3]] == list(range(len(ro.turns[3])))
    assert all(t.episode == e for e, turns in enumerate(ro.turns) for t in turns)


class TruncatingGenerator(ScriptedGenerator):
    """Marks every second response as cut at max_new_tokens."""

    def generate(self, adapter, conversations, sampling):
        out = super().generate(adapter, conversations, sampling)
        out.truncated = [k % 2 == 0 for k in range(len(out.texts))]
        return out


def test_generation_truncation_and_rollout_stats_reach_the_rollout():
    env_id = register_relay()
    venv = marft_envs.make_vec(env_id, num_envs=4, seed=0)
    ro = collect(venv, TruncatingGenerator(lambda a, c: "A"), lambda a: a, 6, SamplingSpec(1), seed=0)
    flat = ro.flat()
    assert [t.truncated for t in ro.turns[0]] == [True, True]  # env 0 is first in both batches
    assert ro.stats["truncated_turns"] == sum(t.truncated for t in flat) > 0
    assert ro.stats["episodes"] == 6 and ro.stats["turns"] == 12 and ro.stats["infra_errors"] == 0
    assert ro.stats["generate_calls"] >= 4 and 1 <= ro.stats["mean_batch_size"] <= 4


def test_infra_error_episodes_are_dropped_and_counted(infra_env):
    from baselines.core.rollout import InfraErrorRollout

    some = infra_env(["1", ""], "infra-some-2agent")
    venv = marft_envs.make_vec(some, num_envs=4, seed=0)
    ro = collect(venv, ScriptedGenerator(lambda a, c: "1"), lambda a: a, 12, SamplingSpec(1), seed=0)
    assert not any(ep.infra_error for ep in ro.episodes)
    assert ro.stats["infra_errors"] > 0 and ro.stats["infra_errors"] + len(ro.episodes) == 12
    assert all(turns[0].episode == e for e, turns in enumerate(ro.turns))  # renumbered densely
    values = {(t.episode, t.index): torch.zeros(1) for t in ro.flat()}
    adv, _ = compute_advantages(ro, values, sequential=True, token_level=False, gamma=1.0, lam=1.0)
    assert set(adv) == set(values)

    every = infra_env(["", ""], "infra-all-2agent")
    venv = marft_envs.make_vec(every, num_envs=4, seed=0)
    with pytest.raises(InfraErrorRollout, match="all 6 episodes ended in an infrastructure error"):
        collect(venv, ScriptedGenerator(lambda a, c: "1"), lambda a: a, 6, SamplingSpec(1), seed=0)


def _truncated_rollout(truncated):
    ro = _rollout([2], rewards=[[0.0, 1.0]])
    ro.episodes[0].truncated = truncated
    return ro


def test_truncated_episode_bootstraps_from_the_critic_terminated_does_not():
    # 2 agents x 2 rounds, rewards 0 then 1 at the round ends, V = 0.1 .. 0.4, gamma 0.5, lam 1
    values = {(0, i): torch.tensor([0.1 * (i + 1)]) for i in range(4)}
    kw = {"sequential": True, "token_level": False, "gamma": 0.5, "lam": 1.0}
    _, ret = compute_advantages(_truncated_rollout(False), values, **kw)
    assert [round(float(ret[(0, i)]), 6) for i in range(4)] == [0.5, 0.5, 1.0, 1.0]
    with pytest.raises(ValueError, match="truncated but no bootstrap"):
        compute_advantages(_truncated_rollout(True), values, **kw)
    # bootstrap V=0.8 after the last turn (a round end, discount 0.5): R_3 = 1 + 0.5 * 0.8
    _, ret = compute_advantages(_truncated_rollout(True), values, bootstrap={(0, None): 0.8}, **kw)
    assert [round(float(ret[(0, i)]), 6) for i in range(4)] == [0.7, 0.7, 1.4, 1.4]
    # independent rows (IPPO): each agent's own row bootstraps from its own value
    _, ret = compute_advantages(_truncated_rollout(True), values, sequential=False, token_level=False,
                                gamma=0.5, lam=1.0, bootstrap={(0, "ag_0"): 0.2, (0, "ag_1"): 0.6})
    assert [round(float(ret[(0, i)]), 6) for i in range(4)] == [0.55, 0.65, 1.1, 1.3]
    # token level: the bootstrap enters after the last token of the last action
    tok = {(0, i): torch.full((i % 2 + 1,), 0.1 * (i + 1)) for i in range(4)}
    _, ret = compute_advantages(_truncated_rollout(True), tok, sequential=True, token_level=True,
                                gamma=0.5, lam=1.0, bootstrap={(0, None): 0.8})
    assert [round(float(ret[(0, i)][0]), 6) for i in range(4)] == [0.7, 0.7, 1.4, 1.4]


def test_episode_truncated_mid_round_bootstraps_from_the_next_agent_without_discount():
    # max_turns=3 with 2 agents: round 0 graded (team reward 1 on its last turn), round 1 cut
    # after agent 0; the bootstrap is the critic's value for agent 1 of the SAME round, so the
    # edge from turn 2 is inside a round (discount 1), not a round end (discount gamma)
    ro = _rollout([2], rewards=[[1.0, 0.0]])
    ro.turns[0] = ro.turns[0][:3]
    ro.episodes[0].verdicts = ro.episodes[0].verdicts[:1]
    ro.episodes[0].truncated = True
    values = {(0, i): torch.tensor([0.1 * (i + 1)]) for i in range(3)}
    kw = {"sequential": True, "gamma": 0.5, "lam": 1.0, "bootstrap": {(0, None): 0.8}}
    _, ret = compute_advantages(ro, values, token_level=False, **kw)
    # R_2 = 0 + 1 * 0.8; R_1 = 1 + 0.5 * R_2; R_0 = 0 + 1 * R_1
    assert [round(float(ret[(0, i)]), 6) for i in range(3)] == [1.4, 1.4, 0.8]
    tok = {(0, i): torch.full((i % 2 + 1,), 0.1 * (i + 1)) for i in range(3)}
    _, ret = compute_advantages(ro, tok, token_level=True, **kw)
    assert [round(float(ret[(0, i)][0]), 6) for i in range(3)] == [1.4, 1.4, 0.8]
