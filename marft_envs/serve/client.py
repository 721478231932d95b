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

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from ..errors import EnvOrderError
from .models import MarftAction, MarftObservation, MarftState

# How OpenEnv's client words an error frame from the server.
_SERVER_ERROR = re.compile(r"Server error: (?P<message>.*) \(code: \w+\)", re.DOTALL)


@contextlib.contextmanager
def _server_order_errors() -> Iterator[None]:
    """Raise the server's order error (its one-line message) as :class:`EnvOrderError`."""
    try:
        yield
    except RuntimeError as exc:
        m = _SERVER_ERROR.fullmatch(str(exc))
        if not (m and EnvOrderError.is_order_message(m["message"])):
            raise
        raise EnvOrderError(m["message"]) from None


class MarftEnvClient(EnvClient[MarftAction, MarftObservation, MarftState]):
    """One session on a ``marft-envs serve`` server. Server errors raise ``RuntimeError``; a
    step out of order raises :class:`~marft_envs.errors.EnvOrderError` (a ``RuntimeError``) with
    the server's message, as the local environment would."""

    # OpenEnv's sync and async clients both send through these two coroutines (the sync wrapper
    # calls them directly), so they are where a server's order error is raised again as its type.
    async def _reset_async(self, **kwargs: Any) -> StepResult[MarftObservation]:
        with _server_order_errors():
            return await super()._reset_async(**kwargs)

    async def _step_async(self, action: MarftAction, **kwargs: Any) -> StepResult[MarftObservation]:
        with _server_order_errors():
            return await super()._step_async(action, **kwargs)

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
