"""AT-GRPO tree sampling and MAGRPO joint episodes on the relay, with a scripted policy: the
grouping bugs group-relative trainers are known for (groups of one sample per agent, groups
mixing prompts of different turns, branches continuing from a stale state)."""

import re

import pytest

import marft_envs
from baselines.core.generation import Generation, SamplingSpec
from baselines.core.groups import group_advantages, joint_rollout, tree_rollout
from baselines.relay import RELAY_WORKFLOW, register_relay, relay_dataset
from marft_envs.credit import ExactVerifier

ENV = "relay-ABCD-groups"
K = 3
SAMPLING = SamplingSpec(max_new_tokens=1)


class Scripted:
    """A deterministic stand-in for a model: branch ``k`` of a node (the ``k``-th of a run of
    identical prompts in one call) answers by the script of its agent. The sender says ``"ABC"[k]``;
    the receiver echoes the last key letter it was shown on branches 0 and 1 and says
    ``"D"`` on branch 2. Prompt ids are the prompt's characters, so equal ids = equal prompts."""

    def __init__(self):
        self.calls = []

    def generate(self, adapter, conversations, sampling):
        self.calls.append((adapter, len(conversations)))
        texts, previous, k = [], None, 0
        for conv in conversations:
            text = "\n".join(m["content"] for m in conv)
            k = k + 1 if text == previous else 0
            previous = text
            if adapter == "sender_0":
                texts.append("ABC"[k % 3])
            else:
                letters = re.findall(r"\b[A-D]\b", conv[-1]["content"])
                texts.append(letters[-1] if k % 3 < 2 and letters else "D")
        prompts = [
            [ord(c) for c in "\n".join(m["content"] for m in conv)] for conv in conversations
        ]
        return Generation(texts, prompts, [[ord(t[0])] for t in texts], [False] * len(texts))


def _envs(n, **kw):
    register_relay(ENV, keys="ABCD")
    return [marft_envs.make(ENV, **kw) for _ in range(n)]


def _groups(batch):
    out = {}
    for s, u in zip(batch.samples, batch.units):
        out.setdefault(batch.groups[u], []).append((s, batch.scores[u]))
    return out


PROBLEMS = [(0, "key-B"), (1, "key-A"), (2, "key-D")]


def test_tree_groups_hold_k_branches_of_one_prompt_per_problem_turn_and_agent():
    gen = Scripted()
    batch = tree_rollout(_envs(3), gen, lambda a: a, PROBLEMS, K, SAMPLING)
    groups = _groups(batch)
    # one group per (problem, round, agent), each with K samples, never a group of one
    assert sorted(groups) == [(p, 0, a) for p in range(3) for a in ("receiver_1", "sender_0")]
    for key, members in groups.items():
        assert len(members) == K, key
        assert len({tuple(s.prompt_ids) for s, _ in members}) == 1, f"{key} mixes prompts"
        assert {s.agent for s, _ in members} == {key[2]}
    # a sender branch is scored by its round's grading (the receiver echoes the letter)
    assert [r for _, r in groups[(0, 0, "sender_0")]] == [0.0, 1.0, 0.0]  # key B
    assert [r for _, r in groups[(1, 0, "sender_0")]] == [1.0, 0.0, 0.0]  # key A
    assert [r for _, r in groups[(2, 0, "sender_0")]] == [0.0, 0.0, 0.0]  # key D: a tie
    # one generate per node and per continuation step, serving every problem at once
    assert gen.calls == [("sender_0", 9), ("receiver_1", 9), ("receiver_1", 9)]
    assert batch.stats["generated_tokens"] == 27.0
    adv, singles = group_advantages(batch)
    assert singles == 0 and len(adv) == len(batch.samples) == 18


def test_the_episode_continues_from_the_selected_branch_not_the_last_one_played():
    batch = tree_rollout(_envs(3), Scripted(), lambda a: a, PROBLEMS, K, SAMPLING)
    groups = _groups(batch)
    # the receiver's prompt shows the best sender branch (B for problem 0, A for problem 1):
    # a stale environment would still hold the last branch played ("C")
    for p, letter in ((0, "B"), (1, "A"), (2, "A")):  # problem 2: all tie -> the first branch
        (s, _), *_ = groups[(p, 0, "receiver_1")]
        shown = re.findall(r"\b[A-D]\b", "".join(map(chr, s.prompt_ids)))
        assert shown[-1] == letter, (p, shown)
    episodes = {e.task_id: e for e in batch.rollout.episodes}
    # problem 2's receiver branches scored [0, 0, 1] (it says D on branch 2): D is selected
    assert [r for _, r in groups[(2, 0, "receiver_1")]] == [0.0, 0.0, 1.0]
    assert [t.action for t in episodes["key-D"].turns] == ["A", "D"]
    assert [t.action for t in episodes["key-B"].turns] == ["B", "B"]
    assert all(e.correct for e in batch.rollout.episodes)
    # the played episode's turns are the selected branches, in order
    assert [len(t) for t in batch.rollout.turns] == [2, 2, 2]
    # and carry the episode's rewards: problem 2's sender branch "A" was scored 0 by its
    # continuation, but the episode it started was won (the receiver then said D)
    for samples, episode in zip(batch.rollout.turns, batch.rollout.episodes, strict=True):
        assert [s.text for s in samples] == [t.action for t in episode.turns]
        assert [s.reward for s in samples] == [t.reward for t in episode.turns]
    assert [s.reward for s in batch.rollout.turns[2]] == [1.0, 1.0]


def test_first_branch_selection_and_separate_groups_per_round():
    envs = _envs(3, horizon=2, stop_on_correct=False)
    batch = tree_rollout(envs, Scripted(), lambda a: a, PROBLEMS, K, SAMPLING, select="first")
    groups = _groups(batch)
    assert sorted(groups) == sorted(
        (p, r, a) for p in range(3) for r in (0, 1) for a in ("sender_0", "receiver_1")
    )
    for key, members in groups.items():
        assert len(members) == K and len({tuple(s.prompt_ids) for s, _ in members}) == 1, key
        assert {s.round for s, _ in members} == {key[1]}
    # the same agent's prompts differ between rounds (round 1 shows round 0's transcript)
    for p in range(3):
        r0 = groups[(p, 0, "sender_0")][0][0].prompt_ids
        r1 = groups[(p, 1, "sender_0")][0][0].prompt_ids
        assert r0 != r1
    # select="first": the played sender message is branch 0's "A" in every round
    assert all([t.action for t in e.turns][0::2] == ["A", "A"] for e in batch.rollout.episodes)


def test_tree_rollout_rejects_bad_arguments():
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        tree_rollout(_envs(3), Scripted(), lambda a: a, PROBLEMS, 1, SAMPLING)
    with pytest.raises(ValueError, match="need as many environments"):
        tree_rollout(_envs(2), Scripted(), lambda a: a, PROBLEMS, K, SAMPLING)


def test_tree_rollout_leaves_environments_beyond_the_problems_unused():
    # "one environment per problem" is a minimum: a larger pool is accepted and its extra
    # environments are never reset or stepped
    envs = _envs(4)
    batch = tree_rollout(envs, Scripted(), lambda a: a, PROBLEMS, K, SAMPLING)
    same = tree_rollout(_envs(3), Scripted(), lambda a: a, PROBLEMS, K, SAMPLING)
    assert [e.task_id for e in batch.rollout.episodes] == [p[1] for p in PROBLEMS]
    assert [s.action_ids for s in batch.samples] == [s.action_ids for s in same.samples]
    assert envs[3].agents == []  # never reset


def test_magrpo_groups_are_problems_even_when_two_share_a_task():
    register_relay(ENV, keys="ABCD")
    venv = marft_envs.make_vec(ENV, num_envs=2, seed=0)
    problems = [(10, "key-A"), (11, "key-A"), (12, "key-B")]
    batch = joint_rollout(venv, Scripted(), lambda a: a, problems, 2, SAMPLING)
    assert len(batch.rollout.episodes) == 6
    assert sorted(batch.groups) == [0, 0, 1, 1, 2, 2]  # problems 0 and 1 are separate groups
    for u, episode in enumerate(batch.rollout.episodes):
        assert batch.scores[u] == episode.score
        assert problems[batch.groups[u]] == (episode.seed, episode.task_id)
    # every turn of an episode shares its unit, so its advantage
    for s, u in zip(batch.samples, batch.units):
        assert s.episode == u
    with pytest.raises(ValueError, match="distinct"):
        joint_rollout(venv, Scripted(), lambda a: a, [(1, "key-A"), (1, "key-B")], 2, SAMPLING)


class _InfraOnA:
    """The relay's grading, except that the response "A" cannot be checked (an
    infrastructure error, as a sandbox that failed to start would report)."""

    name = "relay-infra"

    def grade(self, response, task):
        from marft_envs import Verdict

        if response.strip() == "A":
            return Verdict(correct=False, answer=None, reason="infra", score=0.0, infra_error=True)
        return ExactVerifier().grade(response, task)

    def feedback(self, response, task, verdict, mode):
        return ""


def test_first_selection_skips_infrastructure_error_branches():
    # branch 0 of the sender says "A", whose round cannot be graded: select="first" must not
    # continue along it (the episode would end in an infrastructure error and be dropped)
    env_id = "relay-ABCD-infra"
    if env_id not in marft_envs.registry:
        marft_envs.register(
            env_id,
            "marft_envs.flexmg:FlexMGEnv",
            kwargs={
                "dataset": relay_dataset("ABCD"),
                "workflow": RELAY_WORKFLOW,
                "verifier": _InfraOnA(),
                "feedback": "none",
            },
        )
    envs = [marft_envs.make(env_id)]
    batch = tree_rollout(envs, Scripted(), lambda a: a, [(0, "key-B")], K, SAMPLING, "first")
    assert batch.stats["infra_errors"] == 0.0
    (episode,) = batch.rollout.episodes
    assert [t.action for t in episode.turns] == ["B", "B"] and episode.correct
    # the sender's infrastructure-error branch is not trained on (the receiver's say B, B, D)
    assert sorted(s.agent for s in batch.samples) == ["receiver_1"] * 3 + ["sender_0"] * 2
