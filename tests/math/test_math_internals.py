"""Pieces under the cascade: the LaTeX parser, size bounds, the worker pool."""

import math

import pytest

from marft_envs.math.evaluate import evaluate
from marft_envs.math.latex import LatexError, parse_latex
from marft_envs.math.magnitude import log2_bounds
from marft_envs.math.worker import WorkerPool, WorkerTimeout


@pytest.mark.parametrize(
    "latex, value",
    [("\\frac{3}{4}", 0.75), ("2^{10}", 1024), ("-2^2", -4), ("2\\cdot 3!", 12),
     ("\\sqrt[3]{27}", 3), ("\\frac{1}{2}\\cdot 4", 2), ("10/5/2", 1), ("\\binom{6}{3}", 20),
     ("\\log_{3} 81", 4), ("|-7|", 7), ("\\lfloor 2.7 \\rfloor", 2), ("1.5e2", 150)],
)
def test_parser_and_exact_evaluation(latex, value):
    assert float(evaluate(parse_latex(latex))) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["\\frac{1}", "2+", "\\unknown{3}", "(1", "@", "x_"])
def test_parser_rejects_what_it_does_not_understand(bad):
    with pytest.raises(LatexError):
        parse_latex(bad)


@pytest.mark.parametrize(
    "latex", ["2^{100}", "3^{-50}", "\\frac{7^{40}}{5^{30}}", "(20)!", "\\sqrt{2^{99}}", "\\pi^{30}",
              "2^{100} + 5", "-3^{41}", "\\frac{1}{2^{64}} + 2^{-70}", "e^{40}"]
)
def test_size_bounds_contain_the_value(latex):
    lo, hi = log2_bounds(parse_latex(latex))
    v = math.log2(abs(float(evaluate(parse_latex(latex)))))
    assert lo <= v <= hi


def test_size_bounds_refuse_possible_cancellation():
    assert log2_bounds(parse_latex("2^{100} - 2^{100}")) is None
    assert log2_bounds(parse_latex("x^{100}")) is None


def _sleep_forever():
    import time

    while True:
        time.sleep(1)


def test_worker_pool_kills_and_replaces():
    pool = WorkerPool(size=1)
    try:
        with pytest.raises(WorkerTimeout):
            pool.run(_sleep_forever, timeout=0.5)
        assert pool.run(math.factorial, 5, timeout=60) == 120
        assert pool.live == 1
    finally:
        pool.close()
