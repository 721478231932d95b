"""The verdict type shared by every verifier (math checker, code sandbox)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


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
    can be audited; None where it does not apply.
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

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it deep-copies, and this runs once per graded round.
        return {
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
