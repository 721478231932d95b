"""The sympy backend: build sympy objects from expression trees and decide equality.

Only the worker process imports this module (see ``worker.py``): sympy can run
for ever on adversarial input, and the worker can be killed.
"""

from __future__ import annotations

import sympy

from . import structure as st
from .latex import LatexError, Tree, parse_latex

_CONSTANTS = {"pi": sympy.pi, "E": sympy.E, "I": sympy.I, "oo": sympy.oo}
_FUNCTIONS = {
    "sqrt": sympy.sqrt,
    "log": sympy.log,
    "Abs": sympy.Abs,
    "floor": sympy.floor,
    "ceiling": sympy.ceiling,
    "factorial": sympy.factorial,
    "binomial": sympy.binomial,
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "sec": sympy.sec,
    "csc": sympy.csc,
    "cot": sympy.cot,
    "asin": sympy.asin,
    "acos": sympy.acos,
    "atan": sympy.atan,
    "sinh": sympy.sinh,
    "cosh": sympy.cosh,
    "tanh": sympy.tanh,
    "sech": sympy.sech,
    "csch": sympy.csch,
    "coth": sympy.coth,
    "exp": sympy.exp,
}
_DECIMAL_TOL = sympy.Rational(1, 10**9)


def _root(x, n):
    """Real root for odd n (matches the in-process evaluator)."""
    if n.is_integer and n.is_odd:
        return sympy.real_root(x, n)
    return sympy.root(x, n)


def to_sympy(tree: Tree):
    """The sympy expression of a tree (variables become real-valued symbols? no: plain)."""
    kind = tree[0]
    if kind == "n":
        return sympy.Rational(tree[1].numerator, tree[1].denominator)
    if kind == "c":
        return _CONSTANTS[tree[1]]
    if kind == "v":
        return sympy.Symbol(tree[1])
    if kind == "+":
        return sympy.Add(*(to_sympy(t) for t in tree[1]))
    if kind == "*":
        return sympy.Mul(*(to_sympy(t) for t in tree[1]))
    if kind == "neg":
        return -to_sympy(tree[1])
    if kind == "/":
        return to_sympy(tree[1]) / to_sympy(tree[2])
    if kind == "^":
        return sympy.Pow(to_sympy(tree[1]), to_sympy(tree[2]))
    if kind == "f":
        args = [to_sympy(t) for t in tree[2]]
        if tree[1] == "root":
            return _root(*args)
        return _FUNCTIONS[tree[1]](*args)
    raise ValueError(f"unknown node {kind}")


def _is_zero(expr) -> bool:
    if expr == 0:
        return True
    simplified = sympy.simplify(expr)
    if simplified == 0:
        return True
    return bool(simplified.equals(0))


_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _ratio_differs(x, y) -> bool:
    """Whether ``x / y`` (sympy cancels common powers: ``(x-a)^{6000} / (x-a)^{5999}`` is
    ``x - a``) is not 1 at some point with positive integer values, where both sides are
    defined and ``y`` is clearly not zero. Cheap where expanding would take seconds."""
    if y == 0:
        return False
    q = x / y
    names = sorted(q.free_symbols | y.free_symbols, key=str)
    if not names:
        return False
    for k in range(3):
        env = {s: sympy.Integer(_PRIMES[(k * 5 + i) % len(_PRIMES)]) for i, s in enumerate(names)}
        yv, qv = sympy.N(y.subs(env), 50), sympy.N(q.subs(env), 50)
        if not (yv.is_number and qv.is_number and yv.is_finite and qv.is_finite):
            continue
        if abs(yv) > sympy.Float("1e-30") and abs(qv - 1) > sympy.Float("1e-20"):
            return True
    return False


def trees_equal(a: Tree, b: Tree, approximate: bool) -> bool:
    """Whether two expressions are equal (within 1e-9 relative if one is a decimal)."""
    x, y = to_sympy(a), to_sympy(b)
    if approximate and not (x.free_symbols or y.free_symbols):
        d = abs(sympy.N(x - y, 30))
        return bool(d <= _DECIMAL_TOL * max(abs(sympy.N(x, 30)), abs(sympy.N(y, 30))))
    if not approximate and _ratio_differs(x, y):
        return False
    return _is_zero(x - y)


def equations_equal(f: Tree, g: Tree) -> bool:
    """Whether residuals f = 0 and g = 0 are the same equation (f/g a non-zero constant)."""
    x, y = to_sympy(f), to_sympy(g)
    if x == 0 or y == 0:
        return False
    ratio = sympy.simplify(x / y)
    return bool(ratio.is_number and ratio != 0 and ratio.is_finite)


def real_solutions_are(f: Tree, var: str, values: list[Tree]) -> bool:
    """Whether the real solutions of ``f = 0`` in ``var`` are exactly ``values``."""
    x = sympy.Symbol(var)
    found = sympy.solveset(to_sympy(f).subs(sympy.Symbol(var), x), x, sympy.S.Reals)
    if not isinstance(found, sympy.FiniteSet):
        return False
    given = [to_sympy(v) for v in values]
    unmatched = list(found)
    for g in dict.fromkeys(given):
        hit = next((s for s in unmatched if _is_zero(s - g)), None)
        if hit is None:
            return False
        unmatched.remove(hit)
    return not unmatched


_RELATIONS = {"<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge}


def _interval(seq: st.Seq):
    if len(seq.items) != 2 or not all(isinstance(i, st.Leaf) for i in seq.items):
        return None
    lo, hi = (to_sympy(parse_latex(i.text)) for i in seq.items)
    if lo.free_symbols or hi.free_symbols:
        return None
    return sympy.Interval(lo, hi, seq.open == "(", seq.close == ")")


def real_set(node, var: str):
    """The set of reals a relation (in ``var``), an interval or a union of them describes, or
    None when it is not one sympy solves."""
    try:
        if isinstance(node, st.Seq):
            return _interval(node)
        if isinstance(node, st.Union):
            parts = [real_set(i, var) for i in node.items]
            return None if any(x is None for x in parts) else sympy.Union(*parts)
        if isinstance(node, st.Relation):
            x = sympy.Symbol(var, real=True)
            sides = [to_sympy(parse_latex(t)).subs(sympy.Symbol(var), x) for t in node.parts]
            out = sympy.S.Reals
            for a, op, b in zip(sides, node.ops, sides[1:], strict=False):
                found = sympy.solveset(_RELATIONS[op](a, b), x, sympy.S.Reals)
                if isinstance(found, sympy.ConditionSet):
                    return None
                out = sympy.Intersection(out, found)
            return out
    except (LatexError, ValueError, TypeError, NotImplementedError):
        return None
    return None
