"""The batched extension: many sessions on one WebSocket, one frame carrying a message for each.

OpenEnv's ``/ws`` holds one session per connection and one message per frame, so every agent-turn
pays a frame's fixed cost on both sides (the socket's send and receive, the event loop's reader
bookkeeping, the ASGI and WebSocket layers, an envelope validated and dumped), about twice what
the turn itself costs. ``/marft/ws?sessions=N`` opens ``N`` sessions on one connection, each a
:class:`MarftEnvironment` with exactly the semantics of a ``/ws`` session, and a frame carries one
OpenEnv message (``reset``, ``step``, ``state``) for any number of them; the reply frame carries
what each session's own ``/ws`` would have answered, in order. Protocol: docs/integrations.md.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..errors import EnvOrderError
from .environment import MarftEnvironment
from .models import MarftAction

try:  # a dependency of openenv's (through gradio); the standard library's json otherwise
    import orjson
except ImportError:  # pragma: no cover - depends on the install
    orjson = None  # type: ignore[assignment]

#: The batched endpoint's path (OpenEnv's own endpoints are untouched).
BATCH_PATH = "/marft/ws"
ITEM_TYPES = ("reset", "step", "state")
#: A grade slower than this (seconds) sends the rest of its frame's grades to the thread pool.
SLOW_GRADE_S = 0.002


def dumps(obj: Any) -> str:
    """JSON text of ``obj`` (orjson when installed: a batch reply is tens of kilobytes)."""
    if orjson is not None:
        return orjson.dumps(
            obj, default=to_jsonable_python, option=orjson.OPT_NON_STR_KEYS
        ).decode()
    return json.dumps(obj, default=to_jsonable_python, ensure_ascii=False)


def loads(data: str | bytes) -> Any:
    """Parse JSON text (raises ``ValueError`` on malformed input, as ``json`` does)."""
    return orjson.loads(data) if orjson is not None else json.loads(data)


def error(message: str, code: str, **extra: Any) -> dict[str, Any]:
    """An error message as OpenEnv words it (``WSErrorResponse``)."""
    return {"type": "error", "data": {"message": message, "code": code, **extra}}


class BatchSessions:
    """The sessions of one ``/marft/ws`` connection and how one frame's items are run on them.

    Items that grade nothing run on the event loop, one after another (a few tens of
    microseconds each); the steps that may grade (verifier workers, code sandboxes) run during one
    hop off the loop (:meth:`grade`), so a slow verdict never stalls other connections.
    """

    def __init__(self, envs: Sequence[MarftEnvironment], pool: ThreadPoolExecutor):
        self.envs = list(envs)
        self.pool = pool

    async def run(self, items: list[Any]) -> list[dict[str, Any]]:
        """The reply items of one frame's ``data`` (a list of ``{session, type, data}``)."""
        replies: list[dict[str, Any]] = []
        graded: list[tuple[int, MarftEnvironment, MarftAction]] = []
        seen: set[int] = set()
        for k, item in enumerate(items):
            session, reply = self.check(item, seen)
            if reply is None:
                env = self.envs[session]
                reply, action = self.one(env, item["type"], item.get("data"))
                if action is not None:  # a step that may grade: run below, off the loop
                    graded.append((k, env, action))
            replies.append({"session": session, **reply})
        if graded:
            for (k, _, _), reply in zip(
                graded, await asyncio.to_thread(self.grade, graded), strict=True
            ):
                replies[k].update(reply)
        return replies

    def one(
        self, env: MarftEnvironment, kind: str, data: Any
    ) -> tuple[dict[str, Any], MarftAction | None]:
        """``(reply, None)`` for an item run here and now, or ``({}, action)`` for a step that
        may grade (the caller runs it on a thread)."""
        if kind == "state":
            return self.call(lambda: env.state.model_dump(), kind="state"), None
        if kind == "reset":
            if data is not None and not isinstance(data, dict):
                return error(
                    f"reset data must be an object, got {data!r:.80}", "VALIDATION_ERROR"
                ), None
            return self.call(lambda: env.reset_reply(**(data or {}))), None
        try:
            action = MarftAction.model_validate(data)
        except ValidationError as e:
            errors = loads(e.json(include_url=False))
            return error("Invalid message", "VALIDATION_ERROR", errors=errors), None
        if env.may_grade():
            return {}, action
        return self.call(lambda: env.step_reply(action)), None

    def grade(
        self, graded: list[tuple[int, MarftEnvironment, MarftAction]]
    ) -> list[dict[str, Any]]:
        """Run steps that may grade (called on a worker thread).

        One after another while grades are quick (math: a string or numeric match, tens of
        microseconds; threads would only trade the GIL); from the first slow one (a code
        sandbox, a symbolic check) the rest run side by side on the pool, so a frame of slow
        grades takes about the time of two rather than of all of them.
        """

        def play(g: tuple[int, MarftEnvironment, MarftAction]) -> dict[str, Any]:
            return self.call(lambda: g[1].step_reply(g[2]))

        replies: list[dict[str, Any]] = []
        for n, g in enumerate(graded):
            started = time.perf_counter()
            replies.append(play(g))
            if time.perf_counter() - started > SLOW_GRADE_S:
                replies += self.pool.map(play, graded[n + 1 :])
                break
        return replies

    def check(self, item: Any, seen: set[int]) -> tuple[Any, dict[str, Any] | None]:
        """``(session, None)`` for a well-formed item, else ``(session or None, error reply)``."""
        if not isinstance(item, dict):
            return None, error(
                f"a batch item must be an object, got {item!r:.80}", "VALIDATION_ERROR"
            )
        session = item.get("session")
        if (
            isinstance(session, bool)
            or not isinstance(session, int)
            or not 0 <= session < len(self.envs)
        ):
            return None, error(
                f"session must be an integer in 0..{len(self.envs) - 1}, got {session!r:.40}",
                "VALIDATION_ERROR",
            )
        if session in seen:
            return session, error(
                f"session {session} appears twice in one frame: send its next message in the "
                "next frame (it needs this one's reply first)",
                "VALIDATION_ERROR",
            )
        seen.add(session)
        if item.get("type") not in ITEM_TYPES:
            return session, error(
                f"Unknown message type: {item.get('type')!r:.40} "
                f"(a batch item is one of {list(ITEM_TYPES)})",
                "UNKNOWN_TYPE",
            )
        return session, None

    @staticmethod
    def call(fn: Callable[[], dict[str, Any]], kind: str = "observation") -> dict[str, Any]:
        """``fn()``'s reply, or the ``EXECUTION_ERROR`` a ``/ws`` session would send for the
        client's mistakes (bad input, a message out of order). Other exceptions are server bugs:
        they propagate and end the connection."""
        try:
            return {"type": kind, "data": fn()}
        except (ValueError, EnvOrderError) as e:
            return error(str(e), "EXECUTION_ERROR")

    def close(self) -> None:
        for env in self.envs:
            env.close()


def session_count(raw: str, max_sessions: int) -> int | None:
    """The ``sessions`` query parameter as a count in ``1..max_sessions``, else None. Only ASCII
    digits count ("²" is a digit to ``str.isdigit`` but ``int`` raises on it), and no more of
    them than ``max_sessions`` has (``int`` raises on a text of over 4300 digits)."""
    if not (raw.isascii() and raw.isdigit()) or len(raw.lstrip("0")) > len(str(max_sessions)):
        return None
    n = int(raw)
    return n if 1 <= n <= max_sessions else None


def add_batch_route(
    app: Any,
    factory: Callable[[], MarftEnvironment],
    *,
    max_sessions: int,
    session_timeout_s: float | None = None,
) -> None:
    """Serve ``/marft/ws`` on ``app``: at most ``max_sessions`` sessions over all its connections
    (OpenEnv's ``/ws`` keeps its own count); a connection idle longer than ``session_timeout_s``
    is closed and its sessions freed."""
    open_sessions = [0]  # over every connection of this app; the event loop is its only writer
    pool = ThreadPoolExecutor(max_workers=min(32, max_sessions), thread_name_prefix="marft-grade")

    async def endpoint(websocket: WebSocket) -> None:
        await websocket.accept()
        raw_n = websocket.query_params.get("sessions", "1")
        n = session_count(raw_n, max_sessions)
        if n is None:
            await websocket.send_text(
                dumps(
                    error(
                        f"sessions must be an integer in 1..{max_sessions}, got {raw_n!r:.40}",
                        "VALIDATION_ERROR",
                    )
                )
            )
            await websocket.close(1008)
            return
        if open_sessions[0] + n > max_sessions:
            refusal = (
                f"Server at capacity: {open_sessions[0]}/{max_sessions} sessions open on "
                f"{BATCH_PATH}; asked for {n}"
            )
            await websocket.send_text(
                dumps(
                    error(
                        refusal,
                        "CAPACITY_REACHED",
                        active_sessions=open_sessions[0],
                        max_sessions=max_sessions,
                    )
                )
            )
            await websocket.close(1013)
            return
        open_sessions[0] += n
        sessions: BatchSessions | None = None
        try:
            envs = await asyncio.to_thread(lambda: [factory() for _ in range(n)])
            sessions = BatchSessions(envs, pool)
            hello = {"sessions": n, "env_id": envs[0].env_id, "agents": envs[0].agents}
            await websocket.send_text(dumps({"type": "open", "data": hello}))
            while True:
                try:
                    message = await asyncio.wait_for(websocket.receive(), session_timeout_s)
                except asyncio.TimeoutError:  # not yet TimeoutError on Python 3.10
                    await websocket.close(1000, "idle longer than the session timeout")
                    return
                if message["type"] == "websocket.disconnect":
                    return
                raw = message["text"] if message.get("text") is not None else message["bytes"]
                try:
                    frame = loads(raw)
                except ValueError as e:
                    await websocket.send_text(dumps(error(f"Invalid JSON: {e}", "INVALID_JSON")))
                    continue
                kind = frame.get("type") if isinstance(frame, dict) else None
                if kind == "close":
                    await websocket.close()
                    return
                if kind != "batch":
                    await websocket.send_text(
                        dumps(
                            error(
                                f"Unknown message type: {kind!r:.40} (send 'batch' or 'close')",
                                "UNKNOWN_TYPE",
                            )
                        )
                    )
                    continue
                items = frame.get("data")
                if not isinstance(items, list):
                    why = f"a batch's data must be a list of messages, got {items!r:.80}"
                    await websocket.send_text(dumps(error(why, "VALIDATION_ERROR")))
                    continue
                replies = await sessions.run(items)
                await websocket.send_text(dumps({"type": "batch", "data": replies}))
        except WebSocketDisconnect:
            pass
        finally:
            open_sessions[0] -= n
            if sessions is not None:
                sessions.close()

    app.add_api_websocket_route(BATCH_PATH, endpoint)
