"""``arith``: seeded procedural arithmetic and simple algebra (no data files).

Per-item seeding, reasoning-gym style: item ``i`` of split ``s`` with seed ``k`` (and
level ``L``) is a pure function of ``(k, s, i, L)`` (:func:`arith_task`), so any item
can be made alone and a dataset is just ``[arith_task(s, k, i, L) for i in range(n)]``.

Train and test never share a problem text, whatever the seeds: a problem belongs to
the split given by the parity of the sha256 of its prompt, and each item re-draws
(from its own deterministic stream) until it lands in its split.

Families (which appear at which level):
    sum       ``a + b`` with ``a, b`` in 0..20                         level 0 only
    expr      integer expressions with + - * and parentheses        levels 1-5
    linear    solve a linear equation for x                          levels 1-5
    fraction  fraction arithmetic (+ - * /)                          levels 2-5
Answers are exact (``fractions.Fraction``), as canonical strings: ``"7"``, ``"-3/4"``.

Level 0 is the warm-up a small model can score on from the start (SmolLM2-135M answers some
sums right untrained). Its space is small (441 sums, about 220 per split), so instead of
independent draws, item ``i`` is the ``i``-th sum of a seeded permutation of the split's sums
(cycling): the first ``n`` items are ``n`` distinct problems up to the split's size. It is
never part of the mixed (``level=None``) draw, which mixes levels 1-5.
"""

from __future__ import annotations

import hashlib
import operator
import random
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Union

from tasks.dataset import Loaded, register_dataset
from tasks.record import Task

LEVELS = (0, 1, 2, 3, 4, 5)
MIXED_LEVELS = (1, 2, 3, 4, 5)  # what ``level=None`` mixes
SUM_OPERANDS = range(21)  # level 0: a + b with a, b here
SPLITS = ("train", "test")
DEFAULT_SIZE = {"train": 10_000, "test": 1_000}
_SPLIT_PARITY = {"test": 0, "train": 1}
_MAX_ATTEMPTS = 200
_MAX_DENOMINATOR = 1_000
_MAX_ABS = 10**6

# ---------------------------------------------------------------- expression trees

Expr = Union[Fraction, "Op"]


@dataclass(frozen=True)
class Op:
    symbol: str  # one of + - * /
    left: Expr
    right: Expr


_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}
_APPLY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def evaluate(e: Expr) -> Fraction:
    """Exact value; raises ZeroDivisionError on division by zero."""
    if isinstance(e, Fraction):
        return e
    return _APPLY[e.symbol](evaluate(e.left), evaluate(e.right))


def render(e: Expr, parent: str | None = None, right: bool = False) -> str:
    """Infix text with only the parentheses precedence needs; negative numbers and
    fractions under * or / are parenthesised for readability."""
    if isinstance(e, Fraction):
        text = str(e)
        if (e < 0 and parent is not None) or (e.denominator != 1 and parent in ("*", "/")):
            return f"({text})"
        return text
    inner = f"{render(e.left, e.symbol)} {e.symbol} {render(e.right, e.symbol, right=True)}"
    if parent is not None and (
        _PREC[e.symbol] < _PREC[parent]
        or (right and _PREC[e.symbol] == _PREC[parent] and parent in "-/")
    ):
        return f"({inner})"
    return inner


def random_tree(rng: random.Random, leaves: list[Fraction], ops: str) -> Expr:
    """A random binary tree over ``leaves`` (in order) with operators from ``ops``."""
    if len(leaves) == 1:
        return leaves[0]
    k = rng.randint(1, len(leaves) - 1)
    return Op(rng.choice(ops), random_tree(rng, leaves[:k], ops), random_tree(rng, leaves[k:], ops))


# ---------------------------------------------------------------- families


def _int(rng: random.Random, lo: int, hi: int, nonzero: bool = False) -> Fraction:
    while True:
        v = rng.randint(lo, hi)
        if v or not nonzero:
            return Fraction(v)


def _frac(rng: random.Random, max_den: int, max_num: int, negative: bool) -> Fraction:
    den = rng.randint(2, max_den)
    num = rng.randint(1, max_num)
    f = Fraction(num, den)
    return -f if negative and rng.random() < 0.3 else f


# (operands, lo, hi, ops) per level
_EXPR = {
    1: (2, 1, 20, "+-"),
    2: (3, 1, 12, "+-*"),
    3: (4, -12, 12, "+-*"),
    4: (5, -20, 20, "+-*"),
    5: (6, -25, 25, "+-*"),
}
# (terms, max denominator, max numerator, ops, negatives) per level
_FRACTION = {
    2: (2, 6, 5, "+-", False),
    3: (3, 8, 7, "+-", False),
    4: (3, 10, 9, "+-*/", True),
    5: (4, 12, 11, "+-*/", True),
}
_EXACT = " Give the exact answer as an integer or a reduced fraction."


def _expr(rng: random.Random, level: int) -> tuple[str, Fraction]:
    n, lo, hi, ops = _EXPR[level]
    tree = random_tree(rng, [_int(rng, lo, hi) for _ in range(n)], ops)
    return f"Compute {render(tree)}.", evaluate(tree)


def _fraction(rng: random.Random, level: int) -> tuple[str, Fraction]:
    n, max_den, max_num, ops, neg = _FRACTION[level]
    tree = random_tree(rng, [_frac(rng, max_den, max_num, neg) for _ in range(n)], ops)
    return f"Compute {render(tree)}.{_EXACT}", evaluate(tree)


def _linear_side(coef: Fraction, const: Fraction) -> str:
    """``a x + b`` as text: ``3x - 5``, ``-x + 2``, ``(2/3)x``, ``7``."""
    parts = []
    if coef:
        c = (
            ""
            if coef == 1
            else "-"
            if coef == -1
            else (f"({coef})" if coef.denominator != 1 else str(coef))
        )
        parts.append(f"{c}x")
    if const or not parts:
        if parts:
            parts.append(f"{'-' if const < 0 else '+'} {abs(const)}")
        else:
            parts.append(str(const))
    return " ".join(parts)


def _linear(rng: random.Random, level: int) -> tuple[str, Fraction]:
    if level == 1:  # x + b = c
        x, a, c_coef = _int(rng, 0, 20), Fraction(1), Fraction(0)
        b = _int(rng, 1, 20)
    elif level == 2:  # ax + b = c, integer x
        x, a, c_coef, b = _int(rng, -10, 10), _int(rng, 2, 9), Fraction(0), _int(rng, -20, 20, True)
    elif level == 3:  # ax + b = cx + d, integer x
        x, a, c_coef, b = (
            _int(rng, -12, 12),
            _int(rng, -9, 9, True),
            _int(rng, -9, 9, True),
            _int(rng, -20, 20),
        )
    elif level == 4:  # ax + b = cx + d, fractional x
        a, c_coef, b = _int(rng, -12, 12, True), _int(rng, -12, 12, True), _int(rng, -30, 30)
        x = Fraction(rng.randint(-40, 40), rng.randint(2, 9))
    else:  # fractional coefficients
        a, c_coef = _frac(rng, 6, 7, True), _int(rng, -6, 6)
        b, x = _frac(rng, 8, 9, True), Fraction(rng.randint(-30, 30), rng.randint(1, 7))
    if a == c_coef:
        raise ZeroDivisionError("degenerate equation")  # caller re-draws
    d = a * x + b - c_coef * x
    lhs, rhs = _linear_side(a, b), _linear_side(c_coef, d)
    return f"Solve for x: {lhs} = {rhs}.{_EXACT if level >= 4 else ''}", x


# family -> (generator, first level, last level)
_FAMILIES = {
    "expr": (_expr, 1, 5),
    "linear": (_linear, 1, 5),
    "fraction": (_fraction, 2, 5),
}


def families_for(level: int) -> tuple[str, ...]:
    """The problem families used at ``level``."""
    if level == 0:
        return ("sum",)
    return tuple(name for name, (_, first, last) in _FAMILIES.items() if first <= level <= last)


# ---------------------------------------------------------------- items and datasets


def _rng(*key: object) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, key)).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def _split_of(prompt: str) -> str:
    parity = hashlib.sha256(prompt.encode()).digest()[0] % 2
    return next(s for s, p in _SPLIT_PARITY.items() if p == parity)


def sum_prompt(a: int, b: int) -> str:
    """The level-0 problem text of ``a + b``."""
    return f"Compute {a} + {b}."


@lru_cache(maxsize=64)
def _sum_order(split: str, seed: int) -> tuple[tuple[int, int], ...]:
    """The split's level-0 sums in the seeded order its items follow."""
    pairs = [(a, b) for a in SUM_OPERANDS for b in SUM_OPERANDS]
    mine = [p for p in pairs if _split_of(sum_prompt(*p)) == split]
    _rng("arith-sum", split, seed).shuffle(mine)
    return tuple(mine)


def _sum_task(split: str, seed: int, index: int) -> tuple[str, Fraction]:
    order = _sum_order(split, seed)
    a, b = order[index % len(order)]
    return sum_prompt(a, b), Fraction(a + b)


def _check(split: str, seed: int, index: int, level: int | None) -> None:
    if split not in SPLITS:
        raise ValueError(f"arith: split must be one of {SPLITS}, got {split!r}")
    if level is not None and level not in LEVELS:
        raise ValueError(
            f"arith: level must be one of {LEVELS} or None (levels {MIXED_LEVELS} mixed), "
            f"got {level!r}"
        )
    if not isinstance(seed, int) or not isinstance(index, int) or index < 0:
        raise ValueError(
            f"arith: seed must be an int and index an int >= 0, got {seed!r}, {index!r}"
        )


def _make_task(
    split: str,
    seed: int,
    index: int,
    level: int | None,
    lvl: int,
    family: str,
    prompt: str,
    answer: Fraction,
) -> Task:
    return Task(
        id=f"arith/{split}/s{seed}/{'mix' if level is None else f'L{level}'}/{index:06d}",
        kind="math",
        prompt=prompt,
        answer=str(answer),
        metadata={
            "source": "arith",
            "split": split,
            "seed": seed,
            "index": index,
            "level": lvl,
            "family": family,
        },
    )


def arith_task(split: str, seed: int, index: int, level: int | None = None) -> Task:
    """Item ``index`` of ``split`` for ``seed``; ``level=None`` mixes levels 1-5.

    A pure function of its arguments. Id: ``arith/<split>/s<seed>/<L<level>|mix>/<index:06d>``.
    """
    _check(split, seed, index, level)
    if level == 0:
        prompt, answer = _sum_task(split, seed, index)
        return _make_task(split, seed, index, level, 0, "sum", prompt, answer)
    for attempt in range(_MAX_ATTEMPTS):
        rng = _rng("arith", split, seed, level, index, attempt)
        lvl = level if level is not None else rng.choice(MIXED_LEVELS)
        family = rng.choice(families_for(lvl))
        try:
            prompt, answer = _FAMILIES[family][0](rng, lvl)
        except ZeroDivisionError:
            continue
        if (
            answer.denominator > _MAX_DENOMINATOR
            or abs(answer) > _MAX_ABS
            or _split_of(prompt) != split
        ):
            continue
        return _make_task(split, seed, index, level, lvl, family, prompt, answer)
    raise RuntimeError(
        f"arith: no valid item for {(split, seed, index, level)} in {_MAX_ATTEMPTS} draws"
    )


def load_arith(
    split: str,
    data_dir: Path | None,
    *,
    size: int | None = None,
    seed: int = 0,
    level: int | None = None,
) -> Loaded:
    """``size`` items (default 10,000 train / 1,000 test) of ``arith_task(split, seed, i,
    level)``."""
    n = DEFAULT_SIZE[split] if size is None else size
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"arith: size must be an int >= 0, got {size!r}")
    tasks = [arith_task(split, seed, i, level) for i in range(n)]
    return Loaded(
        tasks, f"generated:arith?seed={seed}&level={'mix' if level is None else level}&size={n}"
    )


register_dataset(
    "arith",
    load_arith,
    splits=SPLITS,
    kind="math",
    needs_data=False,
    description=(
        "Procedural arithmetic and linear equations, seeded per item, "
        "levels 0-5 (size=, seed=, level=)"
    ),
)
