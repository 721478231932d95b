"""Which grader version grades an environment now, and which stored grades it makes stale.

A stored grade is *current* when the grader version that produced it equals the version of the
verifier that the registered environment uses now (``marft_envs.grader_version``); otherwise it
is *stale* until ``marft-leaderboard regrade`` re-grades it. See docs/leaderboard.md.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from leaderboard.models import LEGACY_GRADER_VERSION

__all__ = ["LEGACY_GRADER_VERSION", "current_grader_version", "grading_status"]

# env id -> (the EnvSpec it was built from, its verifier). Keyed on the spec object so that a
# re-registered id is looked up again; the version is read from the verifier on every call.
_VERIFIERS: dict[str, tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def current_grader_version(env_id: str) -> str | None:
    """The grader version that grades ``env_id`` now; None if the id is not registered here or
    its environment cannot be built here (its data is missing, say)."""
    import marft_envs

    try:  # an unversioned id (a row stored before versions) resolves to its newest version
        spec = marft_envs.spec(env_id)
    except KeyError:
        return None
    with _LOCK:
        hit = _VERIFIERS.get(env_id)
        if hit is None or hit[0] is not spec:
            try:
                env = marft_envs.make(spec)  # by spec: an older version is no cause to warn
            except (OSError, ValueError, KeyError, TypeError):
                return None
            try:
                hit = _VERIFIERS[env_id] = (spec, env.unwrapped.verifier)
            finally:
                env.close()
    return marft_envs.grader_version(hit[1])


def grading_status(row: Mapping[str, Any]) -> dict[str, Any]:
    """``{"current_grader_version", "stale"}`` for a stored row with ``env_id`` and
    ``grader_version`` (a submission summary)."""
    current = current_grader_version(row["env_id"])
    return {"current_grader_version": current, "stale": row["grader_version"] != current}
