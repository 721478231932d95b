"""Leaderboard rows in ranking order: the rules that never mix graders or environment versions.

Rows are ranked (``rank`` 1, 2, ...) within one *ranking group*: an environment family, one
environment version and one set of settings (``arith`` at ``v1`` on the registered settings:
``arith-2agent-v1``, ``arith-3agent-v1``, ...; all ids of a family share their versions, see
tests/envs/test_env_versions.py); a bundle made on ``-v1`` is ranked under v1 only, also after a
``-v2`` exists, and a bundle that overrode settings (``horizon=2``) is ranked only with rows of
the same overrides (group ``arith-v1 horizon=2``). Within a group only
rows graded by the current grader version of their environment are ranked; rows graded by
another version are ``stale``: listed after the ranked ones with ``rank`` None, their score shown
with the version that produced it, until they are re-graded. Rows stored from bundles without an
environment fingerprint (before versions) are ``unversioned``: listed, never ranked.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from leaderboard.graders import grading_status
from leaderboard.models import Submission, submission_summary

SORT_KEYS = {
    "score": lambda r: r["verified_score"],
    "claimed": lambda r: -1.0 if r["claimed_score"] is None else r["claimed_score"],
    "team_size": lambda r: r["team_size"],
    "method": lambda r: r["method"],
    "model": lambda r: r["model"].lower(),
    "date": lambda r: r["created_at"] or "",
    "env": lambda r: r["env_id"],
    "version": lambda r: -1 if r.get("env_version") is None else r["env_version"],
}


def overrides_label(overrides: Mapping[str, Any] | None) -> str:
    """``"feedback=verdict horizon=2"`` (sorted by name; JSON values, strings bare); ``""`` for
    none (the registered settings)."""
    return " ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}"
        for k, v in sorted((overrides or {}).items())
    )


def ranking_group(row: Mapping[str, Any]) -> str:
    """The group a row is ranked in: ``"<family>-v<N>"`` on the registered settings,
    ``"<family>-v<N> horizon=2"`` with overrides (``env_overrides``), or
    ``"<family>-unversioned"`` for a row without an environment version (never ranked)."""
    version = row.get("env_version")
    if version is None:
        return f"{row['env_family']}-unversioned"
    label = overrides_label(row.get("env_overrides"))
    return f"{row['env_family']}-v{version}" + (f" {label}" if label else "")


def sort_rows(rows: list[dict[str, Any]], sort: str, order: str) -> list[dict[str, Any]]:
    """Rows sorted by a key of :data:`SORT_KEYS` (unknown keys: by score)."""
    key = SORT_KEYS.get(sort, SORT_KEYS["score"])
    return sorted(rows, key=key, reverse=order != "asc")


def rank_rows(
    rows: Iterable[dict[str, Any]], sort: str = "score", order: str = "desc"
) -> list[dict[str, Any]]:
    """Summary rows with ``current_grader_version``, ``stale``, ``unversioned``, ``group`` and
    ``rank`` added (and ``overrides``, :func:`overrides_label`): the current versioned rows
    sorted and ranked, then the stale and the unversioned rows sorted the same way (``rank``
    None).

    Ranks count within each ranking group (:func:`ranking_group`, one table on the page): the
    families are graded by different graders (math, code), and different versions or settings
    of an environment show agents different things, so one ranking across either would mix them.
    """
    rows = [
        {
            **r,
            **grading_status(r),
            "unversioned": r.get("env_version") is None,
            "group": ranking_group(r),
            "overrides": overrides_label(r.get("env_overrides")),
        }
        for r in rows
    ]
    current = sort_rows([r for r in rows if not r["stale"] and not r["unversioned"]], sort, order)
    rest = sort_rows([r for r in rows if r["stale"] or r["unversioned"]], sort, order)
    seen: Counter[str] = Counter()
    ranked = []
    for r in current:
        seen[r["group"]] += 1
        ranked.append({**r, "rank": seen[r["group"]]})
    return ranked + [{**r, "rank": None} for r in rest]


def leaderboard_rows(
    submissions: Iterable[Submission], sort: str = "score", order: str = "desc"
) -> list[dict[str, Any]]:
    """The leaderboard of ``submissions`` (see :func:`rank_rows`)."""
    return rank_rows((submission_summary(s) for s in submissions), sort, order)
