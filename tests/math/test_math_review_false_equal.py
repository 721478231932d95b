"""The five false "equal"s an independent review of math-5 found (fixed in math-6), on the
review's exact pairs, with the near cases that must stay as they were."""

from __future__ import annotations

import pytest

from marft_envs.math import ExtractionConfig, extract, verify
from marft_envs.math.normalize import normalize

LOOSE = ExtractionConfig(real_domain="loose")


def boxed(answer: str) -> str:
    return "\\boxed{" + answer + "}"


# 1. Python's "**" groups to the right: a**b**c is a^(b^c).


def test_python_power_chain_is_right_associative() -> None:
    assert normalize("2**3**2") == "2^{3^{2}}"
    assert normalize("x**y**z") == "x^{y^{z}}"
    assert normalize("(x**y)**z") == "(x^y)^z"
    assert normalize("x**2") == "x^2"  # a single "**" is a plain "^", as before
    assert normalize("**C**") == "^C^"  # markdown bold is not a chain


@pytest.mark.parametrize(
    ("pred", "gold", "equal"),
    [
        ("2**3**2", "64", False),
        ("2**3**2", "512", True),
        ("x**y**z", "(x^y)^z", False),
        ("x**y**z", "x^{y^z}", True),
        ("2**-1**2", "\\frac{1}{2}", True),  # 2**(-(1**2))
        ("(2**3)**2", "64", True),
    ],
)
def test_python_power_chain_verdicts(pred: str, gold: str, equal: bool) -> None:
    assert verify(boxed(pred), gold).correct is equal


# 2. A letter inside a formula is a symbol, not a choice letter.


@pytest.mark.parametrize("gold", ["E", "\\text{(E)}", "\\textbf{(E)}"])
@pytest.mark.parametrize("pred", ["\\mathrm{E}*2", "E \\cdot 2"])
def test_letter_in_boxed_formula_is_not_a_choice(pred: str, gold: str) -> None:
    v = verify(boxed(pred), gold)
    assert not v.correct, (pred, gold, v.answer, v.answer_source)


@pytest.mark.parametrize(
    ("pred", "golds"),
    [("A+B", ("A", "B")), ("A^2", ("A",)), ("C/2", ("C",)), ("B-1", ("B",))],
)
def test_letters_of_boxed_formulas_are_not_choices(pred: str, golds: tuple[str, ...]) -> None:
    for gold in golds:
        v = verify(boxed(pred), gold)
        assert not v.correct, (pred, gold, v.answer, v.answer_source)


@pytest.mark.parametrize(
    "pred", ["E", "(E)", "\\text{(E)}", "\\textbf{E}", "E. Eve", "E - Eve", "option E"]
)
def test_boxed_choice_letters_still_read(pred: str) -> None:
    assert verify(boxed(pred), "E").correct, pred


def test_letters_in_formulas_in_prose_are_not_choices() -> None:
    assert extract("so $A+B$ is it", choice=True).answer is None
    assert extract("It is B - because of the sign.", choice=True).answer == "B"


# 3. Real domain: a point where only one side is real is a difference of domains.

DOMAIN_PAIRS = [
    ("\\ln|x|", "\\ln x"),
    ("\\ln|x|+C", "\\ln x + C"),
    ("\\sqrt{x}", "\\sqrt{|x|}"),
    ("\\frac{1}{\\sqrt{x}}", "\\frac{1}{\\sqrt{|x|}}"),
    ("\\log_x 2", "\\log_{|x|} 2"),
    ("f(x)=\\sqrt{x}", "f(t)=\\sqrt{|t|}"),
]


@pytest.mark.parametrize(("gold", "pred"), DOMAIN_PAIRS)
def test_functions_with_other_domains_differ(gold: str, pred: str) -> None:
    assert not verify(boxed(pred), gold).correct
    assert not verify(boxed(gold), pred).correct
    assert not verify(boxed(pred), gold, config=ExtractionConfig(real_domain=False)).correct


@pytest.mark.parametrize(("gold", "pred"), DOMAIN_PAIRS)
def test_loose_real_domain_keeps_the_old_rule(gold: str, pred: str) -> None:
    """``real_domain="loose"`` is the math-4/5 rule, which equates these (documented)."""
    assert verify(boxed(pred), gold, config=LOOSE).correct


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("\\frac{1}{\\sqrt x}", "\\sqrt{1/x}"),  # neither side real at negative x
        ("\\sqrt{x^2}", "|x|"),
        ("((x-2)^3)^k", "(x-2)^{3k}"),
        ("\\ln(x^2)", "2\\ln|x|"),
    ],
)
def test_equal_real_functions_stay_equal(pred: str, gold: str) -> None:
    assert verify(boxed(pred), gold).correct


# 4. Probe points with negative bases and fractional exponents.


@pytest.mark.parametrize("config", [ExtractionConfig(), LOOSE])
def test_probe_points_find_a_negative_base_counterexample(config: ExtractionConfig) -> None:
    # at x = -1, k = 3/2: (x^2)^{k/3} = 1, x^{2k/3} = -1
    assert not verify(boxed("(x^{2})^{k/3}"), "x^{2k/3}", config=config).correct
    assert not verify(boxed("x^{2k/3}"), "(x^{2})^{k/3}", config=config).correct


# 5. Inequalities are sets of a named variable.


@pytest.mark.parametrize(
    ("pred", "gold"),
    [("y>1", "x>1"), ("1<y\\le3", "1<x\\le3"), ("t \\ge 2", "x \\ge 2"), ("y=1", "x=1")],
)
def test_relations_in_another_variable_differ(pred: str, gold: str) -> None:
    assert not verify(boxed(pred), gold).correct


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("(1, \\infty)", "x>1"),
        ("x>1", "(1,\\infty)"),
        ("1<x\\le3", "(1,3]"),
        ("-x < -1", "x > 1"),
        ("2 \\le x", "x \\ge 2"),
        ("0 < f(x) < 1", "(0,1)"),
    ],
)
def test_relations_in_the_same_variable_or_against_intervals_still_equal(
    pred: str, gold: str
) -> None:
    assert verify(boxed(pred), gold).correct
