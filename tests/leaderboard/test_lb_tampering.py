"""Forged bundles against the live server: each is rejected (and changes nothing) or scored at its true value."""

from __future__ import annotations

import json

import httpx
import pytest
from lb_helpers import HTTP_TIMEOUT, cli, play_bundle

from leaderboard.client import LeaderboardClient, SubmissionError
from leaderboard.schema import Bundle


@pytest.fixture
def unchanged(db):
    """Asserts after the test that no table gained or lost a row."""
    before = db.row_counts()
    yield
    assert db.row_counts() == before


def _submit(server, token, payload: bytes | Bundle) -> dict:
    with LeaderboardClient(server.url, token=token) as c:
        return c.submit(payload) if isinstance(payload, Bundle) else c.submit_json(payload)


def _rejected(server, token, payload, status: int, match: str) -> None:
    with pytest.raises(SubmissionError) as err:
        _submit(server, token, payload)
    assert err.value.status == status, err.value.detail
    assert match in err.value.detail


def _with_episodes(bundle: Bundle, episodes) -> Bundle:
    return bundle.model_copy(update={"episodes": list(episodes)})


# ----------------------------------------------------------- scored at true value


def test_inflated_claimed_score_is_shown_but_not_believed(server, token, db) -> None:
    b = play_bundle(correct=lambda i: i == 0, model="claims-too-much", claimed_score=1.0)
    b = _with_episodes(b, [e.model_copy(update={"claimed_score": 1.0}) for e in b.episodes])
    before = db.row_counts()
    result = _submit(server, token, b)
    assert result["verified_score"] == pytest.approx(0.2) and result["claimed_score"] == 1.0
    detail = httpx.get(f"{server.url}/api/submissions/{result['id']}", timeout=HTTP_TIMEOUT).json()
    assert [e["score"] for e in detail["episodes"]] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [e["claimed_score"] for e in detail["episodes"]] == [1.0] * 5
    assert db.row_counts() == {
        **before,
        "submissions": before["submissions"] + 1,
        "episodes": before["episodes"] + 5,
    }


def test_answers_swapped_between_tasks_score_their_true_value(server, token) -> None:
    """Right answers moved to other tasks (transcripts and outputs consistently swapped) are wrong there."""
    b = play_bundle(model="swapped-answers", claimed_score=1.0)
    eps = b.episodes
    rotated = [
        e.model_copy(
            update={"turns": eps[(i + 1) % 5].turns, "final_output": eps[(i + 1) % 5].final_output}
        )
        for i, e in enumerate(eps)
    ]
    result = _submit(server, token, _with_episodes(b, rotated))
    assert result["verified_score"] == pytest.approx(0.0)


# ------------------------------------------------------------------- rejected


@pytest.mark.usefixtures("unchanged")
def test_final_output_swapped_without_the_transcript_is_rejected(server, token) -> None:
    b = play_bundle(correct=lambda i: i == 0, model="swapped-output")
    eps = list(b.episodes)
    eps[1] = eps[1].model_copy(update={"final_output": eps[0].final_output})
    _rejected(server, token, _with_episodes(b, eps), 422, "final_output is not the last action")


@pytest.mark.usefixtures("unchanged")
def test_duplicated_episodes_are_rejected(server, token) -> None:
    """Repeating a right episode in place of a wrong one would inflate the score."""
    b = play_bundle(correct=lambda i: i == 0, model="duplicated")
    eps = list(b.episodes)
    eps[1] = eps[0]
    _rejected(server, token, _with_episodes(b, eps), 422, "duplicate episodes")


@pytest.mark.usefixtures("unchanged")
def test_missing_episodes_are_rejected(server, token) -> None:
    """Dropping the failures would inflate the score."""
    b = play_bundle(correct=lambda i: i == 0, model="missing")
    _rejected(server, token, _with_episodes(b, b.episodes[:1]), 422, "4 episode(s) missing")


@pytest.mark.usefixtures("unchanged")
def test_missing_seed_is_rejected(server, token) -> None:
    b = play_bundle(seeds=(0, 1), model="missing-seed")
    _rejected(
        server, token, _with_episodes(b, [e for e in b.episodes if e.seed == 0]), 422, "missing"
    )


@pytest.mark.usefixtures("unchanged")
def test_unknown_task_ids_are_rejected(server, token) -> None:
    b = play_bundle(model="unknown-task")
    eps = [b.episodes[0].model_copy(update={"task_id": "arith/test/made-up"}), *b.episodes[1:]]
    _rejected(server, token, _with_episodes(b, eps), 422, "unknown task id")


@pytest.mark.usefixtures("unchanged")
def test_wrong_dataset_hash_is_rejected(server, token) -> None:
    b = play_bundle(model="wrong-hash")
    forged = b.model_copy(update={"dataset": b.dataset.model_copy(update={"hash": "0" * 64})})
    _rejected(server, token, forged, 422, "does not match the registered dataset")


@pytest.mark.usefixtures("unchanged")
def test_grading_settings_cannot_be_overridden(server, token) -> None:
    b = play_bundle(model="lenient-verifier")
    spec = {**b.env_spec, "kwargs": {**b.env_spec["kwargs"], "verifier_kwargs": {"timeout": 0.001}}}
    _rejected(server, token, b.model_copy(update={"env_spec": spec}), 422, "verifier_kwargs")


@pytest.mark.usefixtures("unchanged")
def test_wrong_team_size_is_rejected(server, token) -> None:
    b = play_bundle(model="team-size")
    _rejected(server, token, b.model_copy(update={"team_size": 4}), 422, "team_size 4")


def test_resubmitting_the_same_bundle_is_a_conflict(server, token, db) -> None:
    b = play_bundle(model="twice")
    _submit(server, token, b)
    before = db.row_counts()
    _rejected(server, token, b, 409, "already submitted")
    assert db.row_counts() == before


@pytest.mark.usefixtures("unchanged")
def test_oversized_body_is_refused_with_413(server, token) -> None:
    payload = json.loads(play_bundle(model="huge").model_dump_json())
    payload["config"] = {"padding": "x" * (21 * 1024 * 1024)}
    _rejected(server, token, json.dumps(payload).encode(), 413, "exceeds the limit")


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(
    "payload, status, match",
    [
        (b'{"env_id": "arith-2agent", ', 400, "not valid JSON"),
        (b"\xff\xfe garbage", 400, "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
        (b"[1, 2, 3]", 422, "invalid bundle"),
        (b'{"env_id": "arith-2agent"}', 422, "episodes: Field required"),
    ],
)
def test_malformed_json_is_rejected(server, token, payload: bytes, status: int, match: str) -> None:
    _rejected(server, token, payload, status, match)


def test_unknown_missing_and_revoked_tokens_are_refused(server, token, honest_bundle, db) -> None:
    doomed = db.create_token("doomed-lab")
    cli("token", "revoke", "--name", "doomed-lab", "--db", server.db_url)
    before = db.row_counts()
    _rejected(server, "mlb_not-a-real-token", honest_bundle, 401, "unknown token")
    _rejected(server, "", honest_bundle, 401, "missing submission token")
    _rejected(server, doomed, honest_bundle, 403, "revoked")
    assert db.row_counts() == before


# ------------------------------------------------------------- code programs

HONEST_ADD = "def add(a, b):\n    return a + b\n"
FAKE_PASSES = {
    "exit-early": "import os\nos._exit(0)\n",
    "sys-exit": "import sys\nsys.exit(0)\n",
    "print-pass-marker": "print('PASS')\nprint('OK: 4/4 tests passed')\nimport sys\nsys.exit(0)\n",
    "patch-assert": (
        "import builtins\nclass _Any:\n    def __eq__(self, other):\n        return True\n"
        "def add(a, b):\n    return _Any()\n"
    ),
}


def _code_bundle(program: str, model: str) -> Bundle:
    def respond(agent: str, task, i: int) -> str:
        if agent.startswith("planner"):
            return "Plan: implement the function exactly as specified."
        return f"Here is the program:\n```python\n{program}```"

    return play_bundle("code-2agent", n_tasks=1, respond=respond, model=model, claimed_score=1.0)


def test_honest_program_passes_in_the_sandbox(server, token) -> None:
    assert _submit(server, token, _code_bundle(HONEST_ADD, "honest-coder"))["verified_score"] == 1.0


@pytest.mark.parametrize("trick", sorted(FAKE_PASSES))
def test_programs_that_fake_a_pass_score_zero(server, token, trick: str) -> None:
    result = _submit(server, token, _code_bundle(FAKE_PASSES[trick], f"faker-{trick}"))
    assert result["verified_score"] == 0.0 and result["claimed_score"] == 1.0
