"""The verdict type shared by every verifier (math checker, code sandbox), and what a verifier
that grades a whole round (more than the answering seat) is given (:class:`RoundPlay`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tasks import Task


@dataclass(frozen=True)
class Verdict:
    """What a verifier concluded about one response.

    ``score`` is the reward in [0, 1] (1.0/0.0 for math; the fraction of tests
    passed or all-or-nothing for code). ``infra_error`` marks verdicts the policy
    is not to blame for (a dead Docker daemon, say): trainers should drop them,
    never score them as failures. ``grader_version`` names the grading rules that produced
    the verdict (``marft_envs.math.version``, ``marft_envs.code.version``); None if the
    verifier does not say. ``answer_source`` says which rule found ``answer``
    (math: ``"boxed"``, ``"final-answer"``, ``"answer-phrase"``, ``"mcq"``, ``"bare"``,
    ``"math-span"``, ``"last-number"`` or ``"none"``; see docs/math_verifier.md), so rewards
    can be audited; None where it does not apply. ``agent_scores`` is what a verifier that read
    more than the answerer gave each agent it graded (agent id -> score in [0, 1]); empty (the
    default) means only the answerer's response was graded. ``reward_to="graded"`` pays each
    agent its entry (see :class:`~marft_envs.FlexMGEnv`).
    """

    correct: bool
    answer: str | None
    reason: str
    score: float = 0.0
    elapsed: float = 0.0
    infra_error: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)
    grader_version: str | None = None
    answer_source: str | None = None
    agent_scores: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies, and this runs once per graded round.
        out = {
            "correct": self.correct,
            "answer": self.answer,
            "reason": self.reason,
            "score": self.score,
            "elapsed": self.elapsed,
            "infra_error": self.infra_error,
            "details": dict(self.details),
            "grader_version": self.grader_version,
            "answer_source": self.answer_source,
        }
        if self.agent_scores:  # only team-graded verdicts carry the key (older records unchanged)
            out["agent_scores"] = {a: float(v) for a, v in self.agent_scores.items()}
        return out


@dataclass(frozen=True)
class RoundPlay:
    """One finished round as a round-grading verifier sees it (:class:`RoundVerifier`).

    ``actions`` maps every agent id to its response of this round, in acting order;
    ``roles`` maps the same ids to their role names; ``answerer`` is the answering seat's id;
    ``round`` counts from 0 and ``horizon`` is the episode's number of rounds (so a verifier can
    score only the last round); ``history`` holds the earlier rounds' entries (``agent``,
    ``role``, ``position``, ``round``, ``action``), oldest first.
    """

    actions: Mapping[str, str]
    roles: Mapping[str, str]
    answerer: str
    round: int
    horizon: int
    history: tuple[Mapping[str, Any], ...] = ()

    @property
    def final(self) -> bool:
        """True in the episode's last round."""
        return self.round + 1 >= self.horizon

    @property
    def order(self) -> tuple[str, ...]:
        """The agent ids in acting order."""
        return tuple(self.actions)


@runtime_checkable
class RoundVerifier(Protocol):
    """A verifier that grades a whole round: every seat's response may count toward the score.

    An environment whose verifier has ``grade_round`` calls it after each round instead of
    ``grade(answerer's response, task)``; its verdict's ``score`` is the round's team reward and
    ``agent_scores`` (optional) each graded agent's own share.
    """

    def grade_round(self, play: RoundPlay, task: Task) -> Verdict: ...


def grades_rounds(verifier: Any) -> bool:
    """True when ``verifier`` grades whole rounds (has a callable ``grade_round``)."""
    return callable(getattr(verifier, "grade_round", None))
