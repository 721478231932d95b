"""The math grader's version: recorded in every math verdict, result bundle and leaderboard grade.

Bump ``GRADER_VERSION`` (``math-<n>`` -> ``math-<n+1>``) in the same commit as any change that can
turn a verdict's ``correct``/``score`` around for some input: extraction priority, normalisation,
the equivalence cascade, tolerances, time limits, or the pinned version of a grading dependency
(sympy, math-verify). The leaderboard then lists every score of the older version as stale until
``marft-leaderboard regrade`` re-grades it (docs/leaderboard.md). Refactors that grade every input
the same way keep the version.
"""

# math-9: the rules of the adversarial review of math-8 (docs/math_verifier.md).
# math-10: the rules of the second adversarial review (circled choices in products, sentence
# references with several formulas, one variable's solutions vs a tuple, "or" of equations in
# two variables, Greek names in alphabet order).
GRADER_VERSION = "math-10"
