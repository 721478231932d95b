"""stdout comparison rules, checked against the upstream graders' own cases."""

import pytest

from marft_envs.code.compare import OUTPUT_RULES, outputs_match


# CodeContests' OutputsMatchTest cases (execution/tester_sandboxer_test.cc), verbatim inputs.
@pytest.mark.parametrize(
    "actual, expected, want",
    [
        ("abc def", "abc def", True),
        ("abc deg", "abc def", False),
        ("abc def", "abc def 123", False),
        ("abc DEF", "abc def", True),
        ("abc 123", "abc 123.000001", True),
        ("abc 123", "abc 123.1", False),
    ],
)
def test_codecontests_upstream_cases(actual, expected, want):
    assert outputs_match(actual, expected, "codecontests") is want


def test_codecontests_whitespace_and_integers():
    assert outputs_match("1\n2\n", "1 2", "codecontests")
    assert not outputs_match("3", "4", "codecontests")
    assert not outputs_match("yes", "no", "codecontests")


@pytest.mark.parametrize(
    "actual, expected, want",
    [
        ("6\n2.00\n", "6\n2.00", True),  # trailing whitespace stripped
        ("  6  \n 2.00", "6\n2.00\n", True),  # each line stripped
        ("6 2.00", "6\n2.00", False),  # line structure matters
        ("2", "2.00", True),  # Decimal equality
        ("0.1", "0.10000001", False),  # no tolerance
        ("1e2", "100", True),
        ("abc", "ABC", False),  # case matters
        ("a  b", "a b", False),  # differ as text, and are not numbers
        ("1  2", "1 2", True),  # differ as text, equal as Decimals
    ],
)
def test_livecodebench_rule(actual, expected, want):
    assert outputs_match(actual, expected, "livecodebench") is want


def test_apps_rule_tolerates_float_noise_only():
    assert outputs_match("0.3333333", "0.33333333", "apps")
    assert not outputs_match("0.33", "0.34", "apps")
    assert outputs_match("1  2\n", "1 2", "apps")


def test_unknown_rule_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid rules are"):
        outputs_match("1", "1", "exact")
    assert "tokens" in OUTPUT_RULES


@pytest.mark.parametrize("actual", ["sNaN", "1 sNaN", "-sNaN123"])
def test_livecodebench_signalling_nan_is_a_wrong_answer(actual):
    """Decimal('sNaN') is a valid Decimal whose comparison raises InvalidOperation: a program
    printing it must get a wrong answer, not an exception (the verifier turned it into an
    infrastructure error, i.e. an unscored episode the policy could hide failures in)."""
    assert outputs_match(actual, "1 2" if " " in actual else "1", "livecodebench") is False
    assert outputs_match("1", actual, "livecodebench") is False


def test_codecontests_long_and_non_ascii_numbers():
    """A 5000-digit token is no 32-bit integer (int() of it raised ValueError past Python's
    4300-digit limit, an infrastructure error); absl's SimpleAtoi/SimpleAtod read ASCII
    digits only, so Arabic-Indic digits are text."""
    assert outputs_match("1" * 5000, "2", "codecontests") is False
    assert outputs_match("2", "1" * 5000, "codecontests") is False
    assert outputs_match("1" * 5000, "1" * 5000 + " ", "codecontests") is True
    assert outputs_match("\u0661\u0662\u0663", "123", "codecontests") is False
