"""The OpenEnv server of a registered id: ``create_server_app(env_id)`` and ``serve(...)``."""

from __future__ import annotations

import functools
import os
from typing import Any

from openenv.core.env_server.http_server import create_app

from ..errors import EnvOrderError
from ..registry import make, spec
from .batch import add_batch_route
from .environment import MarftEnvironment
from .models import MarftAction, MarftObservation, MarftState


def create_server_app(
    env_id: str, *, max_sessions: int = 64, session_timeout_s: float | None = None, **overrides: Any
) -> Any:
    """A FastAPI app serving ``env_id`` (with ``make()`` overrides) through OpenEnv.

    Each WebSocket connection (``/ws``) is one session with its own environment; at most
    ``max_sessions`` at once; ``session_timeout_s`` reaps idle sessions. ``/marft/ws`` is the
    batched extension (:mod:`marft_envs.serve.batch`): many sessions per connection, at most
    ``max_sessions`` of them over all its connections. The id and overrides are
    checked here, so a bad one fails at start-up with the registry's message, not per session.
    """
    spec(env_id)  # unknown ids raise KeyError naming the closest registered ones
    if not isinstance(max_sessions, int) or max_sessions < 1:
        raise ValueError(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
    make(env_id, **overrides).close()  # bad overrides fail now, with make()'s message
    from openenv.core.env_server.types import ConcurrencyConfig

    factory = functools.partial(MarftEnvironment, env_id, overrides)
    app = create_app(
        factory,
        MarftAction,
        MarftObservation,
        env_name=env_id,
        state_cls=MarftState,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=session_timeout_s
        ),
    )
    add_batch_route(app, factory, max_sessions=max_sessions, session_timeout_s=session_timeout_s)
    app.add_exception_handler(ValueError, _bad_http_request)
    app.add_exception_handler(EnvOrderError, _bad_http_request)
    return app


async def _bad_http_request(request: Any, exc: Exception) -> Any:
    """A ValueError or EnvOrderError from the environment over HTTP is the client's mistake: 400
    with its message.

    OpenEnv's HTTP /reset and /step are stateless (a fresh environment per request, closed after
    it), so an HTTP /step can never continue an episode: episodes are played over ``/ws``.
    (Over the WebSocket OpenEnv itself turns the error into an ``EXECUTION_ERROR`` message.)
    """
    from fastapi.responses import JSONResponse

    message = str(exc)
    if request.url.path.rstrip("/").endswith("/step"):
        message += (
            " (HTTP /step is stateless in OpenEnv: each request gets a fresh environment; "
            "play episodes over the WebSocket /ws, e.g. with MarftEnvClient)"
        )
    return JSONResponse(status_code=400, content={"detail": message})


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
    """The app named by ``MARFT_ENV_ID`` and ``MARFT_MAX_SESSIONS`` (for uvicorn and
    openenv.yaml)."""
    return create_server_app(
        os.environ.get("MARFT_ENV_ID", "arith-3agent"),
        max_sessions=int(os.environ.get("MARFT_MAX_SESSIONS", "64")),
    )
