"""The real OpenEnv server on a loopback port, driven by the real client.

Served episodes must equal in-process ones (same seeds, same actions: same observations, rewards,
verdicts), under many concurrent sessions; every bad input gets a clear error and leaves the
server and the other sessions working.
"""

import asyncio
import json
import socket
import time

import pytest

pytest.importorskip("openenv")

import websockets.sync.client as ws_sync

import marft_envs
from marft_envs import EnvOrderError
from marft_envs.cli import main as cli_main
from marft_envs.policies import episode_over, oracle
from marft_envs.serve import MarftAction, MarftEnvClient, create_server_app

# A loaded 2-core CI machine can take longer than httpx's 5 s default.
HTTP_TIMEOUT = 60.0
from marft_envs.serve.testing import running_server
from marft_envs.wrappers import SingleSeat

ENV_ID = "arith-3agent"


def plain(x):
    """What a value looks like after JSON (tuples become lists)."""
    return json.loads(json.dumps(x))


def scripted(env, agent, obs):
    """Deterministic, non-trivial actions: right on even seeds, wrong on odd, quoting predecessors."""
    seed = env.unwrapped.episode().seed
    quote = obs["predecessors"][-1]["action"][:20] if obs["predecessors"] else "start"
    answer = (
        env.unwrapped.task.answer if seed % 2 == 0 and obs["round"] > 0 or seed % 4 == 0 else "-1"
    )
    return f"{agent} r{obs['round']} after '{quote}' \u00e9\u2211 \\boxed{{{answer}}}"


def in_process_trace(env_id, overrides, seed):
    """(actions, trace) of one in-process episode, the trace shaped like the server's replies."""
    env = marft_envs.make(env_id, **overrides)
    env.reset(seed=seed)
    last = env.possible_agents[-1]

    def point(acted):
        over = episode_over(env)
        agent = None if over else env.agent_selection
        return {
            "agent": agent,
            "view": plain(env.observe(agent)) if agent else {},
            "messages": env.unwrapped.messages(agent) if agent else [],
            "rewards": {a: float(env.rewards.get(a, 0.0)) for a in env.possible_agents},
            "done": over,
            "verdict": plain(env.infos[last].get("verdict")) if acted == last else None,
            "task_id": env.unwrapped.task.id,
        }

    actions, trace = [], [point(None)]
    while not episode_over(env):
        agent = env.agent_selection
        action = scripted(env, agent, env.observe(agent))
        env.step(action)
        actions.append((agent, action))
        trace.append(point(agent))
    return actions, trace


def served_point(result):
    obs = result.observation
    return {
        "agent": obs.agent,
        "view": plain(obs.view),
        "messages": obs.messages,
        "rewards": obs.rewards,
        "done": result.done,
        "verdict": result.metadata.get("verdict"),
        "task_id": result.metadata["task_id"],
    }


async def served_trace(url, seed, actions):
    async with MarftEnvClient(base_url=url) as env:
        trace = [served_point(await env.reset(seed=seed))]
        for agent, text in actions:
            trace.append(served_point(await env.step(MarftAction(agent=agent, text=text))))
    return trace


@pytest.fixture(scope="module")
def server():
    with running_server(ENV_ID, max_sessions=64) as url:
        yield url


@pytest.mark.parametrize(
    "env_id, overrides",
    [
        (ENV_ID, {}),
        ("arith-2agent", {"horizon": 3, "feedback": "verdict", "reward_to": "last"}),
    ],
)
def test_served_episodes_equal_in_process_under_48_concurrent_sessions(env_id, overrides):
    seeds = list(range(48))
    expected = {s: in_process_trace(env_id, overrides, s) for s in seeds}
    assert any(t[-1]["verdict"]["correct"] for _, t in expected.values())  # both outcomes occur
    assert not all(t[-1]["verdict"]["correct"] for _, t in expected.values())

    async def run_all(url):
        return await asyncio.gather(*(served_trace(url, s, expected[s][0]) for s in seeds))

    with running_server(env_id, max_sessions=64, **overrides) as url:
        got = asyncio.run(run_all(url))
    for s, trace in zip(seeds, got):
        assert trace == expected[s][1], f"seed {s}: served episode differs from in-process"


def test_seats_played_server_side_equal_single_seat_in_process(server):
    with MarftEnvClient(base_url=server).sync() as env:
        for seed in range(6):
            local = SingleSeat(ENV_ID, seat="actor_1", others="oracle")
            obs, _ = local.reset(seed=seed)
            r = env.reset(seed=seed, seats=["actor_1"], others="oracle")
            assert r.observation.agent == "actor_1" and plain(obs) == plain(r.observation.view)
            assert [t["agent"] for t in r.metadata["server_turns"]] == ["reasoner_0"]
            text = "\\boxed{7}" if seed % 2 else oracle(local.aec, "actor_1", obs)
            obs, reward, term, trunc, info = local.step(text)
            r = env.step(MarftAction(agent="actor_1", text=text))
            assert (r.done, r.reward) == (term or trunc, reward)
            assert r.metadata["verdict"] == plain(info["verdict"])
            assert [t["agent"] for t in r.metadata["server_turns"]] == ["verifier_2"]


def test_group_of_rollouts_shares_a_pinned_task(server):
    task_id = marft_envs.make(ENV_ID).unwrapped.dataset[5].id
    with MarftEnvClient(base_url=server).sync() as env:
        for seed in (0, 1, 2):
            r = env.reset(seed=seed, task_id=task_id)
            assert r.metadata["task_id"] == task_id
        assert env.state().task_id == task_id


# -- bad input: a clear error, and the server and the other sessions live on ---------------------


@pytest.fixture
def bystander(server):
    """A session in mid-episode; ``check()`` plays it to the end and compares with in-process."""
    actions, trace = in_process_trace(ENV_ID, {}, 11)
    env = MarftEnvClient(base_url=server).sync()
    env.connect()
    got = [served_point(env.reset(seed=11))]
    got.append(served_point(env.step(MarftAction(agent=actions[0][0], text=actions[0][1]))))

    def check():
        for agent, text in actions[1:]:
            got.append(served_point(env.step(MarftAction(agent=agent, text=text))))
        assert got == trace

    yield check
    env.close()


def raw_ws(url):
    return ws_sync.connect(url.replace("http://", "ws://") + "/ws", max_size=64 * 2**20)


def send(ws, message):
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=30))


def test_malformed_json_is_an_error_and_the_connection_still_works(server, bystander):
    with raw_ws(server) as ws:
        for junk in ("{not json", "", "[1, 2", "\x00\xff"):
            reply = send(ws, junk)
            assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON"
            assert "Invalid JSON" in reply["data"]["message"]
        reply = send(ws, {"type": "step", "data": {"agent": "reasoner_0"}})  # no text
        assert reply["data"]["code"] == "VALIDATION_ERROR"
        assert reply["data"]["errors"][0]["loc"][-1] == "text"
        reply = send(ws, {"type": "teleport"})
        assert reply["data"]["code"] == "UNKNOWN_TYPE"
        reply = send(ws, {"type": "reset", "data": {"seed": 3}})
        assert (
            reply["type"] == "observation" and reply["data"]["observation"]["agent"] == "reasoner_0"
        )
    bystander()


def test_json_that_is_not_an_object_ends_only_that_connection(server, bystander):
    """OpenEnv 0.10 reads ``message.get("type")`` outside its error handling: a JSON array or
    string ends the connection with SESSION_ERROR (documented); the server and others live on."""
    import websockets

    for junk in ("[1, 2]", '"hi"'):
        with raw_ws(server) as ws:
            reply = send(ws, junk)
            assert reply["type"] == "error" and reply["data"]["code"] == "SESSION_ERROR"
            with pytest.raises(websockets.exceptions.ConnectionClosed):
                send(ws, {"type": "reset", "data": {"seed": 1}})
    with MarftEnvClient(base_url=server).sync() as env:
        assert env.reset(seed=0).observation.agent == "reasoner_0"
    bystander()


def test_wrong_agent_is_refused_and_the_turn_stays(server, bystander):
    with MarftEnvClient(base_url=server).sync() as env:
        env.reset(seed=2)
        with pytest.raises(
            RuntimeError, match=r"it is 'reasoner_0''s turn .*not 'verifier_2'.*EXECUTION_ERROR"
        ):
            env.step(MarftAction(agent="verifier_2", text="hi"))
        with pytest.raises(RuntimeError, match="not 'nobody'"):
            env.step(MarftAction(agent="nobody", text="hi"))
        env.reset(seed=2, seats=["actor_1"], others="echo")
        with pytest.raises(RuntimeError, match=r"it is 'actor_1'"):
            env.step(MarftAction(agent="reasoner_0", text="hi"))
        r = env.step(MarftAction(agent="actor_1", text="hi"))
        assert r.done
    bystander()


def test_step_after_the_end_and_before_reset(server, bystander):
    with MarftEnvClient(base_url=server).sync() as env:
        # the client raises the server's one-line message as the local environment's error type
        with pytest.raises(EnvOrderError) as e:
            env.step(MarftAction(agent="reasoner_0", text="x"))
        assert str(e.value) == "step() called before reset(): call reset(seed=...) first"
        r = env.reset(seed=0, seats=["verifier_2"], others="echo")
        r = env.step(MarftAction(agent="verifier_2", text="\\boxed{1}"))
        assert r.done and r.observation.agent is None
        with pytest.raises(EnvOrderError) as e:
            env.step(MarftAction(agent="verifier_2", text="again"))
        assert str(e.value) == "the episode has ended: call reset() before step()"
        # other server errors stay OpenEnv's RuntimeError
        env.reset(seed=0)
        with pytest.raises(RuntimeError, match="turn") as e:
            env.step(MarftAction(agent="verifier_2", text="x"))
        assert not isinstance(e.value, EnvOrderError)
        assert env.reset(seed=0).observation.agent == "reasoner_0"  # the session lives on
    bystander()


def test_unknown_ids_and_bad_reset_fields_are_named(server, bystander):
    with pytest.raises(
        KeyError, match="No environment registered with id 'arith-9agent'.*Did you mean"
    ):
        create_server_app("arith-9agent")
    with pytest.raises(TypeError, match="unknown override"):
        create_server_app(ENV_ID, colour="blue")
    with MarftEnvClient(base_url=server).sync() as env:
        with pytest.raises(RuntimeError, match="No task 'no-such-task' in dataset 'arith'"):
            env.reset(seed=0, task_id="no-such-task")
        with pytest.raises(RuntimeError, match=r"seats must be .*agents of \['reasoner_0'"):
            env.reset(seats=["actor_9"])
        with pytest.raises(RuntimeError, match=r"need a policy: pass others="):
            env.reset(seats=["actor_1"])
        with pytest.raises(
            RuntimeError, match=r"one of \['echo', 'oracle', 'random'\], got 'human'"
        ):
            env.reset(seats=["actor_1"], others="human")
        with pytest.raises(RuntimeError, match=r"unknown reset field\(s\) \['colour'\]"):
            env.reset(colour="blue")
        with pytest.raises(RuntimeError, match="seed must be an integer"):
            env.reset(seed="zero")
        assert env.reset(seed=0).observation.agent == "reasoner_0"
    bystander()


def test_reset_fields_of_the_wrong_json_type_are_named_and_state_still_works(server, bystander):
    with raw_ws(server) as ws:
        for data, field in [
            ({"episode_id": 7}, "episode_id must be a string"),
            ({"episode_id": {"a": 1}}, "episode_id must be a string"),
            ({"task_id": [1]}, "task_id must be a string"),
            ({"seats": 5}, "seats must be a list of agent ids"),
            ({"seats": "actor_1", "others": "echo"}, "seats must be a list of agent ids"),
            ({"seats": [["actor_1"]], "others": "echo"}, "seats must be a list of agent ids"),
        ]:
            reply = send(ws, {"type": "reset", "data": data})
            assert reply["type"] == "error" and reply["data"]["code"] == "EXECUTION_ERROR"
            assert field in reply["data"]["message"], reply
            # the session is unharmed: its state message still answers
            assert send(ws, {"type": "state"})["type"] == "state"
    bystander()


def test_http_endpoints_answer_bad_input_with_400_and_point_at_the_websocket(server):
    import httpx

    r = httpx.post(
        f"{server}/step",
        json={"action": {"agent": "reasoner_0", "text": "x"}},
        timeout=HTTP_TIMEOUT,
    )
    assert r.status_code == 400 and "play episodes over the WebSocket /ws" in r.json()["detail"]
    r = httpx.post(f"{server}/reset", json={"task_id": "no-such-task"}, timeout=HTTP_TIMEOUT)
    assert r.status_code == 400 and "No task 'no-such-task'" in r.json()["detail"]
    r = httpx.post(f"{server}/reset", json={"seed": 3}, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200 and r.json()["observation"]["agent"] == "reasoner_0"


def test_cli_serve_names_an_unknown_id(capsys):
    assert cli_main(["serve", "arith-9agent", "--port", "1"]) == 2
    assert "No environment registered with id 'arith-9agent'" in capsys.readouterr().out


def test_ten_megabyte_action_is_refused_with_the_limit(server, bystander):
    with MarftEnvClient(base_url=server).sync() as env:
        env.reset(seed=1)
        with pytest.raises(
            RuntimeError, match=r"action text is 10,000,000 characters; .* at most 200,000"
        ):
            env.step(MarftAction(agent="reasoner_0", text="x" * 10_000_000))
        assert (
            env.step(MarftAction(agent="reasoner_0", text="short")).observation.agent == "actor_1"
        )
    bystander()


def test_client_disconnecting_mid_episode_frees_its_session():
    with running_server(ENV_ID, max_sessions=2) as url:
        survivor = MarftEnvClient(base_url=url).sync()
        survivor.connect()
        survivor.reset(seed=4)
        with raw_ws(url) as ws:  # the second (last) slot
            send(ws, {"type": "reset", "data": {"seed": 1}})
            send(ws, {"type": "step", "data": {"agent": "reasoner_0", "text": "half an episode"}})
            extra = MarftEnvClient(base_url=url).sync()  # over capacity: refused, clearly
            with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                extra.reset(seed=0)
            extra.close()
            ws.socket.shutdown(socket.SHUT_RDWR)  # vanish without a close handshake
        deadline = time.monotonic() + 10  # the server notices the vanished peer within moments
        while True:
            try:
                with MarftEnvClient(base_url=url).sync() as again:
                    assert again.reset(seed=0).observation.agent == "reasoner_0"
                break
            except RuntimeError as e:
                assert "CAPACITY_REACHED" in str(e) and time.monotonic() < deadline
                time.sleep(0.1)
        with MarftEnvClient(
            base_url=url
        ).sync() as again:  # and it is freed again after a clean close
            assert again.reset(seed=0).observation.agent == "reasoner_0"
        r = survivor.step(MarftAction(agent="reasoner_0", text="still here"))
        assert r.observation.agent == "actor_1"
        survivor.close()


def test_a_session_reaped_for_idleness_refuses_further_messages():
    """OpenEnv's reaper closes an idle session even while its WebSocket is connected (and frees
    its slot): that connection must get a clear error, not play on a closed environment."""
    with running_server(ENV_ID, max_sessions=1, session_timeout_s=1.0) as url:
        idle = MarftEnvClient(base_url=url).sync()
        idle.connect()
        idle.reset(seed=0)
        time.sleep(7)  # the reaper looks every max(timeout / 4, 5 s)
        with pytest.raises(RuntimeError, match="closed by the server .*idle"):
            idle.step(MarftAction(agent="reasoner_0", text="late"))
        with pytest.raises(RuntimeError, match="closed by the server"):
            idle.reset(seed=0)
        idle.close()
        with MarftEnvClient(base_url=url).sync() as fresh:
            assert fresh.reset(seed=0).observation.agent == "reasoner_0"


def test_openenv_yaml_is_a_valid_manifest_for_openenv():
    from pathlib import Path

    from openenv.validation.parsers.openenv_yaml import OpenEnvYamlParser

    import marft_envs.serve

    manifest = OpenEnvYamlParser().parse(Path(marft_envs.serve.__file__).parent)
    assert manifest.version == "0.1.0"


@pytest.mark.slow
def test_cli_serve_runs_a_server_that_plays_an_episode():
    import subprocess
    import sys

    import httpx

    from marft_envs.serve.testing import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "marft_envs.cli",
        "serve",
        "arith-2agent",
        "--port",
        str(port),
        "--max-sessions",
        "2",
        "--set",
        "reward_to=last",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "marft-envs serve did not answer /health"
                time.sleep(0.2)
        with MarftEnvClient(base_url=url).sync() as env:
            env.reset(seed=0, seats=["reasoner_0"], others="oracle")
            r = env.step(MarftAction(agent="reasoner_0", text="thinking"))
            # The oracle actor answers right; reward_to=last (a --set override) pays it alone.
            assert r.done and r.observation.rewards == {"reasoner_0": 0.0, "actor_1": 1.0}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
