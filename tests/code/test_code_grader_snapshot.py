"""A code verdict may change only with a new code ``GRADER_VERSION`` (tests/grader_snapshots.py).

Runs in the most isolating sandbox that works here (every backend must grade alike).
"""

from __future__ import annotations

import pytest

from marft_envs.code.sandbox.select import probe
from tests.grader_snapshots import code_verdicts, load_snapshot, snapshot_message


@pytest.fixture
def isolating_or_plain(sandbox_factory):
    name = next((b for b in ("docker", "bwrap") if probe(b) is None), "subprocess")
    return sandbox_factory(name)


def test_code_verdicts_match_the_snapshot_of_their_version(isolating_or_plain) -> None:
    version, now = code_verdicts(isolating_or_plain)
    recorded = load_snapshot("code")
    assert sum(v is not None for v in now.values()) >= 40, "too few programs ran to compare"
    message = snapshot_message("code", recorded, version, now)
    assert message is None, message
