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
class FinalView:
    """Where a truncated episode stopped: what a trainer bootstraps its value from.

    ``agent`` (with its ``role``) would have acted next; ``state`` is ``env.state()`` there (a
    centralized critic's input); ``messages[a]`` is what agent ``a`` would see on its next turn
    (an own-observation critic's input), as chat messages: for an agent that already acted in a
    round the cut left unfinished, the next round's view with that round's actions so far.
    """

    agent: str
    role: str
    state: str
    messages: dict[str, list[dict[str, str]]] = field(default_factory=dict)


@dataclass
class Episode:
    """A finished (or truncated) episode.

    ``final_view`` is set only when the episode was truncated (an outside limit stopped it), so
    a trainer can bootstrap from where it stopped instead of treating it as finished.
    """

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
    final_view: FinalView | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
