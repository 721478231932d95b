"""Bounded in-process evaluation of expression trees (the fast path; no sympy).

Rational arithmetic is exact (``Fraction``); irrational values (roots, pi, logs,
trig) are mpmath numbers at ``DIGITS`` significant digits in a private context.
Every operation is size-checked: anything that could take real time (huge
powers, big factorials, enormous magnitudes) raises ``TooHard`` so the pair
goes to the time-limited sympy worker instead. Nothing here can hang.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from fractions import Fraction
from typing import Union

import mpmath

from .latex import Tree

DIGITS = 60
MAX_BITS = 20_000  # largest exact rational we build in-process
MAX_EXPONENT = 10_000  # largest integer exponent we expand exactly
MAX_FACTORIAL = 1_000
MAX_MAGNITUDE_BITS = 20_000  # |x| < 2**20000 for approximate values
MAX_TRIG_ARGUMENT = 10**6

CTX = mpmath.MPContext()
CTX.dps = DIGITS

Value = Union[Fraction, "mpmath.mpf", "mpmath.mpc"]


class TooHard(Exception):
    """The value is outside the cheap, bounded range: ask the symbolic worker."""


class Undefined(Exception):
    """The expression has no value here (division by zero, unknown variable, ...)."""


def _bits(q: Fraction) -> int:
    return max(q.numerator.bit_length(), q.denominator.bit_length())


def _exact(q: Fraction) -> Fraction:
    if _bits(q) > MAX_BITS:
        raise TooHard("rational too large")
    return q


def _mp(x: Value):
    if isinstance(x, Fraction):
        return CTX.mpf(x.numerator) / x.denominator
    return x


def _checked(x):
    """Reject NaN and values too large to compare cheaply."""
    if isinstance(x, Fraction):
        return _exact(x)
    if CTX.isnan(x):
        raise Undefined("not a number")
    if CTX.isinf(x):
        return x
    if x != 0 and CTX.mag(x) > MAX_MAGNITUDE_BITS:
        raise TooHard("magnitude too large")
    return x


def _int_root(n: int, k: int) -> int | None:
    """The exact k-th root of n >= 0, or None."""
    if n < 2:
        return n
    # Newton's method on integers, from an upper bound.
    x = 1 << ((n.bit_length() + k - 1) // k)
    while True:
        y = ((k - 1) * x + n // x ** (k - 1)) // k
        if y >= x:
            break
        x = y
    return x if x**k == n else None


def _rational_power(base: Fraction, exp: Fraction) -> Fraction | None:
    """base**exp exactly when the result is rational (e.g. 8^(2/3) = 4), else None."""
    if exp.denominator == 1:
        e = exp.numerator
        if abs(e) > MAX_EXPONENT or _bits(base) * abs(e) > MAX_BITS:
            raise TooHard("power too large")
        if base == 0 and e < 0:
            raise Undefined("division by zero")
        return base**e
    if base < 0 or exp.denominator > 64:
        return None
    num = _int_root(base.numerator, exp.denominator)
    den = _int_root(base.denominator, exp.denominator)
    if num is None or den is None:
        return None
    return _rational_power(Fraction(num, den), Fraction(exp.numerator))


def _power(base: Value, exp: Value) -> Value:
    if isinstance(base, Fraction) and isinstance(exp, Fraction):
        exact = _rational_power(base, exp)
        if exact is not None:
            return exact
    e = _mp(exp)
    if CTX.isinf(e) or abs(e) > MAX_EXPONENT:
        raise TooHard("exponent too large")
    b = _mp(base)
    if b == 0 and CTX.re(e) <= 0:
        raise Undefined("zero to a non-positive power")
    return CTX.power(b, e)


def _root(x: Value, n: Value) -> Value:
    """The real n-th root for odd n and negative x (as written in school maths)."""
    if isinstance(n, Fraction) and n.denominator == 1 and n.numerator % 2 == 1:
        if isinstance(x, Fraction) and x < 0:
            return -_power(-x, 1 / n)
        if not isinstance(x, Fraction) and CTX.im(x) == 0 and x < 0:
            return -_power(-x, 1 / _mp(n))
    return _power(x, 1 / n if isinstance(n, Fraction) else 1 / _mp(n))


def _integer(x: Value, limit: int) -> int:
    if not isinstance(x, Fraction) or x.denominator != 1 or x < 0:
        raise TooHard("not a small non-negative integer")
    if x > limit:
        raise TooHard("argument too large")
    return int(x)


def _is_integer(x: Value) -> bool:
    return isinstance(x, Fraction) and x.denominator == 1


def _gamma_of(x: Value) -> Value:
    """Gamma(x) for the factorial of a non-integer (x! = Gamma(x + 1))."""
    m = _mp(x)
    if abs(m) > MAX_FACTORIAL:
        raise TooHard("argument too large")
    return CTX.gamma(m)


def _factorial(n: Value) -> Value:
    if _is_integer(n) and n < 0:
        raise Undefined("factorial of a negative integer")
    if _is_integer(n):
        return Fraction(math.factorial(_integer(n, MAX_FACTORIAL)))
    return _gamma_of(_mp(n) + 1)


def _binomial(n: Value, k: Value) -> Value:
    if _is_integer(n) and _is_integer(k):
        if k < 0 or k > n >= 0:
            return Fraction(0)
        return Fraction(math.comb(_integer(n, 5_000), _integer(k, 5_000)))
    return _gamma_of(_mp(n) + 1) / (_gamma_of(_mp(k) + 1) * _gamma_of(_mp(n) - _mp(k) + 1))


def _transcendental(name: str):
    fn = getattr(CTX, name)

    def apply(x: Value) -> Value:
        if (
            isinstance(x, Fraction)
            and x == 0
            and name in ("sin", "tan", "sinh", "tanh", "asin", "atan")
        ):
            return Fraction(0)
        m = _mp(x)
        if abs(m) > MAX_TRIG_ARGUMENT:
            raise TooHard("argument too large")
        return fn(m)

    return apply


def _log(x: Value, base: Value | None = None) -> Value:
    if x == 0:
        raise Undefined("log of zero")
    if x == 1:
        return Fraction(0)
    value = CTX.log(_mp(x))
    if base is None:
        return value
    if base == 1 or base == 0:
        raise Undefined("bad log base")
    if isinstance(x, Fraction) and isinstance(base, Fraction):
        # log_2 8 = 3 exactly, when the answer is a small integer or its reciprocal
        for k in range(1, 64):
            if base**k == x:
                return Fraction(k)
            if base**k == 1 / x:
                return Fraction(-k)
            if abs(base) > 1 and abs(base**k) > abs(x) + abs(1 / x):
                break
    return value / CTX.log(_mp(base))


def _floor(x: Value) -> Value:
    return Fraction(math.floor(x)) if isinstance(x, Fraction) else Fraction(int(CTX.floor(x)))


def _ceiling(x: Value) -> Value:
    return Fraction(math.ceil(x)) if isinstance(x, Fraction) else Fraction(int(CTX.ceil(x)))


def _abs(x: Value) -> Value:
    return abs(x)


def _sqrt(x: Value) -> Value:
    return _power(x, Fraction(1, 2))


_FUNCTIONS = {
    "sqrt": _sqrt,
    "root": _root,
    "log": _log,
    "Abs": _abs,
    "floor": _floor,
    "ceiling": _ceiling,
    "factorial": lambda n: _factorial(n),
    "binomial": lambda n, k: _binomial(n, k),
    "sec": lambda x: 1 / _transcendental("cos")(x),
    "csc": lambda x: 1 / _transcendental("sin")(x),
    "cot": lambda x: 1 / _transcendental("tan")(x),
    "sech": lambda x: 1 / _transcendental("cosh")(x),
    "csch": lambda x: 1 / _transcendental("sinh")(x),
    "coth": lambda x: 1 / _transcendental("tanh")(x),
    **{
        n: _transcendental(n)
        for n in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "exp")
    },
}


_CONSTANTS = {"pi": CTX.pi, "E": CTX.e, "I": CTX.mpc(0, 1), "oo": CTX.inf}


def divide(a: Value, b: Value) -> Value:
    """a / b, exact for rationals."""
    if b == 0:
        raise Undefined("division by zero")
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a / b
    return _mp(a) / _mp(b)


def _sum(values: list[Value]) -> Value:
    if all(isinstance(v, Fraction) for v in values):
        return sum(values, Fraction(0))
    return CTX.fsum(_mp(v) for v in values)


def _prod(values: list[Value]) -> Value:
    if all(isinstance(v, Fraction) for v in values):
        out = Fraction(1)
        for v in values:
            out = _exact(out * v)
        return out
    out = CTX.mpf(1)
    for v in values:
        out = _checked(out * _mp(v))
    return out


def evaluate(
    tree: Tree, env: Mapping[str, Value] | None = None, opaque: int | None = None
) -> Value:
    """The value of ``tree`` with variables taken from ``env``.

    Raises ``TooHard`` (ask sympy) or ``Undefined`` (no value, e.g. 1/0 or a free variable).
    With ``opaque=k``, every subtree too hard to evaluate is instead given a pseudo-random
    value (fixed per subtree and k), like a free variable: ``S - S + 1`` is then 1 for any S.
    """
    if opaque is None:
        return _node(tree, env, None)
    try:
        return _node(tree, env, opaque)
    except TooHard:
        h = zlib.crc32(f"{tree!r}:{opaque}".encode()) / 2**32
        return CTX.mpf(h) * 2 + CTX.mpf(1) / 2 + CTX.sqrt(opaque + 5) / 1000


def _node(tree: Tree, env: Mapping[str, Value] | None, opaque: int | None) -> Value:
    kind = tree[0]
    if kind == "n":
        return _exact(tree[1])
    if kind == "c":
        return _CONSTANTS[tree[1]]
    if kind == "v":
        if env is None or tree[1] not in env:
            raise Undefined(f"free variable {tree[1]}")
        return env[tree[1]]
    if kind == "+":
        return _checked(_sum([evaluate(t, env, opaque) for t in tree[1]]))
    if kind == "*":
        return _prod([evaluate(t, env, opaque) for t in tree[1]])
    if kind == "neg":
        return -evaluate(tree[1], env, opaque)
    if kind == "/":
        return _checked(divide(evaluate(tree[1], env, opaque), evaluate(tree[2], env, opaque)))
    if kind == "^":
        return _checked(_power(evaluate(tree[1], env, opaque), evaluate(tree[2], env, opaque)))
    if kind == "f":
        args = [evaluate(t, env, opaque) for t in tree[2]]
        return _checked(_FUNCTIONS[tree[1]](*args))
    raise Undefined(f"unknown node {kind}")


class NotReal(Undefined):
    """A subexpression is not real here (``(-1)^{1/2}``): outside a real function's domain."""


def evaluate_real(tree: Tree, env: Mapping[str, Value]) -> Value:
    """Like :func:`evaluate`, but every subexpression must be real (raises ``NotReal``), so
    ``(-1)^{-3/2} \\cos(2)^{-3/2}``, real only through two complex factors, has no value."""
    kind = tree[0]
    if kind in ("n", "c", "v"):
        value = _node(tree, env, None)
    elif kind == "+":
        value = _checked(_sum([evaluate_real(t, env) for t in tree[1]]))
    elif kind == "*":
        value = _prod([evaluate_real(t, env) for t in tree[1]])
    elif kind == "neg":
        value = -evaluate_real(tree[1], env)
    elif kind == "/":
        value = _checked(divide(evaluate_real(tree[1], env), evaluate_real(tree[2], env)))
    elif kind == "^":
        value = _checked(_power(evaluate_real(tree[1], env), evaluate_real(tree[2], env)))
    elif kind == "f":
        value = _checked(_FUNCTIONS[tree[1]](*[evaluate_real(t, env) for t in tree[2]]))
    else:
        raise Undefined(f"unknown node {kind}")
    if not isinstance(value, Fraction) and CTX.im(value) != 0:
        raise NotReal("not real")
    return value


def sample_point(names: frozenset[str], k: int) -> dict[str, Value]:
    """Deterministic, irrational-looking values with 0.5 < |v| < 2.6 for point k.

    Point 0 is negative so identities that only hold for positive numbers
    (sqrt(x^2) = x) are not taken as equal; the other points are positive.
    """
    env = {}
    sign = -1 if k == 0 else 1
    for name in names:
        h = zlib.crc32(f"{name}:{k}".encode()) / 2**32
        env[name] = sign * (CTX.mpf(h) * 2 + CTX.mpf(1) / 2 + CTX.sqrt(k + 2) / 1000)
    return env


# How close two values must be. Exact forms: agreement to 45 digits (at moderate
# magnitudes) decides "equal"; anything further than 1e-9 relative decides "different";
# in between we ask sympy. With a decimal literal on either side the answer is an
# approximation: equal iff within REL_TOL_DECIMAL.
REL_TOL_DECIMAL = Fraction(1, 10**9)
_EQUAL_TOL = CTX.mpf(10) ** -45
_DIFFERENT_TOL = CTX.mpf(10) ** -9


def values_equal(a: Value, b: Value, approximate: bool) -> bool | None:
    """True/False when the numbers decide; None when only sympy can."""
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        if a == b:
            return True
        return approximate and abs(a - b) <= REL_TOL_DECIMAL * max(abs(a), abs(b))
    x, y = _mp(a), _mp(b)
    if CTX.isinf(x) or CTX.isinf(y):
        return bool(x == y)
    d = abs(x - y)
    scale = max(abs(x), abs(y))
    if approximate:
        return bool(d <= _DIFFERENT_TOL * scale)
    if d <= _EQUAL_TOL * max(scale, 1):
        return True if d == 0 or CTX.mpf(10) ** -12 <= scale <= CTX.mpf(10) ** 12 else None
    if d > _DIFFERENT_TOL * scale and d > CTX.mpf(10) ** -30:
        return False
    return None
