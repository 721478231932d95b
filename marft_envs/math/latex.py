"""A small LaTeX-expression parser: normalised answer text -> an expression tree.

The tree is made of plain tuples so it is hashable, cheap to cache and picklable:

    ("n", Fraction, is_decimal)      a number (exact); is_decimal marks "0.33"-style literals
    ("v", name)                      a variable (x, x_1, theta)
    ("c", "pi" | "E" | "I" | "oo")   a constant
    ("+", (a, b, ...))               a sum
    ("*", (a, b, ...))               a product
    ("/", a, b)   ("^", a, b)   ("neg", a)
    ("f", name, (args...))           sqrt, root, sin, ..., log, factorial, binomial, Abs, floor

Both backends (exact/mpmath numerics in-process, sympy in the worker) walk this
tree, so we never ``eval`` text and need neither antlr nor
``sympy.parsing.latex``. Anything we do not understand raises ``LatexError``.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import cast

MAX_LATEX_CHARS = 4000

Tree = tuple


class LatexError(ValueError):
    """The text is not an expression this parser understands."""


_TOKEN = re.compile(
    r"(?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|(?P<cmd>\\[A-Za-z]+|\\[{}|])"
    r"|(?P<letter>[A-Za-z])"
    r"|(?P<op>[-+*/^_()\[\]{}!|,])"
    r"|(?P<space>\s+)"
)

_GREEK = {
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
}
_FUNCTIONS = {
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "sec": "sec",
    "csc": "csc",
    "cot": "cot",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "tanh": "tanh",
    "ln": "log",
    "log": "log",
    "exp": "exp",
    # programming-syntax names (normalize turns "cosec(x)" into "\\cosec(x)")
    "asin": "asin",
    "acos": "acos",
    "atan": "atan",
    "cosec": "csc",
    "sech": "sech",
    "csch": "csch",
    "cosech": "csch",
    "coth": "coth",
}
# Functions written as calls with parenthesised, comma-separated arguments ("\\abs(x)",
# "\\binomial(n,k)", "\\log(y,2)": sympy's order, the base second).
_CALLS = {
    "abs": ("Abs", 1),
    "factorial": ("factorial", 1),
    "binomial": ("binomial", 2),
    "floor": ("floor", 1),
    "ceil": ("ceiling", 1),
    "ceiling": ("ceiling", 1),
}
_TWO_ARGS = {
    "frac": "/",
    "dfrac": "/",
    "tfrac": "/",
    "binom": "binomial",
    "dbinom": "binomial",
    "tbinom": "binomial",
}
_MUL_CMDS = {"\\cdot", "\\times", "\\ast"}
_ATOM_CMDS = (
    {"\\pi", "\\infty", "\\sqrt", "\\lfloor", "\\lceil"}
    | {f"\\{g}" for g in _GREEK}
    | {f"\\{f}" for f in list(_FUNCTIONS) + list(_TWO_ARGS) + list(_CALLS)}
)
_CONSTS = {"\\pi": ("c", "pi"), "\\infty": ("c", "oo")}


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise LatexError(f"unexpected character {text[pos]!r} in {text[:60]!r}")
        pos = m.end()
        if m.lastgroup != "space":
            tokens.append((cast(str, m.lastgroup), m.group()))  # every alternative is named
    return tokens


def number(literal: str) -> Tree:
    """The tree of a number literal such as ``12``, ``0.5`` or ``1.5e3``."""
    value = Fraction(literal.rstrip(".") or "0")
    return ("n", value, bool(re.search(r"[.eE]", literal)))


def _product(items: list[Tree]) -> Tree:
    return items[0] if len(items) == 1 else ("*", tuple(items))


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0

    # -- token helpers -------------------------------------------------
    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise LatexError("unexpected end of expression")
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        tok = self.take()
        if tok[1] != value:
            raise LatexError(f"expected {value!r}, found {tok[1]!r}")

    def at(self, value: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[1] == value

    def starts_atom(self) -> bool:
        tok = self.peek()
        if tok is None:
            return False
        kind, value = tok
        return kind in ("num", "letter") or value in ("(", "{", "[") or value in _ATOM_CMDS

    # -- grammar ---------------------------------------------------------
    def parse(self) -> Tree:
        tree = self.expr()
        if (tok := self.peek()) is not None:
            raise LatexError(f"unexpected {tok[1]!r}")
        return tree

    def expr(self) -> Tree:
        terms = [self.term()]
        while self.at("+") or self.at("-"):
            op = self.take()[1]
            t = self.term()
            terms.append(t if op == "+" else ("neg", t))
        return terms[0] if len(terms) == 1 else ("+", tuple(terms))

    def term(self) -> Tree:
        factors = [self.unary()]
        while True:
            tok = self.peek()
            if tok is None:
                break
            if tok[1] in ("*",) or tok[1] in _MUL_CMDS:
                self.take()
                factors.append(self.unary())
            elif tok[1] in ("/", "\\div"):
                self.take()
                factors = [("/", _product(factors), self.unary())]
            elif self.starts_atom():
                factors.append(self.power())
            else:
                break
        return _product(factors)

    def unary(self) -> Tree:
        if self.at("-"):
            self.take()
            return ("neg", self.unary())
        if self.at("+"):
            self.take()
            return self.unary()
        return self.power()

    def power(self) -> Tree:
        base = self.postfix(self.atom())
        while self.at("^"):
            self.take()
            base = ("^", base, self.exponent())
        return base

    def exponent(self) -> Tree:
        if self.at("-"):
            self.take()
            return ("neg", self.exponent())
        return self.postfix(self.atom())

    def postfix(self, tree: Tree) -> Tree:
        while self.at("!"):
            self.take()
            tree = ("f", "factorial", (tree,))
        return tree

    def group(self, close: str) -> Tree:
        inner = self.expr()
        self.expect(close)
        return inner

    def argument(self) -> Tree:
        """A command argument: ``{...}`` or one atom."""
        if self.at("{"):
            self.take()
            return self.group("}")
        return self.atom()

    def subscript(self) -> str:
        self.expect("_")
        if self.at("{"):
            self.take()
            parts = []
            while not self.at("}"):
                parts.append(self.take()[1])
            self.take()
            return "".join(parts)
        return self.take()[1]

    def atom(self) -> Tree:
        kind, value = self.take()
        if kind == "num":
            return number(value)
        if kind == "letter":
            if self.at("_"):
                sub = re.sub(r"\W", "", self.subscript())
                return ("v", f"{value}_{sub}")
            if value == "e":
                return ("c", "E")
            if value == "i":
                return ("c", "I")
            return ("v", value)
        if value == "(":
            return self.group(")")
        if value == "[":
            return self.group("]")
        if value == "{":
            return self.group("}")
        if value == "|":
            return ("f", "Abs", (self.group("|"),))
        if kind == "cmd":
            return self.command(value)
        raise LatexError(f"unexpected {value!r}")

    def command(self, cmd: str) -> Tree:
        name = cmd[1:]
        if cmd in _CONSTS:
            return _CONSTS[cmd]
        if name in _GREEK:
            return ("v", name)
        if name in _TWO_ARGS:
            a, b = self.argument(), self.argument()
            return ("/", a, b) if _TWO_ARGS[name] == "/" else ("f", "binomial", (a, b))
        if name == "sqrt":
            if self.at("["):
                self.take()
                n = self.group("]")
                return ("f", "root", (self.argument(), n))
            return ("f", "sqrt", (self.argument(),))
        if name in ("lfloor", "lceil"):
            inner = self.expr()
            self.expect("\\rfloor" if name == "lfloor" else "\\rceil")
            return ("f", "floor" if name == "lfloor" else "ceiling", (inner,))
        if name in _FUNCTIONS:
            return self.function(_FUNCTIONS[name])
        if name in _CALLS and self.at("("):
            fname, arity = _CALLS[name]
            self.take()
            args = self.call_arguments()
            if len(args) != arity:
                raise LatexError(f"{name} takes {arity} argument(s)")
            return ("f", fname, tuple(args))
        raise LatexError(f"unsupported command {cmd}")

    def call_arguments(self) -> list[Tree]:
        """``a, b, ...)`` after an opening parenthesis."""
        args = [self.expr()]
        while self.at(","):
            self.take()
            args.append(self.expr())
        self.expect(")")
        return args

    def function(self, fname: str) -> Tree:
        base = power = None
        if fname == "log" and self.at("_"):
            self.take()
            base = self.argument()
        if self.at("^"):
            self.take()
            power = self.exponent()
        if self.at("("):
            self.take()
            args = self.call_arguments()
            if len(args) == 2 and fname == "log" and base is None:
                return self._raised(("f", "log", (args[0], args[1])), power)  # log(y, 2)
            if len(args) != 1:
                raise LatexError(f"{fname} takes one argument")
            arg = args[0]
        elif self.at("{"):
            arg = self.argument()
        else:  # "\sin 2x": a product of atoms, no + or -
            factors = [self.power()]
            while self.starts_atom() and self.tokens[self.i][1][1:] not in _FUNCTIONS:
                factors.append(self.power())
            arg = _product(factors)
        return self._raised(("f", fname, (arg,) if base is None else (arg, base)), power)

    @staticmethod
    def _raised(tree: Tree, power: Tree | None) -> Tree:
        return tree if power is None else ("^", tree, power)


@lru_cache(maxsize=8192)
def parse_latex(text: str) -> Tree:
    """Parse a normalised LaTeX expression into a tree; raise ``LatexError`` if we cannot."""
    if len(text) > MAX_LATEX_CHARS:
        raise LatexError(f"expression longer than {MAX_LATEX_CHARS} characters")
    if not text.strip():
        raise LatexError("empty expression")
    try:
        return _Parser(text).parse()
    except RecursionError as e:
        raise LatexError("expression nested too deeply") from e


def has_decimal(tree: Tree) -> bool:
    """Whether a decimal literal (an approximation such as 0.33) occurs in the tree."""
    kind = tree[0]
    if kind == "n":
        return tree[2]
    if kind in ("+", "*"):
        return any(has_decimal(t) for t in tree[1])
    if kind in ("/", "^"):
        return has_decimal(tree[1]) or has_decimal(tree[2])
    if kind == "neg":
        return has_decimal(tree[1])
    if kind == "f":
        return any(has_decimal(t) for t in tree[2])
    return False


def free_symbols(tree: Tree) -> frozenset[str]:
    """The variable names in the tree."""
    kind = tree[0]
    if kind == "v":
        return frozenset((tree[1],))
    if kind in ("+", "*"):
        return frozenset().union(*(free_symbols(t) for t in tree[1]))
    if kind in ("/", "^"):
        return free_symbols(tree[1]) | free_symbols(tree[2])
    if kind == "neg":
        return free_symbols(tree[1])
    if kind == "f":
        return frozenset().union(*(free_symbols(t) for t in tree[2]))
    return frozenset()


def rename(tree: Tree, names: dict[str, str]) -> Tree:
    """The tree with variables renamed (``f(t) = t^2`` read as ``f(x) = x^2``)."""
    kind = tree[0]
    if kind == "v":
        return ("v", names.get(tree[1], tree[1]))
    if kind in ("+", "*"):
        return (kind, tuple(rename(t, names) for t in tree[1]))
    if kind in ("/", "^"):
        return (kind, rename(tree[1], names), rename(tree[2], names))
    if kind == "neg":
        return ("neg", rename(tree[1], names))
    if kind == "f":
        return ("f", tree[1], tuple(rename(t, names) for t in tree[2]))
    return tree
