"""Served throughput: agent-turns per second over OpenEnv's WebSocket, 64 concurrent sessions,
beside the same episodes stepped in process (the real verifier in both).

    PYTHONPATH=. python benchmarks/bench_serve.py [--env arith-3agent] [--sessions 64] [--seconds 10]

The server is `marft-envs serve` in its own process on a loopback port; the clients are
`MarftEnvClient`s on one asyncio loop in this process. Target (issue 14): served >= 25% of
in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--env", default="arith-3agent")
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()

    from marft_envs.serve.testing import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(args.env, port, args.sessions)
    try:
        wait_healthy(url, proc)
        asyncio.run(served_turns_per_second(url, args.sessions, 1.0))  # warm-up: sessions, imports
        server_cpu0, client_cpu0 = cpu_seconds(proc.pid), time.process_time()
        served, turns = asyncio.run(served_turns_per_second(url, args.sessions, args.seconds))
        server_cpu = cpu_seconds(proc.pid) - server_cpu0
        client_cpu = time.process_time() - client_cpu0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    local = in_process_turns_per_second(args.env, args.seconds)
    ratio = served / local
    load = os.getloadavg()[0]
    print(
        f"bench_serve  env={args.env}  cores={os.cpu_count()}  load average={load:.1f}  "
        f"sessions={args.sessions}  seconds={args.seconds:g}"
    )
    print(f"  in-process (one env, sequential)       {local:10.1f} agent-turns/s")
    print(f"  served over WebSocket ({args.sessions} sessions)    {served:10.1f} agent-turns/s")
    print(
        f"  CPU per served turn: server {1e3 * server_cpu / turns:.2f} ms, "
        f"clients {1e3 * client_cpu / turns:.2f} ms"
    )
    print(
        f"  served / in-process                    {ratio:10.1%}   (target >= {TARGET:.0%}: "
        f"{'met' if ratio >= TARGET else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
