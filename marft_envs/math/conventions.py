"""Readings of an answer that hold by a grading convention, not by the notation alone.

Each is an option of :class:`~marft_envs.math.extract.ExtractionConfig` (all on by default,
measured both ways by ``benchmarks/bench_verifier.py``) and is tried only after the cascade
found the pair different: a convention can turn "different" into "equal", never the reverse.

- ``rounded_decimals``: a decimal equals an exact value it rounds to at its own written
  places (``12.67`` = ``\\frac{38}{3}``, ``3.142`` = ``\\pi``, ``1.67\\pi`` = ``\\frac{5\\pi}{3}``);
  not when the reference is itself written as a decimal (``3.14`` != ``3.143``: the reference
  states its precision), nor with fewer than ``MIN_DIGITS`` (3) significant digits
  (``0.33`` != ``\\frac13``: STACK's algebraic-equivalence test says so, ``stack-006``);
  since math-9 not when the exact value is a terminating decimal (``1.13`` != ``\\frac98``, the
  reference is then exactly ``1.125``), not when the decimal writes an integer (``1000.0`` !=
  ``1000 + \\frac{1}{30}``), and not for a percentage (``12.67\\%`` != ``\\frac{38}{3}``).
- ``percent_fraction``: ``x\\%`` is also ``x/100`` (``-13\\%`` = ``-.13``, ``50\\%`` =
  ``\\frac12``); it stays equal to ``x`` (the sign as a label, the default reading).
- ``degrees_radians``: a plain number of degrees ``x^\\circ`` is also ``x\\pi/180`` against a
  reference ``q\\pi`` with ``q`` rational, not whole, ``|q| <= 2`` (``45^\\circ`` =
  ``\\frac{\\pi}{4}``); since math-9 not against ``\\pi``, ``2\\pi``, ``4\\pi`` (as often a length,
  an area or a period), not for a prediction that itself carries ``\\pi``; the other way round
  (``\\frac{\\pi}{4}`` against ``45^\\circ``) under the same limits, the ``q\\pi`` side with no
  degree mark (``\\frac{\\pi}{4}\\text{ degrees}`` != ``45^\\circ``).
- ``integer_parameter``: a family of solutions with another integer name (``x = 2m\\pi`` =
  ``2k\\pi``): one of ``k, n, m, l, j`` renamed to the reference's, where both sides contain
  ``\\pi`` and have no other letters that differ; since math-9 only when a side states the
  integer note (``k \\in \\mathbb{Z}``, "k is an integer"), the prediction solves for a variable
  (``x = 2m\\pi``, not ``k = 2m\\pi`` against ``2k\\pi``) or both are periodic families with an
  offset (``\\frac{\\pi}{2} + m\\pi``): ``n\\pi`` != ``k\\pi`` (``n`` may be the problem's).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

from .evaluate import CTX, TooHard, Undefined, evaluate
from .latex import LatexError, free_symbols, parse_latex
from .structure import split_top

_UNDECIDED = (TooHard, Undefined, LatexError, ArithmeticError, TypeError, ValueError)
Compare = Callable[[str, str], bool]

_NUMBER = r"-?(?:\d+(?:\.\d+)?|\.\d+)"
_PERCENT = re.compile(rf"^[\s$]*({_NUMBER})\s*(?:\\%|%|\\text\{{\s*\\?%\s*\}}|percent)[\s$.]*$")
_DEGREES = re.compile(
    rf"^[\s$]*({_NUMBER})\s*(?:\^\s*\{{\s*\\circ\s*\}}|\^\s*\\circ|°|\\degree|degrees?)[\s$.]*$"
)
_DEGREE_MARK = re.compile(r"\\circ|°|\\degree|degree")
_DECIMAL = re.compile(r"^(-?)(\d*)\.(\d+)(\\pi)?$")
_PLAIN_DECIMAL = re.compile(r"^-?(?:\d+(?:\.\d+)?|\.\d+)$")
_INTEGER_NAMES = ("k", "n", "m", "l", "j")
# Significant digits a decimal needs to be read at its precision: two-digit decimals are too
# coarse to certify a value (STACK's AlgEquiv test stack-006: 0.33 is not 1/3).
MIN_DIGITS = 3
# A reference that is exactly a decimal with at most this many places is that decimal (math-9):
# "1.13" is not "\\frac98" (= 1.125) rounded, it is another number.
_TERMINATING_PLACES = 20


def _letters(s: str) -> set[str]:
    """Single-letter names in a normalised answer (commands such as ``\\pi`` excluded)."""
    return set(re.findall(r"(?<![\\A-Za-z])([A-Za-z])(?![A-Za-z])", s))


def percent_readings(raw: str) -> list[str]:
    """``x/100`` when ``raw`` is a number with a percent sign, else nothing."""
    m = _PERCENT.match(raw)
    return [f"\\frac{{{m.group(1)}}}{{100}}"] if m else []


def degree_readings(raw: str) -> list[str]:
    """``x\\pi/180`` when ``raw`` is a number of degrees, else nothing."""
    m = _DEGREES.match(raw)
    return [f"\\frac{{({m.group(1)})\\pi}}{{180}}"] if m else []


# The most an angle's multiple of pi may be (a whole turn) and the largest denominator read.
_MAX_TURNS = 2
_MAX_ANGLE_DENOMINATOR = 360


def angle_multiple(ref: str) -> Fraction | None:
    """``q`` when ``ref`` is ``q\\pi`` for a rational ``q`` that is not a whole number, with
    ``|q| <= 2`` (``\\frac{\\pi}{4}``, ``\\frac{5\\pi}{3}``), else None (math-9). A whole
    multiple (``\\pi``, ``2\\pi``, ``4\\pi``) is as often a length, an area or a period as an
    angle; a reference with other names or functions is no angle."""
    if "\\pi" not in ref or re.search(r"[A-Za-z\\]", re.sub(r"\\[dt]?frac|\\pi", "", ref)):
        return None
    value = _exact_value(f"\\frac{{{ref}}}{{\\pi}}")
    if value is None or value == 0:
        return None
    q = Fraction(value).limit_denominator(_MAX_ANGLE_DENOMINATOR)
    with localcontext() as ctx:
        ctx.prec = 60
        if abs(Decimal(q.numerator) / Decimal(q.denominator) - value) > Decimal(10) ** -25:
            return None
    return q if q.denominator > 1 and abs(q) <= _MAX_TURNS else None


def _exact_value(ref: str) -> Decimal | None:
    try:
        tree = parse_latex(ref)
        if free_symbols(tree):
            return None
        v = evaluate(tree)
    except _UNDECIDED:
        return None
    with localcontext() as ctx:
        ctx.prec = 50
        if isinstance(v, Fraction):
            return Decimal(v.numerator) / Decimal(v.denominator)
        if isinstance(v, CTX.mpc):
            return None
        return Decimal(CTX.nstr(CTX.mpf(v), 45, min_fixed=-(10**6), max_fixed=10**6))


def _terminates(value: Decimal) -> bool:
    """Whether ``value`` is a terminating decimal (a fraction whose denominator has no prime
    factor but 2 and 5: ``\\frac98`` is exactly 1.125), read to 40 significant digits."""
    with localcontext() as ctx:
        ctx.prec = 60
        if value == 0:
            return True
        near = value.quantize(Decimal(1).scaleb(-_TERMINATING_PLACES))
        return abs(value - near) <= abs(value) * Decimal(10) ** -40


def rounds_to(pred: str, ref: str) -> bool:
    """Whether the decimal ``pred`` (optionally times ``\\pi``) is the exact ``ref`` rounded
    half-up at ``pred``'s written places (see the module docstring for the limits)."""
    m = _DECIMAL.match(pred)
    if not m or _PLAIN_DECIMAL.match(ref) or "." in ref:
        return False
    sign, whole, places, pi = m.groups()
    digits = (whole + places).lstrip("0")
    if len(digits) < MIN_DIGITS:
        return False
    if not places.strip("0"):
        return False  # "1000.0", "1.00": the decimal writes an integer (math-9)
    value = _exact_value(f"\\frac{{{ref}}}{{\\pi}}" if pi else ref)
    if value is None or _terminates(value):
        return False
    written = Decimal(f"{sign}{whole or '0'}.{places}")
    with localcontext() as ctx:
        ctx.prec = 60
        rounded = value.quantize(Decimal(1).scaleb(-len(places)), rounding=ROUND_HALF_UP)
    return rounded == written and rounded != value  # exact equality is the cascade's


# A stated integer note: "k \\in \\mathbb{Z}", "k \\in Z", "where k is an integer".
_INTEGER_STATED = re.compile(r"\\in\s*(?:\\mathbb\s*\{?Z|\\Z(?![A-Za-z])|Z(?![A-Za-z]))|integer")


def _has_offset(value: str, letter: str) -> bool:
    """Whether ``value`` is a periodic family ``a + b k\\pi`` with an offset ``a`` free of the
    parameter ``letter`` (``\\frac{\\pi}{2} + k\\pi``)."""
    parts = [p for p in split_top(value, ("+", "-"))[0] if p.strip()]
    name = re.compile(rf"(?<![\\A-Za-z]){letter}(?![A-Za-z])")
    return len(parts) > 1 and any(not name.search(p) for p in parts)


def renamed_parameter(pred: str, ref: str, stated: bool = False) -> str | None:
    """``pred`` with its integer parameter renamed to ``ref``'s, or None (see the module
    docstring). Since math-9 the letters must be integer parameters: ``stated`` (a side states
    the integer note), or each side a periodic family with an offset (``\\frac{\\pi}{2} +
    k\\pi``) or the prediction a solution family ``x = 2m\\pi``; ``n\\pi`` and ``k\\pi`` alone may
    be the problem's quantities."""
    if "\\pi" not in pred or "\\pi" not in ref:
        return None
    solved = False
    if pred.count("=") == 1 and "=" not in ref:
        lhs, pred = pred.split("=")  # "x = 2m\\pi" against "2k\\pi": the family's values
        if not re.fullmatch(r"[A-Za-z]", lhs.strip()) or lhs.strip() in _letters(ref):
            return None  # "k = 2m\\pi" against "2k\\pi": k is no solved variable there
        solved = True
    a, b = _letters(pred), _letters(ref)
    only_p = [x for x in a - b if x in _INTEGER_NAMES]
    only_r = [x for x in b - a if x in _INTEGER_NAMES]
    if len(only_p) != 1 or len(only_r) != 1 or (a - set(only_p)) != (b - set(only_r)):
        return None
    periodic = _has_offset(pred, only_p[0]) and _has_offset(ref, only_r[0])
    if not (stated or solved or periodic):
        return None
    return re.sub(rf"(?<![\\A-Za-z]){only_p[0]}(?![A-Za-z])", only_r[0], pred)


def equal_by_convention(
    answer: str, pred: str, ref_text: str, ref: str, config, same: Compare
) -> bool:
    """Whether one of ``config``'s conventions makes the answer equal to the reference.

    ``answer``/``ref_text`` are the raw strings (the signs normalisation drops), ``pred``/``ref``
    the normalised ones; ``same(p, r)`` is the cascade on normalised strings (True only when
    it decides "equal")."""
    pairs: list[tuple[str, str]] = []
    if config.percent_fraction:
        pairs += [(alt, ref) for alt in percent_readings(answer)]
        pairs += [(pred, alt) for alt in percent_readings(ref_text)]
    if config.degrees_radians:
        if "\\pi" not in answer and angle_multiple(ref) is not None:
            pairs += [(alt, ref) for alt in degree_readings(answer)]
        if not _DEGREE_MARK.search(answer) and angle_multiple(pred) is not None:
            # the same reading the other way: a plain q\\pi answer to a reference in degrees
            pairs += [(pred, alt) for alt in degree_readings(ref_text) if "\\pi" not in ref_text]
    if config.integer_parameter:
        stated = bool(_INTEGER_STATED.search(answer) or _INTEGER_STATED.search(ref_text))
        renamed = renamed_parameter(pred, ref, stated)
        if renamed is not None:
            pairs.append((renamed, ref))
    if any(same(p, r) for p, r in pairs):
        return True
    if percent_readings(answer) or degree_readings(answer):
        return False  # "12.67\\%" is no rounding of 38/3: one convention at a time (math-9)
    return bool(config.rounded_decimals and rounds_to(pred, ref))
