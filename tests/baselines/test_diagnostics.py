"""The collaboration checks: is the graded agent's answer already in a predecessor's message,
and how far the centralized critic's value moves when an agent acts."""

import torch

from baselines.core.diagnostics import answer_in_predecessors, answer_in_text, value_change
from baselines.core.rollout import Rollout, TurnSample
from marft_envs import Episode


def test_answer_in_text_matches_whole_tokens_only():
    assert answer_in_text("12", "so the total is 12.")
    assert not answer_in_text("1", "so the total is 12")
    assert not answer_in_text("2", "1.2 apples")
    assert answer_in_text("\\frac{1}{2}", "we get \\frac{1}{2} here")
    assert answer_in_text("x + 1", "answer: x  +\n1")  # whitespace normalised
    assert not answer_in_text(None, "anything") and not answer_in_text(" ", "anything")


def _episode(texts_by_round, answer, answerer="actor_1"):
    """Two agents (reasoner_0 then actor_1), one TurnSample per text, verdict on the last round."""
    turns, i = [], 0
    for r, texts in enumerate(texts_by_round):
        for agent, text in zip(("reasoner_0", "actor_1"), texts):
            turns.append(TurnSample(0, i, agent, agent.split("_")[0], r, [1], [2], text, "s", 0.0))
            i += 1
    verdicts = [{"round": len(texts_by_round) - 1, "answer": answer, "answerer": answerer}]
    return Episode(env_id="x", task_id="t", seed=0, verdicts=verdicts), turns


def _rollout(*episodes):
    eps, turns = [], []
    for e, (ep, ts) in enumerate(episodes):
        for t in ts:
            t.episode = e
        eps.append(ep)
        turns.append(ts)
    return Rollout(eps, turns)


def test_answer_in_predecessors_reads_the_final_round_only():
    ro = _rollout(
        _episode([["I think 7", "\\boxed{7}"]], "7"),  # copied from the reasoner
        _episode([["no idea", "\\boxed{9}"]], "9"),  # the answerer's own
        _episode([["maybe 5", "\\boxed{3}"], ["it is 3", "\\boxed{3}"]], "3"),  # round 2 counts
        _episode([["hmm", "nothing"]], None),  # no extracted answer: left out
    )
    assert answer_in_predecessors(ro) == {"reasoner_0": 2 / 3, "any": 2 / 3}
    assert answer_in_predecessors(_rollout(_episode([["a", "b"]], None))) == {}


def test_value_change_is_the_value_move_inside_a_round():
    ep, turns = _episode([["a", "b"], ["c", "d"]], "x")
    ro = _rollout((ep, turns))
    values = {
        (0, 0): torch.tensor([0.5]),
        (0, 1): torch.tensor([0.2, 9.0]),  # first entry counts
        (0, 2): torch.tensor([0.1]),
        (0, 3): torch.tensor([0.4]),
    }
    change = value_change(ro, values)
    assert set(change) == {"reasoner_0"}  # the last agent of a round has no same-round successor
    assert abs(change["reasoner_0"] - (0.3 + 0.3) / 2) < 1e-6
