"""Sandbox fixtures: one sandbox per backend for the whole session.

A backend that cannot run here is skipped, unless MARFT_REQUIRE_SANDBOXES is set
(the Makefile / CI sets it): then its tests FAIL, so CI never passes without
really exercising docker and bubblewrap. The docker fixture starts dockerd with
scripts/services.sh when no daemon answers, and stops it at the end of the
session only if it started it.
"""

from __future__ import annotations

import pytest

from marft_envs.code.sandbox import get_sandbox
from marft_envs.code.sandbox.select import probe
from tests.services import docker_daemon, require_sandboxes

ISOLATING = ("docker", "bwrap")
ALL_BACKENDS = ("docker", "bwrap", "subprocess")
#: Small limits keep the hostile suite fast; timeouts are per test.
TEST_LIMITS = {
    "timeout": 5.0,
    "memory_mb": 256,
    "pids": 48,
    "output_bytes": 200_000,
    "disk_mb": 16,
    "extra_files_bytes": 100_000,
    "nofile": 128,
}


def _unusable(name: str, reason: str) -> None:
    message = f"sandbox backend {name!r} is not usable here: {reason}"
    if require_sandboxes():
        pytest.fail(
            f"{message} (MARFT_REQUIRE_SANDBOXES is set, so this is an error)", pytrace=False
        )
    pytest.skip(message)


@pytest.fixture(scope="session")
def docker_service():
    """None when docker is usable (daemon + image), else the reason. Starts dockerd if needed."""
    with docker_daemon() as reason:
        yield reason


@pytest.fixture(scope="session")
def sandbox_factory(docker_service):
    """``make(name)`` -> the session's sandbox of that backend (skips/fails if unusable)."""
    cache: dict[str, object] = {}

    def make(name: str):
        if name not in cache:
            reason = docker_service if name == "docker" else probe(name)
            if reason is not None:
                _unusable(name, reason)
            cache[name] = get_sandbox(name, **TEST_LIMITS)
        return cache[name]

    yield make
    for sb in cache.values():
        sb.close()


@pytest.fixture(params=ALL_BACKENDS)
def sandbox(request, sandbox_factory):
    """Each backend in turn (subprocess included)."""
    return sandbox_factory(request.param)


@pytest.fixture(params=ISOLATING)
def isolating_sandbox(request, sandbox_factory):
    """docker and bwrap in turn."""
    return sandbox_factory(request.param)
