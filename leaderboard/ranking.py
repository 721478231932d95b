"""Leaderboard rows in ranking order: the rule that never mixes graders.

Only rows graded by the current grader version of their environment are ranked (``rank`` 1, 2,
... within each environment family); rows graded by another version are ``stale``: listed after
the ranked ones with ``rank`` None, their score shown with the version that produced it, until
they are re-graded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
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
}


def sort_rows(rows: list[dict[str, Any]], sort: str, order: str) -> list[dict[str, Any]]:
    """Rows sorted by a key of :data:`SORT_KEYS` (unknown keys: by score)."""
    key = SORT_KEYS.get(sort, SORT_KEYS["score"])
    return sorted(rows, key=key, reverse=order != "asc")


def rank_rows(
    rows: Iterable[dict[str, Any]], sort: str = "score", order: str = "desc"
) -> list[dict[str, Any]]:
    """Summary rows with ``current_grader_version``, ``stale`` and ``rank`` added: the current
    rows sorted and ranked, then the stale rows sorted the same way (``rank`` None).

    Ranks count within each environment family (``env_family``, one table on the page): the
    families are graded by different graders (math, code), so one ranking across them would mix
    graders too.
    """
    rows = [{**r, **grading_status(r)} for r in rows]
    current = sort_rows([r for r in rows if not r["stale"]], sort, order)
    stale = sort_rows([r for r in rows if r["stale"]], sort, order)
    seen: Counter[str] = Counter()
    ranked = []
    for r in current:
        seen[r["env_family"]] += 1
        ranked.append({**r, "rank": seen[r["env_family"]]})
    return ranked + [{**r, "rank": None} for r in stale]


def leaderboard_rows(
    submissions: Iterable[Submission], sort: str = "score", order: str = "desc"
) -> list[dict[str, Any]]:
    """The leaderboard of ``submissions`` (see :func:`rank_rows`)."""
    return rank_rows((submission_summary(s) for s in submissions), sort, order)
