"""The batched extension ``/marft/ws``: many sessions on one connection, one frame for all.

Each session must play exactly as a ``/ws`` session (and so as in process); a bad item gets the
error ``/ws`` would send, and the frame's other items are still played.
"""

import asyncio
import contextlib
import json
import time
import urllib.parse

import pytest

pytest.importorskip("openenv")

import websockets.exceptions
import websockets.sync.client as ws_sync

from marft_envs import EnvOrderError
from marft_envs.serve import (
    BATCH_PATH,
    BatchError,
    MarftAction,
    MarftBatchClient,
    MarftEnvClient,
    batch,
)
from marft_envs.serve.testing import running_server
from tests.serve.test_serve import ENV_ID, in_process_trace, served_point


@pytest.fixture(scope="module")
def server():
    with running_server(ENV_ID, max_sessions=16) as url:
        yield url


async def batched_traces(url, seeds, actions, in_flight):
    """Every seed's episode in its own session of one connection, ``in_flight`` frames at once."""
    traces = {}
    async with MarftBatchClient(url, sessions=len(seeds)) as client:

        async def group(ids):
            results = await client.reset({i: {"seed": seeds[i]} for i in ids})
            for i in ids:
                traces[i] = [served_point(results[i])]
            turn = 0
            while ids := [i for i in ids if turn < len(actions[i])]:
                steps = {
                    i: MarftAction(agent=actions[i][turn][0], text=actions[i][turn][1]) for i in ids
                }
                for i, r in (await client.step(steps)).items():
                    traces[i].append(served_point(r))
                turn += 1

        await asyncio.gather(
            *(group(list(range(len(seeds)))[g::in_flight]) for g in range(in_flight))
        )
    return [traces[i] for i in range(len(seeds))]


@pytest.mark.parametrize(
    "env_id, overrides, in_flight, slow_grade_s",
    [
        (ENV_ID, {}, 1, batch.SLOW_GRADE_S),
        (ENV_ID, {}, 2, 0.0),  # pipelined frames; every grade "slow": the pool's path
        ("arith-2agent", {"horizon": 3, "feedback": "verdict", "reward_to": "last"}, 2, 0.0),
    ],
)
def test_batched_sessions_equal_in_process(env_id, overrides, in_flight, slow_grade_s, monkeypatch):
    monkeypatch.setattr(batch, "SLOW_GRADE_S", slow_grade_s)
    seeds = list(range(24))
    expected = [in_process_trace(env_id, overrides, s) for s in seeds]
    with running_server(env_id, max_sessions=32, **overrides) as url:
        got = asyncio.run(batched_traces(url, seeds, [a for a, _ in expected], in_flight))
    for s, trace, (_, want) in zip(seeds, got, expected, strict=True):
        assert trace == want, f"seed {s}: batched episode differs from in-process"


def test_a_batched_session_equals_a_ws_session_with_seats_and_server_policies(server):
    with (
        MarftBatchClient(server, sessions=2).sync() as envs,
        MarftEnvClient(base_url=server).sync() as one,
    ):
        assert envs.client.agents == ["reasoner_0", "actor_1", "verifier_2"]
        fields = {"seed": 3, "seats": ["actor_1"], "others": "oracle", "episode_id": "e"}
        b = envs.reset({1: fields})[1]
        w = one.reset(**fields)
        assert served_point(b) == served_point(w) and b.metadata == w.metadata
        act = {1: MarftAction(agent="actor_1", text="\\boxed{5}")}
        b, w = envs.step(act)[1], one.step(act[1])
        assert served_point(b) == served_point(w) and b.done and b.metadata == w.metadata
        state = envs.state([1])[1]
        assert state.model_dump() == one.state().model_dump()
        assert state.episode_id == "e" and state.seats == ["actor_1"]


def test_bad_items_get_the_ws_errors_and_the_rest_of_the_frame_is_played(server):
    with MarftBatchClient(server, sessions=5).sync() as envs:
        envs.reset({i: {"seed": i} for i in range(3)})
        items = [
            {"session": 0, "type": "step", "data": {"agent": "reasoner_0", "text": "fine"}},
            {"session": 1, "type": "step", "data": {"agent": "actor_1", "text": "not my turn"}},
            {"session": 2, "type": "step", "data": {"agent": "reasoner_0"}},  # no text
            {"session": 3, "type": "step", "data": {"agent": "reasoner_0", "text": "no reset"}},
            {"session": 0, "type": "state"},  # twice in one frame
            {"session": 9, "type": "state"},
            {"session": 2.0, "type": "state"},
            {"session": 4, "type": "teleport"},
            "not an item",
        ]
        replies = envs.send(items)
        assert [r["session"] for r in replies] == [0, 1, 2, 3, 0, None, None, 4, None]
        assert replies[0]["type"] == "observation"
        assert replies[0]["data"]["observation"]["agent"] == "actor_1"
        codes = [r["data"].get("code") for r in replies[1:]]
        assert codes == ["EXECUTION_ERROR", "VALIDATION_ERROR", "EXECUTION_ERROR"] + [
            "VALIDATION_ERROR"
        ] * 3 + ["UNKNOWN_TYPE", "VALIDATION_ERROR"]
        assert "it is 'reasoner_0''s turn" in replies[1]["data"]["message"]
        assert replies[2]["data"]["errors"][0]["loc"] == ["text"]
        assert "reset" in replies[3]["data"]["message"]
        assert "twice in one frame" in replies[4]["data"]["message"]
        assert "0..4" in replies[5]["data"]["message"]

        # the typed calls: the good session's result rides on the error; order errors keep type
        with pytest.raises(BatchError) as caught:
            envs.step(
                {
                    0: MarftAction(agent="actor_1", text="fine"),
                    3: MarftAction(agent="reasoner_0", text="still no reset"),
                }
            )
        assert list(caught.value.results) == [0]
        assert caught.value.results[0].observation.agent == "verifier_2"
        assert isinstance(caught.value.errors[3], EnvOrderError)
        # nothing above changed session 1 or 2: they play on from their first turn
        results = envs.step({i: MarftAction(agent="reasoner_0", text="go") for i in (1, 2)})
        assert {i: r.observation.agent for i, r in results.items()} == {1: "actor_1", 2: "actor_1"}


@contextlib.contextmanager
def raw_batch_ws(url, sessions):
    """A plain WebSocket on the batched endpoint, and the server's first frame."""
    url = url.replace("http://", "ws://") + f"{BATCH_PATH}?sessions={sessions}"
    with ws_sync.connect(url) as ws:
        yield ws, json.loads(ws.recv(timeout=30))


def test_malformed_frames_are_errors_and_the_connection_lives(server):
    with raw_batch_ws(server, 1) as (ws, hello):
        assert hello == {
            "type": "open",
            "data": {
                "sessions": 1,
                "env_id": ENV_ID,
                "agents": ["reasoner_0", "actor_1", "verifier_2"],
            },
        }
        for frame, code in [
            ("{not json", "INVALID_JSON"),
            ("[1, 2]", "UNKNOWN_TYPE"),
            ('{"type": "step", "data": {}}', "UNKNOWN_TYPE"),
            ('{"type": "batch", "data": {"session": 0}}', "VALIDATION_ERROR"),
        ]:
            ws.send(frame)
            reply = json.loads(ws.recv(timeout=30))
            assert reply["type"] == "error" and reply["data"]["code"] == code, frame
        ws.send(
            json.dumps(
                {"type": "batch", "data": [{"session": 0, "type": "reset", "data": {"seed": 1}}]}
            ).encode()
        )
        reply = json.loads(ws.recv(timeout=30))  # a binary frame is read as JSON too
        assert (
            reply["type"] == "batch"
            and reply["data"][0]["data"]["observation"]["agent"] == "reasoner_0"
        )


def test_capacity_is_counted_in_sessions_and_freed_on_close():
    with running_server(ENV_ID, max_sessions=4) as url:
        for n in ("0", "5", "two"):
            with raw_batch_ws(url, n) as (_, reply):
                assert (
                    reply["data"]["code"] == "VALIDATION_ERROR"
                    and "1..4" in reply["data"]["message"]
                )
        first = MarftBatchClient(url, sessions=3).sync().connect()
        refused = MarftBatchClient(url, sessions=2).sync()
        with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
            refused.connect()
        refused.close()
        with MarftBatchClient(url, sessions=1).sync() as last:  # the fourth slot is still free
            assert last.reset({0: {"seed": 0}})[0].observation.agent == "reasoner_0"
        first.close()
        deadline = time.monotonic() + 10
        while True:  # the server frees the sessions when it sees the close
            try:
                with MarftBatchClient(url, sessions=4).sync() as envs:
                    assert len(envs.reset({i: {} for i in range(4)})) == 4
                break
            except RuntimeError as e:
                assert "CAPACITY_REACHED" in str(e) and time.monotonic() < deadline
                time.sleep(0.1)


def test_an_idle_connection_is_closed_with_the_reason():
    with running_server(ENV_ID, max_sessions=2, session_timeout_s=0.5) as url:
        envs = MarftBatchClient(url, sessions=2).sync().connect()
        envs.reset({0: {"seed": 0}})
        time.sleep(1.5)
        with pytest.raises(RuntimeError, match="idle longer than the session timeout"):
            envs.step({0: MarftAction(agent="reasoner_0", text="late")})
        envs.close()
        with MarftBatchClient(url, sessions=2).sync() as fresh:  # its sessions were freed
            assert fresh.reset({1: {"seed": 1}})[1].observation.agent == "reasoner_0"


def test_a_plain_openenv_client_plays_over_ws_beside_a_batched_connection(server):
    """OpenEnv's own GenericEnvClient (no marft code) on /ws, while /marft/ws sessions play."""
    from openenv.core.generic_client import GenericEnvClient

    with (
        MarftBatchClient(server, sessions=2).sync() as envs,
        GenericEnvClient(base_url=server).sync() as plain,
    ):
        envs.reset({0: {"seed": 5}, 1: {"seed": 6}})
        r = plain.reset(seed=5)
        while not r.done:
            agent = r.observation["agent"]
            r = plain.step({"agent": agent, "text": "\\boxed{1}"})
            b = envs.step({0: MarftAction(agent=agent, text="\\boxed{1}")})[0]
            assert b.observation.agent == r.observation["agent"] and b.done == r.done
        assert r.metadata["verdict"] == b.metadata["verdict"]


@pytest.mark.parametrize("n", ["\u00b2", "1" * 5000, "-1", " 2", "0x2"])
def test_a_session_count_that_is_no_ascii_number_is_refused_cleanly(server, n):
    """"²" is a digit to ``str.isdigit`` but ``int`` raises on it; 5000 digits are over ``int``'s
    limit: a VALIDATION_ERROR frame and a close, not a server traceback."""
    with raw_batch_ws(server, urllib.parse.quote(n)) as (ws, reply):
        assert reply["data"]["code"] == "VALIDATION_ERROR" and "1..16" in reply["data"]["message"]
        with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def test_session_count():
    assert [batch.session_count(n, 16) for n in ("1", "0016", "16")] == [1, 16, 16]
    assert [batch.session_count(n, 16) for n in ("0", "17", "\u00b2", "\u0661", "9" * 5000)] == [
        None
    ] * 5


def test_errors_of_unreadable_sessions_are_keyed_by_the_index_sent(server):
    """The server answers an index out of range with ``"session": null``; the client keys each
    reply by the index its item was sent with, so every failure is reported."""
    with MarftBatchClient(server, sessions=2).sync() as envs:
        with pytest.raises(BatchError) as caught:
            envs.state([0, 7, 9])
        assert list(caught.value.results) == [0]
        assert sorted(caught.value.errors) == [7, 9]
        assert "0..1" in str(caught.value.errors[9])


@pytest.mark.parametrize("sessions", ["abc", "3", 0, -1, 2.0, True, None])
def test_the_session_count_of_a_client_must_be_a_positive_integer(sessions):
    with pytest.raises(ValueError, match="sessions must be a positive integer"):
        MarftBatchClient("http://127.0.0.1:1", sessions=sessions)


def test_a_missing_reply_times_out_naming_the_url_and_the_limit():
    """A server that opens the sessions and then never answers: the call fails after
    ``message_timeout_s`` with a message naming both; a reply that comes late is dropped."""
    from websockets.asyncio.server import serve

    async def silent(ws):
        await ws.send(json.dumps({"type": "open", "data": {"sessions": 1, "env_id": "x",
                                                           "agents": ["a"]}}))
        await ws.recv()  # the frame: never answered in time
        await asyncio.sleep(0.5)
        await ws.send(json.dumps({"type": "batch", "data": [{"session": 0, "type": "state",
                                                             "data": {}}]}))
        await ws.wait_closed()

    async def main():
        async with serve(silent, "127.0.0.1", 0) as srv:
            port = srv.sockets[0].getsockname()[1]
            client = MarftBatchClient(f"http://127.0.0.1:{port}", sessions=1,
                                      message_timeout_s=0.2)
            async with client:
                with pytest.raises(TimeoutError) as caught:
                    await client.send([{"session": 0, "type": "state"}])
                await asyncio.sleep(0.6)  # the late reply reaches the cancelled call: dropped
            return str(caught.value)

    message = asyncio.run(main())
    assert "ws://127.0.0.1:" in message and "/marft/ws?sessions=1" in message
    assert "message_timeout_s=0.2" in message
