"""The database tables (SQLAlchemy 2.0 ORM). Schema changes go through Alembic (``migrations/``)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


LEGACY_GRADER_VERSION = "legacy"
"""The grader version of grades stored before versions were recorded (migration 0002)."""


class Base(DeclarativeBase):
    pass


class Token(Base):
    """A submission token. Only the sha256 of the secret is stored; revoked tokens keep their
    row."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Submission(Base):
    """One accepted, re-graded bundle: its metadata and the verified score.

    ``grader_version`` names the grader that produced the stored score; ``previous_score`` and
    ``previous_grader_version`` keep the grade it replaced when it was last re-graded (None
    until then). ``bundle_grader_version`` is the bundle's own (that of ``claimed_score``).
    ``env_version`` (the N of ``env_id``'s ``-vN``) and ``env_fingerprint`` (the environment
    fingerprint the leaderboard re-computed and matched) are None for rows from bundles written
    before environment versions (schema 1 and 2): those rows are *unversioned*, never ranked.
    ``env_overrides`` are the bundle's settings that differ from the registered ones
    (``{"horizon": 2}``; ``regrade.ranking_overrides``): rows are ranked only with rows of the same
    overrides. None (rows stored before migration 0004) reads as no overrides.
    """

    __tablename__ = "submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("tokens.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # sha256 of the canonical bundle JSON: the same bundle cannot be listed twice.
    bundle_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    schema_version: Mapped[int] = mapped_column(Integer)
    env_id: Mapped[str] = mapped_column(String(200), index=True)
    env_family: Mapped[str] = mapped_column(String(200), index=True)
    env_version: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    env_fingerprint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # the digests of the fingerprint's parts, so that a re-grade re-checks the whole fingerprint
    env_fingerprint_parts: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    env_overrides: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    env_spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    dataset_name: Mapped[str] = mapped_column(String(200))
    dataset_split: Mapped[str] = mapped_column(String(200))
    dataset_hash: Mapped[str] = mapped_column(String(64))
    package_version: Mapped[str] = mapped_column(String(100))
    method: Mapped[str] = mapped_column(String(50))
    model: Mapped[str] = mapped_column(String(500))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    seeds: Mapped[list[int]] = mapped_column(JSON)
    team_size: Mapped[int] = mapped_column(Integer)
    n_tasks: Mapped[int] = mapped_column(Integer)
    n_episodes: Mapped[int] = mapped_column(Integer)
    verified_score: Mapped[float] = mapped_column(Float)
    ci_low: Mapped[float] = mapped_column(Float)
    ci_high: Mapped[float] = mapped_column(Float)
    claimed_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    grader_version: Mapped[str] = mapped_column(String(100), index=True)
    previous_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    previous_grader_version: Mapped[str | None] = mapped_column(String(100), nullable=True)
    bundle_grader_version: Mapped[str | None] = mapped_column(String(100), nullable=True)

    episodes: Mapped[list[EpisodeRow]] = relationship(
        back_populates="submission", order_by="EpisodeRow.index", cascade="all, delete-orphan"
    )


class EpisodeRow(Base):
    """One re-graded episode of a submission, with its transcript."""

    __tablename__ = "episodes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    task_id: Mapped[str] = mapped_column(String(500))
    seed: Mapped[int] = mapped_column(Integer)
    turns: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    final_output: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Float)
    correct: Mapped[bool] = mapped_column(Boolean)
    answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    reason: Mapped[str] = mapped_column(Text)
    claimed_score: Mapped[float | None] = mapped_column(Float, nullable=True)

    submission: Mapped[Submission] = relationship(back_populates="episodes")


def _iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.isoformat(timespec="seconds")


def submission_summary(sub: Submission) -> dict[str, Any]:
    """The JSON view of a submission without episodes (leaderboard rows, CSV/Markdown export)."""
    return {
        "id": sub.id,
        "env_id": sub.env_id,
        "env_family": sub.env_family,
        "env_version": sub.env_version,
        "env_fingerprint": sub.env_fingerprint,
        "env_overrides": dict(sub.env_overrides or {}),
        "method": sub.method,
        "model": sub.model,
        "team_size": sub.team_size,
        "verified_score": sub.verified_score,
        "ci_low": sub.ci_low,
        "ci_high": sub.ci_high,
        "claimed_score": sub.claimed_score,
        "grader_version": sub.grader_version,
        "previous_score": sub.previous_score,
        "previous_grader_version": sub.previous_grader_version,
        "n_tasks": sub.n_tasks,
        "n_episodes": sub.n_episodes,
        "dataset": {"name": sub.dataset_name, "split": sub.dataset_split, "hash": sub.dataset_hash},
        "seeds": sub.seeds,
        "package_version": sub.package_version,
        "created_at": _iso(sub.created_at),
    }


def episode_dict(ep: EpisodeRow) -> dict[str, Any]:
    """The JSON view of one re-graded episode."""
    return {
        "index": ep.index,
        "task_id": ep.task_id,
        "seed": ep.seed,
        "score": ep.score,
        "correct": ep.correct,
        "answer": ep.answer,
        "reason": ep.reason,
        "claimed_score": ep.claimed_score,
        "final_output": ep.final_output,
        "turns": ep.turns,
    }


def submission_detail(sub: Submission) -> dict[str, Any]:
    """A submission with its config, env spec and every episode."""
    return {
        **submission_summary(sub),
        "schema_version": sub.schema_version,
        "bundle_grader_version": sub.bundle_grader_version,
        "env_spec": sub.env_spec,
        "config": sub.config,
        "episodes": [episode_dict(e) for e in sub.episodes],
    }
