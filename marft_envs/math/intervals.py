"""Solution sets of one-variable linear inequalities, and of written intervals.

``x \\ge 2``, ``2 \\le x``, ``-x \\le -2`` and ``[2, \\infty)`` are the same set; comparing
sets lets an inequality equal the equivalent inequality or interval. Only what can be
decided exactly and cheaply is handled: linear sides in one variable (checked at three
points), rational or high-precision endpoints, chains such as ``1 < x \\le 3``, and unions of
intervals. Anything else gives None ("not a set we understand").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from . import structure as st
from .evaluate import CTX, TooHard, Undefined, evaluate, values_equal
from .latex import LatexError, free_symbols, parse_latex

_UNDECIDED = (TooHard, Undefined, LatexError, ArithmeticError, TypeError, ValueError)
_INF = CTX.inf


@dataclass(frozen=True)
class Interval:
    lo: Any  # a Fraction, an mpf (mpmath is untyped), or -inf
    hi: Any
    lo_closed: bool
    hi_closed: bool


def _mp(x):
    return CTX.mpf(x.numerator) / x.denominator if isinstance(x, Fraction) else x


def _same(a, b) -> bool:
    ma, mb = _mp(a), _mp(b)
    if CTX.isinf(ma) or CTX.isinf(mb):
        return bool(ma == mb)
    return values_equal(a, b, False) is True


def _linear(text: str, var: str):
    """(slope, intercept) of ``text`` as a linear function of ``var``, or None."""
    tree = parse_latex(text)
    # Points on both sides of 0, so |x| or x^2 is not taken for a line.
    values = [evaluate(tree, {var: Fraction(k)}) for k in (0, 1, -2, 3)]
    if not all(isinstance(v, Fraction) for v in values):
        return None
    slope = values[1] - values[0]
    if any(v != values[0] + slope * k for v, k in zip(values, (0, 1, -2, 3), strict=True)):
        return None
    return slope, values[0]


def _half_line(lhs: str, op: str, rhs: str, var: str) -> Interval | None:
    """The set where ``lhs op rhs`` holds, for sides linear in ``var``."""
    a, b = _linear(lhs, var), _linear(rhs, var)
    if a is None or b is None or a[0] == b[0]:
        return None
    slope, intercept = a[0] - b[0], a[1] - b[1]  # lhs - rhs = slope * x + intercept
    root = -intercept / slope
    if op == "!=":
        return None
    less = op in ("<", "<=")
    if slope < 0:
        less = not less
    closed = op in ("<=", ">=")
    return Interval(-_INF, root, False, closed) if less else Interval(root, _INF, closed, False)


def _intersect(x: Interval, y: Interval) -> Interval:
    lo, lo_closed = (x.lo, x.lo_closed) if _mp(x.lo) > _mp(y.lo) else (y.lo, y.lo_closed)
    if _same(x.lo, y.lo):
        lo_closed = x.lo_closed and y.lo_closed
    hi, hi_closed = (x.hi, x.hi_closed) if _mp(x.hi) < _mp(y.hi) else (y.hi, y.hi_closed)
    if _same(x.hi, y.hi):
        hi_closed = x.hi_closed and y.hi_closed
    return Interval(lo, hi, lo_closed, hi_closed)


_FUNCTION_VALUE = re.compile(r"^[A-Za-z]\([A-Za-z]\)$")


def relation_set(rel: st.Relation) -> list[Interval] | None:
    """The solution set of a chain of inequalities in one variable, or None.

    A function value standing alone (``0 < f(x) < 1``) is the variable of its chain.
    """
    rel = st.Relation(tuple("t" if _FUNCTION_VALUE.match(p) else p for p in rel.parts), rel.ops)
    try:
        if any(_ABS_PART.match(p) for p in rel.parts):
            return _abs_chain(rel)
        names = frozenset().union(*(free_symbols(parse_latex(p)) for p in rel.parts))
        if len(names) != 1:
            return None
        (var,) = names
        result = None
        # n parts, n - 1 operators: each operator with its two neighbours
        for lhs, op, rhs in zip(rel.parts, rel.ops, rel.parts[1:], strict=False):
            half = _half_line(lhs, op, rhs, var)
            if half is None:
                return None
            result = half if result is None else _intersect(result, half)
        return [result] if result is not None else None
    except _UNDECIDED:
        return None


_ABS_PART = re.compile(r"^\|([^|]+)\|$")


def _neg(x):
    return -x


def _through_line(iv: Interval, slope: Fraction, intercept: Fraction) -> Interval:
    """The set of x with slope * x + intercept in ``iv``."""
    lo, hi = ((iv.lo - intercept) / slope, (iv.hi - intercept) / slope)
    lo_c, hi_c = iv.lo_closed, iv.hi_closed
    if slope < 0:
        lo, hi, lo_c, hi_c = hi, lo, hi_c, lo_c
    return Interval(lo, hi, lo_c, hi_c)


def _abs_chain(rel: st.Relation) -> list[Interval] | None:
    """``1 \\le |z| \\le 2`` (one ``|linear|`` part, constant others) as intervals of z."""
    found = [(i, m) for i, p in enumerate(rel.parts) if (m := _ABS_PART.match(p))]
    if len(found) != 1:
        return None
    ((k, m),) = found
    inner = m.group(1)
    names = free_symbols(parse_latex(inner))
    others = [p for i, p in enumerate(rel.parts) if i != k]
    if len(names) != 1 or any(free_symbols(parse_latex(p)) for p in others):
        return None
    line = _linear(inner, next(iter(names)))
    t_set = relation_set(
        st.Relation(tuple("t" if i == k else p for i, p in enumerate(rel.parts)), rel.ops)
    )
    if line is None or line[0] == 0 or not t_set:
        return None
    t = _intersect(t_set[0], Interval(Fraction(0), _INF, True, False))
    if _mp(t.lo) > _mp(t.hi):
        return None
    mirrored = Interval(_neg(t.hi), _neg(t.lo), t.hi_closed, t.lo_closed)
    return [_through_line(iv, *line) for iv in (mirrored, t)]


def _endpoint(node) -> object:
    """The value of an interval end; None when it is not a real constant."""
    if not isinstance(node, st.Leaf):
        return None
    tree = parse_latex(node.text)
    if free_symbols(tree):
        return None
    value = evaluate(tree)
    if isinstance(value, Fraction):
        return value
    return value if CTX.im(value) == 0 else None


def interval_set(node) -> list[Interval] | None:
    """The intervals written as ``[a, b)`` or a union of them, or None."""
    items = node.items if isinstance(node, st.Union) else (node,)
    out = []
    names: set[frozenset[str]] = set()
    try:
        for item in items:
            if isinstance(item, st.Relation) and isinstance(node, st.Union):
                # "x < -2 \\cup x > 2" ("x < -2 or x > 2"): a union of one variable's sets
                part = relation_set(item)
                if part is None:
                    return None
                names.add(frozenset().union(*(free_symbols(parse_latex(p)) for p in item.parts)))
                out.extend(part)
                continue
            if not (isinstance(item, st.Seq) and len(item.items) == 2):
                return None
            lo, hi = (_endpoint(i) for i in item.items)
            if lo is None or hi is None:
                return None
            out.append(Interval(lo, hi, item.open == "[", item.close == "]"))
    except _UNDECIDED:
        return None
    return out if len(names) <= 1 else None  # "x < 1 or y > 2" is no set of one variable


def as_set(node) -> list[Interval] | None:
    """An inequality or interval(s) as a list of intervals; None for any other shape."""
    if isinstance(node, st.Relation):
        return relation_set(node)
    if isinstance(node, (st.Seq, st.Union)):
        return interval_set(node)
    return None


def _merged(intervals: list[Interval]) -> list[Interval]:
    """The same set as disjoint intervals: overlapping or touching ones joined."""
    out: list[Interval] = []
    for x in sorted(intervals, key=lambda i: _mp(i.lo)):
        if out:
            last = out[-1]
            touch = _same(last.hi, x.lo) and (last.hi_closed or x.lo_closed)
            if touch or _mp(x.lo) < _mp(last.hi):
                if _mp(x.hi) > _mp(last.hi) or _same(x.hi, last.hi):
                    hi_closed = x.hi_closed or (_same(x.hi, last.hi) and last.hi_closed)
                    out[-1] = Interval(last.lo, x.hi, last.lo_closed, hi_closed)
                continue
        out.append(x)
    return out


def same_set(a: list[Interval], b: list[Interval]) -> bool:
    """Whether two lists of intervals are the same set."""
    a, b = _merged(a), _merged(b)
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if not (_same(x.lo, y.lo) and _same(x.hi, y.hi)):
            return False
        # An infinite end is open however it is written.
        if not CTX.isinf(_mp(x.lo)) and x.lo_closed != y.lo_closed:
            return False
        if not CTX.isinf(_mp(x.hi)) and x.hi_closed != y.hi_closed:
            return False
    return True
