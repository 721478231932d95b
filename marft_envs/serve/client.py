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

import asyncio
import contextlib
import operator
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from websockets.exceptions import ConnectionClosed

from ..errors import EnvOrderError
from .batch import BATCH_PATH, dumps, loads
from .models import MarftAction, MarftObservation, MarftState

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self needs Python 3.11

T = TypeVar("T")

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
        return parse_result(payload)

    def _parse_state(self, payload: dict[str, Any]) -> MarftState:
        return MarftState(**payload)


def parse_result(payload: dict[str, Any]) -> StepResult[MarftObservation]:
    """The :class:`StepResult` of an observation message's ``data`` (``/ws`` or ``/marft/ws``)."""
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


def server_error(data: dict[str, Any]) -> RuntimeError:
    """The exception of an error message's ``data``, worded as OpenEnv's client words it; an
    order error is an :class:`EnvOrderError`."""
    message = data.get("message", "Unknown error")
    if EnvOrderError.is_order_message(message):
        return EnvOrderError(message)
    return RuntimeError(f"Server error: {message} (code: {data.get('code', 'UNKNOWN')})")


class BatchError(RuntimeError):
    """Some items of a batch failed. The others were played: ``results`` holds their replies
    (session -> result), ``errors`` the failures (session -> exception)."""

    def __init__(self, results: dict[int, Any], errors: dict[int, RuntimeError]):
        self.results, self.errors = results, errors
        first = next(iter(errors.items()))
        super().__init__(
            f"{len(errors)} of {len(results) + len(errors)} sessions failed; "
            f"session {first[0]}: {first[1]}"
        )


class MarftBatchClient:
    """``sessions`` sessions on one ``/marft/ws`` connection (the batched extension).

    Each session behaves exactly as a :class:`MarftEnvClient` on ``/ws``; one call sends a
    message for any number of them in one frame and returns their replies by session index:

        async with MarftBatchClient(base_url=url, sessions=64) as envs:
            results = await envs.reset({i: {"seed": i} for i in range(64)})
            while live := {i: r for i, r in results.items() if not r.done}:
                texts = my_llm([r.observation.view["prompt"] for r in live.values()])
                actions = {i: MarftAction(agent=r.observation.agent, text=t)
                           for (i, r), t in zip(live.items(), texts)}
                results = await envs.step(actions)  # the sessions stepped, finished ones too

    A session's failure raises :class:`BatchError` after the whole frame is answered (the other
    sessions' results ride on it); ``.sync()`` gives the blocking form.
    """

    def __init__(
        self,
        base_url: str,
        sessions: int,
        *,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        max_size: int = 64 * 2**20,
    ):
        try:
            n = None if isinstance(sessions, bool) else operator.index(sessions)
        except TypeError:
            n = None
        if n is None or n < 1:
            raise ValueError(
                f"sessions must be a positive integer (how many sessions to open), got "
                f"{sessions!r:.40}"
            )
        self.url = _ws_url(base_url) + f"{BATCH_PATH}?sessions={n}"
        self.num_sessions = n
        self.connect_timeout_s, self.message_timeout_s = connect_timeout_s, message_timeout_s
        self.max_size = max_size
        self.env_id: str | None = None
        self.agents: list[str] = []
        self._ws: Any = None
        self._pending: deque[asyncio.Future[list[dict[str, Any]]]] = deque()
        self._reader: asyncio.Task[None] | None = None
        self._error: RuntimeError | None = None  # why the connection ended, once it has

    async def connect(self) -> Self:
        """Open the connection and its sessions (a refusal, e.g. capacity, raises here)."""
        from websockets.asyncio.client import connect

        if self._ws is None:
            ws = await connect(
                self.url,
                open_timeout=self.connect_timeout_s,
                max_size=self.max_size,
                compression=None,  # CPU-bound sessions: see app.WS_DEFLATE
            )
            try:
                hello = await asyncio.wait_for(ws.recv(), self.message_timeout_s)
            except ConnectionClosed as e:
                raise _closed(e) from None
            except asyncio.TimeoutError:  # not yet TimeoutError on Python 3.10
                await ws.close()
                raise TimeoutError(self._no_reply("its sessions opened")) from None
            message = loads(hello)
            if message.get("type") == "error":
                await ws.close()
                raise server_error(message["data"])
            self.env_id, self.agents = message["data"]["env_id"], message["data"]["agents"]
            self._ws, self._pending = ws, deque()
            self._reader = asyncio.get_running_loop().create_task(self._read_replies(ws))
        return self

    async def close(self) -> None:
        if self._ws is not None:
            ws, self._ws = self._ws, None
            self._error = RuntimeError("this client was closed: open a new one")
            await ws.close()
        if self._reader is not None:
            await self._reader  # it ends with the connection, failing what is still pending
            self._reader = None

    async def __aenter__(self) -> Self:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send one frame of ``{session, type, data}`` items; the server's reply items, in order.

        Calls may overlap (``asyncio.gather``, or tasks each driving some of the sessions): their
        frames are pipelined on the one connection, so the server works on one frame while this
        side builds the next; replies come back in the order the frames were sent.
        """
        if self._ws is None and self._error is not None:
            raise self._error  # its sessions are gone with it: open a new client
        await self.connect()
        reply: asyncio.Future[list[dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._pending.append(reply)
        try:
            await self._ws.send(dumps({"type": "batch", "data": items}))
        except ConnectionClosed:
            pass  # the reader fails ``reply`` with the server's reason for closing
        # shield: a timed-out call leaves its future queued, so later replies stay paired
        try:
            return await asyncio.wait_for(asyncio.shield(reply), self.message_timeout_s)
        except asyncio.TimeoutError:  # not yet TimeoutError on Python 3.10
            reply.cancel()  # its reply, if it comes, is dropped by the reader
            why = self._no_reply(f"a frame of {len(items)} item(s) was answered")
            raise TimeoutError(why) from None

    def _no_reply(self, what: str) -> str:
        return (
            f"no reply from {self.url} within message_timeout_s={self.message_timeout_s:g} s "
            f"before {what}: the server may be overloaded or stalled (raise message_timeout_s "
            "for slow grades)"
        )

    async def reset(
        self, sessions: Mapping[int, Mapping[str, Any]]
    ) -> dict[int, StepResult[MarftObservation]]:
        """Reset each session of ``sessions`` (index -> reset fields: seed, task_id, seats, ...)."""
        items = [{"session": i, "type": "reset", "data": dict(kw)} for i, kw in sessions.items()]
        return self._results(items, await self.send(items), parse_result)

    async def step(
        self, actions: Mapping[int, MarftAction]
    ) -> dict[int, StepResult[MarftObservation]]:
        """Play one action in each session of ``actions`` (index -> action)."""
        items = [{"session": i, "type": "step", "data": a.model_dump()} for i, a in actions.items()]
        return self._results(items, await self.send(items), parse_result)

    async def state(self, sessions: Iterable[int] | None = None) -> dict[int, MarftState]:
        """The state of each of ``sessions`` (default all)."""
        ids = range(self.num_sessions) if sessions is None else sessions
        items = [{"session": i, "type": "state"} for i in ids]
        return self._results(items, await self.send(items), lambda d: MarftState(**d))

    def sync(self) -> SyncMarftBatchClient:
        """The blocking form of this client (its own event loop)."""
        return SyncMarftBatchClient(self)

    async def _read_replies(self, ws: Any) -> None:
        """Hand each reply frame to the oldest call waiting (the server answers in order)."""
        error: RuntimeError | None = None
        try:
            while True:
                message = loads(await ws.recv())  # ConnectionClosed carries the server's reason
                reply = self._pending.popleft()
                if reply.cancelled():  # its caller timed out (send cancels it)
                    continue
                if message.get("type") == "error":  # a frame the server could not read
                    reply.set_exception(server_error(message["data"]))
                else:
                    reply.set_result(message["data"])
        except ConnectionClosed as e:
            error = _closed(e)
        finally:
            error = error or RuntimeError("the connection to the server was closed")
            if self._ws is ws:
                self._ws, self._error = None, error
            while self._pending:
                reply = self._pending.popleft()
                if not reply.done():
                    reply.set_exception(error)

    @staticmethod
    def _results(
        items: list[dict[str, Any]], replies: list[dict[str, Any]], parse: Callable[[Any], T]
    ) -> dict[int, T]:
        """Replies by the session index each item was sent with: the server answers an item it
        cannot read (an index out of range) with ``"session": null``, and the replies come in
        the items' order."""
        results: dict[int, T] = {}
        errors: dict[int, RuntimeError] = {}
        paired = len(items) == len(replies)
        for k, reply in enumerate(replies):
            session = items[k]["session"] if paired else reply["session"]
            if reply["type"] == "error":
                errors[session] = server_error(reply["data"])
            else:
                results[session] = parse(reply["data"])
        if errors:
            raise BatchError(results, errors)
        return results


class SyncMarftBatchClient:
    """:class:`MarftBatchClient` for blocking code: every call runs on this object's own loop."""

    def __init__(self, client: MarftBatchClient):
        self.client = client
        self._loop = asyncio.new_event_loop()

    def connect(self) -> Self:
        self._loop.run_until_complete(self.client.connect())
        return self

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self.client.close())
            self._loop.close()

    def __enter__(self) -> Self:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return self._loop.run_until_complete(self.client.send(items))

    def reset(
        self, sessions: Mapping[int, Mapping[str, Any]]
    ) -> dict[int, StepResult[MarftObservation]]:
        return self._loop.run_until_complete(self.client.reset(sessions))

    def step(self, actions: Mapping[int, MarftAction]) -> dict[int, StepResult[MarftObservation]]:
        return self._loop.run_until_complete(self.client.step(actions))

    def state(self, sessions: Iterable[int] | None = None) -> dict[int, MarftState]:
        return self._loop.run_until_complete(self.client.state(sessions))


def _closed(e: ConnectionClosed) -> RuntimeError:
    reason = e.rcvd.reason if e.rcvd is not None else ""
    return RuntimeError(f"the server closed the connection: {reason or e}")


def _ws_url(base_url: str) -> str:
    """``http(s)://host:port[/]`` -> ``ws(s)://host:port`` (as OpenEnv's client converts it)."""
    url = base_url.rstrip("/")
    if url.startswith("http://"):
        return "ws://" + url[len("http://") :]
    if url.startswith("https://"):
        return "wss://" + url[len("https://") :]
    return url
