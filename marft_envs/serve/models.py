"""The wire types of a served Flex-MG environment (OpenEnv's pydantic Action/Observation/State).

The multi-agent extension (documented in docs/integrations.md): an action names its agent; an
observation names whose turn it is and carries that agent's Flex-MG view; per-agent rewards
ride beside OpenEnv's scalar ``reward`` (the sum over the client's seats).
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class MarftAction(Action):
    """One agent's whole response."""

    agent: str = Field(..., description="the agent acting: must be the agent whose turn it is")
    text: str = Field(..., description="the agent's whole response (any unicode)")


class MarftObservation(Observation):
    """Whose turn it is, what that agent sees, and what the last step paid.

    ``reward`` is the sum of ``rewards`` over the client's seats. ``metadata`` holds ``task_id``,
    ``round``, ``verdict`` (the verdict of a round graded during this call, else ``None``),
    ``answerer``, ``server_turns`` (the turns the server's policy played since the client's last
    message), ``terminated``, ``truncated`` and ``action_note``.
    """

    agent: str | None = Field(default=None, description="the agent to act next; None once done")
    view: dict[str, Any] = Field(
        default_factory=dict, description="observe(agent): the Flex-MG view"
    )
    messages: list[dict[str, str]] = Field(
        default_factory=list, description="the view as chat messages"
    )
    rewards: dict[str, float] = Field(
        default_factory=dict, description="per-agent rewards of this call"
    )
    seats: list[str] = Field(default_factory=list, description="the agents this client plays")
    agents: list[str] = Field(default_factory=list, description="every agent of the team, in order")


class MarftState(State):
    """The session's episode: ids, the agent to act, the global transcript, verdicts so far."""

    env_id: str = ""
    task_id: str | None = None
    seed: int | None = None
    agent: str | None = None
    done: bool = False
    seats: list[str] = Field(default_factory=list)
    transcript: str = Field(default="", description="env.state(): what a centralized critic sees")
    verdicts: list[dict[str, Any]] = Field(default_factory=list)
