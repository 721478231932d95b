"""Collaboration checks on a rollout: does each agent's message matter to the team?

A "lazy agent" either ignores its predecessors (it redoes their work, or its own message is
what decides) or is ignored (its message never changes the outcome). Two pure checks, both
cheap and read off a rollout the trainer already has:

- :func:`answer_in_predecessors`: how often the graded agent's final answer is already in a
  predecessor's message of the final round (high: the graded agent copies; then the
  predecessor did the work, which is the Flex-MG design working, or the graded agent is lazy);
- :func:`value_change`: how far the centralized critic's value moves when an agent acts
  (``|V(after its action) - V(before)|`` inside a round; near 0: the critic thinks that
  agent's message does not matter).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

import torch

from .rollout import Rollout

__all__ = ["answer_in_predecessors", "answer_in_text", "value_change"]


def answer_in_text(answer: str | None, text: str) -> bool:
    """True when ``answer`` occurs in ``text`` as a whole token (``"1"`` is not in ``"12"``).

    Whitespace is normalised on both sides; an empty or missing answer is never found.
    """
    norm = " ".join((answer or "").split())
    if not norm:
        return False
    pattern = re.escape(norm).replace(r"\ ", r"\s+")
    if norm[0].isalnum():
        pattern = r"(?<![\w.])" + pattern
    if norm[-1].isalnum():
        pattern = pattern + r"(?![\w])"
    return re.search(pattern, text) is not None


def answer_in_predecessors(rollout: Rollout) -> dict[str, float]:
    """Per predecessor agent: the fraction of graded episodes whose final answer (the last
    verdict's extracted ``answer``) already appears in that agent's message of the final round;
    ``"any"``: in at least one predecessor's message. Agents acting after the answerer and
    episodes without an extracted answer are left out (an empty dict when none has one)."""
    hits: dict[str, int] = {}
    graded = anywhere = 0
    for episode, turns in zip(rollout.episodes, rollout.turns, strict=True):
        verdict = episode.verdicts[-1] if episode.verdicts else {}
        answer, answerer = verdict.get("answer"), verdict.get("answerer")
        if not answer or not turns:
            continue
        last_round = turns[-1].round
        played = [t for t in turns if t.round == last_round]
        agents = [t.agent for t in played]
        if answerer not in agents:
            continue
        graded += 1
        found = False
        for t in played[: agents.index(answerer)]:
            inside = answer_in_text(answer, t.text)
            hits[t.agent] = hits.get(t.agent, 0) + inside
            found |= inside
        anywhere += found
    if not graded:
        return {}
    return {**{a: n / graded for a, n in hits.items()}, "any": anywhere / graded}


def value_change(
    rollout: Rollout, values: Mapping[tuple[int, int], torch.Tensor]
) -> dict[str, float]:
    """Per agent: mean ``|V(next turn) - V(this turn)|`` over its turns followed by a turn of
    the same round, with ``values[(episode, turn)]`` the centralized critic's values (the first
    entry is the action-level value ``V(context)``). Only meaningful for one critic that sees
    every turn (MARFT, MARFT-shared); agents that always act last in a round are absent."""
    sums: dict[str, list[float]] = {}
    for turns in rollout.turns:
        for this, nxt in itertools.pairwise(turns):
            if nxt.round != this.round:
                continue
            before = float(values[(this.episode, this.index)].flatten()[0])
            after = float(values[(nxt.episode, nxt.index)].flatten()[0])
            sums.setdefault(this.agent, []).append(abs(after - before))
    return {a: sum(v) / len(v) for a, v in sums.items()}
