"""Answer extraction: boxes, answer phrases, bare answers, the last-number fallback."""

import pytest

from marft_envs.math import extract_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so $\\boxed{5}$.", "5"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("nested \\boxed{\\frac{\\sqrt{2}}{2}} end", "\\frac{\\sqrt{2}}{2}"),
        ("set \\boxed{\\{1,2\\}}", "\\{1,2\\}"),
        ("first \\boxed{1} then \\boxed{2}", "2"),
        ("\\fbox{7}", "7"),
        ("$\\boxed 5$", "5"),
        ("\\boxed 12 apples", "12"),
        ("closed \\boxed{3} then unclosed \\boxed{4", "3"),
        ("The answer is 42.", "42"),
        ("So the final answer is $x = 3$ because ...", "x = 3"),
        ("Final answer: \\frac{3}{4}", "\\frac{3}{4}"),
        ("**Answer:** 17", "17"),
        ("work...\n#### 1,234", "1,234"),
        ("The answer is 1.5. It checks out.", "1.5"),
        ("\\frac{1}{2}", "\\frac{1}{2}"),
        ("$x=-3$", "$x=-3$"),
        ("She has 18 apples left.", "18"),
        ("It costs -3.5 dollars, or 7/2", "7/2"),
    ],
)
def test_extract(text, expected):
    assert extract_answer(text) == expected


def test_box_beats_answer_phrase_and_numbers():
    assert extract_answer("The answer is 3. Actually \\boxed{4}, not 5") == "4"


def test_last_number_fallback_is_a_setting():
    text = "We computed everything and got 12 in the end"
    assert extract_answer(text) == "12"
    assert extract_answer(text, last_number_fallback=False) is None


@pytest.mark.parametrize("text", [None, "", "   ", "no digits in this prose at all"])
def test_nothing_to_extract(text):
    assert extract_answer(text) is None


def test_non_strings_are_converted():
    assert extract_answer(12) == "12"
    assert extract_answer(b"\\boxed{9}") == "9"


def test_many_unclosed_boxes_stay_bounded():
    text = "\\boxed{" * 50_000 + " the answer is 8"
    assert extract_answer(text) == "8"
