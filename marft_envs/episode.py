"""Records of played episodes: what trainers learn from and what result bundles store."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Turn:
    """One agent's action in one round, with everything it was conditioned on.

    ``state`` is ``env.state()`` just before the action (input of a centralized critic);
    ``reward`` is what this agent received when its round was graded.
    """

    agent: str
    role: str
    position: int
    round: int
    observation: dict[str, Any]
    messages: list[dict[str, str]]
    state: str
    action: str
    reward: float = 0.0


@dataclass
class Episode:
    """A finished (or truncated) episode."""

    env_id: str | None
    task_id: str
    seed: int | None
    turns: list[Turn] = field(default_factory=list)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    returns: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    correct: bool = False
    infra_error: bool = False
    truncated: bool = False
    final_output: str = ""
    env_index: int | None = None  # which environment of a VectorFlexEnv played it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
