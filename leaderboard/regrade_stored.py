"""Re-grade stored submissions whose grader version is not the current one.

``marft-leaderboard regrade`` runs :func:`regrade_stale`. Each stale submission is rebuilt as the
bundle it was accepted as (:func:`stored_bundle`), re-graded with the same rules as a new
submission (:func:`leaderboard.regrade.regrade`), and its new grade replaces the stored one in a
single transaction (:meth:`leaderboard.db.Database.replace_grade`). A submission that cannot be
re-graded (its verifier's infrastructure keeps failing, or it breaks today's rules) keeps its
stored grade and is reported; running again re-grades only what is still stale.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from leaderboard.db import Database
from leaderboard.graders import current_grader_version
from leaderboard.models import Submission
from leaderboard.regrade import BundleRejected, GradingUnavailable, regrade
from leaderboard.schema import Bundle, DatasetRef, EpisodeRecord, FingerprintRef, TurnRecord

Status = Literal["regraded", "infra_error", "rejected", "skipped"]


@dataclass(frozen=True)
class RegradeOutcome:
    """What happened to one stale submission.

    ``status``: ``regraded`` (the new grade is stored); ``infra_error`` (the verifier's
    infrastructure kept failing: the stored grade is untouched, try again later); ``rejected``
    (the stored bundle breaks today's rules or its environment is gone: untouched);
    ``skipped`` (someone else re-graded it meanwhile).
    """

    submission_id: int
    env_id: str
    status: Status
    old_version: str
    old_score: float
    new_version: str | None = None
    new_score: float | None = None
    reason: str = ""


def stored_bundle(sub: Submission) -> Bundle:
    """The bundle a stored submission (loaded with its episodes) was accepted as.

    ``dataset.size`` is the stored number of tasks: the same evaluation set (the first
    ``n_tasks`` tasks of the split) whether the bundle named a size or the whole split. A row
    stored from a versioned bundle keeps its schema version and fingerprint (so a re-grade
    checks it again); an unversioned row comes back without one.
    """
    fingerprint = None
    if sub.env_fingerprint is not None and sub.env_fingerprint_parts is not None:
        fingerprint = FingerprintRef(digest=sub.env_fingerprint, parts=sub.env_fingerprint_parts)
    return Bundle(
        schema_version=sub.schema_version,
        fingerprint=fingerprint,
        env_id=sub.env_id,
        env_spec=sub.env_spec,
        dataset=DatasetRef(
            name=sub.dataset_name, split=sub.dataset_split, hash=sub.dataset_hash, size=sub.n_tasks
        ),
        package_version=sub.package_version,
        method=sub.method,  # type: ignore[arg-type]
        model=sub.model,
        config=sub.config,
        seeds=list(sub.seeds),
        team_size=sub.team_size,
        claimed_score=sub.claimed_score,
        grader_version=sub.bundle_grader_version,
        episodes=[
            EpisodeRecord(
                task_id=e.task_id,
                seed=e.seed,
                turns=[TurnRecord(**t) for t in e.turns],
                final_output=e.final_output,
                claimed_score=e.claimed_score,
            )
            for e in sub.episodes
        ],
    )


def stale_submissions(db: Database, env: str | None = None) -> list[Submission]:
    """Stored submissions (without episodes) not graded by their environment's current grader."""
    return [
        s for s in db.submissions(env=env) if s.grader_version != current_grader_version(s.env_id)
    ]


def regrade_submission(
    db: Database, sub_id: int, server_overrides: Mapping[str, Any] | None = None
) -> RegradeOutcome:
    """Re-grade one stored submission and store the new grade in one transaction.

    Grading runs outside the transaction (it can take minutes for code); the write then
    checks the stored grader version is still the one that was graded over.
    """
    sub = db.submission(sub_id)
    if sub is None:
        raise KeyError(f"no submission with id {sub_id}")
    base: dict[str, Any] = {
        "submission_id": sub.id,
        "env_id": sub.env_id,
        "old_version": sub.grader_version,
        "old_score": sub.verified_score,
    }
    try:
        grade = regrade(stored_bundle(sub), server_overrides)
    except GradingUnavailable as e:
        return RegradeOutcome(**base, status="infra_error", reason=str(e))
    except OSError as e:  # the server's data or sandbox is not there: not the submission's fault
        return RegradeOutcome(**base, status="infra_error", reason=f"{type(e).__name__}: {e}")
    except (BundleRejected, ValidationError) as e:
        return RegradeOutcome(**base, status="rejected", reason=str(e))
    stored = db.replace_grade(sub.id, sub.grader_version, grade)
    return RegradeOutcome(
        **base,
        status="regraded" if stored else "skipped",
        new_version=grade.grader_version,
        new_score=grade.score,
        reason="" if stored else "its stored grade changed while it was being re-graded",
    )


def regrade_stale(
    db: Database, server_overrides: Mapping[str, Any] | None = None, env: str | None = None
) -> Iterator[RegradeOutcome]:
    """Re-grade every stale submission (of ``env`` only, if given), one transaction each,
    yielding each outcome as it is known. Idempotent: a second run finds nothing stale."""
    for sub in stale_submissions(db, env):
        yield regrade_submission(db, sub.id, server_overrides)
