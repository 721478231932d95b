"""stdout comparison rules for stdin/stdout tasks, each as its benchmark grades it (pure functions).

    outputs_match(actual, expected, rule="tokens")

* ``tokens`` (default, the hand-written ``code`` set and generic records): equal sequences of
  whitespace-separated tokens; any whitespace difference is ignored.
* ``livecodebench``: LiveCodeBench's ``grade_stdio`` (lcb_runner/evaluation/testing_util.py):
  both texts are stripped and split on ``\\n``, every line stripped; the line counts must be
  equal; each line pair must be equal as text, or else, split on whitespace, equal as lists of
  ``decimal.Decimal`` (so ``1.0`` matches ``1``, but there is no tolerance).
* ``codecontests``: CodeContests' ``OutputsMatch`` (execution/tester_sandboxer.cc): both texts
  are split on `` \\n\\t\\r\\v`` and lowercased; equal token lists match; otherwise the counts
  must be equal and each token pair must match: if either is not a number, as text; if either
  is a floating-point number, within an absolute 1e-5; two (32-bit) integers exactly.
* ``apps``: APPS's cascade (apps/eval/testing_util.py) reduced to its two main steps: equal
  token sequences, or the same number of tokens with every numeric pair close under
  ``numpy.allclose``'s default (``|a - b| <= 1e-8 + 1e-5 * |b|``) and other pairs equal.
  Upstream's further fallbacks (token sets, per-line sets) are not applied.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

__all__ = ["OUTPUT_RULES", "outputs_match"]

OUTPUT_RULES = ("tokens", "livecodebench", "codecontests", "apps")

_CC_SPLIT = re.compile(r"[ \n\t\r\v]+")
# absl::SimpleAtoi / SimpleAtod accept optional surrounding whitespace, a sign, and for doubles
# the usual decimal/exponent forms, inf and nan.
_INT = re.compile(r"[+-]?\d{1,10}\Z", re.ASCII)  # a 32-bit int has at most 10 digits
_FLOAT = re.compile(
    r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf(inity)?|nan)\Z",
    re.IGNORECASE | re.ASCII,
)
_INT32 = (-(2**31), 2**31 - 1)


def _lcb_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(t) for t in line.split()]
    except (InvalidOperation, ValueError):
        return None


def _match_livecodebench(actual: str, expected: str) -> bool:
    got, want = _lcb_lines(actual), _lcb_lines(expected)
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        if a == b:
            continue
        da, db = _decimals(a), _decimals(b)
        if da is None or db is None:
            return False
        try:
            if da != db:
                return False
        except InvalidOperation:  # a signalling NaN ("sNaN") refuses to be compared
            return False
    return True


def _cc_int(token: str) -> int | None:
    if _INT.match(token):
        value = int(token)
        if _INT32[0] <= value <= _INT32[1]:
            return value
    return None


def _cc_float(token: str) -> float | None:
    return float(token) if _FLOAT.match(token) else None


def _cc_values_match(a: str, b: str) -> bool:
    ai, bi, ad, bd = _cc_int(a), _cc_int(b), _cc_float(a), _cc_float(b)
    if (ai is None and ad is None) or (bi is None and bd is None):
        return a == b
    if ai is None or bi is None:  # at least one is a float only: tolerance
        return abs(ad - bd) < 1e-5  # type: ignore[operator]
    return ai == bi


def _match_codecontests(actual: str, expected: str) -> bool:
    got = [t.lower() for t in _CC_SPLIT.split(actual) if t]
    want = [t.lower() for t in _CC_SPLIT.split(expected) if t]
    if got == want:
        return True
    return len(got) == len(want) and all(
        _cc_values_match(a, b) for a, b in zip(got, want, strict=True)
    )


def _number(token: str) -> float | None:
    if not _FLOAT.match(token):
        return None
    value = float(token)
    return value if math.isfinite(value) else None


def _match_apps(actual: str, expected: str) -> bool:
    got, want = actual.split(), expected.split()
    if got == want:
        return True
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        if a == b:
            continue
        x, y = _number(a), _number(b)
        if x is None or y is None or abs(x - y) > 1e-8 + 1e-5 * abs(y):
            return False
    return True


_RULES = {
    "tokens": lambda actual, expected: actual.split() == expected.split(),
    "livecodebench": _match_livecodebench,
    "codecontests": _match_codecontests,
    "apps": _match_apps,
}


def outputs_match(actual: str, expected: str, rule: str = "tokens") -> bool:
    """Whether a program's stdout ``actual`` is accepted for ``expected`` under ``rule``."""
    try:
        match = _RULES[rule]
    except KeyError:
        raise ValueError(f"unknown output rule {rule!r}; valid rules are {OUTPUT_RULES}") from None
    return match(actual, expected)
