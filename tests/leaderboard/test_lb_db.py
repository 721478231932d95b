"""Storage: migrations, transactional submissions, hashed tokens."""

from __future__ import annotations

import hashlib

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, select, text
from sqlalchemy.exc import IntegrityError

from leaderboard.db import DuplicateSubmission, TokenError, open_db
from leaderboard.models import Base, EpisodeRow, Token
from leaderboard.regrade import regrade
from leaderboard.server import to_submission


@pytest.fixture
def database(tmp_path):
    return open_db(f"sqlite:///{tmp_path / 'lb.db'}")


def test_migrations_build_exactly_the_models(database) -> None:
    with database.engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) >= {"tokens", "submissions", "episodes", "alembic_version"}
        assert conn.execute(text("select version_num from alembic_version")).scalar() == "0004"
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree; add an Alembic revision: {diff}"


def test_opening_twice_is_idempotent(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'lb.db'}"
    open_db(url).create_token("a")
    assert open_db(url).row_counts()["tokens"] == 1


def test_tokens_are_stored_hashed_and_can_be_revoked(database) -> None:
    secret = database.create_token("lab")
    with database.sessions() as s:
        stored = s.scalar(select(Token.token_hash))
    assert stored == hashlib.sha256(secret.encode()).hexdigest() and secret not in stored
    assert database.check_token(secret)[0] is not None
    assert database.check_token(secret + "x") == (None, "unknown token")
    database.revoke_token("lab")
    assert database.check_token(secret) == (None, "token 'lab' was revoked")
    with pytest.raises(TokenError, match="already exists"):
        database.create_token("lab")
    with pytest.raises(TokenError, match="no token named 'nobody'"):
        database.revoke_token("nobody")


def test_a_submission_is_all_or_nothing(database, honest_bundle) -> None:
    token_id, _ = database.check_token(database.create_token("lab"))
    grade = regrade(honest_bundle)
    broken = to_submission(honest_bundle, grade, token_id)
    broken.episodes.append(EpisodeRow(index=99, task_id=None, seed=0, turns=[], final_output="",
                                      score=0.0, correct=False, reason=""))
    before = database.row_counts()
    with pytest.raises(IntegrityError):
        database.add_submission(broken)
    assert database.row_counts() == before

    sub_id = database.add_submission(to_submission(honest_bundle, grade, token_id))
    assert database.row_counts() == {**before, "submissions": 1, "episodes": 10}
    stored = database.submission(sub_id)
    assert stored.verified_score == pytest.approx(0.6) and len(stored.episodes) == 10
    with pytest.raises(DuplicateSubmission):
        database.add_submission(to_submission(honest_bundle, grade, token_id))
    assert database.row_counts() == {**before, "submissions": 1, "episodes": 10}
