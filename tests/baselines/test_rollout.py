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
