import pytest

from tasks.answers import gsm8k_final_answer, last_boxed


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"so $x = \boxed{5}$.", "5"),
        (r"$\boxed{\frac{1}{2}}$", r"\frac{1}{2}"),
        (r"first \boxed{1} then \boxed{2}", "2"),
        (r"\boxed{\left( 3, \frac{\pi}{2} \right)}", r"\left( 3, \frac{\pi}{2} \right)"),
        (r"the answer is $\fbox{7}$", "7"),
        (r"\boxed{a} and finally \fbox{b}", "b"),
        (r"our answer is $\boxed 2$.", "2"),
        (r"$x^2 + y^2 = \boxed 9$", "9"),
        (r"\boxed{\text{(A)}}", r"\text{(A)}"),
        (r"\boxed{}", ""),
        ("no box here", None),
        (r"\boxed{unclosed {", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("He has 5 + 3 = <<5+3=8>>8 apples.\n#### 8", "8"),
        ("...\n#### 1,000", "1000"),
        ("...\n#### 1,234,567", "1234567"),
        ("...\n####  -3.5 ", "-3.5"),
        ("a #### b\n#### 12", "12"),
        ("no marker", None),
        ("#### ", None),
    ],
)
def test_gsm8k_final_answer(text, expected):
    assert gsm8k_final_answer(text) == expected
