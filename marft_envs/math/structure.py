"""Split a normalised answer into its shape: a number/expression, a tuple, an
interval, a set, a union, a matrix, an equation, an inequality, or text.

Shapes decide the order rules used by the comparison:

* ``Seq``: a bracketed list ``(1,2)``, ``[1,2)``; ordered, and its brackets must match
  (so open/closed interval ends matter and ``(1,2)`` is not ``[1,2]``);
* ``SetOf``: ``\\{1,2\\}``, unordered, duplicates ignored;
* ``Bag``: a bare list ``1, 2`` (or ``1 \\pm 2``), unordered;
* ``Union``: ``A \\cup B``, unordered;
* ``Matrix``: ``\\begin{pmatrix}..\\end{pmatrix}``;
* ``Assign``: ``x = 3`` (a variable or ``f(x)`` on the left), ``Equation``: any other ``=``;
* ``Relation``: ``<``, ``\\le``, ``>``, ``\\ge``, ``\\ne`` chains;
* ``Text``: words; ``Leaf``: everything else (a single expression).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from tasks.brackets import bracket_depths

from .latex import LatexError, free_symbols, parse_latex

MAX_ITEMS = 64


@dataclass(frozen=True)
class Leaf:
    text: str


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Seq:
    open: str
    close: str
    items: tuple


@dataclass(frozen=True)
class SetOf:
    items: tuple


@dataclass(frozen=True)
class Bag:
    items: tuple


@dataclass(frozen=True)
class Union:
    items: tuple


@dataclass(frozen=True)
class Matrix:
    rows: tuple  # tuple of tuples of nodes


@dataclass(frozen=True)
class Assign:
    var: str
    value: object


@dataclass(frozen=True)
class Equation:
    lhs: str
    rhs: str


@dataclass(frozen=True)
class Relation:
    parts: tuple  # texts
    ops: tuple  # "<" or "<=" or "!=" between consecutive parts


_OPEN = "([{"
_CLOSE = ")]}"
_REL_OPS = {"<": "<", ">": ">", "\\le": "<=", "\\ge": ">=", "\\ne": "!="}
_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}
_VAR = re.compile(
    r"^(?:[A-Za-z](?:_\{?\\?\w+\}?)?|\\[A-Za-z]+|[A-Za-z]\([^()]*\)|\([A-Za-z](?:,[A-Za-z])+\))$"
)
_MATRIX = re.compile(
    r"^\\begin\{(pmatrix|bmatrix|Bmatrix|matrix|array)\}(?:\{[lcr|]*\})?((?:(?!\\begin|\\end).)*)"
    r"\\end\{\1\}$",
    re.DOTALL,
)
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")
_COMMAND = re.compile(r"\\[A-Za-z]+")
_OPERATION = re.compile(
    r"\\(?:lim|sum|prod|int|binom|dbinom|bmod|pmod|det|begin\{vmatrix\})(?![A-Za-z])"
)
_PLAIN_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{\w+\}")


_NAME_PARTS = re.compile(
    r"_\{?\w+\}?|\\(?:frac|angle|overline|widehat|hat|bar|vec|overrightarrow|"
    r"triangle|measuredangle|operatorname|mathrm|text)(?![A-Za-z])|[{}()\s^',|:]"
)


def _names_quantity(lhs: str) -> bool:
    """A left side made only of letters (``\\frac{AB}{CD}``, ``m\\angle ABC``, ``BC``): a name."""
    bare = _NAME_PARTS.sub("", lhs)
    return bare.isascii() and bare.isalpha() and len(bare) <= 12


def _is_calculation(lhs: str) -> bool:
    """A left side without unknowns (``3 + 4``, ``2 \\cdot 3``, ``e^{i\\pi}``): it states a
    value."""
    bare = _COMMAND.sub("", lhs)
    if _OPERATION.search(lhs):
        return True  # "\\binom{5}{2} = 10", "\\lim_{x \\to 0} \\frac{\\sin x}{x} = 1"
    if any(c.isdigit() for c in bare) and not any(c.isalpha() for c in bare):
        # "3 + 4 = 7", "\\log_2(8) = 3" state a value; "7 = 11a + c" does not.
        return bool(re.search(r"[-+*/^!]", lhs) or _COMMAND.search(lhs))
    try:
        tree = parse_latex(lhs)
    except LatexError:
        return False
    return tree[0] not in ("n", "c", "neg") and not free_symbols(tree)


def _scan(s: str) -> Iterator[tuple[int, int]]:
    """Yield (index, depth) for every token; ``\\{`` and ``\\}`` count as brackets."""
    return bracket_depths(s, opens=_OPEN, closes=_CLOSE, escapes="latex")


def split_top(s: str, seps: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Split ``s`` at separators outside brackets. Returns (parts, separators found)."""
    parts, found = [], []
    start = 0
    skip_to = -1
    for i, depth in _scan(s):
        if i < skip_to or depth != 0:
            continue
        for sep in seps:
            if s.startswith(sep, i) and not (
                sep[-1].isalpha() and s[i + len(sep) : i + len(sep) + 1].isalpha()
            ):
                parts.append(s[start:i])
                found.append(sep)
                start = skip_to = i + len(sep)
                break
    parts.append(s[start:])
    return parts, found


def _wraps(s: str, open_len: int) -> bool:
    """Whether the bracket opening at 0 closes exactly at the end of ``s``."""
    for i, depth in _scan(s):
        if depth == 0 and i >= open_len and i < len(s) - (2 if s.endswith("\\}") else 1):
            return False
    return True


def _items(parts: list[str]) -> tuple:
    if len(parts) > MAX_ITEMS:
        raise ValueError("too many items")
    return tuple(parse_answer(p) for p in parts)


def _flatten_bag(items: tuple) -> tuple:
    out: list = []
    for it in items:
        out.extend(it.items if isinstance(it, Bag) else (it,))
    return tuple(out)


@lru_cache(maxsize=8192)
def parse_answer(s: str) -> object:
    """The shape of a normalised answer (see the module docstring)."""
    s = s.strip()
    m = _MATRIX.match(s)
    if m:
        rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip()]
        return Matrix(tuple(_items(r.split("&")) for r in rows))
    groups, _ = split_top(s, (";",))
    if len(groups) > 1:
        # "p=5,q=2; p=7,q=2": semicolons between solutions, commas inside one (a tuple).
        if any(len(split_top(g, (",",))[0]) > 1 for g in groups):
            return Bag(tuple(Seq("(", ")", _items(split_top(g, (",",))[0])) for g in groups))
        return Bag(_items(groups))
    parts, _ = split_top(s, (",",))
    if len(parts) > 1:
        items = _items(parts)
        if isinstance(items[0], Assign) and not any(
            isinstance(x, (Assign, Equation)) for x in items[1:]
        ):
            items = (items[0].value, *items[1:])  # "x = 1, 2" lists the values of x
        return Bag(_flatten_bag(items))
    parts, _ = split_top(s, ("\\cup",))
    if len(parts) > 1:
        return Union(_items(parts))
    parts, _ = split_top(s, ("\\in",))
    if len(parts) == 2 and _VAR.match(parts[0].strip()):
        return parse_answer(parts[1])
    parts, _ = split_top(s, ("=",))
    if len(parts) > 1:
        lhs, rhs = parts[0].strip(), parts[-1].strip()
        if _is_calculation(lhs):
            return parse_answer(rhs)  # "3 + 4 = 7" states the value 7, as a worked answer does
        if len(parts) == 2 and _PLAIN_NUMBER.match(lhs) and not _PLAIN_NUMBER.match(rhs):
            return Leaf(lhs)  # "200 = 7 * 700": the number it opens with is the claim
        if _VAR.match(lhs) or (len(parts) == 2 and _names_quantity(lhs)):
            return Assign(lhs, parse_answer(rhs))
        if len(parts) > 2:
            return parse_answer(rhs)  # a chain "1 = a = x = 0" ends on the value it reached
        return Equation(lhs, rhs)
    parts, ops = split_top(s, tuple(_REL_OPS))
    if len(parts) > 1:
        return Relation(tuple(p.strip() for p in parts), tuple(_REL_OPS[o] for o in ops))
    if s.startswith("\\{") and s.endswith("\\}") and _wraps(s, 2):
        inner = s[2:-2]
        return SetOf(_items(split_top(inner, (",",))[0]) if inner.strip() else ())
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]" and _wraps(s, 1):
        inner_parts, _ = split_top(s[1:-1], (",", ";"))
        if len(inner_parts) > 1:
            return Seq(s[0], s[-1], _items(inner_parts))
    for sign in ("\\pm", "\\mp"):
        if s.count(sign) == 1:
            plus, minus = ("+", "-") if sign == "\\pm" else ("-", "+")
            return Bag((parse_answer(s.replace(sign, plus)), parse_answer(s.replace(sign, minus))))
    if _WORD.search(_ENVIRONMENT.sub(" ", s)):
        return Text(s)
    return Leaf(s)


def flip(rel: Relation) -> Relation:
    """The same relation read right to left (``3 > x`` is ``x < 3``)."""
    return Relation(rel.parts[::-1], tuple(_FLIP[o] for o in rel.ops[::-1]))
