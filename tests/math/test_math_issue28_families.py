"""The answer families of issue 28 added in math-7: labelled tuples, set-builder notation and
"or" of relations, circled choices, number words, and the conventions of ExtractionConfig
(rounded decimals, percentages, degrees, integer parameters), each with its near misses."""

import pytest

from marft_envs.math import ExtractionConfig, extract, verify
from marft_envs.math.conventions import renamed_parameter, rounds_to
from marft_envs.math.extract import number_words
from marft_envs.math.normalize import normalize


@pytest.mark.parametrize(
    "pred, ref",
    [
        ("Largest: 9, Smallest: 2", "9, 2"),
        ("p=3, q=5", "3, 5"),
        ("4 and 7", "4, 7"),
        ("\\{x | 1 < x \\leqslant 3\\}", "(1,3]"),
        ("\\{x \\mid x > 2\\}", "(2,\\infty)"),
        ("\\{x \\in \\mathbb{R} : x \\geq 0\\}", "[0, \\infty)"),
        ("x < -2 \\text{ or } x > 2", "(-\\infty,-2)\\cup(2,\\infty)"),
        ("x<-\\frac{4}{3} 或 x>0", "(-\\infty,-\\frac{4}{3})\\cup(0,+\\infty)"),
        ("x < -2 or x > 2", "x^2 > 4"),
        ("The answer is $x < -1$ or $x > 1$.", "(-\\infty,-1)\\cup(1,\\infty)"),
        ("①④", "1, 4"),
        ("②、③", "2, 3"),
        ("x=2k\\pi, k \\in \\mathbb{Z}", "x=2k\\pi"),
        ("\\boxed{\\frac{\\pi}{2}+k\\pi, \\text{ where } k \\text{ is an integer}}", "\\frac{\\pi}{2}+k\\pi"),
        ("the 7th week", "7"),
        ("35 dollars", "35"),
        ("3 \\frac{2}{7}", "\\frac{23}{7}"),
        ("Final Answer:\nThe total is Three hundred sixty-four thousand.", "3.64 \\times 10^5"),
        ("the solution to the problem is $m \\in [\\sqrt{2}, +\\infty)$", "m \\geq \\sqrt{2}"),
    ],
)
def test_equal(pred, ref):
    v = verify(pred, ref)
    assert v.correct, v


def test_a_sentence_reference_states_its_one_formula():
    assert verify("m \\geq \\sqrt{2}", "the solution to the problem is $m \\in [\\sqrt{2}, +\\infty)$").correct


@pytest.mark.parametrize(
    "pred, ref",
    [
        ("Largest: 9, Smallest: 3", "9, 2"),
        ("\\{x | 1 < x \\leqslant 3\\}", "(1,3)"),
        ("x < -2 or x > 2", "(-\\infty,-2)\\cup(3,\\infty)"),
        ("x < -2 or y > 2", "(-\\infty,-2)\\cup(2,\\infty)"),  # two variables: no such set
        ("x \\ge 1 \\text{ and } x \\le 1", "(-\\infty, \\infty)"),  # "and" is no union
        ("①④", "1, 3"),
        ("①④", "14"),
        ("x = 2m\\pi", "2k\\pi + 1"),
        ("2n+1", "2k+1"),  # a renamed parameter only in a family of angles (with \\pi)
        ("46^\\circ", "\\frac{\\pi}{4}"),
        ("12.66", "\\frac{38}{3}"),
        ("0.33", "\\frac{1}{3}"),  # two significant digits: too coarse (STACK's stack-006)
        ("3.14", "3.143"),  # the reference states its own precision
        ("0.1428", "\\frac17"),  # truncated, not rounded
        ("20\\%", "2"),
    ],
)
def test_different(pred, ref):
    v = verify(pred, ref)
    assert not v.correct, v


def test_labelled_lists_and_or_spans_are_extracted():
    assert extract("Largest: 9, Smallest: 2").answer == "(9, 2)"  # ordered (math-9)
    assert extract("The answer is \\( x < -1 \\) 或 \\( x > 1 \\).").answer == "x < -1 or x > 1"
    assert extract("The answer is $12$ and $13$.").answer == "12, 13"


def test_normal_forms():
    assert normalize("①④") == "\\{1,4\\}"  # a set of choices (math-9)
    assert normalize("x < -2 \\text{ or } x > 2") == "x<-2\\cup x>2"
    assert normalize("x = 1 or x = 2") == "x=1,x=2"  # equations: a list, as before
    assert normalize("\\{1,2\\}") == "\\{1,2\\}"


def test_number_words():
    assert number_words("The total is Three hundred sixty-four thousand.") == "364000"
    assert number_words("so the answer is twenty-one") == "21"
    assert number_words("it is one of them") is None


def test_rounds_to_and_renamed_parameter():
    assert rounds_to("12.67", "\\frac{38}{3}") and rounds_to("1.67\\pi", "\\frac{5\\pi}{3}")
    assert rounds_to("12.7", "\\frac{38}{3}")  # three significant digits, rounded at one place
    assert not rounds_to("12.6", "\\frac{38}{3}")
    assert not rounds_to("0.5", "\\frac12")  # exact: the cascade's, not a convention's
    assert renamed_parameter("x=2m\\pi", "2k\\pi") == "2k\\pi"
    assert renamed_parameter("2m\\pi+n", "2k\\pi") is None


@pytest.mark.parametrize(
    "option, pred, ref",
    [
        ("rounded_decimals", "12.67", "\\frac{38}{3}"),
        ("percent_fraction", "-13\\%", "-.13"),
        ("percent_fraction", "2.5", "250\\%"),
        ("degrees_radians", "45^\\circ", "\\frac{\\pi}{4}"),
        ("degrees_radians", "\\frac{\\pi}{4}", "45^\\circ"),
        ("integer_parameter", "x = 2m\\pi", "2k\\pi"),
    ],
)
def test_each_convention_is_its_option(option, pred, ref):
    assert verify(pred, ref).correct
    off = verify(pred, ref, config=ExtractionConfig(**{option: False}))
    assert not off.correct, off


@pytest.mark.parametrize(
    "pred, ref, correct",
    [
        ("\\cos(x)", "\\sin(90^{\\circ}-x)", True),  # MARIO_EVAL's test (mario-03)
        ("\\sin(90^{\\circ}-x)", "\\cos x", True),
        ("\\frac{1}{2}", "\\sin 30^\\circ", True),
        ("\\frac{\\sqrt3}{2}", "\\cos 30°", True),
        ("1", "\\tan\\left(45^\\circ\\right)", True),
        ("\\frac{3}{4}", "\\cos^2 30^{\\circ}", True),
        ("\\sin 30", "\\sin 30^\\circ", False),  # radians: sin(30) is not 1/2
        ("\\sin(x)", "\\sin(90^{\\circ}-x)", False),
        ("30", "30^\\circ", True),  # outside a trig argument the sign stays a label
    ],
)
def test_degrees_in_a_trig_argument_are_an_angle(pred, ref, correct):
    """math-8: a degree sign inside a trigonometric function's argument converts the number to
    radians (in normalisation, not a convention: there it is never a label)."""
    v = verify(pred, ref, config=ExtractionConfig(degrees_radians=False))
    assert v.correct is correct, v


def test_trig_degrees_normal_form():
    assert normalize("\\sin(90^{\\circ}-x)") == "\\sin(\\frac{90\\pi}{180}-x)"
    assert normalize("\\cos^2 60°") == "\\cos^2(\\frac{60\\pi}{180})"
    assert normalize("\\angle A = 30^\\circ") == "\\angle A=30"
    assert normalize("\\sin x + 30^\\circ") == "\\sin x+30"
