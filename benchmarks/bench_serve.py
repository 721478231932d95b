"""Served throughput: agent-turns per second with 64 concurrent sessions, over OpenEnv's `/ws`
(one session per connection) and over the batched extension `/marft/ws` (64 sessions on one
connection, one frame per step of all of them), beside the same episodes stepped in process (the
real verifier everywhere).

    PYTHONPATH=. python benchmarks/bench_serve.py [--env arith-3agent] [--sessions 64]
                                                  [--seconds 5] [--repeats 3]

The server is `marft-envs serve` in its own process on a loopback port; the clients
(`MarftEnvClient`s, or one `MarftBatchClient`) run on one asyncio loop in this process. The three
measurements alternate, `--repeats` times, and the medians are printed: on a shared machine the
ratios of one run are what to compare. Target (issues 14, 29): served >= 25% of in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import marft_envs
from marft_envs.policies import episode_over

TARGET = 0.25


def action(agent: str, round_: int) -> str:
    return f"{agent}, round {round_}: adding both sides.\nThe answer is \\boxed{{42}}."


def in_process_turns_per_second(env_id: str, seconds: float) -> float:
    env = marft_envs.make(env_id)
    turns, ep, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.reset(seed=ep)
        ep += 1
        while not episode_over(env):
            agent = env.agent_selection
            obs = env.observe(agent)
            env.step(action(agent, obs["round"]))
            turns += 1
    return turns / (time.perf_counter() - start)


async def session(
    url: str,
    seed0: int,
    ready: asyncio.Barrier,
    clock: list[float],
    seconds: float,
    counts: list[int],
) -> None:
    from marft_envs.serve import MarftAction, MarftEnvClient

    async with MarftEnvClient(base_url=url, message_timeout_s=120, connect_timeout_s=120) as env:
        result = await env.reset(seed=seed0)
        await ready.wait()  # every session connected: time the steady state only
        if not clock:
            clock.append(time.perf_counter())
        ep = 1
        while time.perf_counter() < clock[0] + seconds:
            if result.done:
                result = await env.reset(seed=seed0 + ep)
                ep += 1
            obs = result.observation
            text = action(obs.agent, obs.view["round"])
            result = await env.step(MarftAction(agent=obs.agent, text=text))
            counts[0] += 1


async def served_turns_per_second(url: str, sessions: int, seconds: float) -> tuple[float, int]:
    counts: list[int] = [0]
    clock: list[float] = []
    ready = asyncio.Barrier(sessions)
    await asyncio.gather(
        *(session(url, 1000 * i, ready, clock, seconds, counts) for i in range(sessions))
    )
    return counts[0] / (time.perf_counter() - clock[0]), counts[0]


async def batched_turns_per_second(
    url: str, sessions: int, seconds: float, in_flight: int = 2
) -> tuple[float, int]:
    """One `MarftBatchClient` with `sessions` sessions in `in_flight` groups, each group one
    frame at a time (steps for its running episodes, resets for its finished ones; resets are not
    counted as turns). Two groups pipeline: the server plays one frame while this side builds the
    other."""
    from marft_envs.serve import MarftBatchClient

    turns = [0]

    async def group(client: Any, ids: list[int], deadline: float) -> None:
        episodes = dict.fromkeys(ids, 0)
        replies = await client.send(
            [{"session": i, "type": "reset", "data": {"seed": 1000 * i}} for i in ids]
        )
        while time.perf_counter() < deadline:
            items = []
            for r in replies:
                i, data = r["session"], r["data"]
                if data["done"]:
                    episodes[i] += 1
                    reset = {"seed": 1000 * i + episodes[i]}
                    items.append({"session": i, "type": "reset", "data": reset})
                else:
                    agent = data["observation"]["agent"]
                    text = action(agent, data["observation"]["view"]["round"])
                    step = {"agent": agent, "text": text}
                    items.append({"session": i, "type": "step", "data": step})
                    turns[0] += 1
            replies = await client.send(items)

    async with MarftBatchClient(url, sessions, message_timeout_s=120, connect_timeout_s=120) as c:
        start = time.perf_counter()
        groups = [list(range(sessions))[g::in_flight] for g in range(in_flight)]
        await asyncio.gather(*(group(c, ids, start + seconds) for ids in groups))
        return turns[0] / (time.perf_counter() - start), turns[0]


def cpu_seconds(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def start_server(env_id: str, port: int, sessions: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "marft_envs.cli",
            "serve",
            env_id,
            "--port",
            str(port),
            "--max-sessions",
            str(sessions),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read()}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the server at {url} did not answer /health in {timeout:.0f} s")


def measure_served(url: str, pid: int, run: Any) -> tuple[float, float, float]:
    """(agent-turns/s, server CPU ms per turn, client CPU ms per turn) of one served run."""
    server_cpu0, client_cpu0 = cpu_seconds(pid), time.process_time()
    rate, turns = asyncio.run(run)
    server_ms = 1e3 * (cpu_seconds(pid) - server_cpu0) / turns
    return rate, server_ms, 1e3 * (time.process_time() - client_cpu0) / turns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--env", default="arith-3agent")
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    from marft_envs.serve.testing import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(args.env, port, args.sessions)
    local: list[float] = []
    plain: list[tuple[float, float, float]] = []
    batched: list[tuple[float, float, float]] = []
    try:
        wait_healthy(url, proc)
        # warm-up: sessions, imports, the first episodes' caches
        asyncio.run(served_turns_per_second(url, args.sessions, 1.0))
        asyncio.run(batched_turns_per_second(url, args.sessions, 1.0))
        for _ in range(args.repeats):  # alternate, so that load from elsewhere hits all three
            local.append(in_process_turns_per_second(args.env, args.seconds))
            run = served_turns_per_second(url, args.sessions, args.seconds)
            plain.append(measure_served(url, proc.pid, run))
            run = batched_turns_per_second(url, args.sessions, args.seconds)
            batched.append(measure_served(url, proc.pid, run))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    med = statistics.median
    local_m = med(local)
    ratios = {
        "/ws": med(r[0] / lo for r, lo in zip(plain, local, strict=True)),
        "/marft/ws": med(r[0] / lo for r, lo in zip(batched, local, strict=True)),
    }
    load = os.getloadavg()[0]
    print(
        f"bench_serve  env={args.env}  cores={os.cpu_count()}  load average={load:.1f}  "
        f"sessions={args.sessions}  seconds={args.seconds:g}  repeats={args.repeats} (medians)"
    )
    print(f"  in-process (one env, sequential)           {local_m:10.1f} agent-turns/s")
    for name, runs in (
        ("OpenEnv /ws, a connection each", plain),
        ("batched /marft/ws, one connection", batched),
    ):
        print(
            f"  served, {name:<34} {med(r[0] for r in runs):10.1f} agent-turns/s   CPU per turn: "
            f"server {med(r[1] for r in runs):.3f} ms, clients {med(r[2] for r in runs):.3f} ms"
        )
    for name, ratio in ratios.items():
        print(
            f"  served / in-process, {name:<10}            {ratio:10.1%}   "
            f"(target >= {TARGET:.0%}: "
            f"{'met' if ratio >= TARGET else 'MISSED'})"
        )


if __name__ == "__main__":
    main()
