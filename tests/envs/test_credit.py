"""The credit games (marft_envs.credit): who sees what, what is graded, the roles ablation."""

import pytest

import marft_envs
import tasks
from marft_envs.credit import ROLE_MARKS, credit_env_ids


def play(env_id, policy, key="A", **overrides):
    """One episode on ``key`` with ``policy(agent, obs) -> str``; returns (prompts, score)."""
    env = marft_envs.make(env_id, **overrides)
    env.reset(options={"task_id": f"key-{key}"})
    prompts = {}
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        prompts[agent] = obs["prompt"]
        env.step(policy(agent, obs))
    return prompts, env.episode().score


def relay(agent, obs):
    """Say the key if you see it, else repeat your last predecessor's message."""
    return obs["problem"] or (obs["predecessors"][-1]["action"] if obs["predecessors"] else "")


def test_every_credit_id_is_registered_and_needs_no_data():
    for env_id in credit_env_ids():
        spec = marft_envs.spec(env_id)
        assert spec.kwargs["dataset"] == "keys" and spec.to_json()
    assert [t.answer for t in tasks.load("keys")] == ["A", "B"]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_a_chain_that_relays_the_key_wins_and_each_agent_sees_only_its_predecessor(n):
    prompts, score = play(f"credit-chain-{n}agent", relay, key="B")
    assert score == 1.0
    agents = list(prompts)
    assert "B" in prompts[agents[0]] and all("## Problem" not in prompts[a] for a in agents[1:])
    for i, agent in enumerate(agents[2:], start=2):  # sees agent i-1, not agent i-2
        assert f"[{agents[i - 1]}]" in prompts[agent] and f"[{agents[i - 2]}]" not in prompts[agent]


def test_a_broken_link_anywhere_in_the_chain_loses():
    def drop_middle(agent, obs):
        return "" if agent == "relay_1" else relay(agent, obs)

    assert play("credit-chain-4agent", drop_middle)[1] == 0.0


def test_the_bystander_sees_nothing_and_the_receiver_reads_both():
    def talk(agent, obs):
        return {"sender_0": obs["problem"], "bystander_1": "B"}.get(agent, "A")

    prompts, score = play("credit-silent-3agent", talk, key="A")
    assert "[sender_0]\nA" in prompts["receiver_2"] and "[bystander_1]\nB" in prompts["receiver_2"]
    assert "## Problem" not in prompts["bystander_1"] and "Teammates" not in prompts["bystander_1"]
    assert score == 1.0  # only the receiver's answer is graded


def test_roles_false_removes_the_seat_marks():
    with_roles, _ = play("credit-chain-3agent", relay)
    without, _ = play("credit-chain-3agent", relay, roles=False)
    assert all(any(m in p for m in ROLE_MARKS) for p in with_roles.values())
    assert not any(m in p for p in without.values() for m in ROLE_MARKS)


def test_exact_verifier_and_keys_reject_bad_input():
    verifier = marft_envs.get_verifier("exact")
    task = tasks.load("keys")[0]
    assert verifier.grade(" A\n", task).correct and not verifier.grade("AA", task).correct
    with pytest.raises(ValueError, match="distinct letters"):
        tasks.load("keys", keys="AA")
