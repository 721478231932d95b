"""Shared helpers for the leaderboard tests and benchmark: play scripted bundles, run a live server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx

import marft_envs
from leaderboard.schema import Bundle

# Requests from the tests: a loaded 2-core CI machine can take longer than httpx's 5 s default.
HTTP_TIMEOUT = 60.0
REPO = Path(__file__).resolve().parents[2]


def answer_text(agent: str, answer: str) -> str:
    return f"{agent}: I worked it out step by step.\nThe answer is \\boxed{{{answer}}}."


def play_bundle(
    env_id: str = "arith-2agent",
    *,
    n_tasks: int = 5,
    seeds: Iterable[int] = (0,),
    correct: Callable[[int], bool] = lambda i: True,
    method: str = "marft",
    model: str = "scripted-oracle",
    claimed_score: float | None = None,
    respond: Callable[[str, object, int], str] | None = None,
    **env_kwargs: object,
) -> Bundle:
    """Play the first ``n_tasks`` tasks of ``env_id`` once per seed with a scripted team.

    By default every agent ends its response with a boxed answer: the reference for task
    ``i`` when ``correct(i)``, else ``wrong``; ``respond(agent, task, i)`` replaces that
    (code tasks). Episodes go through the real environment (reset, agent_iter, step) and
    ``Bundle.from_episodes``, exactly as a trainer would.
    """
    env = marft_envs.make(env_id, **env_kwargs)
    ids = env.unwrapped.dataset.ids[:n_tasks]
    episodes = []
    for seed in seeds:
        for i, task_id in enumerate(ids):
            env.reset(seed=seed, options={"task_id": task_id})
            task = env.unwrapped.task
            answer = task.answer if correct(i) else "wrong"
            for agent in env.agent_iter():
                _, _, term, trunc, _ = env.last()
                if term or trunc:
                    env.step(None)
                else:
                    env.step(respond(agent, task, i) if respond else answer_text(agent, answer))
            episodes.append(env.episode())
    env.close()
    return Bundle.from_episodes(
        env,
        episodes,
        method=method,
        model=model,
        config={"policy": "scripted", "lr": 1e-5},
        seeds=list(seeds),
        claimed_score=claimed_score,
        dataset_size=n_tasks,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``python -m leaderboard.cli ARGS`` in the repository root."""
    proc = subprocess.run(
        [sys.executable, "-m", "leaderboard.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"leaderboard.cli {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


@dataclass
class LiveServer:
    """A real ``marft-leaderboard serve`` process on a loopback port."""

    url: str
    db_url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def sandbox_backend() -> str:
    """The code sandbox the test server re-grades with: bubblewrap, or (only where it is
    missing) the non-isolating subprocess backend."""
    return "bwrap" if shutil.which("bwrap") else "subprocess"


def start_server(tmp: Path, *extra: str) -> LiveServer:
    """Start the server with uvicorn in a background process and wait until it answers."""
    db_url = f"sqlite:///{tmp / 'leaderboard.db'}"
    port = free_port()
    log = tmp / "server.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "leaderboard.cli",
            "serve",
            "--db",
            db_url,
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--sandbox",
            sandbox_backend(),
            *extra,
        ],
        cwd=REPO,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/api/health", timeout=2).status_code == 200:
                return LiveServer(url, db_url, proc, log)
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"server did not answer within 120 s:\n{log.read_text()}")


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def save_screenshot(page, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot in pytest's ``tmp_path``; copied over ``docs/img/<name>`` only when
    ``MARFT_UPDATE_SCREENSHOT=1`` (a deliberate refresh of the docs): a test run never edits the
    checkout."""
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("MARFT_UPDATE_SCREENSHOT") == "1":
        shutil.copy(shot, REPO / "docs" / "img" / name)
    return shot


def launch_chromium(playwright):
    """The system Chromium (Debian package; see scripts/install_browser.sh), headless."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} not found: run scripts/install_browser.sh")
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
