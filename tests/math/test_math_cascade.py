"""Every branch of the equivalence cascade, with its near-miss negatives."""

import pytest

from marft_envs.math import ExtractionConfig, verify
from marft_envs.verdict import Verdict


def check(pred, ref, equal, reason=None):
    v = verify(pred, ref)
    assert isinstance(v, Verdict)
    assert v.correct is equal, (pred, ref, v)
    assert v.score == (1.0 if equal else 0.0)
    if reason:
        assert v.reason == reason, (pred, ref, v)
    if not equal:
        assert v.reason in {"mismatch", "no_answer", "invalid", "timeout"}


@pytest.mark.parametrize("pred, ref", [("\\frac{1}{2}", "\\dfrac12"), ("x=3", "x = 3"), ("10\\%", "10"),
                                       ("30^\\circ", "30"), ("(B)", "B"), ("1,000", "1000")])
def test_exact_after_normalisation(pred, ref):
    check(pred, ref, True, "exact")


@pytest.mark.parametrize("pred, ref", [("0.5", "\\frac{1}{2}"), ("2\\sqrt{3}", "\\sqrt{12}"),
                                       ("1.5\\times10^{3}", "1500"), ("6.02e23", "6.02\\times10^{23}"),
                                       ("\\frac{\\pi}{2}", "\\pi/2"), ("\\sqrt[3]{-8}", "-2"),
                                       ("\\log_2 8", "3"), ("3+4i", "4i+3")])
def test_numeric(pred, ref):
    check(pred, ref, True, "numeric")


@pytest.mark.parametrize("pred, ref", [("(x+1)^2", "x^2+2x+1"), ("2x - y + 3 = 0", "y=2x+3"),
                                       ("\\sin(2x)", "2\\sin x\\cos x"), ("b a^2", "a^2b")])
def test_symbolic(pred, ref):
    check(pred, ref, True, "symbolic")


def test_symbolic_through_sympy_worker():
    # Too large for the bounded in-process evaluator: sympy decides it in the worker.
    v = verify("2^{100001}/2", "2^{100000}")
    assert v.correct and v.reason == "symbolic"
    assert not verify("2^{100001}", "2^{100000}").correct


@pytest.mark.parametrize(
    "pred, ref",
    [
        ("0.33", "\\frac{1}{3}"), ("0.3334", "\\frac13"), ("3.15", "\\pi"), ("1.415", "\\sqrt2"),
        ("[1,2)", "[1,2]"), ("(1,2]", "(1,2)"), ("(-\\infty,3]", "(-\\infty,3)"),
        ("(1,2)", "\\{1,2\\}"), ("\\{1,2\\}", "(1,2)"), ("(2,1)", "(1,2)"),
        ("x=-3", "x=3"), ("-3", "x=3"), ("a=2", "b=2"), ("x^2=4", "x=2"),
        ("0.2", "10\\%"), ("10\\%", "0.01"), ("1,001", "1000"), ("(C)", "B"), ("odd", "\\text{even}"),
        ("x\\le 3", "x<3"), ("\\{1,2,3\\}", "\\{1,2\\}"), ("1+\\sqrt2", "1\\pm\\sqrt2"),
        ("\\begin{pmatrix}1&3\\\\2&4\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}"),
        ("(x-1)^2", "x^2-1"), ("3-4i", "3+4i"), ("2^{10}+1", "2^{10}"),
        ("1267650600228229401496703205377", "2^{100}"),
    ],
)
def test_near_miss_negatives(pred, ref):
    check(pred, ref, False)


@pytest.mark.parametrize(
    "pred, ref",
    [
        ("\\{2,1\\}", "\\{1,2\\}"), ("3, 2", "2, 3"), ("(4,\\infty)\\cup(-\\infty,1)", "(-\\infty,1)\\cup(4,\\infty)"),
        ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1,2)"), ("1, 2", "(1,2)"), ("x \\in [2,5)", "[2,5)"),
        ("1+\\sqrt2, 1-\\sqrt2", "1\\pm\\sqrt{2}"), ("(x,y)=(2,5)", "(2,5)"), ("3>x", "x<3"),
        ("5 \\text{ cm}", "5"), ("\\$12.00", "12"), ("\\text{Evelyn}", "evelyn"),
    ],
)
def test_structures_and_order_rules(pred, ref):
    check(pred, ref, True)


def test_verdict_fields():
    v = verify("Reasoning... so $\\boxed{\\frac{2}{4}}$.", "0.5")
    assert v.correct and v.answer == "\\frac{2}{4}" and v.reason == "numeric"
    assert v.elapsed >= 0 and not v.infra_error
    assert v.details["normalized"] == "\\frac{2}{4}"
    assert v.to_dict()["details"]["reference"] == "0.5"


STRICT = ExtractionConfig(
    rounded_decimals=False, percent_fraction=False, degrees_radians=False, integer_parameter=False
)


@pytest.mark.parametrize(
    "pred, ref",
    [
        ("0.333333", "\\frac13"), ("3.14", "\\pi"), ("1.414", "\\sqrt2"), ("0.1", "10\\%"),
        ("10\\%", "0.1"), ("45^\\circ", "\\frac{\\pi}{4}"), ("x = 2m\\pi", "2k\\pi"),
    ],
)
def test_conventions_equal_by_default_and_different_when_off(pred, ref):
    # math-7 (issue 28): the conventions are options of ExtractionConfig, all on by default
    v = verify(pred, ref)
    assert v.correct and v.details["method"] == "convention", v
    assert not verify(pred, ref, config=STRICT).correct
