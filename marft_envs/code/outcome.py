"""The typed outcome of one test and of one check (one definition for harness and `check`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["OUTCOMES", "Outcome", "UnitResult"]

Outcome = Literal["pass", "fail", "timeout", "memory", "runtime_error", "infra_error"]
#: Every outcome a check can have.
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


@dataclass(frozen=True)
class UnitResult:
    """The result of one test: its index, source, outcome and a short message."""

    index: int
    source: str
    outcome: Outcome
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "source": self.source,
            "outcome": self.outcome,
            "message": self.message,
        }
