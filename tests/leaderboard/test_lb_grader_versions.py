"""Grader versions on the leaderboard: stored grades name their grader, a grader change makes
them stale, ``regrade`` re-grades them one transaction each, and the ranking never mixes graders."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3

import pytest
from alembic import command
from lb_helpers import play_bundle
from sqlalchemy import event, insert, select, update

import marft_envs
from leaderboard.db import DuplicateSubmission, alembic_config, make_engine, open_db
from leaderboard.graders import current_grader_version
from leaderboard.models import LEGACY_GRADER_VERSION, EpisodeRow, Submission, Token, utcnow
from leaderboard.ranking import leaderboard_rows
from leaderboard.regrade import regrade
from leaderboard.regrade_stored import regrade_stale, stored_bundle
from leaderboard.schema import Bundle
from leaderboard.server import bundle_sha256, to_submission
from marft_envs.math import version as math_version
from marft_envs.verdict import Verdict
from marft_envs.verifiers import MathVerifier

MATH = math_version.GRADER_VERSION


@pytest.fixture
def database(tmp_path):
    return open_db(f"sqlite:///{tmp_path / 'lb.db'}")


@pytest.fixture
def token_id(database) -> int:
    return database.check_token(database.create_token("lab"))[0]


def _store(database, token_id: int, bundle) -> int:
    return database.add_submission(to_submission(bundle, regrade(bundle), token_id))


def _snapshot(database, sub_id: int) -> tuple:
    """Everything a re-grade may change: the submission's grade and every episode's verdict."""
    sub = database.submission(sub_id)
    return (
        sub.grader_version,
        sub.verified_score,
        sub.ci_low,
        sub.ci_high,
        sub.previous_score,
        sub.previous_grader_version,
        [(e.score, e.correct, e.answer, e.reason) for e in sub.episodes],
    )


def _as_if_graded_by(database, sub_id: int, version: str, score: float) -> None:
    """Make a stored grade look like an older grader's (the state a grader upgrade leaves)."""
    with database.sessions.begin() as s:
        s.execute(
            update(Submission)
            .where(Submission.id == sub_id)
            .values(grader_version=version, verified_score=score)
        )
        s.execute(
            update(EpisodeRow)
            .where(EpisodeRow.submission_id == sub_id)
            .values(score=0.0, correct=False, reason="graded by the old grader")
        )


def test_bundles_and_stored_grades_name_the_grader(database, token_id, honest_bundle) -> None:
    assert honest_bundle.grader_version == MATH == marft_envs.grader_version("arith-2agent")
    grade = regrade(honest_bundle)
    assert grade.grader_version == MATH
    sub = database.submission(_store(database, token_id, honest_bundle))
    assert (sub.grader_version, sub.bundle_grader_version) == (MATH, MATH)
    assert sub.previous_score is None and sub.previous_grader_version is None
    [row] = leaderboard_rows(database.submissions())
    assert row["grader_version"] == row["current_grader_version"] == MATH
    assert row["stale"] is False and row["rank"] == 1


def _as_schema_1(bundle: Bundle) -> dict:
    """``bundle`` as a schema 1 bundle was written: no grader version, no fingerprint, an id
    without a version."""
    v1 = bundle.model_dump(mode="json")
    v1["schema_version"] = 1
    del v1["grader_version"], v1["fingerprint"]
    v1["env_id"] = v1["env_spec"]["id"] = "arith-2agent"
    return v1


def test_version_1_bundles_without_a_grader_version_are_still_accepted(honest_bundle) -> None:
    bundle = Bundle.model_validate(_as_schema_1(honest_bundle))
    assert bundle.grader_version is None
    grade = regrade(bundle)
    assert grade.grader_version == MATH
    assert grade.env_version is None and grade.env_fingerprint is None  # unversioned


def test_a_stored_submission_is_rebuilt_as_its_bundle(database, token_id, honest_bundle) -> None:
    rebuilt = stored_bundle(database.submission(_store(database, token_id, honest_bundle)))
    assert rebuilt.episodes == honest_bundle.episodes and rebuilt.seeds == honest_bundle.seeds
    assert regrade(rebuilt) == regrade(honest_bundle)


def test_ranking_never_mixes_graders(database, token_id) -> None:
    low = _store(database, token_id, play_bundle(correct=lambda i: i < 2, model="low"))  # 0.4
    high = _store(database, token_id, play_bundle(correct=lambda i: i < 4, model="high"))  # 0.8
    _as_if_graded_by(database, high, "math-0", 0.9)
    rows = leaderboard_rows(database.submissions())
    assert [(r["id"], r["rank"], r["stale"], r["grader_version"]) for r in rows] == [
        (low, 1, False, MATH),
        (high, None, True, "math-0"),
    ]
    assert rows[1]["current_grader_version"] == MATH


def test_regrade_updates_stale_rows_and_is_idempotent(database, token_id) -> None:
    keep = _store(database, token_id, play_bundle(correct=lambda i: i < 2, model="current"))
    old = _store(database, token_id, play_bundle(correct=lambda i: i < 4, model="old"))
    _as_if_graded_by(database, old, "math-0", 0.2)
    untouched = _snapshot(database, keep)

    [outcome] = list(regrade_stale(database))
    assert (outcome.submission_id, outcome.status) == (old, "regraded")
    assert (outcome.old_version, outcome.new_version) == ("math-0", MATH)
    assert outcome.old_score == 0.2 and outcome.new_score == pytest.approx(0.8)
    sub = database.submission(old)
    assert (sub.grader_version, sub.verified_score) == (MATH, pytest.approx(0.8))
    assert (sub.previous_grader_version, sub.previous_score) == ("math-0", 0.2)
    assert [e.correct for e in sub.episodes] == [True, True, True, True, False]
    assert _snapshot(database, keep) == untouched

    counts = database.row_counts()
    after_first = _snapshot(database, old)
    assert list(regrade_stale(database)) == []  # a second run finds nothing to do
    assert _snapshot(database, old) == after_first and database.row_counts() == counts
    assert all(not r["stale"] for r in leaderboard_rows(database.submissions()))


def test_a_failed_write_leaves_the_stored_grade_intact(database, token_id) -> None:
    """The new grade is written in one transaction: a failure on the fourth episode's row
    rolls back the submission's score and the first three episodes too."""
    old = _store(database, token_id, play_bundle(correct=lambda i: i < 4, model="old"))
    _as_if_graded_by(database, old, "math-0", 0.2)
    before = _snapshot(database, old)

    def fail_on_fourth(mapper, connection, row) -> None:
        if row.index == 3:
            raise RuntimeError("disk full")

    event.listen(EpisodeRow, "before_update", fail_on_fourth)
    try:
        with pytest.raises(RuntimeError, match="disk full"):
            list(regrade_stale(database))
    finally:
        event.remove(EpisodeRow, "before_update", fail_on_fourth)
    assert _snapshot(database, old) == before

    grade = regrade(stored_bundle(database.submission(old)))
    shifted = dataclasses.replace(grade, episodes=grade.episodes[1:] + grade.episodes[:1])
    with pytest.raises(ValueError, match="other episodes than the stored ones"):
        database.replace_grade(old, "math-0", shifted)
    assert _snapshot(database, old) == before
    assert database.replace_grade(old, "math-7", grade) is False  # not the version it graded over
    assert _snapshot(database, old) == before


def test_a_rejected_stored_bundle_is_reported_and_kept(database, token_id) -> None:
    old = _store(database, token_id, play_bundle(model="old"))
    _as_if_graded_by(database, old, "math-0", 0.5)
    with database.sessions.begin() as s:  # as if the registered dataset had changed since
        s.execute(update(Submission).where(Submission.id == old).values(dataset_hash="f" * 64))
    before = _snapshot(database, old)
    [outcome] = list(regrade_stale(database))
    assert (
        outcome.status == "rejected" and "does not match the registered dataset" in outcome.reason
    )
    assert _snapshot(database, old) == before


class SwitchableMath(MathVerifier):
    """The math verifier with a version and an infrastructure that the test can change: what a
    grader release and a broken worker pool do to a running leaderboard."""

    version = "switchable-1"
    down = False

    def grade(self, response: str, task) -> Verdict:
        if SwitchableMath.down:
            return Verdict(
                correct=False, answer=None, reason="worker pool unavailable", infra_error=True
            )
        return super().grade(response, task)


@pytest.fixture
def switchable_env():
    marft_envs.register_verifier("lb-switchable-math", SwitchableMath)
    registered = marft_envs.spec("arith-2agent")
    marft_envs.register(
        "lbswitch-2agent-v1",
        registered.entry_point,
        kwargs={**registered.kwargs, "verifier": "lb-switchable-math"},
        overwrite=True,
    )
    try:
        yield "lbswitch-2agent-v1"
    finally:
        del marft_envs.registry["lbswitch-2agent-v1"]
        SwitchableMath.version, SwitchableMath.down = "switchable-1", False


def test_a_grader_bump_makes_rows_stale_and_infra_errors_keep_them(
    database, token_id, switchable_env
) -> None:
    sub_id = _store(database, token_id, play_bundle(switchable_env, correct=lambda i: i < 3))
    assert database.submission(sub_id).grader_version == "switchable-1"
    assert not leaderboard_rows(database.submissions())[0]["stale"]

    SwitchableMath.version = "switchable-2"  # a new grader release
    assert current_grader_version(switchable_env) == "switchable-2"
    [row] = leaderboard_rows(database.submissions())
    assert row["stale"] and row["rank"] is None and row["grader_version"] == "switchable-1"

    SwitchableMath.down = True  # its infrastructure fails: reported, nothing stored
    before = _snapshot(database, sub_id)
    [outcome] = list(regrade_stale(database))
    assert outcome.status == "infra_error" and "worker pool unavailable" in outcome.reason
    assert _snapshot(database, sub_id) == before

    SwitchableMath.down = False
    [outcome] = list(regrade_stale(database))
    assert outcome.status == "regraded" and outcome.new_version == "switchable-2"
    sub = database.submission(sub_id)
    assert (sub.grader_version, sub.previous_grader_version) == ("switchable-2", "switchable-1")
    assert sub.verified_score == pytest.approx(0.6) == sub.previous_score
    assert list(regrade_stale(database)) == []


def test_rows_stored_before_versions_are_legacy_until_regraded(tmp_path, honest_bundle) -> None:
    """Migration 0002 on a database written by revision 0001: its rows become ``legacy``."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    cfg = alembic_config(url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    legacy = Bundle.model_validate({**_as_schema_1(honest_bundle), "schema_version": 2})
    sub = to_submission(legacy, regrade(legacy), 1)
    new_columns = {
        "id",
        "created_at",
        "grader_version",
        "previous_score",
        "previous_grader_version",
        "bundle_grader_version",
        "env_version",
        "env_fingerprint",
        "env_fingerprint_parts",
        "env_overrides",
    }
    with engine.begin() as conn:  # the rows a server of revision 0001 wrote
        conn.execute(
            insert(Token.__table__).values(
                id=1, name="lab", token_hash="0" * 64, created_at=utcnow()
            )
        )
        values = {
            c.name: getattr(sub, c.name)
            for c in Submission.__table__.columns
            if c.name not in new_columns
        }
        sub_id = conn.execute(
            insert(Submission.__table__).values(**values, created_at=utcnow())
        ).inserted_primary_key[0]
        conn.execute(
            insert(EpisodeRow.__table__),
            [
                {
                    c.name: getattr(e, c.name)
                    for c in EpisodeRow.__table__.columns
                    if c.name not in ("id", "submission_id")
                }
                | {"submission_id": sub_id}
                for e in sub.episodes
            ],
        )
    engine.dispose()

    database = open_db(url)  # migrates to head
    with database.sessions() as s:
        assert s.scalar(select(Submission.grader_version)) == LEGACY_GRADER_VERSION
    [row] = leaderboard_rows(database.submissions())
    assert (
        row["stale"] and row["grader_version"] == "legacy" and row["current_grader_version"] == MATH
    )
    assert row["unversioned"] and row["env_version"] is None and row["rank"] is None
    [outcome] = list(regrade_stale(database))
    assert (outcome.status, outcome.old_version, outcome.new_version) == (
        "regraded",
        "legacy",
        MATH,
    )
    stored = database.submission(sub_id)
    assert stored.grader_version == MATH and stored.verified_score == pytest.approx(0.6)
    assert stored.previous_grader_version == "legacy"


def test_a_version_1_bundle_keeps_the_sha256_a_version_1_server_gave_it(
    database, token_id, honest_bundle
) -> None:
    """Duplicate detection survives the upgrade: a v1 bundle accepted before schema 2 existed
    (its sha256 taken over its v1 fields, no ``grader_version``) is still refused when it is
    submitted again."""
    v1 = _as_schema_1(honest_bundle)
    canonical = json.dumps(v1, sort_keys=True, separators=(",", ":"))  # what revision 0001 stored
    old_sha = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    bundle = Bundle.model_validate(v1)
    assert bundle_sha256(bundle) == old_sha

    sub = to_submission(bundle, regrade(bundle), token_id)
    database.add_submission(sub)
    counts = database.row_counts()
    with pytest.raises(DuplicateSubmission):
        database.add_submission(to_submission(bundle, regrade(bundle), token_id))
    assert database.row_counts() == counts
    # a v2 bundle names its grader, and the name is part of what identifies it
    assert bundle_sha256(honest_bundle) != bundle_sha256(
        honest_bundle.model_copy(update={"grader_version": "math-0"})
    )


def test_families_with_different_graders_are_ranked_apart(
    database, token_id, switchable_env
) -> None:
    """A ranking of math-1 scores and switchable-1 scores together would mix graders: each
    family (one table on the page) has its own ranks, whatever the filter."""
    arith = _store(database, token_id, play_bundle(correct=lambda i: i < 2, model="arith"))  # 0.4
    other = _store(database, token_id, play_bundle(switchable_env, correct=lambda i: i < 3))  # 0.6
    rows = leaderboard_rows(database.submissions())
    assert [(r["id"], r["env_family"], r["grader_version"], r["rank"]) for r in rows] == [
        (other, "lbswitch", "switchable-1", 1),
        (arith, "arith", MATH, 1),
    ]
    assert leaderboard_rows(database.submissions(family="arith"))[0]["rank"] == 1


def test_a_grade_replaced_meanwhile_by_another_process_is_not_overwritten(tmp_path) -> None:
    """``replace_grade`` checks the stored version and writes in one step: another process (a
    second ``regrade``) committing between the check and the write is never silently undone."""
    path = tmp_path / "race.db"
    database = open_db(f"sqlite:///{path}")
    token = database.check_token(database.create_token("lab"))[0]
    old = _store(database, token, play_bundle(correct=lambda i: i < 4, model="old"))
    _as_if_graded_by(database, old, "math-0", 0.2)
    grade = regrade(stored_bundle(database.submission(old)))

    attempt: dict[str, bool] = {}

    def another_process_writes(conn, cursor, statement, *args) -> None:
        if attempt or "submissions" not in statement:
            return
        other = sqlite3.connect(path, timeout=0)  # never waits: a held write lock is an error
        try:
            other.execute(
                "update submissions set grader_version = 'math-9', verified_score = 0.55 "
                "where id = ?",
                (old,),
            )
            other.commit()
            attempt["committed"] = True
        except sqlite3.OperationalError:  # "database is locked": the check holds the row
            attempt["committed"] = False
        finally:
            other.close()

    event.listen(database.engine, "after_cursor_execute", another_process_writes)
    try:
        stored = database.replace_grade(old, "math-0", grade)
    finally:
        event.remove(database.engine, "after_cursor_execute", another_process_writes)
    sub = database.submission(old)
    if attempt["committed"]:
        assert stored is False and (sub.grader_version, sub.verified_score) == ("math-9", 0.55)
    else:
        assert stored is True and (sub.grader_version, sub.previous_grader_version) == (
            MATH,
            "math-0",
        )
        assert sub.previous_score == 0.2


def test_the_submission_page_names_the_claimed_scores_grader_only_with_a_claimed_score(
    database, token_id, honest_bundle
) -> None:
    from fastapi.testclient import TestClient

    from leaderboard.server import create_app

    claimed = _store(database, token_id, honest_bundle)  # claimed 0.6, by math-1
    unclaimed = _store(database, token_id, play_bundle(model="no-claim"))
    with TestClient(create_app(database)) as client:
        page = client.get(f"/submissions/{claimed}").text
        assert f"0.600 <span class=\"muted\">(by the submitter's grader {MATH})" in page
        page = client.get(f"/submissions/{unclaimed}").text
        assert 'id="claimed">not given</td>' in page and "submitter's grader" not in page
