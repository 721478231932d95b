"""A math verdict may change only with a new ``GRADER_VERSION`` (tests/grader_snapshots.py)."""

from __future__ import annotations

import pytest

from tests.grader_snapshots import compared_cases, load_snapshot, math_verdicts, snapshot_message


def test_math_verdicts_match_the_snapshot_of_their_version() -> None:
    version, now = math_verdicts()
    recorded = load_snapshot("math")
    assert len(recorded["verdicts"]) > 900  # every pair of the three files
    assert len(compared_cases(recorded["verdicts"], now)) > 900, "too few pairs compared"
    message = snapshot_message("math", recorded, version, now)
    assert message is None, message


def test_a_changed_verdict_under_the_same_version_fails_and_says_bump() -> None:
    recorded = load_snapshot("math")
    case = next(k for k, v in recorded["verdicts"].items() if v is not None)
    flipped = dict(recorded["verdicts"])
    flipped[case] = {**flipped[case], "correct": not flipped[case]["correct"]}
    message = snapshot_message("math", recorded, recorded["grader_version"], flipped)
    assert message is not None and case in message and "bump GRADER_VERSION" in message
    # a time-out (None) is the machine's load, not a changed rule
    timed_out = {**recorded["verdicts"], case: None}
    assert snapshot_message("math", recorded, recorded["grader_version"], timed_out) is None
    # an edited data row (other inputs under the same id) is a new case, not a changed verdict
    edited = {**flipped, case: {**flipped[case], "input": "0" * 16}}
    assert snapshot_message("math", recorded, recorded["grader_version"], edited) is None
    # a new version needs a re-recorded snapshot
    assert "re-record" in (snapshot_message("math", recorded, "math-999", flipped) or "")


def test_recording_refuses_a_changed_verdict_under_the_same_version(tmp_path, monkeypatch) -> None:
    import tests.grader_snapshots as gs

    monkeypatch.setattr(gs, "SNAPSHOTS", tmp_path)
    gs.write_snapshot("math", "math-3", {"a": {"correct": True, "score": 1.0}})
    with pytest.raises(SystemExit, match="bump the version"):
        gs.write_snapshot("math", "math-3", {"a": {"correct": False, "score": 0.0}})
    gs.write_snapshot("math", "math-4", {"a": {"correct": False, "score": 0.0}})
    assert gs.load_snapshot("math")["grader_version"] == "math-4"
