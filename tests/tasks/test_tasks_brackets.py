"""The one bracket matcher shared by reference-answer extraction and the math verifier."""

import pytest

from tasks.brackets import bracket_depths, matching_brace


@pytest.mark.parametrize(
    "text, start, expected",
    [
        ("{a}", 0, 2),
        ("x{a{b}c}d", 1, 7),
        (r"{\frac{1}{2}}", 0, 12),
        (r"{\{1,2\}}", 0, 8),  # escaped braces neither open nor close
        (r"{a\}b}", 0, 5),
        (r"{a\\}b}", 0, 4),  # "\\" is one token: the brace after it is real
        ("{a{b}", 0, -1),  # not closed
        ("{}", 0, 1),
        ("{\\", 0, -1),  # a trailing backslash ends the text
    ],
)
def test_matching_brace(text, start, expected):
    assert matching_brace(text, start) == expected


def test_matching_brace_stops_at_end():
    assert matching_brace("{abc}", 0, end=5) == 4
    assert matching_brace("{abc}", 0, end=4) == -1


def test_matching_brace_needs_an_opening_brace():
    with pytest.raises(ValueError, match=r"text\[1\] must be '\{'"):
        matching_brace("{a}", 1)


def test_depths_skip_mode():
    # a bracket has the depth around it; what it encloses is one deeper
    assert list(bracket_depths("{a}b")) == [(0, 0), (1, 1), (2, 0), (3, 0)]
    assert list(bracket_depths(r"\{a")) == [(0, 0), (2, 0)]  # one token for "\{"


def test_depths_latex_mode_counts_set_braces_and_other_brackets():
    got = list(bracket_depths(r"\{(1,2)\}", opens="([{", closes=")]}", escapes="latex"))
    assert got == [(0, 0), (2, 1), (3, 2), (4, 2), (5, 2), (6, 1), (7, 0)]
    # any other backslash is an ordinary character, the next character is read on its own
    got = list(bracket_depths(r"\left(x", opens="(", closes=")", escapes="latex"))
    assert got[-2:] == [(5, 0), (6, 1)]


def test_depths_unbalanced_close_goes_negative():
    assert list(bracket_depths("}a")) == [(0, -1), (1, -1)]


def test_depths_reject_an_unknown_escape_mode():
    with pytest.raises(ValueError, match="escapes must be one of"):
        list(bracket_depths("{}", escapes="none"))
