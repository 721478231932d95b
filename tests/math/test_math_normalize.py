"""Normalisation: cosmetic differences disappear, values do not change."""

import pytest

from marft_envs.math import normalize


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("$\\dfrac{1}{2}$", "\\frac{1}{2}"),
        ("\\tfrac12", "\\frac{1}{2}"),
        ("\\frac 3 4", "\\frac{3}{4}"),
        ("\\sqrt2", "\\sqrt{2}"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("30^\\circ", "30"),
        ("30^{\\circ}", "30"),
        ("10\\%", "10"),
        ("\\$1,000", "1000"),
        ("1{,}000", "1000"),
        ("1\\,000", "1000"),
        ("(1,000)", "(1,000)"),
        ("5\\text{ cm}^2", "5"),
        ("12 inches", "12"),
        ("\\text{Evelyn}", "Evelyn"),
        ("\\textbf{(B)}", "B"),
        ("1 \\text{ and } 2", "1,2"),
        ("x \\leq 3", "x\\le 3"),
        ("2\\pi r", "2\\pi r"),
        ("+5.", "5"),
        ("\u221a2 \u00d7 \u03c0", "\\sqrt{2}\\times\\pi"),
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
    ],
)
def test_normalize(raw, expected):
    assert normalize(raw) == expected


def test_normalize_keeps_values_apart():
    assert normalize("-3") != normalize("3")
    assert normalize("0.1") != normalize("10\\%")
    assert normalize("[1,2)") != normalize("[1,2]")


def test_normalize_never_raises_on_garbage():
    for junk in ["\\frac{", "}}}{{{", "\x00\ud800", "\\text{" * 100, "$" * 1000]:
        assert isinstance(normalize(junk), str)
