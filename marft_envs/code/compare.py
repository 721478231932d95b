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

Relaxed comparisons for problems whose statement accepts more than one output (the special
judge, :mod:`marft_envs.code.judge`, decides when they apply; they are never a task's rule):

* :func:`tolerance_match`: equal token counts, each pair equal as text or both finite numbers
  within a stated absolute or relative error, as testlib's ``doubleCompare`` (testlib.h,
  MikeMirzayanov/testlib; the ``dcmp`` checker): ``|a - b| <= abs_tol``, or ``a`` within
  ``b * (1 -/+ rel_tol)``; each tolerance gets testlib's ``1e-15`` slack.
* :func:`any_order_match`: with ``scope="within_line"``, the same non-blank lines in the same
  order, each line's tokens equal as a multiset (``print the k indices in any order`` on one
  line); with ``scope="lines"``, the same non-blank lines as a multiset, each line's tokens in
  their order (``print the edges in any order``, one edge a line). Optionally with a tolerance.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

__all__ = [
    "ANY_ORDER_SCOPES",
    "OUTPUT_RULES",
    "any_order_match",
    "outputs_match",
    "tolerance_match",
]

OUTPUT_RULES = ("tokens", "livecodebench", "codecontests", "apps")
#: What :func:`any_order_match` frees: the order of the tokens within each line, or the order
#: of the lines.
ANY_ORDER_SCOPES = ("within_line", "lines")

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


#: testlib's slack on a stated error (``MAX_DOUBLE_ERROR += 1E-15`` in ``doubleCompare``).
_TESTLIB_SLACK = 1e-15


def _check_tolerances(abs_tol: float, rel_tol: float) -> None:
    for name, value in (("abs_tol", abs_tol), ("rel_tol", rel_tol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, got {type(value).__name__}")
        if not (math.isfinite(value) and 0 <= value < 1):
            raise ValueError(f"{name} must be a finite number in [0, 1), got {value!r}")


def _close(a: str, b: str, abs_tol: float, rel_tol: float) -> bool:
    """Token ``a`` (the program's) is accepted for ``b`` (the expected one): equal text, or
    both finite numbers with ``a`` within the absolute or the relative error of ``b``."""
    if a == b:
        return True
    x, y = _number(a), _number(b)
    if x is None or y is None:
        return False
    if abs(x - y) <= abs_tol + _TESTLIB_SLACK:
        return True
    r = rel_tol + _TESTLIB_SLACK
    lo, hi = sorted((y * (1.0 - r), y * (1.0 + r)))
    return lo <= x <= hi


def tolerance_match(actual: str, expected: str, abs_tol: float, rel_tol: float) -> bool:
    """Whether ``actual`` has the tokens of ``expected``, numbers within ``abs_tol`` absolute or
    ``rel_tol`` relative error (either suffices; pass 0 to disable one), other tokens equal.

    Whitespace is ignored as by the ``tokens`` rule. Non-finite numbers (``nan``, ``inf``) and
    tokens that are not plain decimal numbers (``0x10``, ``1_000``) compare as text only.
    """
    _check_tolerances(abs_tol, rel_tol)
    got, want = actual.split(), expected.split()
    return len(got) == len(want) and all(
        _close(a, b, abs_tol, rel_tol) for a, b in zip(got, want, strict=True)
    )


def _sort_key(token: str) -> tuple[int, float, str]:
    value = _number(token)
    return (0, value, "") if value is not None else (1, 0.0, token)


def _line_key(tokens: list[str]) -> tuple[tuple[int, float, str], ...]:
    return tuple(_sort_key(t) for t in tokens)


def _lines_close(g: list[str], w: list[str], abs_tol: float, rel_tol: float) -> bool:
    return len(g) == len(w) and all(
        _close(a, b, abs_tol, rel_tol) for a, b in zip(g, w, strict=True)
    )


def any_order_match(
    actual: str,
    expected: str,
    abs_tol: float | None = None,
    rel_tol: float | None = None,
    scope: str = "within_line",
) -> bool:
    """Whether ``actual`` has the non-blank lines of ``expected`` with one order freed.

    ``scope="within_line"`` (the default): the lines in the same order, each holding the same
    tokens in any order (a multiset: a repeated token must be repeated); tokens never move to
    another line. ``scope="lines"``: the same lines in any order (a multiset of lines), each
    line's tokens in their own order (an edge ``p c`` stays ``p c``). Upstream APPS's last
    fallback (per-line token *sets*, lines in any order) frees both at once and accepts outputs
    most problems reject. With ``abs_tol``/``rel_tol`` the tokens of each line (within a line)
    or the lines (by their tokens) are sorted, numbers by value before other tokens, and
    compared pairwise with that tolerance: what is accepted is always a valid pairing.
    """
    if scope not in ANY_ORDER_SCOPES:
        raise ValueError(f"scope must be one of {ANY_ORDER_SCOPES}, got {scope!r}")
    tolerant = abs_tol is not None or rel_tol is not None
    a_tol, r_tol = float(abs_tol or 0.0), float(rel_tol or 0.0)
    if tolerant:
        _check_tolerances(a_tol, r_tol)
    got = [line.split() for line in actual.splitlines() if line.strip()]
    want = [line.split() for line in expected.splitlines() if line.strip()]
    if len(got) != len(want):
        return False
    if scope == "lines":
        if not tolerant:
            return sorted(got) == sorted(want)
        return all(
            _lines_close(g, w, a_tol, r_tol)
            for g, w in zip(sorted(got, key=_line_key), sorted(want, key=_line_key), strict=True)
        )
    for g, w in zip(got, want, strict=True):
        if len(g) != len(w):
            return False
        if not tolerant:
            if sorted(g) != sorted(w):
                return False
        elif not _lines_close(sorted(g, key=_sort_key), sorted(w, key=_sort_key), a_tol, r_tol):
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
