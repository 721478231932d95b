"""Database access: engine, Alembic migrations on start-up, tokens, submissions, queries.

Any SQLAlchemy URL works (``sqlite:///lb.db`` by default, ``postgresql://...`` for a
shared server). :func:`open_db` upgrades the schema to the latest Alembic revision
before anything else touches it.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from alembic import command
from alembic.config import Config
from sqlalchemy import (
    CursorResult,
    Engine,
    create_engine,
    event,
    func,
    make_url,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload, sessionmaker
from sqlalchemy.pool import StaticPool

from leaderboard.models import Base, EpisodeRow, Submission, Token, utcnow

if TYPE_CHECKING:
    from leaderboard.regrade import Grade

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
TOKEN_PREFIX = "mlb_"


class DuplicateSubmission(ValueError):
    """The exact same bundle was already accepted."""


class TokenError(ValueError):
    """A token name is taken, or no such token exists."""


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cur = dbapi_connection.cursor()
    # WAL lets readers run while one writer commits; busy_timeout makes other
    # processes (the CLI issuing a token while the server runs) wait instead of failing.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and foreign keys."""
    if url.startswith("sqlite"):
        memory = url in ("sqlite://", "sqlite:///:memory:")
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False}}
        if memory:  # one shared connection, or every session would see an empty database
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(_with_installed_driver(url), pool_pre_ping=True)


def _with_installed_driver(url: str) -> str:
    """``postgresql://`` means psycopg2 to SQLAlchemy; use psycopg 3 when only that is installed."""
    u = make_url(url)
    if u.drivername == "postgresql" and not find_spec("psycopg2") and find_spec("psycopg"):
        return u.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    return url


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the packaged migrations (no alembic.ini needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(engine: Engine) -> None:
    """Apply every pending migration (``alembic upgrade head``) on ``engine``."""
    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            # SQLite batch migrations copy a table and drop the old one, which its foreign keys
            # forbid while rows point at it; the pragma only takes effect outside a transaction.
            conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            conn.commit()
        try:
            with conn.begin():
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        finally:
            if sqlite:
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                conn.commit()


@dataclass
class Database:
    """An engine, a session factory, and the operations the server and CLI need."""

    engine: Engine
    sessions: sessionmaker[Session]

    def __post_init__(self) -> None:
        # SQLite has one writer at a time; serialising our own writes in-process
        # avoids lock-upgrade failures under many concurrent submissions.
        self._write_lock = threading.Lock() if self.engine.dialect.name == "sqlite" else _NullLock()

    # ----------------------------------------------------------------- tokens

    def create_token(self, name: str) -> str:
        """Issue a new token named ``name``; returns the secret (shown once, stored hashed)."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        try:
            with self._write_lock, self.sessions.begin() as s:
                s.add(Token(name=name, token_hash=hash_token(secret)))
        except IntegrityError:
            raise TokenError(f"a token named {name!r} already exists; pick another name") from None
        return secret

    def revoke_token(self, name: str) -> None:
        """Revoke the token named ``name`` (its past submissions stay listed)."""
        with self._write_lock, self.sessions.begin() as s:
            tok = s.scalar(select(Token).where(Token.name == name))
            if tok is None:
                raise TokenError(f"no token named {name!r}")
            if tok.revoked_at is None:
                tok.revoked_at = utcnow()

    def list_tokens(self) -> list[dict[str, Any]]:
        with self.sessions() as s:
            return [
                {"id": t.id, "name": t.name, "created_at": t.created_at, "revoked_at": t.revoked_at}
                for t in s.scalars(select(Token).order_by(Token.id))
            ]

    def check_token(self, secret: str) -> tuple[int | None, str]:
        """``(token id, "")`` for a valid token, else ``(None, why)``."""
        with self.sessions() as s:
            tok = s.scalar(select(Token).where(Token.token_hash == hash_token(secret)))
        if tok is None:
            return None, "unknown token"
        if tok.revoked_at is not None:
            return None, f"token {tok.name!r} was revoked"
        return tok.id, ""

    # ------------------------------------------------------------ submissions

    def add_submission(self, sub: Submission) -> int:
        """Store a submission and its episodes in one transaction; returns its id."""
        try:
            with self._write_lock, self.sessions.begin() as s:
                s.add(sub)
                s.flush()
                return sub.id
        except IntegrityError as e:
            if "bundle_sha256" in str(
                e.orig
            ):  # SQLite and PostgreSQL both name the column/constraint
                raise DuplicateSubmission("this exact bundle was already submitted") from None
            raise

    def replace_grade(self, sub_id: int, expected_version: str, grade: Grade) -> bool:
        """Store ``grade`` as submission ``sub_id``'s grade, in one transaction.

        The submission's score, interval and grader version, and every episode's verdict, are
        replaced together; the grade they replace is kept as ``previous_score`` /
        ``previous_grader_version``. Nothing changes (and the answer is False) when the stored
        grade is no longer by ``expected_version`` (someone re-graded it meanwhile) or the
        submission is gone. A grade whose episodes do not match the stored ones raises
        ValueError, and any error leaves the stored grade as it was.
        """
        with self._write_lock, self.sessions.begin() as s:
            # Check and write in one statement: on SQLite a SELECT takes no lock (the driver only
            # begins the transaction at the first write), so a check done by reading first could
            # let another process's re-grade land in between and be overwritten.
            # an UPDATE's result is a CursorResult (its rowcount); Session.execute says Result
            replaced = cast(
                "CursorResult[Any]",
                s.execute(
                    update(Submission)
                    .where(Submission.id == sub_id, Submission.grader_version == expected_version)
                    .values(
                        previous_score=Submission.verified_score,
                        previous_grader_version=Submission.grader_version,
                        verified_score=grade.score,
                        ci_low=grade.ci_low,
                        ci_high=grade.ci_high,
                        n_tasks=grade.n_tasks,
                        grader_version=grade.grader_version,
                    )
                    .execution_options(synchronize_session=False)
                ),
            )
            if replaced.rowcount != 1:
                return False
            episodes = list(
                s.scalars(
                    select(EpisodeRow)
                    .where(EpisodeRow.submission_id == sub_id)
                    .order_by(EpisodeRow.index)
                )
            )
            stored = [(e.index, e.task_id, e.seed) for e in episodes]
            graded = [(g.index, g.task_id, g.seed) for g in grade.episodes]
            if stored != graded:
                raise ValueError(
                    f"the grade of submission {sub_id} covers other episodes than the stored ones"
                )
            for row, g in zip(episodes, grade.episodes, strict=True):
                row.score, row.correct = g.score, g.correct
                row.answer, row.reason = g.answer, g.reason
            return True

    def submissions(
        self,
        *,
        env: str | None = None,
        family: str | None = None,
        method: str | None = None,
        team_size: int | None = None,
    ) -> list[Submission]:
        """Submissions (without episodes) matching the filters, best verified score first.

        ``env`` with a version (``math-3agent-v1``) matches that version; without one
        (``math-3agent``) every version of the id and its unversioned rows."""
        q = select(Submission)
        if env:
            from marft_envs.registry import parse_env_id

            if parse_env_id(env)[1] is None:
                escaped = env.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                q = q.where(
                    or_(
                        Submission.env_id == env,
                        Submission.env_id.like(f"{escaped}-v%", escape="\\"),
                    )
                )
            else:
                q = q.where(Submission.env_id == env)
        if family:
            q = q.where(Submission.env_family == family)
        if method:
            q = q.where(Submission.method == method)
        if team_size:
            q = q.where(Submission.team_size == team_size)
        q = q.order_by(Submission.verified_score.desc(), Submission.id)
        with self.sessions() as s:
            return list(s.scalars(q))

    def submission(self, sub_id: int) -> Submission | None:
        """One submission with its episodes loaded."""
        with self.sessions() as s:
            return s.scalar(
                select(Submission)
                .where(Submission.id == sub_id)
                .options(selectinload(Submission.episodes))
            )

    def row_counts(self) -> dict[str, int]:
        """Rows per table (tests and the load benchmark check nothing is lost or duplicated)."""
        with self.sessions() as s:
            return {
                t.__tablename__: s.scalar(select(func.count()).select_from(t)) or 0
                for t in (Token, Submission, EpisodeRow)
            }


class _NullLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def hash_token(secret: str) -> str:
    """sha256 hex of a token secret (what the database stores)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def open_db(url: str) -> Database:
    """Connect to ``url`` and migrate its schema to the latest revision."""
    engine = make_engine(url)
    upgrade(engine)
    return Database(engine, sessionmaker(engine, expire_on_commit=False))


__all__ = [
    "Base",
    "Database",
    "DuplicateSubmission",
    "TokenError",
    "hash_token",
    "open_db",
    "upgrade",
]
