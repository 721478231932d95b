"""The episode rules every environment shares and its fingerprint records: how a seed picks a
task, and the rules' version. Its own module so that :mod:`marft_envs.flexmg` (which plays by
them) and :mod:`marft_envs.fingerprint` (which hashes them) both import it without a cycle."""

from __future__ import annotations

import hashlib

#: The episode rules' version, part of every environment fingerprint (marft_envs.fingerprint):
#: bump it in the same commit as a change of what reset/step do with the same settings (how the
#: task is chosen, when an episode ends, how rewards are attributed), and bump the ids it changes.
EPISODE_RULES_VERSION = 1


def task_index(seed: int, episode_index: int, n: int) -> int:
    """Per-item seeding: the task of episode k after ``reset(seed=s)`` depends on (s, k) only."""
    digest = hashlib.sha256(f"{seed}:{episode_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % n
