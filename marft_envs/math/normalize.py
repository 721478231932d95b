"""Normalise an answer string to a canonical LaTeX-ish form.

Only cosmetic differences are removed here (the same value written two ways
should become the same string as often as possible, so the cheap exact check
catches it). Rules decided by this project (see docs/math_verifier.md):

* ``$``/``\\(``/``\\[`` delimiters, ``\\left``/``\\right``, spacing commands, ``\\displaystyle``
  and font commands are dropped; ``\\dfrac``/``\\tfrac`` become ``\\frac``.
* Degrees (``^\\circ``), percent signs and dollar signs are *labels*: they are
  dropped, never converted (``10\\%`` equals ``10``; it does not equal ``0.1``).
* ``\\text{...}`` that is only words next to some maths is a unit and is dropped
  (with a following ``^2``/``^3``); a text-only answer keeps its words.
* ``1,000`` and ``1{,}000`` are thousands separators only when the whole answer
  is such a number; ``(1,000)`` stays a pair.
* "and"/"or" between items become commas.
"""

from __future__ import annotations

import re
import unicodedata

from tasks.brackets import matching_brace

_UNICODE = {
    "\u2212": "-",
    "\u2013": "-",
    "\u00d7": "\\times ",
    "\u00f7": "\\div ",
    "\u00b7": "\\cdot ",
    "\u22c5": "\\cdot ",
    "\u03c0": "\\pi ",
    "\u221e": "\\infty ",
    "\u221a": "\\sqrt",
    "\u2264": "\\le ",
    "\u2265": "\\ge ",
    "\u2260": "\\ne ",
    "\u222a": "\\cup ",
    "\u2229": "\\cap ",
    "\u00b2": "^2",
    "\u00b3": "^3",
    "\u00b0": "",
    "\u2032": "'",
    "\u20ac": "",
    "\u00a3": "",
    "\u00a5": "",
}
# 12\,340, 12{,}340, 12,\!340: thousands separators in every LaTeX spelling.
_THIN_THOUSANDS = re.compile(
    r"(?<=\d)(?<!\\\\)\s?(?:\\[,!; ]|\{\s*,\s*\}|,\\[!,;: ]|,\{\})\s*(?=\d{3}(?!\d))"
)
# "\\left(" and "\\frac" (a JSON or prompt artefact, doubled backslashes) are "\left(", "\frac".
_DOUBLED_BACKSLASH = re.compile(
    r"\\\\(?=(?:left|right|frac|dfrac|tfrac|sqrt|pi|cdot|times|le|ge|leq|geq|ne|neq|infty|"
    r"text|boxed|mathrm|begin|end|pm|in|cup)(?![A-Za-z]))"
)
# "\approx": an exact value then its approximation ("x = 1/3 \approx 0.33") keeps the exact one.
_APPROX = re.compile(r"\\approx(?![A-Za-z])|\u2248")
_ASCII_RELATIONS = [
    (re.compile(p), r)
    for p, r in [(r">=|=>", r"\\ge "), (r"<=|=<", r"\\le "), (r"=/=|(?<![\d)}!])!=", r"\\ne ")]
]
_SPACING = re.compile(
    r"\\\\|\\q?quad|\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big|displaystyle|textstyle|"
    r"limits|nolimits)(?![A-Za-z])|\\[!,;: ]|~"
)
_ALIASES = [
    (re.compile(r"\\[dtc]frac(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\\geqq(?![A-Za-z])"), r"\\ge "),
    (re.compile(r"\\leqq(?![A-Za-z])"), r"\\le "),
    (re.compile(r"\\leq?slant(?![A-Za-z])|\\leq(?![A-Za-z])"), r"\\le "),
    (re.compile(r"\\geq?slant(?![A-Za-z])|\\geq(?![A-Za-z])"), r"\\ge "),
    (re.compile(r"\\neq(?![A-Za-z])"), r"\\ne "),
    (re.compile(r"\\lt(?![A-Za-z])"), "<"),
    (re.compile(r"\\gt(?![A-Za-z])"), ">"),
    (re.compile(r"\\lbrace(?![A-Za-z])"), r"\\{"),
    (re.compile(r"\\rbrace(?![A-Za-z])"), r"\\}"),
    (re.compile(r"\\[lr]?vert(?![A-Za-z])"), "|"),
    (re.compile(r"\\infinity(?![A-Za-z])|(?<![\\A-Za-z])infinity(?![A-Za-z])"), r"\\infty "),
]
_DEGREE = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ(?![A-Za-z])|\\degree(?![A-Za-z])")
# A degree sign in a trigonometric function's argument is a unit of the angle, never a label:
# "\sin 30^\circ" is 1/2 and "\sin(90^{\circ}-x)" is "\cos x" (math-8). The number of degrees
# becomes radians there; everywhere else the degree sign stays a label (dropped below).
_TRIG_CALL = re.compile(
    r"\\(?:sin|cos|tan|cot|sec|csc)(?![A-Za-z])(?:\s*\^\s*(?:\{[^{}]*\}|-?\d))?\s*(?:\\left\s*)?"
)
_DEGREE_MARK = (
    r"(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])|\\circ(?![A-Za-z])"
    r"|\\degree(?![A-Za-z])|\u00b0|\\text\s*\{\s*degrees?\s*\}|(?<![A-Za-z])degrees?(?![A-Za-z]))"
)
# What a degree mark makes an angle (math-9 adds the letters: "\sin(x^\circ)" is no "\sin x").
_DEGREE_NUMBER = re.compile(
    r"(\d+(?:\.\d+)?|\.\d+|\\(?:theta|alpha|beta|gamma|phi|varphi)(?![A-Za-z])"
    r"|(?<![\\A-Za-z])[A-Za-z](?![A-Za-z]))\s*" + _DEGREE_MARK
)
_MARK_AFTER = re.compile(r"\s*" + _DEGREE_MARK)
# A value with pi marked as degrees ("\frac{\pi}{4}^\circ"): that many degrees, in radians.
_PI_DEGREES = re.compile(r"^(?P<value>[^°]*\\pi(?![A-Za-z])[^°]*?)\s*" + _DEGREE_MARK + r"\s*$")
_BRACKET_PAIRS = {"(": ")", "{": "}", "[": "]"}
_PERCENT_DOLLAR = re.compile(r"\\%|%|\\\$|\\textdollar(?![A-Za-z])")
_TEXT_COMMANDS = (
    "text",
    "textbf",
    "textit",
    "textrm",
    "textnormal",
    "mbox",
    "mathrm",
    "mathbf",
    "mathit",
    "mathsf",
    "boldsymbol",
    "operatorname",
    "boxed",
    "fbox",
    "hbox",
    "emph",
)
_TEXT_COMMAND = re.compile(r"\\(" + "|".join(_TEXT_COMMANDS) + r")\s*\{")
_WORDS_ONLY = re.compile(r"^[A-Za-z][A-Za-z .\-']*$")
_UNIT_POWER = re.compile(r"\s*\^\s*(?:\{\s*[23]\s*\}|[23])")
# Words that are maths, never units, when written without a backslash.
_MATH_WORDS = {"pi", "sqrt", "sin", "cos", "tan", "log", "ln", "exp", "and", "or", "i", "e"}
_TRAILING_UNIT = re.compile(r"(?<=[\d}).])((?:\s+[A-Za-z]{2,}\.?(?:\s*\^\s*\{?[23]\}?)?)+)\s*$")
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_SPACE_THOUSANDS = re.compile(r"^-?\d{1,3}(?: \d{3})+(?:\.\d+)?$")
# "[\begin{array}..\end{array}]" (from \left[ ... \right]): the brackets are the matrix's own.
_BRACKETED_MATRIX = re.compile(
    r"^[\[(]\s*(\\begin\{(array|matrix|pmatrix|bmatrix)\}(?:(?!\\begin).)*\\end\{\2\})\s*[\])]$",
    re.S,
)
_FRAC_SHORT = [
    (re.compile(r"\\frac\s*([0-9a-zA-Z])\s*([0-9a-zA-Z])"), r"\\frac{\1}{\2}"),
    (re.compile(r"\\frac\s*([0-9a-zA-Z])\s*\{"), r"\\frac{\1}{"),
    (re.compile(r"\\frac\s*(\{[^{}]*\})\s*([0-9a-zA-Z])"), r"\\frac\1{\2}"),
    (re.compile(r"\\sqrt\s*([0-9a-zA-Z])"), r"\\sqrt{\1}"),
]
# "1\frac{4}{5}": an integer written against a proper numeric fraction is a mixed number (MATH
# writes 11 of its 5000 test answers so), not a product; "2\frac{x}{3}" stays a product.
_MIXED_NUMBER = re.compile(r"(?<![\w.^_}\\])(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}")
# "7 3/4": a mixed number written with a slash (PRM800K's grader reads it so).
_MIXED_SLASH = re.compile(r"^(-?)(\d+)\s+(\d+)/(\d+)$")
# "3 million": a number word multiplier, not a unit.
_SCALE = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_SCALE_WORD = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(thousand|million|billion|trillion)$", re.I)
_AND_OR = re.compile(
    r"\s+(?:and|or)\s+|,\s*(?:and|or)\s+|(?<=[)\]}])\s*(?:and|or)\s*(?=[(\[{\\\d-])"
)
_EMPTY_ITEMS = re.compile(r",(?:\s*,)+")
# A whole answer in plain braces ("{1,3}", LaTeX grouping, not the set "\{1,3\}").
_PARENTHESISED_EQUATION = re.compile(r"^\(([^(),]*=[^(),]*)\)$")
_GROUPING_BRACES = re.compile(r"^\{([^{}]*)\}$")
# "2,74", "1000,99", "0,111": a decimal comma (two decimals, or after a leading 0); "1,2" and
# "1,000" stay a list and a thousands number.
_DECIMAL_COMMA = re.compile(r"^(-?(?:\d+,\d{2}|0,\d+|\d{4,},\d{1,2}))$")
_SPACE = re.compile(r"\s+")
_USELESS_SPACE = re.compile(r"(?<![A-Za-z0-9]) | (?![A-Za-z0-9])")
_SINGLE_TOKEN_PARENS = re.compile(r"^\((-?[A-Za-z0-9.]+)\)$")


# Programming syntax (Python, sympy, Maxima, as models write answers in code): "y**3",
# "sqrt(2)", "log(y, 2)", "factorial(k)", "arccos(y)", "%pi". A known function name directly
# before "(" becomes its LaTeX command; "pi" standing alone is the constant.
_CALL_NAMES = (
    "sqrt|abs|exp|log|ln|sin|cos|tan|sec|csc|cosec|cot|arcsin|arccos|arctan|asin|acos|atan|"
    "sinh|cosh|tanh|sech|csch|cosech|coth|factorial|binomial|floor|ceil|ceiling"
)
_CALL = re.compile(rf"(?<![\\A-Za-z])({_CALL_NAMES})\s*(?=\()")
_ASCII_PI = re.compile(r"%pi(?![A-Za-z])|(?<![\\A-Za-z])pi(?![A-Za-z])")
_MAXIMA_E = re.compile(r"%e(?![A-Za-z])")


# The right operand of a Python "**": signs, then a number, a letter, pi, a call with its
# parentheses, a LaTeX command with its arguments, or a bracketed group.
_POW_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_POW_NAME = re.compile(r"%?[A-Za-z_][A-Za-z0-9_]*|\\[A-Za-z]+")
_POW_CLOSE = {"(": ")", "[": "]", "{": "}"}
_POW_MAX_DEPTH = 20


def _group_end(s: str, i: int) -> int | None:
    """The index after the bracket that closes the one at ``s[i]``, or None."""
    opener, closer = s[i], _POW_CLOSE[s[i]]
    depth = 0
    for j in range(i, len(s)):
        if s[j] == opener:
            depth += 1
        elif s[j] == closer:
            depth -= 1
            if depth == 0:
                return j + 1
    return None


def _power_operand_end(s: str, i: int) -> int | None:
    """The index after the right operand of a ``**`` that ends at ``i``, or None."""
    while i < len(s) and s[i] in " +-":
        i += 1
    if i >= len(s):
        return None
    if s[i] in _POW_CLOSE:
        return _group_end(s, i)
    m = _POW_NUMBER.match(s, i) or _POW_NAME.match(s, i)
    if not m:
        return None
    word, stop = m.group(), m.end()
    if word.startswith("\\"):  # \frac{1}{2}, \sqrt[3]{x}: the command's arguments
        end: int | None = stop
        while end is not None and end < len(s) and s[end] in "[{":
            end = _group_end(s, end)
        return end
    if stop < len(s) and s[stop] == "(" and not word[0].isdigit():  # a call: sqrt(2)
        return _group_end(s, stop)
    if word[0].isalpha() and len(word) > 1 and word != "pi":
        return None  # a word ("**5** and **6**", markdown bold), not an operand
    return stop


def _python_powers(s: str, depth: int = 0) -> str:
    """``**`` -> ``^``, grouped to the right as Python, sympy and Maxima group it (math-6):
    ``2**3**2`` is ``2^{3^2}`` (512), not ``(2^3)^2``; a single ``**`` is a plain ``^``."""
    out = []
    i = 0
    while True:
        j = s.find("**", i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        out.append(s[i:j])
        spans = []  # the operands of the chain "a ** b1 ** b2 ** ..." after its first "**"
        start = j + 2
        while True:
            end = _power_operand_end(s, start)
            if end is None:
                break
            spans.append((start, end))
            after = end
            while after < len(s) and s[after] == " ":
                after += 1
            if not s.startswith("**", after):
                break
            start = after + 2
        if len(spans) < 2 or depth >= _POW_MAX_DEPTH:
            out.append("^")
            i = j + 2
            continue
        parts = [_python_powers(s[a:b].strip(), depth + 1) for a, b in spans]
        chain = parts[-1]
        for part in reversed(parts[:-1]):
            chain = f"{part}^{{{chain}}}"
        out.append(f"^{{{chain}}}")
        i = spans[-1][1]


def _programming_syntax(s: str) -> str:
    if "**" in s:
        s = _python_powers(s)
    if ":=" in s:
        s = s.replace(":=", "=")  # Maxima's function definition "f(x):=x^2"
    if "%" in s:
        s = _MAXIMA_E.sub("e", s)
    if "pi" in s:
        s = _ASCII_PI.sub(r"\\pi ", s)
    if "(" in s:
        s = _CALL.sub(r"\\\1", s)
    return s


def _unwrap_text(s: str) -> str:
    """Replace ``\\text{...}``-like groups by their content; drop word-only units."""
    out = []
    pos = 0
    whole = s.strip()
    for _ in range(1000):  # bounded: each pass consumes one command
        m = _TEXT_COMMAND.search(s, pos)
        if not m:
            break
        close = matching_brace(s, m.end() - 1)
        if close < 0:
            break
        end = close + 1
        inner = s[m.end() : end - 1]
        out.append(s[pos : m.start()])
        words = inner.strip()
        if words in ("and", "or", ","):
            out.append(",")
        elif (
            m.group(1) in ("text", "mbox", "textrm", "mathrm", "textnormal")
            and _WORDS_ONLY.match(words)
            and not (m.group(1) == "mathrm" and len(words) == 1)  # \mathrm{e}: Euler's e
            and s[m.start() : end].strip() != whole
            and re.search(r"[0-9}]", s[: m.start()] + s[end:])
        ):
            out.append(" ")  # a unit next to a number: drop it and any ^2/^3
            power = _UNIT_POWER.match(s, end)
            if power:
                end = power.end()
        else:
            out.append(" " + _unwrap_text(inner) + " ")
        pos = end
    out.append(s[pos:])
    return "".join(out)


def _strip_trailing_units(s: str) -> str:
    m = _TRAILING_UNIT.search(s)
    if not m:
        return s
    words = re.findall(r"[A-Za-z]+", m.group(1))
    if any(w.lower() in _MATH_WORDS for w in words):
        return s
    return s[: m.start(1)]


def _approx(s: str) -> str:
    """``x = 1/3 \\approx 0.33`` -> ``x = 1/3``; ``x \\approx 11`` -> ``x = 11``."""
    m = _APPROX.search(s)
    if not m:
        return s
    head = s[: m.start()].strip()
    if "=" in head or not re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?", head):
        return head  # the exact value before the approximation
    return _APPROX.sub("=", s, count=1)


def _mixed_number(m: re.Match) -> str:
    whole, num, den = m.groups()
    if 0 < int(num) < int(den):
        return f"({whole}+\\frac{{{num}}}{{{den}}})"
    return m.group()


# Circled numbers (exam choices "①④", "②③"): a run of them is a list of numbers.
_CIRCLED = re.compile("[\u2460-\u2473\u24ea]")
_CIRCLED_RUN = re.compile("[\u2460-\u2473\u24ea](?:[\\s,、，]*[\u2460-\u2473\u24ea])*")
# Circled numbers are choice labels, not numbers: in arithmetic they are no values (math-9;
# math-10 also next to \times, \cdot, \div, which _UNICODE writes for ×, ·, ÷).
_CIRCLED_OP = r"(?:[-+*/×÷·^=]|\\(?:times|cdot|div|ast)(?![A-Za-z]))"
_CIRCLED_ARITHMETIC = re.compile(
    "[\u2460-\u2473\u24ea]\\s*" + _CIRCLED_OP + "|" + _CIRCLED_OP + "\\s*[\u2460-\u2473\u24ea]"
)


def _circled_number(c: str) -> str:
    return "0" if c == "\u24ea" else str(ord(c) - 0x2460 + 1)


def _circled_list(m: re.Match) -> str:
    """A run of circled choices: the set of their numbers (math-9: a set, unordered, so
    ``②③`` is no ordered pair ``(2, 3)``; ``①⓪`` is choices 1 and 0, not ``⑩``)."""
    numbers = [_circled_number(c) for c in _CIRCLED.findall(m.group())]
    return numbers[0] if len(numbers) == 1 else "\\{" + ", ".join(numbers) + "\\}"


_RELATION_OP = re.compile(
    r"<|>|\\le(?:q|qslant)?(?![A-Za-z])|\\ge(?:q|qslant)?(?![A-Za-z])|\\[lg]t(?![A-Za-z])"
)
# "x < -2 or x > 2", "x<-\\frac43 或 x>0", "x < 1 \\lor x > 3": a union of the relations' sets.
_OR = re.compile(
    r"\s+or\s+|\s*,\s*or\s+|\s*或\s*|\s*\\(?:lor|vee)(?![A-Za-z])\s*"
    r"|\s*\\(?:text|mbox|textrm|mathrm)\s*\{\s*,?\s*(?:or|或)\s*\}\s*"
)


def _or_relations(s: str) -> str:
    """Relations joined by "or" as a union (``\\cup``); "and" stays a list (an intersection is
    not a union: "x \\ge 1 and x \\le 1" is not the union of the two)."""
    if not ("or" in s or "或" in s or "\\lor" in s or "\\vee" in s) or not _OR.search(s):
        return s
    parts = _OR.split(s)
    if len(parts) < 2 or not all(
        _RELATION_OP.search(p)
        and "=" not in p.replace("\\le", "").replace("\\ge", "")
        and "," not in p
        and " and " not in p
        for p in parts
    ):
        return s
    return " \\cup ".join(p.strip() for p in parts)


# The integer parameter of a family of solutions, stated after it: ", k \\in \\mathbb{Z}",
# "(k \\in \\mathbb Z)", ", where k is an integer".
_INTEGER_NOTE = re.compile(  # one \\s* between tokens: no backtracking blow-up on long blanks
    r",?\s*(?:\(\s*)?(?:(?:where|for|with)\s+)?([a-zA-Z])\s*"
    r"(?:\\in\s*(?:\\mathbb\s*\{?Z\}?|\\Z|Z)|is\s+(?:an?\s+|any\s+)?integer)(?:\s*\))?\s*\.?$"
)


_INEQUALITY = re.compile(r"[<>≤≥≠]|\\(?:le|ge|leq|geq|leqslant|geqslant|lt|gt|ne|neq)(?![A-Za-z])")


def _relation_variable(value: str, letter: str) -> bool:
    """Whether ``letter`` is the variable of the relation ``value`` (a side of its own, or the
    relation's only letter: ``x > 0``, ``1 \\le x \\le 5``, ``2x+1 > 0``), not a parameter in
    it (``x \\ne \\frac{\\pi}{2} + k\\pi``)."""
    if not _INEQUALITY.search(value):
        return False
    sides = [p.strip(" ,") for p in _INEQUALITY.split(value)]
    names = set(re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", value))
    return letter in sides or names == {letter}


def _drop_integer_note(s: str) -> str:
    """``x = 2k\\pi, k \\in \\mathbb{Z}`` -> ``x = 2k\\pi``: the family, not its parameter."""
    tail = len(s) - 80 if len(s) > 80 else 0  # the note ends the answer: read only its tail
    m = _INTEGER_NOTE.search(s, tail)
    if m is None:
        return s
    value, letter = s[: m.start()], m.group(1)
    if not re.search(rf"(?<![\\A-Za-z]){letter}(?![A-Za-z])", value):
        return s
    if _relation_variable(value, letter) or re.match(rf"\s*{letter}\s*=", value):
        # "x > 0, x \\in \\mathbb{Z}": the note restricts the variable of a relation (or of
        # "x = ..."), a set of integers, not a parameter of a value (math-9): kept, written
        # one way ("x > 0 for x is an integer" is "x > 0, x \\in \\mathbb{Z}")
        return f"{value.rstrip(', ')}, {letter} \\in \\mathbb{{Z}}"
    return value.rstrip(", ")


_TEXT_WRAPPER = re.compile(r"\\(?:text|mbox|textrm)\s*\{([^{}]*)\}")
# Set-builder notation: "\\{x | cond\\}", "\\{x \\mid cond\\}", "\\{x : cond\\}", also with
# "x \\in \\mathbb{R}".
_SET_BUILDER = re.compile(
    r"^\\\{\s*([a-zA-Z])\s*(?:\\in\s*\\mathbb\s*\{?R\}?\s*)?(?:\||\\mid|:)\s*(.+?)\s*\\\}$"
)


def _radians(m: re.Match) -> str:
    return f"\\frac{{{m.group(1)}\\pi}}{{180}}"


def _close_of(s: str, start: int) -> int | None:
    """Index of the bracket closing the one at ``start`` (same kind), or None."""
    open_, close = s[start], _BRACKET_PAIRS[s[start]]
    depth = 0
    for i in range(start, len(s)):
        if s[i] == open_:
            depth += 1
        elif s[i] == close:
            depth -= 1
            if depth == 0:
                return i
    return None


def _trig_degrees(s: str) -> str:
    """``\\sin 30^\\circ`` -> ``\\sin(\\frac{30\\pi}{180})``: degrees in a trig argument (radians).

    The argument is the bracket group after the function (``\\sin(90^{\\circ}-x)``,
    ``\\cos\\left(...\\right)``, ``\\tan{45^\\circ}``), or a number of degrees right after it
    (``\\sin 30^\\circ``, ``\\cos^2 60°``). Only numbers marked as degrees change."""
    out: list[str] = []
    pos = 0
    for m in _TRIG_CALL.finditer(s):
        j = m.end()
        if j < pos:
            continue
        if j < len(s) and s[j] in _BRACKET_PAIRS:
            close = _close_of(s, j)
            if close is None:
                continue
            after = _MARK_AFTER.match(s, close + 1)
            if after and not _DEGREE_NUMBER.search(s, j, close + 1):
                # "\sin{30}^\circ", "\sin(30)^\circ": the argument marked as degrees (math-9)
                out += [s[pos:j], "(\\frac{(", s[j + 1 : close], ")\\pi}{180})"]
                pos = after.end()
                continue
            out += [s[pos:j], _DEGREE_NUMBER.sub(_radians, s[j : close + 1])]
            pos = close + 1
            continue
        d = _DEGREE_NUMBER.match(s, j)
        if d:
            out += [s[pos:j], "(", _radians(d), ")"]
            pos = d.end()
    return "".join(out) + s[pos:] if out else s


def normalize(answer: str) -> str:
    """Return the canonical form of a bare answer (see the module docstring for the rules)."""
    if not isinstance(answer, str):
        answer = "" if answer is None else str(answer)
    s = answer
    if ("circ" in s or "degree" in s or "\u00b0" in s) and _TRIG_CALL.search(s):
        s = _trig_degrees(s)  # before the degree sign is dropped as a label (and ° by _UNICODE)
    if "\\pi" in s and ("circ" in s or "degree" in s or "\u00b0" in s):
        m = _PI_DEGREES.match(s)
        if m and not re.search(_DEGREE_MARK, m.group("value")):
            s = f"({m.group('value')})\\cdot\\frac{{\\pi}}{{180}}"  # no label: a unit (math-9)
    for k, v in _UNICODE.items():
        if k in s:
            s = s.replace(k, v)
    if _CIRCLED.search(s):
        if _CIRCLED_ARITHMETIC.search(s):
            return s.strip()  # "①+④": labels in a sum, no number (math-9)
        s = _CIRCLED_RUN.sub(_circled_list, s)  # before NFKC, which glues "①④" into "14"
    s = unicodedata.normalize("NFKC", s)
    if "\\\\" in s:
        s = _DOUBLED_BACKSLASH.sub(r"\\", s)
    s = _programming_syntax(s)
    m = _DECIMAL_COMMA.match(s.strip().strip("$").strip())
    if m:
        s = m.group(1).replace(",", ".")
    s = s.replace("\\$", " ").replace("$", " ")
    s = re.sub(r"(?<!\\)\\[()\[\]]", " ", s)
    s = _THIN_THOUSANDS.sub("", s)
    if "=" in s:
        for pattern, latex_op in _ASCII_RELATIONS:
            s = pattern.sub(latex_op, s)
    s = _SPACING.sub(lambda m: m.group() if m.group() == "\\\\" else " ", s)
    for pattern, repl in _ALIASES:
        s = pattern.sub(repl, s)
    s = _DEGREE.sub(" ", s)
    s = _PERCENT_DOLLAR.sub(" ", s)
    s = _or_relations(s)
    if "integer" in s or "\\in" in s:
        # "... , \\text{ where } k \\text{ is an integer}": read without the \\text wrappers
        plain = _TEXT_WRAPPER.sub(r" \1 ", s)
        cut = _drop_integer_note(plain)
        s = cut if cut != plain else s
    s = _unwrap_text(s)
    s = _AND_OR.sub(",", s)
    s = _EMPTY_ITEMS.sub(",", s)
    s = _approx(s)
    s = _SPACE.sub(" ", s).strip()
    m = _SCALE_WORD.match(s)
    if m:
        s = f"{m.group(1)}\\times 10^{{{_SCALE[m.group(2).lower()]}}}"
    m = _MIXED_SLASH.match(s)
    if m and 0 < int(m.group(3)) < int(m.group(4)):
        s = f"{m.group(1)}({m.group(2)}+\\frac{{{m.group(3)}}}{{{m.group(4)}}})"
    s = _strip_trailing_units(s).strip()
    s = re.sub(r"\b(?:dollars?|cents?|USD)\b", " ", s).strip() if re.search(r"\d", s) else s
    s = s.replace("{,}", "")
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    if _SPACE_THOUSANDS.match(s):
        s = s.replace(" ", "")
    for pattern, repl in _FRAC_SHORT:
        s = pattern.sub(repl, s)
    s = _MIXED_NUMBER.sub(_mixed_number, s)
    s = _SPACE.sub(" ", s)
    s = _USELESS_SPACE.sub("", s).strip()
    s = s.rstrip(".").strip()
    s = s.removeprefix("+")
    m = _SINGLE_TOKEN_PARENS.match(s)
    if m:
        s = m.group(1)
    m = _PARENTHESISED_EQUATION.match(s)
    if m:
        s = m.group(1)  # "(35 + 70 = 105)": a worked calculation in parentheses
    m = _GROUPING_BRACES.match(s)
    if m and not s.startswith("\\{"):
        s = m.group(1)
    m = _BRACKETED_MATRIX.match(s)
    if m:
        s = m.group(1)
    s = _drop_integer_note(s)
    m = _SET_BUILDER.match(s)
    if (
        m
        and _RELATION_OP.search(m.group(2))
        and re.search(rf"(?<![\\A-Za-z]){m.group(1)}(?![A-Za-z])", m.group(2))
    ):  # the condition must be on the set's variable: "\\{x | y > 1\\}" is no set of x
        s = m.group(2)  # "\\{x | 1 < x \\le 3\\}" is the set of "1 < x \\le 3"
    return s


# Units written against a number ("5cm", "3 s", "12 km/h", "3页", "13只"). Only stripped from a
# prediction whose reference is a plain number (``strip_units``): "3s" may be 3*s elsewhere.
_UNIT_WORDS = (
    "km/h|m/s|mph|kmh|cm|mm|km|m|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|"
    "years?|kg|g|mg|lbs?|oz|ft|feet|in|inch(?:es)?|yds?|mi|miles?|ml|mL|l|L|units?|dollars?|"
    "cents?|degrees?|pages?|people|students?|apples?|eggs?|pounds?|meters?|cm\\^2|m\\^2"
)
_GLUED_UNIT = re.compile(
    rf"^(-?(?:\d+(?:\.\d+)?|\.\d+|\\frac\{{\d+\}}\{{\d+\}})(?:/\d+)?)\s*(?:(?:{_UNIT_WORDS})(?:\^\{{?[23]\}}?)?\.?"
    r"|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]{1,4})$"
)


def strip_units(answer: str) -> str:
    """``5cm`` -> ``5``, ``3页`` -> ``3``: a normalised number followed only by a unit."""
    m = _GLUED_UNIT.match(answer)
    return m.group(1) if m else answer
