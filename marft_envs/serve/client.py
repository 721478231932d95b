"""The client of a served Flex-MG environment (OpenEnv ``EnvClient``; ``.sync()`` for blocking use).

from marft_envs.serve import MarftAction, MarftEnvClient
with MarftEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
    result = env.reset(seed=0, seats=["actor_1"], others="oracle")
    while not result.done:
        obs = result.observation          # obs.agent is the seat to play, obs.view what it sees
        result = env.step(MarftAction(agent=obs.agent, text=my_llm(obs.view["prompt"])))
    result.metadata["verdict"]
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from .models import MarftAction, MarftObservation, MarftState


class MarftEnvClient(EnvClient[MarftAction, MarftObservation, MarftState]):
    """One session on a ``marft-envs serve`` server. Server errors raise ``RuntimeError``."""

    def _step_payload(self, action: MarftAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[MarftObservation]:
        obs = dict(payload.get("observation", {}))
        obs.update(
            done=payload.get("done", False),
            reward=payload.get("reward"),
            metadata=payload.get("metadata") or obs.get("metadata") or {},
        )
        observation = MarftObservation(**obs)
        return StepResult(
            observation=observation,
            reward=observation.reward,
            done=observation.done,
            metadata=observation.metadata,
        )

    def _parse_state(self, payload: dict[str, Any]) -> MarftState:
        return MarftState(**payload)
