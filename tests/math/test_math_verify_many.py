"""verify_many: same verdicts as verify, in input order, sympy pairs in parallel."""

from marft_envs.math import DEFAULT_TIMEOUT, verify, verify_many

PAIRS = [
    ("\\boxed{\\frac{1}{2}}", "0.5"),
    ("The answer is 7", "8"),
    (None, "1"),
    ("2^{100001}/2", "2^{100000}"),
    ("\\{2,1\\}", "\\{1,2\\}"),
    ("2^{100001}", "2^{100000}"),
    ("x=-3", "x=3"),
]


def test_same_as_verify_and_ordered():
    many = verify_many(PAIRS, workers=2)
    single = [verify(p, r) for p, r in PAIRS]
    assert [(v.correct, v.reason) for v in many] == [(v.correct, v.reason) for v in single]
    assert [v.correct for v in many] == [True, False, False, True, True, False, False]


def test_empty_and_generator_input():
    assert verify_many([]) == []
    assert [v.correct for v in verify_many((p, r) for p, r in PAIRS[:2])] == [True, False]


def test_default_timeout_is_positive():
    assert 0 < DEFAULT_TIMEOUT <= 60
