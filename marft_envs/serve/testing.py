"""Run a server on a loopback port inside this process (tests, benchmarks, notebooks).

with running_server("arith-3agent", max_sessions=64) as url:
    with MarftEnvClient(base_url=url).sync() as env: ...
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from .app import WS_DEFLATE, create_server_app


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(
    env_id: str, *, max_sessions: int = 64, port: int | None = None, **overrides: Any
) -> Iterator[str]:
    """Serve ``env_id`` with uvicorn on a background thread; yield its URL; stop it on exit."""
    import uvicorn

    app = create_server_app(env_id, max_sessions=max_sessions, **overrides)
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", ws_per_message_deflate=WS_DEFLATE
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"marft-serve-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server for {env_id!r} on port {port} did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
