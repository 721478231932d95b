"""Find the final answer in a model's response.

Order of the rules (the first that finds something wins):

1. the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces, or ``\\boxed 5``);
2. the last "the answer is ...", "Final answer: ...", "Answer: ..." or "#### ...";
3. the whole text, when it is itself a short bare answer (``\\frac{1}{2}``, ``x = 3``);
4. the last number in the text (a setting: ``last_number_fallback``).

Work is bounded on any input: we scan at most a few box candidates from the end
and never read more than ``_MAX_BOX_CHARS`` of one box.
"""

from __future__ import annotations

import re

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_MAX_BOX_CANDIDATES = 20  # unclosed boxes to skip before giving up (adversarial text)
_MAX_BOX_CHARS = 10_000  # a box longer than this is not an answer
_MAX_BARE_CHARS = 200

_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer\s*(?:is|:)|the\s+answer\s+is|\banswer\s*:|####)[\s:*]*",
    re.IGNORECASE,
)
_MATH_SEGMENT = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]")
# Two plain words (outside \text{} labels such as units) mean prose, not a bare answer.
_WORD = re.compile(r"(?<![\\A-Za-z{])[A-Za-z]{2,}(?![A-Za-z])")
_TEXT_GROUP = re.compile(r"\\(?:text|mbox|textbf|mathrm)\s*\{[^{}]*\}")
_NUMBER = re.compile(r"-?\d(?:[\d,]*\d)?(?:\.\d+)?(?:/\d+)?")


def _read_box(text: str, start: int) -> str | None:
    """The argument of a box command whose name ends at ``start``, or None if unclosed."""
    i = start
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    if i >= n:
        return None
    if text[i] != "{":
        # "\boxed 5": one token up to whitespace or the end of the math.
        m = re.match(r"[^\s$]+", text[i : i + 200])
        if start == i or not m:  # "\boxedx" is another command, not a box
            return None
        return m.group(0)
    depth = 0
    end = min(n, i + _MAX_BOX_CHARS)
    j = i
    while j < end:
        c = text[j]
        if c == "\\":
            j += 2  # an escaped character (\{ \} \\) never opens or closes
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
        j += 1
    return None


def last_boxed(text: str) -> str | None:
    """The content of the last closed ``\\boxed{}``/``\\fbox{}`` in ``text``."""
    pos = len(text)
    for _ in range(_MAX_BOX_CANDIDATES):
        found = max((text.rfind(c, 0, pos), c) for c in _BOX_COMMANDS)
        idx, cmd = found
        if idx < 0:
            return None
        content = _read_box(text, idx + len(cmd))
        if content is not None:
            return content.strip()
        pos = idx
    return None


def _after_phrase(text: str) -> str | None:
    """The answer after the last "the answer is"-style phrase, or None."""
    last = None
    for last in _ANSWER_PHRASE.finditer(text):
        pass
    if last is None:
        return None
    rest = text[last.end() :]
    boxed = last_boxed(rest)
    if boxed:
        return boxed
    line = rest.split("\n", 1)[0].strip()
    math = _MATH_SEGMENT.search(line)
    if math:
        return next(g for g in math.groups() if g is not None).strip() or None
    line = re.split(r"\.\s", line, maxsplit=1)[0]
    line = line.strip().strip("*").strip().rstrip(".!;").strip()
    return line or None


def is_bare_answer(text: str) -> bool:
    """Whether ``text`` reads as a bare answer (short, one line, no prose) and not a response."""
    s = text.strip()
    if not s or len(s) > _MAX_BARE_CHARS or "\n" in s:
        return False
    return len(_WORD.findall(_TEXT_GROUP.sub(" ", s))) < 2


def _bare(text: str) -> str | None:
    return text.strip() if is_bare_answer(text) else None


def _last_number(text: str) -> str | None:
    last = None
    for last in _NUMBER.finditer(text):
        pass
    return last.group(0) if last else None


def extract_answer(text: str, *, last_number_fallback: bool = True) -> str | None:
    """Return the final answer written in ``text`` (a response or a bare answer), or None.

    ``last_number_fallback`` turns on the last rule (the last number in the text).
    Non-strings are converted with ``str``; ``None`` gives ``None``.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
    for rule in (last_boxed, _after_phrase, _bare):
        found = rule(text)
        if found:
            return found
    return _last_number(text) if last_number_fallback else None
