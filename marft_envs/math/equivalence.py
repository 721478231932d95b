"""The equivalence cascade over answer shapes: exact string, numeric, symbolic.

``compare`` walks two shapes (see ``structure.py``) and asks a *judge* about each
pair of leaf expressions. Two judges share that walk:

* ``NumericJudge`` (in-process, no sympy): exact string, then bounded exact /
  mpmath evaluation; expressions with variables are compared at fixed sample
  points. It answers True, False, or None ("cannot tell cheaply").
* ``SympyJudge`` (only inside the worker): the numeric judge first, then sympy.

An outcome is ``(equal, method)`` with equal in {True, False, None} and method in
"exact" < "numeric" < "symbolic" (the strongest step any part needed).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from fractions import Fraction
from itertools import pairwise

from . import structure as st
from .evaluate import (
    NotReal,
    TooHard,
    Undefined,
    divide,
    evaluate,
    evaluate_real,
    sample_point,
    values_equal,
)
from .intervals import as_set, same_set
from .latex import LatexError, Tree, free_symbols, has_decimal, parse_latex, rename
from .magnitude import clearly_different

EXACT, NUMERIC, SYMBOLIC = "exact", "numeric", "symbolic"
UNPARSED = "unparsed"  # with equal=False: our parser could not read a side (not a decision)
SHAPE = "shape"  # with equal=False: the two answers have shapes our rules do not compare
UNDECIDED_METHODS = (UNPARSED, SHAPE)
_RANK = {EXACT: 0, UNPARSED: 0, SHAPE: 0, NUMERIC: 1, SYMBOLIC: 2}
SAMPLE_POINTS = 3
# ExtractionConfig.real_domain: True (real functions, domains must agree: math-6), "loose" (real
# functions, a point where one side only is real decides nothing: math-4/5), False (complex).
REAL_DOMAIN_SETTINGS = (True, False, "loose")
_ZERO = Fraction(0)
_ONE = Fraction(1)
# Errors that mean "the cheap evaluation cannot decide", never "different".
_UNDECIDED = (TooHard, Undefined, ArithmeticError, TypeError, ValueError, OverflowError)

Outcome = tuple  # (bool | None, str)

_CHOICE_REF = re.compile(r"^[A-E]$")
_LITERAL = re.compile(r"^(?:\d+_\{?\d+\}?|\d+(?::\d+)+(?::\\[lc]?dots)?)$")
_CHOICE_PRED = re.compile(r"^\(?([A-E])(?:\)|\.|:|$)")


def _strongest(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


def _residual(lhs: str, rhs: str) -> Tree:
    return ("+", (parse_latex(lhs), ("neg", parse_latex(rhs))))


def _value(tree: Tree, env):
    """The value, ``Undefined`` (1/0, log 0: no value at all), or None (too hard to tell)."""
    try:
        return evaluate(tree, env)
    except Undefined as e:
        return e
    except _UNDECIDED:
        return None


OUTSIDE = "outside"  # a sample point outside the real domain of a side (see _point_equal)


def _non_real(v) -> bool:
    return not isinstance(v, Fraction) and bool(getattr(v, "imag", 0))


def _has_i(tree: Tree) -> bool:
    if tree[0] == "c":
        return tree[1] == "I"
    if tree[0] in ("+", "*"):
        return any(_has_i(t) for t in tree[1])
    if tree[0] in ("/", "^"):
        return _has_i(tree[1]) or _has_i(tree[2])
    if tree[0] == "neg":
        return _has_i(tree[1])
    if tree[0] == "f":
        return any(_has_i(t) for t in tree[2])
    return False


def _real_value(tree: Tree, env):
    """The value where every subexpression is real, else None."""
    try:
        return evaluate_real(tree, env)
    except _UNDECIDED:
        return None


def _point_equal(
    ta: Tree, tb: Tree, env, approximate: bool, real: bool = False, loose: bool = False
):
    """True/False/None at one point; ``OUTSIDE`` where ``real`` and a side is not real there.

    With variables and no ``i`` in either answer, both are real functions: a point where one
    is not real (``\\sqrt{x}``, ``\\log x`` at negative x) is outside its domain and decides
    nothing, so ``\\log(a^2 b)`` equals ``2\\log a + \\log b`` and ``\\frac{1}{\\sqrt x}``
    equals ``\\sqrt{1/x}`` (where they are defined), while ``\\sqrt{x^2}`` (real everywhere) is
    not ``x``. A real point where both sides differ still decides (``_real_counterexample``).
    A point where exactly one side is real is a difference of domains and decides "different"
    (math-6: ``\\ln|x|`` is not ``\\ln x``); ``loose`` (``real_domain="loose"``, the math-4/5
    rule) lets it decide nothing."""
    a, b = _value(ta, env), _value(tb, env)
    if a is None or b is None:
        return None
    undefined = isinstance(a, Undefined), isinstance(b, Undefined)
    if any(undefined):
        # 1/0 is never equal to a number; two undefined values are sympy's business
        return None if all(undefined) or env else False
    if real and (_non_real(a) or _non_real(b)):
        if not loose and _non_real(a) != _non_real(b):
            return False  # real on one side only: the domains differ ("\\ln|x|" vs "\\ln x")
        return OUTSIDE
    try:
        return values_equal(a, b, approximate)
    except _UNDECIDED:
        return None


def _too_hard(tree: Tree, env) -> bool:
    try:
        evaluate(tree, env)
    except TooHard:
        return True
    except _UNDECIDED:
        return False
    return False


def _same_everywhere(values: list) -> bool:
    return all(values_equal(values[0], v, False) is True for v in values[1:])


def _with_opaque_parts(ta: Tree, tb: Tree, names, approximate: bool) -> bool | None:
    """Compare with every too-hard subtree replaced by an unknown (see ``evaluate``).

    Equal at every point means equal whatever the unknowns are. "Different" needs a
    difference that does not depend on the unknowns: both sides constant and apart,
    or a constant non-zero gap (``S`` vs ``S + 1``), or a constant ratio other than 1.
    """
    env0 = sample_point(names, 0) if names else {}
    if not (_too_hard(ta, env0) or _too_hard(tb, env0)):
        return None  # nothing huge here: an ordinary undecided pair, sympy's business
    va, vb = [], []
    for k in range(SAMPLE_POINTS):
        env = sample_point(names, k) if names else {}
        try:
            va.append(evaluate(ta, env, opaque=k))
            vb.append(evaluate(tb, env, opaque=k))
        except _UNDECIDED:
            return None
    try:
        if all(values_equal(x, y, approximate) is True for x, y in zip(va, vb, strict=True)):
            return True
        gaps = [x - y for x, y in zip(va, vb, strict=True)]
        if _same_everywhere(gaps) and values_equal(gaps[0], _ZERO, False) is False:
            return False
        if all(values_equal(y, _ZERO, False) is False for y in vb):
            ratios = [divide(x, y) for x, y in zip(va, vb, strict=True)]
            if _same_everywhere(ratios) and values_equal(ratios[0], _ONE, False) is False:
                return False
        if not names and _same_everywhere(va) and _same_everywhere(vb):
            return values_equal(va[0], vb[0], approximate)
        return None
    except _UNDECIDED:
        return None


# Where a side is not real at the negative sample point, the real domain is probed further:
# small exact values, negative and fractional, at which both sides may still be real.
_PROBE_VALUES = tuple(
    Fraction(v) for v in ("-3/2", "-2", "-1/2", "2", "1/2", "-3", "3/2", "3", "-5/2", "5/2")
)
PROBE_POINTS = 12
# Seeded extra probe points (math-6): -1 and 1 with fractional values, so a negative base meets
# an exponent that makes it real (x = -1, k = 3/2 in x^{2k/3}).
_EXTRA_PROBE_VALUES = tuple(
    Fraction(v) for v in ("-1", "1", "3/2", "-3/2", "1/2", "-1/2", "3", "-2", "2", "3/4", "-3/4")
)
EXTRA_PROBE_POINTS = 24


def _real_counterexample(ta: Tree, tb: Tree, names, approximate: bool, loose: bool = False) -> bool:
    """Whether some probe point has both sides real, defined and apart (or, unless ``loose``,
    one side real and the other not)."""
    return _probe(ta, tb, names, approximate, loose)[0]


PROBES_FOR_EQUAL = 4


def _probe_points(names) -> list[dict[str, Fraction]]:
    """The probe points: fixed combinations of ``_PROBE_VALUES``, then seeded pseudo-random
    ones that pair negative bases with fractional values (math-6: ``(x^2)^{k/3}`` vs
    ``x^{2k/3}`` differ at x = -1, k = 3/2, a point the combinations never reach)."""
    ordered = sorted(names)
    points = [
        {
            n: _PROBE_VALUES[(7 * k + 3 * i + k * i) % len(_PROBE_VALUES)]
            for i, n in enumerate(ordered)
        }
        for k in range(PROBE_POINTS)
    ]
    rng = random.Random(f"probe:{len(ordered)}")
    for _ in range(EXTRA_PROBE_POINTS):
        points.append({n: rng.choice(_EXTRA_PROBE_VALUES) for n in ordered})
    return points


def _real_or_not(tree: Tree, env):
    """The value where every subexpression is real; ``OUTSIDE`` where one is not; else None."""
    try:
        return evaluate_real(tree, env)
    except NotReal:
        return OUTSIDE
    except _UNDECIDED:
        return None


def _probe(ta: Tree, tb: Tree, names, approximate: bool, loose: bool = True) -> tuple[bool, int]:
    """(some probe point has both sides real, defined and apart, or, unless ``loose``, one
    side real and the other not; how many probe points have both real, defined and equal)."""
    agree = 0
    for env in _probe_points(names):
        a, b = _real_or_not(ta, env), _real_or_not(tb, env)
        if a is None or b is None:
            continue
        if (a is OUTSIDE) != (b is OUTSIDE) and not loose:
            # Real on one side only: the domains differ, unless the other side's value is real
            # after all (a^{1/2} a^{1/2} against a: a complex factor pair, a real product).
            other = _value(ta if a is OUTSIDE else tb, env)
            if other is not None and not isinstance(other, Undefined) and _non_real(other):
                return True, agree
        if a is OUTSIDE or b is OUTSIDE:
            continue
        if _non_real(a) or _non_real(b):
            continue
        try:
            same = values_equal(a, b, approximate)
        except _UNDECIDED:
            continue
        if same is False:
            return True, agree
        agree += same is True
    return False, agree


class NumericJudge:
    """Leaf comparisons without sympy: bounded, in-process, never hangs.

    ``real_domain`` (default True, ``ExtractionConfig.real_domain``): answers without ``i``
    are real functions, compared where both are real, and "different" where only one is;
    ``"loose"``: a point where only one is real decides nothing (see ``_point_equal``)."""

    def __init__(self, real_domain: bool | str = True) -> None:
        self.real_domain = bool(real_domain)
        self.loose = real_domain == "loose"

    def expr(self, a: str, b: str) -> Outcome:
        if a == b:
            return True, EXACT
        try:
            ta, tb = parse_latex(a), parse_latex(b)
        except LatexError:
            return False, UNPARSED
        return self.trees(ta, tb)

    def trees(self, ta: Tree, tb: Tree) -> Outcome:
        approximate = has_decimal(ta) or has_decimal(tb)
        names = free_symbols(ta) | free_symbols(tb)
        method = SYMBOLIC if names else NUMERIC
        real = self.real_domain and bool(names) and not (_has_i(ta) or _has_i(tb))
        results = []
        for k in range(SAMPLE_POINTS if names else 1):
            env = sample_point(names, k) if names else None
            results.append(_point_equal(ta, tb, env, approximate, real, self.loose))
            if results[-1] is False:
                return False, method
        inside = [r for r in results if r is not OUTSIDE]
        if len(inside) >= min(2, len(results)) and all(r is True for r in inside):
            if len(inside) < len(results) and _real_counterexample(
                ta, tb, names, approximate, self.loose
            ):
                return False, method  # "(a^b)^c" vs "a^{bc}": apart where both are real
            return True, method
        if real and len(inside) < 2 and all(r is True for r in inside):
            # Real at fewer than two sample points ("(-1)^n \\cos^n x", "((x-2)^3)^k" at
            # non-integer exponents): the probe points, where both may be real, decide.
            apart, agree = _probe(ta, tb, names, approximate, self.loose)
            if apart:
                return False, method
            if agree >= PROBES_FOR_EQUAL:
                return True, method
        # Too big to evaluate: settle huge constants by size, or by treating the huge parts
        # as unknowns (sound for "equal" only); the rest goes to sympy.
        if not names and clearly_different(ta, tb):
            return False, NUMERIC
        return _with_opaque_parts(ta, tb, names, approximate), method

    def equation(self, a: st.Equation, b: st.Equation) -> Outcome:
        try:
            f, g = _residual(a.lhs, a.rhs), _residual(b.lhs, b.rhs)
        except LatexError:
            return False, UNPARSED
        return self.residuals(f, g)

    def residuals(self, f: Tree, g: Tree) -> Outcome:
        names = free_symbols(f) | free_symbols(g)
        if not names:
            return None, SYMBOLIC
        ratios = []
        try:
            for k in range(SAMPLE_POINTS):
                env = sample_point(names, k)
                fv, gv = evaluate(f, env), evaluate(g, env)
                if (
                    values_equal(gv, _ZERO, False) is not False
                    or values_equal(fv, _ZERO, False) is not False
                ):
                    return None, SYMBOLIC
                ratios.append(divide(fv, gv))
        except _UNDECIDED:
            return None, SYMBOLIC
        verdicts = [values_equal(ratios[0], q, False) for q in ratios[1:]]
        if any(v is False for v in verdicts):
            return False, SYMBOLIC
        return (True if all(verdicts) else None), SYMBOLIC

    def real_sets(self, p, r) -> Outcome | None:
        """One-variable relations, intervals and unions that ``as_set`` cannot solve (sides not
        linear): undecided here (sympy's), None when they are not such sets."""
        return (None, SYMBOLIC) if _set_variable(p, r) is not None else None

    def solutions(self, f: Tree, var: str, values: list[Tree]) -> Outcome:
        """Whether ``values`` are the real solutions of ``f = 0``: False when one is not a
        solution; otherwise only sympy can tell whether the list is complete."""
        for v in values:
            try:
                fv = evaluate(f, {var: evaluate(v)})
            except _UNDECIDED:
                continue
            if _non_real(fv) or values_equal(fv, _ZERO, False) is False:
                return False, SYMBOLIC
        return None, SYMBOLIC


class SympyJudge(NumericJudge):
    """The numeric judge, then sympy for what it cannot decide. Worker-only."""

    def trees(self, ta: Tree, tb: Tree) -> Outcome:
        equal, method = super().trees(ta, tb)
        if equal is not None:
            return equal, method
        from .symbolic import trees_equal

        return trees_equal(ta, tb, has_decimal(ta) or has_decimal(tb)), SYMBOLIC

    def residuals(self, f: Tree, g: Tree) -> Outcome:
        equal, method = super().residuals(f, g)
        if equal is not None:
            return equal, method
        from .symbolic import equations_equal

        return equations_equal(f, g), SYMBOLIC

    def real_sets(self, p, r) -> Outcome | None:
        var = _set_variable(p, r)
        if var is None:
            return None
        from .symbolic import real_set

        a, b = real_set(p, var), real_set(r, var)
        if a is None or b is None:
            return False, SHAPE  # not a set sympy solves: math-verify's, as before
        return a == b, SYMBOLIC

    def solutions(self, f: Tree, var: str, values: list[Tree]) -> Outcome:
        equal, method = super().solutions(f, var, values)
        if equal is not None:
            return equal, method
        from .symbolic import real_solutions_are

        return real_solutions_are(f, var, values), SYMBOLIC


def _all(pairs, judge) -> Outcome:
    """AND over item pairs; a decisive False wins over undecided items."""
    method, undecided = EXACT, False
    for a, b in pairs:
        equal, m = compare(a, b, judge)
        if equal is False:
            return False, m
        undecided |= equal is None
        method = _strongest(method, m)
    return (None if undecided else True), method


def _matching(n: int, ok: Callable[[int, int], bool]) -> bool:
    """Whether an n x n bipartite graph has a perfect matching (Kuhn's algorithm)."""
    owner = [-1] * n

    def augment(i: int, seen: list[bool]) -> bool:
        for j in range(n):
            if ok(i, j) and not seen[j]:
                seen[j] = True
                if owner[j] < 0 or augment(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return all(augment(i, [False] * n) for i in range(n))


def _unordered(xs: tuple, ys: tuple, judge) -> Outcome:
    if len(xs) != len(ys):
        return False, EXACT
    grid = [[compare(x, y, judge) for y in ys] for x in xs]
    method = EXACT
    for row in grid:
        for equal, m in row:
            if equal is not False:
                method = _strongest(method, m)
    n = len(xs)
    if _matching(n, lambda i, j: grid[i][j][0] is True):
        return True, method
    if _matching(n, lambda i, j: grid[i][j][0] is not False):
        return None, method
    return False, method


def _grouped_as_flat(xs: tuple, ys: tuple):
    """ "p=5,q=2; p=7,q=2" (groups) against "p=5, q=2, p=7, q=2" (the same, flat), in order."""
    for groups, flat in ((xs, ys), (ys, xs)):
        if len(groups) < len(flat) and all(isinstance(g, st.Seq) for g in groups):
            items = tuple(i for g in groups for i in g.items)
            if len(items) == len(flat):
                return list(
                    zip(items, flat, strict=True) if groups is xs else zip(flat, items, strict=True)
                )
    return None


def _dedupe(items: tuple) -> tuple:
    return tuple(dict.fromkeys(items))


def _vector(m: st.Matrix) -> tuple | None:
    """The entries of a row or column vector, else None."""
    if len(m.rows) == 1:
        return m.rows[0]
    if all(len(r) == 1 for r in m.rows):
        return tuple(r[0] for r in m.rows)
    return None


def _as_equation(node) -> st.Equation | None:
    if isinstance(node, st.Equation):
        return node
    if isinstance(node, st.Assign) and isinstance(node.value, st.Leaf):
        return st.Equation(node.var, node.value.text)
    return None


def _text_key(s: str) -> str:
    return re.sub(r"[^0-9a-z]", "", s.casefold())


def _relations(p: st.Relation, r: st.Relation, judge) -> Outcome:
    if p.ops != r.ops or len(p.parts) != len(r.parts):
        return False, EXACT
    return _all(zip(map(st.Leaf, p.parts), map(st.Leaf, r.parts), strict=True), judge)


_CALL_VAR = re.compile(r"^([A-Za-z])\(([A-Za-z](?:,[A-Za-z])*)\)$")


def _renamed_function(p: st.Assign, r: st.Assign, judge) -> Outcome | None:
    """``f(t) = t^2`` against ``f(x) = x^2``: the same function, its argument renamed."""
    mp, mr = _CALL_VAR.match(p.var), _CALL_VAR.match(r.var)
    if not (mp and mr) or mp.group(1) != mr.group(1):
        return None
    old, new = mp.group(2).split(","), mr.group(2).split(",")
    if len(old) != len(new) or len(set(old)) != len(old) or len(set(new)) != len(new):
        return None
    if not (isinstance(p.value, st.Leaf) and isinstance(r.value, st.Leaf)):
        return None
    try:
        tp, tr = parse_latex(p.value.text), parse_latex(r.value.text)
    except LatexError:
        return None
    if (free_symbols(tp) - set(old)) & set(new):
        return None  # a renamed argument would meet another name of the answer
    return judge.trees(rename(tp, dict(zip(old, new, strict=True))), tr)


def _solution_list(eq: st.Equation, bag: st.Bag, judge) -> Outcome | None:
    """An equation in one unknown against the list of its solutions (``x = 2, x = -2`` or
    ``2, -2``): equal when the list is exactly its set of real solutions."""
    items = bag.items
    if not items or len(items) > 16:
        return None
    names = {i.var for i in items if isinstance(i, st.Assign)}
    found = [i.value if isinstance(i, st.Assign) else i for i in items]
    leaves = [x for x in found if isinstance(x, st.Leaf)]
    if len(names) > 1 or len(leaves) != len(found):
        return None
    try:
        f = _residual(eq.lhs, eq.rhs)
        values = [parse_latex(x.text) for x in leaves]
    except LatexError:
        return None
    unknowns = free_symbols(f)
    if len(unknowns) != 1 or (names and names != unknowns):
        return None
    if any(free_symbols(v) for v in values):
        return None
    return judge.solutions(f, next(iter(unknowns)), values)


def _set_variable(p, r) -> str | None:
    """The one variable of a pair of real sets (a relation, an interval or a union, at least
    one a relation with a non-linear side), else None."""
    if not all(isinstance(x, (st.Relation, st.Seq, st.Union)) for x in (p, r)):
        return None
    if not any(isinstance(x, st.Relation) for x in (p, r)):
        return None
    names: set[str] = set()
    for x in (p, r):
        if isinstance(x, st.Relation):
            if any(op == "!=" for op in x.ops):
                return None
            for part in x.parts:
                try:
                    names |= free_symbols(parse_latex(part))
                except LatexError:
                    return None
    return next(iter(names)) if len(names) == 1 else None


_FUNCTION_VALUE = re.compile(r"^[A-Za-z]\([A-Za-z]\)$")


def _relation_names(rel: st.Relation) -> frozenset[str] | None:
    """The variables of a relation (``f(x)`` standing alone is one name), None if unreadable."""
    names: set[str] = set()
    for part in rel.parts:
        if _FUNCTION_VALUE.match(part):
            names.add(part)
            continue
        try:
            names |= free_symbols(parse_latex(part))
        except LatexError:
            return None
    return frozenset(names)


def _same_names(p: st.Relation, r: st.Relation) -> bool:
    """Whether two relations are about the same variables (True when a side is unreadable)."""
    a, b = _relation_names(p), _relation_names(r)
    return a is None or b is None or a == b


def _shape_names(x) -> frozenset[str] | None:
    """The variables of a relation or of a union's relations (math-9), None when it has none
    or one is unreadable."""
    rels = [x] if isinstance(x, st.Relation) else []
    if isinstance(x, st.Union):
        rels = [i for i in x.items if isinstance(i, st.Relation)]
    names: set[str] = set()
    for rel in rels:
        found = _relation_names(rel)
        if found is None:
            return None
        names |= found
    return frozenset(names) or None


def _other_variables(p, r) -> bool:
    """Whether two sets are written in different variables ("x<-2 or x>2" vs "|y|>2")."""
    a, b = _shape_names(p), _shape_names(r)
    return a is not None and b is not None and a != b


_STRICT = {"<": True, ">": True, "<=": False, ">=": False}


def _scaled_relation(p: st.Relation, r: st.Relation) -> bool | None:
    """Two one-sided relations that are positive multiples of each other (``3x^2 < 9a``,
    ``x^2 - 3a < 0``): True; None when the sample points do not show a constant ratio."""
    if len(p.parts) != 2 or len(r.parts) != 2:
        return None
    (op_p,), (op_r,) = p.ops, r.ops
    if op_p not in _STRICT or op_r not in _STRICT or _STRICT[op_p] != _STRICT[op_r]:
        return None
    try:
        # "a < b" and "a > b" as "lhs - rhs" of the same direction (< 0 or <= 0)
        f = _residual(*p.parts) if op_p[0] == "<" else _residual(p.parts[1], p.parts[0])
        g = _residual(*r.parts) if op_r[0] == "<" else _residual(r.parts[1], r.parts[0])
    except LatexError:
        return None
    names = free_symbols(f) | free_symbols(g)
    if not names:
        return None
    ratios = []
    try:
        for k in range(SAMPLE_POINTS):
            env = sample_point(names, k)
            fv, gv = evaluate(f, env), evaluate(g, env)
            if values_equal(gv, _ZERO, False) is not False or _non_real(fv) or _non_real(gv):
                return None
            ratios.append(divide(fv, gv))
        if not all(values_equal(ratios[0], q, False) is True for q in ratios[1:]):
            return None
        return bool(ratios[0] > 0)
    except _UNDECIDED:
        return None


_LATIN_NAME = re.compile(r"([A-Za-z])(?:_\{?(\d+)\}?)?")
# Greek names in their alphabet's order (math-10: "\beta=1, \alpha=2" is (2, 1)).
_GREEK = (
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "chi",
    "psi",
    "omega",
)
_GREEK_NAME = re.compile(r"\\(?:var)?(" + "|".join(_GREEK) + r")(?:_\{?(\d+)\}?)?")


def _name_key(name: str) -> tuple[int, int, int] | None:
    """(alphabet, place, index) of a one-letter name, Latin or Greek; None for another name."""
    m = _LATIN_NAME.fullmatch(name)
    if m is not None:
        return 0, ord(m[1]), int(m[2] or 0)
    m = _GREEK_NAME.fullmatch(name)
    if m is not None:
        return 1, _GREEK.index(m[1]), int(m[2] or 0)
    return None


def _assignment_values(x) -> tuple | None:
    """The values of a list of assignments to distinct variables, in the variables' order when
    they are a run of letters or one letter's indices (``y=3, x=5`` -> ``(5, 3)``, ``x_2=1,
    x_1=4`` -> ``(4, 1)``), else in the written order (``x=-5, p=2``); None for no such list."""
    if type(x) is not st.Bag or len(x.items) < 2:
        return None
    if not all(type(i) is st.Assign for i in x.items):
        return None
    names = [i.var for i in x.items]
    if len(set(names)) != len(names):
        return None  # "x=2, x=-2": solutions of one variable, a set
    keys = [k for k in (_name_key(n.replace(" ", "")) for n in names) if k is not None]
    ordered = sorted(keys)
    letters = [k[:2] for k in ordered]
    run = (
        len({k[0] for k in ordered}) == 1
        and all(b[1] - a[1] == 1 for a, b in pairwise(letters))
        and not any(k[2] for k in ordered)
    )
    indexed = len(set(letters)) == 1  # x_1, x_2, ...
    if len(keys) != len(names) or not (run or indexed):
        # "r=2, \\theta=1", "x=-5, p=\\frac{14}{3}": no named order, the written one
        return tuple(i.value for i in x.items)
    order = sorted(range(len(names)), key=lambda k: keys[k])
    return tuple(x.items[k].value for k in order)


def _solutions_of_one_variable(bag: st.Bag) -> bool:
    """``x=1, x=2`` (also ``x=1 or x=2``): solutions of one variable, a set (math-10)."""
    items = bag.items
    return (
        len(items) > 1
        and all(type(i) is st.Assign for i in items)
        and len({i.var for i in items}) == 1
    )


def _by_name(p, r, judge) -> Outcome | None:
    """Assignments against an unlabelled list or tuple (math-9): the point they name, in the
    variables' order ("x=1, y=2" is (1, 2), not "2, 1"; "y=3, x=5" is not (3, 5))."""
    for named, other, named_first in ((p, r, True), (r, p, False)):
        values = _assignment_values(named)
        if values is None:
            continue
        round_seq = type(other) is st.Seq and (other.open, other.close) == ("(", ")")
        if not (type(other) is st.Bag or round_seq) or len(other.items) != len(values):
            return None
        if any(type(i) is st.Assign for i in other.items):
            return None
        pred_items, ref_items = (values, other.items) if named_first else (other.items, values)
        return _all(zip(pred_items, ref_items, strict=True), judge)
    return None


def compare(p, r, judge) -> Outcome:
    """Compare a predicted shape with a reference shape, leaf pairs going to ``judge``."""
    tp, tr = type(p), type(r)
    by_name = _by_name(p, r, judge)
    if by_name is not None:
        return by_name
    if tp is st.Leaf and tr is st.Leaf:
        return judge.expr(p.text, r.text)
    if tp is st.Text or tr is st.Text:
        return (tp is tr and _text_key(p.text) == _text_key(r.text)), EXACT
    if tp is st.Assign and tr is st.Assign:
        if p.var != r.var:
            renamed = _renamed_function(p, r, judge)
            return renamed if renamed is not None else (False, EXACT)
        return compare(p.value, r.value, judge)
    if {tp, tr} == {st.Equation, st.Bag}:
        eq, bag = (p, r) if tp is st.Equation else (r, p)
        solved = _solution_list(eq, bag, judge)  # "x^2 = 4" vs "x = 2 or x = -2"
        if solved is not None:
            return solved
    if st.Equation in (tp, tr):
        e, f = _as_equation(p), _as_equation(r)
        if e is None or f is None:
            return False, EXACT
        return judge.equation(e, f)
    if tp is st.Assign or tr is st.Assign:
        return compare(p.value if tp is st.Assign else p, r.value if tr is st.Assign else r, judge)
    if {tp, tr} == {st.Bag, st.Relation}:
        # "x \\ge 1 or 1 \\le x": the same relation twice is that relation.
        bag, rel = (p, r) if tp is st.Bag else (r, p)
        if all(isinstance(i, st.Relation) for i in bag.items):
            outcome = _all(((item, rel) for item in bag.items), judge)
            if outcome[0] is not False:
                return outcome
    if tp is st.Relation and tr is st.Relation:
        if not _same_names(p, r):
            return False, EXACT  # "x > 1" vs "y > 1": sets of different variables (math-6)
        outcome = _relations(p, r, judge)
        if outcome[0] is False:
            outcome = _relations(st.flip(p), r, judge)
        if outcome[0] is not False:
            return outcome
    if _other_variables(p, r):
        return False, EXACT  # "x<-2 or x>2" vs "y<-2 or y>2" (math-9: as math-6's x>1, y>1)
    if st.Relation in (tp, tr):
        # "-x > -1" is "x < 1"; "x \ge 2" is "[2, \infty)": compare solution sets.
        a, b = as_set(p), as_set(r)
        if a is not None and b is not None:
            return same_set(a, b), NUMERIC
        solved = judge.real_sets(p, r)  # "x^2 > 4" vs "(-\\infty,-2) \\cup (2,\\infty)": sympy's
        if solved is not None:
            return solved
        if tp is st.Relation and tr is st.Relation:
            scaled = _scaled_relation(p, r)  # "3x^2 < 9a" is "x^2 - 3a < 0"
            if scaled is not None:
                return scaled, SYMBOLIC
        # Both relations: compared above. A relation we cannot solve ("1 \\le |z| \\le 2")
        # against an interval or union: math-verify's.
        settable = (st.Seq, st.Union)
        return False, (SHAPE if tp in settable or tr in settable else EXACT)
    if tp is st.Seq and tr is st.Seq:
        if (p.open, p.close) != (r.open, r.close) or len(p.items) != len(r.items):
            return False, EXACT
        return _all(zip(p.items, r.items, strict=True), judge)
    if st.Union in (tp, tr) and {tp, tr} <= {st.Union, st.Seq}:
        a, b = as_set(p), as_set(r)  # "(-\\infty,-3] \\cup [2,\\infty)" vs "[-3,2]": two sets
        if a is not None and b is not None:
            return same_set(a, b), NUMERIC
        if any(isinstance(i, st.Relation) for u in (p, r) if type(u) is st.Union for i in u.items):
            return False, EXACT  # "x < -2 or y > 2": relations of two variables are no such set
    if {tp, tr} == {st.Bag, st.Leaf}:
        # "\\boxed{15\\frac{39}{40}}, or \\boxed{\\frac{639}{40}}": one value written two ways.
        bag, leaf = (p, r) if tp is st.Bag else (r, p)
        outcome = _all(((item, leaf) for item in bag.items), judge)
        return outcome if outcome[0] is not False else (False, EXACT)
    if {tp, tr} == {st.Seq, st.Bag}:
        seq, bag = (p, r) if tp is st.Seq else (r, p)
        if (seq.open, seq.close) != ("(", ")") or len(p.items) != len(r.items):
            return False, EXACT
        if _solutions_of_one_variable(bag):
            return False, EXACT  # "x=1, x=2" is a set of solutions, never the tuple (1, 2)
        return _all(zip(p.items, r.items, strict=True), judge)  # a bare list read as a tuple
    unordered = (st.Bag, st.SetOf)
    if tp in unordered and tr in unordered:
        # A list of solutions is a set: a repeated solution is still one solution.
        flat = _grouped_as_flat(p.items, r.items)
        if flat is not None:
            return _all(flat, judge)
        return _unordered(_dedupe(p.items), _dedupe(r.items), judge)
    if tp is st.Union and tr is st.Union:
        return _unordered(p.items, r.items, judge)
    if tp is st.Matrix and tr is st.Matrix:
        if [len(row) for row in p.rows] != [len(row) for row in r.rows]:
            return False, EXACT
        return _all(zip(sum(p.rows, ()), sum(r.rows, ()), strict=True), judge)
    if st.Matrix in (tp, tr):
        other = r if tp is st.Matrix else p
        vec = _vector(p if tp is st.Matrix else r)
        round_seq = (
            tp is st.Bag
            or tr is st.Bag
            or (isinstance(other, st.Seq) and (other.open, other.close) == ("(", ")"))
        )
        if not isinstance(other, (st.Seq, st.Bag)):
            return False, SHAPE  # a matrix against an expression ("A + B"): math-verify's case
        if vec is None or not round_seq or len(vec) != len(other.items):
            return False, EXACT
        return _all(
            zip(vec, other.items, strict=True)
            if tp is st.Matrix
            else zip(other.items, vec, strict=True),
            judge,
        )
    # Our rules decide tuple vs set vs list and a set vs its element; a union or an expression
    # we cannot read against another shape ("{1,2} \\cap {2,3}" vs "\\{2\\}") is math-verify's.
    unreadable = any(type(x) is st.Leaf and not _parses(x.text) for x in (p, r))
    return False, (SHAPE if st.Union in (tp, tr) or unreadable else EXACT)


def _parses(text: str) -> bool:
    try:
        parse_latex(text)
    except LatexError:
        return False
    return True


def equivalent(pred: str, ref: str, judge) -> Outcome:
    """Compare two *normalised* answers."""
    if pred == ref:
        return True, EXACT
    if _LITERAL.match(pred) and _LITERAL.match(ref):
        # Base-n numerals (1112112_3), clock times (12:00), ratios (7:32): written forms.
        return pred.replace("{", "").replace("}", "") == ref.replace("{", "").replace(
            "}", ""
        ), EXACT
    if _CHOICE_REF.match(ref):
        m = _CHOICE_PRED.match(pred)
        return bool(m and m.group(1) == ref), EXACT
    try:
        return compare(st.parse_answer(pred), st.parse_answer(ref), judge)
    except (ValueError, RecursionError):
        return False, UNPARSED


NUMERIC_JUDGES = {k: NumericJudge(k) for k in REAL_DOMAIN_SETTINGS}


def fast_compare(pred: str, ref: str, real_domain: bool | str = True) -> Outcome:
    """The in-process cascade (exact, numeric); ``None`` means "needs sympy"."""
    return equivalent(pred, ref, NUMERIC_JUDGES[real_domain])


MATH_VERIFY = "math-verify"
TIMEOUT = "timeout"


def full_compare(
    pred: str,
    ref: str,
    answer: str | None = None,
    reference: str | None = None,
    mv_seconds: int | None = None,
    real_domain: bool | str = True,
) -> Outcome:
    """The whole cascade: our rules with sympy, then math-verify. Runs in the worker process.

    math-verify (on the raw ``answer`` and ``reference``) is asked only where our rules did
    not decide: a side our parser cannot read, or sympy could not tell. A decisive "different"
    from our rules is final (math-verify's false "equal"s are on pairs we decide). It gets
    ``mv_seconds`` (its own limits); running out of them is the outcome ``(False, "timeout")``.
    """
    equal, method = equivalent(pred, ref, SympyJudge(real_domain))
    if equal:
        return True, method
    if (
        answer is not None
        and reference is not None
        and (equal is None or method in UNDECIDED_METHODS)
    ):
        from .mv_stage import mv_equal

        found = mv_equal(answer, reference, mv_seconds)
        if found is None:
            return False, TIMEOUT
        if found:
            return True, MATH_VERIFY
    return False, method
