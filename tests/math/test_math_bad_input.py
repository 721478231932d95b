"""Garbage never raises: it is a wrong answer with a reason."""

import pytest

from marft_envs.math import MAX_ANSWER_CHARS, verify


@pytest.mark.parametrize(
    "pred, reason",
    [
        (None, "no_answer"),
        ("", "no_answer"),
        ("   \n ", "no_answer"),
        ("I have no idea, sorry.", "no_answer"),
        ("\\boxed{}", "no_answer"),
    ],
)
def test_no_answer(pred, reason):
    v = verify(pred, "5")
    assert not v.correct and v.reason == reason and v.score == 0.0


@pytest.mark.parametrize(
    "pred",
    [
        object(), [1, 2], {"a": 1}, 3.5, b"\xff\xfe", "\x00\x01\x02", "\ud800\udfff garbage \U0001f600",
        "\\boxed{\\frac{\\frac{\\frac{", "}}}}{{{{", "((((((((((((((((((((1", "\\boxed{" + "(" * 3000 + "}",
        "\\boxed{\\undefinedcommand{3}}", "\\boxed{1/0}", "\\boxed{0^{-1}}", "\\boxed{\\log 0}",
        "\\boxed{\\begin{pmatrix}1&2\\end{pmatrix}}", "\\boxed{,,,}", "\\boxed{=}", "\\boxed{\\{\\}}",
    ],
)
def test_garbage_is_a_wrong_answer(pred):
    v = verify(pred, "5", timeout=3)
    assert v.correct is False and v.score == 0.0
    assert v.reason in {"mismatch", "no_answer", "invalid", "timeout"}
    assert not v.infra_error


def test_megabyte_prediction():
    text = "blah " * 400_000 + "\\boxed{5}"
    v = verify(text, "5")
    assert v.correct and v.reason == "exact"
    v = verify("x" * 2_000_000, "5")
    assert not v.correct


def test_overlong_answer_is_invalid():
    v = verify("\\boxed{" + "1+" * MAX_ANSWER_CHARS + "1}", "5")
    assert not v.correct and v.reason == "invalid"


@pytest.mark.parametrize("ref", [None, "", "   "])
def test_bad_reference_is_an_infrastructure_problem(ref):
    v = verify("\\boxed{5}", ref)
    assert not v.correct and v.reason == "invalid" and v.infra_error


def test_non_string_reference_is_converted():
    assert verify("\\boxed{12}", 12).correct
