"""The sympy backend: build sympy objects from expression trees and decide equality.

Only the worker process imports this module (see ``worker.py``): sympy can run
for ever on adversarial input, and the worker can be killed.
"""

from __future__ import annotations

import sympy

from .latex import Tree

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


def trees_equal(a: Tree, b: Tree, approximate: bool) -> bool:
    """Whether two expressions are equal (within 1e-9 relative if one is a decimal)."""
    x, y = to_sympy(a), to_sympy(b)
    if approximate and not (x.free_symbols or y.free_symbols):
        d = abs(sympy.N(x - y, 30))
        return bool(d <= _DECIMAL_TOL * max(abs(sympy.N(x, 30)), abs(sympy.N(y, 30))))
    return _is_zero(x - y)


def equations_equal(f: Tree, g: Tree) -> bool:
    """Whether residuals f = 0 and g = 0 are the same equation (f/g a non-zero constant)."""
    x, y = to_sympy(f), to_sympy(g)
    if x == 0 or y == 0:
        return False
    ratio = sympy.simplify(x / y)
    return bool(ratio.is_number and ratio != 0 and ratio.is_finite)
