"""The OpenEnv server of a registered id: ``create_server_app(env_id)`` and ``serve(...)``."""

from __future__ import annotations

import functools
import os
from typing import Any

from openenv.core.env_server.http_server import create_app

from ..registry import make, spec
from .environment import MarftEnvironment
from .models import MarftAction, MarftObservation, MarftState


def create_server_app(
    env_id: str, *, max_sessions: int = 64, session_timeout_s: float | None = None, **overrides: Any
) -> Any:
    """A FastAPI app serving ``env_id`` (with ``make()`` overrides) through OpenEnv.

    Each WebSocket connection (``/ws``) is one session with its own environment; at most
    ``max_sessions`` at once; ``session_timeout_s`` reaps idle sessions. The id and overrides are
    checked here, so a bad one fails at start-up with the registry's message, not per session.
    """
    spec(env_id)  # unknown ids raise KeyError naming the closest registered ones
    if not isinstance(max_sessions, int) or max_sessions < 1:
        raise ValueError(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
    make(env_id, **overrides).close()  # bad overrides fail now, with make()'s message
    from openenv.core.env_server.types import ConcurrencyConfig

    factory = functools.partial(MarftEnvironment, env_id, overrides)
    return create_app(
        factory,
        MarftAction,
        MarftObservation,
        env_name=env_id,
        state_cls=MarftState,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=session_timeout_s
        ),
    )


#: permessage-deflate costs the server about a fifth of its CPU per turn (bench_serve.py) to
#: shrink messages of a few kilobytes; sessions are CPU-bound, so it is off unless asked for.
WS_DEFLATE = False


def serve(
    env_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 64,
    session_timeout_s: float | None = None,
    log_level: str = "info",
    **overrides: Any,
) -> None:
    """Run the server in this process until interrupted (uvicorn)."""
    import uvicorn

    app = create_server_app(
        env_id, max_sessions=max_sessions, session_timeout_s=session_timeout_s, **overrides
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level, ws_per_message_deflate=WS_DEFLATE)


def app_from_environ() -> Any:
    """The app named by ``MARFT_ENV_ID`` and ``MARFT_MAX_SESSIONS`` (for uvicorn and openenv.yaml)."""
    return create_server_app(
        os.environ.get("MARFT_ENV_ID", "arith-3agent"),
        max_sessions=int(os.environ.get("MARFT_MAX_SESSIONS", "64")),
    )
