"""Fixtures: a live leaderboard server per test module, tokens, and scripted bundles."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lb_helpers import LiveServer, cli, play_bundle, start_server

from leaderboard.db import Database, open_db


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> LiveServer:
    live = start_server(tmp_path_factory.mktemp("lb-server"))
    yield live
    live.stop()


@pytest.fixture(scope="module")
def db(server: LiveServer) -> Database:
    """The live server's database, opened from the test process (row counts, tokens)."""
    return open_db(server.db_url)


@pytest.fixture(scope="module")
def token(server: LiveServer) -> str:
    """A token issued with the real CLI."""
    return cli("token", "create", "--name", "test-lab", "--db", server.db_url).stdout.strip()


@pytest.fixture(scope="session")
def honest_bundle():
    """arith-2agent, 5 tasks x 2 seeds, tasks 0, 2, 4 right: true score 0.6."""
    return play_bundle(seeds=(0, 1), correct=lambda i: i % 2 == 0, claimed_score=0.6)
