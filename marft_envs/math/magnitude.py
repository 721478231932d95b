"""Cheap bounds on the size of huge constants, so ``2^{2^{2^{2^{2^{100}}}}}`` vs ``3``
is "different" in microseconds instead of a sympy time-out.

``log2_bounds(tree)`` returns ``(lo, hi)`` with ``2**lo <= |value| <= 2**hi`` (floats,
possibly infinite), or None when we cannot bound the value (variables, possible
cancellation, unknown functions). Only the forms that make values astronomically
large or small are handled: numbers, pi, e, products, quotients, powers,
factorials, roots, and sums with one dominant term.
"""

from __future__ import annotations

import math
from fractions import Fraction

from .latex import Tree

_LOG2_E = math.log2(math.e)
_SLACK = 1e-9  # relative slack for float rounding in the bounds
_CONST = {"pi": math.log2(math.pi), "E": _LOG2_E}


def _exp2(x: float) -> float:
    """2**x as a float, inf when it overflows."""
    return math.inf if x > 1023 else 2.0**x


def _log2_fraction(q: Fraction) -> float:
    return math.log2(abs(q.numerator)) - math.log2(q.denominator)


def _widen(lo: float, hi: float) -> tuple[float, float] | None:
    if math.isnan(lo) or math.isnan(hi):
        return None
    if math.isfinite(lo):
        lo -= abs(lo) * _SLACK + 1e-12
    if math.isfinite(hi):
        hi += abs(hi) * _SLACK + 1e-12
    return lo, hi


def _positive(tree: Tree) -> bool:
    """Conservatively: is the value certainly a positive real?"""
    kind = tree[0]
    if kind == "n":
        return tree[1] > 0
    if kind == "c":
        return tree[1] in _CONST
    if kind in ("+", "*"):
        return all(_positive(t) for t in tree[1])
    if kind == "/":
        return _positive(tree[1]) and _positive(tree[2])
    if kind == "^":  # a positive base to a real power
        exp = tree[2][1] if tree[2][0] == "neg" else tree[2]
        return _positive(tree[1]) and _positive(exp)
    if kind == "f":
        return tree[1] in ("factorial", "sqrt", "root", "exp") and _positive(tree[2][0])
    return False


def _value_bounds(tree: Tree) -> tuple[float, float] | None:
    """Bounds on the value (not its log) of a certainly-positive tree."""
    if not _positive(tree):
        return None
    b = log2_bounds(tree)
    return None if b is None else (_exp2(b[0]), _exp2(b[1]))


def _power(base: Tree, exp: Tree) -> tuple[float, float] | None:
    lb = log2_bounds(base)
    if exp[0] == "neg":
        ev = _value_bounds(exp[1])
        ev = None if ev is None else (-ev[1], -ev[0])
    else:
        ev = _value_bounds(exp)
    if lb is None or ev is None or lb[0] <= 0 <= lb[1]:
        return None  # |base| may be 1: the power may be anything near 1
    products = [e * b for e in ev for b in lb]
    if any(math.isnan(p) for p in products):
        return None
    return min(products), max(products)


def _all_bounds(trees: tuple) -> list[tuple[float, float]] | None:
    """The bounds of every tree, or None if one of them is unknown."""
    out = []
    for t in trees:
        b = log2_bounds(t)
        if b is None:
            return None
        out.append(b)
    return out


def _sum(terms: tuple) -> tuple[float, float] | None:
    bounds = _all_bounds(terms)
    if bounds is None:
        return None
    top = max(range(len(bounds)), key=lambda i: bounds[i][0])
    rest_hi = max((b[1] for i, b in enumerate(bounds) if i != top), default=-math.inf)
    if rest_hi == math.inf or bounds[top][0] < rest_hi + math.log2(len(bounds)) + 1:
        return None  # no single dominant term: the sum could cancel
    return bounds[top][0] - 1, max(b[1] for b in bounds) + math.log2(len(bounds))


def log2_bounds(tree: Tree) -> tuple[float, float] | None:
    """``(lo, hi)`` with ``2**lo <= |value| <= 2**hi``, or None if unknown."""
    kind = tree[0]
    if kind == "n":
        if tree[1] == 0:
            return None
        v = _log2_fraction(tree[1])
        return _widen(v, v)
    if kind == "c":
        c = _CONST.get(tree[1])
        return None if c is None else _widen(c, c)
    if kind == "neg":
        return log2_bounds(tree[1])
    if kind == "*":
        parts = _all_bounds(tree[1])
        if parts is None:
            return None
        return _widen(sum(p[0] for p in parts), sum(p[1] for p in parts))
    if kind == "/":
        a, b = log2_bounds(tree[1]), log2_bounds(tree[2])
        return None if a is None or b is None else _widen(a[0] - b[1], a[1] - b[0])
    if kind == "+":
        s = _sum(tree[1])
        return None if s is None else _widen(*s)
    if kind == "^":
        p = _power(tree[1], tree[2])
        return None if p is None else _widen(*p)
    if kind == "f":
        name, args = tree[1], tree[2]
        if name == "sqrt":
            a = log2_bounds(args[0])
            return None if a is None else _widen(a[0] / 2, a[1] / 2)
        if name == "factorial":
            n = _value_bounds(args[0])
            if n is None or n[0] < 16:
                return None  # small factorials are evaluated exactly anyway
            lo = n[0] * (math.log2(n[0]) - _LOG2_E)  # Stirling: n! >= (n/e)^n
            hi = n[1] * math.log2(n[1]) + 1 if math.isfinite(n[1]) else math.inf
            return _widen(lo, hi)
    return None


def clearly_different(a: Tree, b: Tree) -> bool:
    """True when the magnitudes of two constants cannot overlap (one is astronomically bigger)."""
    x, y = log2_bounds(a), log2_bounds(b)
    zero = ("n", Fraction(0), False), ("n", Fraction(0), True)
    if x is not None and y is None:
        return b in zero  # a nonzero bound vs a literal 0
    if y is not None and x is None:
        return a in zero
    if x is None or y is None:
        return False
    return x[0] > y[1] + 1 or y[0] > x[1] + 1
