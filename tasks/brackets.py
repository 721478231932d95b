"""Bracket matching in LaTeX-like text: the one matcher for reference answers and grading.

``tasks`` reads ``\\boxed{...}`` in dataset solutions; ``marft_envs.math`` reads boxes in model
responses, unwraps ``\\text{...}`` and splits answers at top-level commas. All of them walk
the text with `bracket_depths`; `matching_brace` is the common case of one brace group.

How a backslash is read is the one thing the callers differ on, so it is a parameter:

- ``"skip"``: a backslash and the character after it are one token that is no bracket
  (``\\{``, ``\\}``, ``\\\\``): LaTeX's escaped braces never open or close a group;
- ``"latex"``: ``\\{`` and ``\\}`` are brackets (a set's braces, for splitting a set's
  items); any other backslash is an ordinary character.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

__all__ = ["ESCAPES", "Escapes", "bracket_depths", "matching_brace"]

Escapes = Literal["skip", "latex"]
ESCAPES: tuple[Escapes, ...] = ("skip", "latex")


def bracket_depths(
    text: str,
    start: int = 0,
    end: int | None = None,
    *,
    opens: str = "{",
    closes: str = "}",
    escapes: Escapes = "skip",
) -> Iterator[tuple[int, int]]:
    """Yield ``(index, depth)`` for every token of ``text[start:end]``, depth counted from 0.

    A token is one character, or a backslash and the character after it (see the module
    docstring for ``escapes``). A bracket's depth is the depth around it, so a group's
    opening and closing brackets share one depth; other tokens have the depth inside the
    groups that enclose them. Unbalanced closing brackets make the depth negative.
    """
    if escapes not in ESCAPES:
        raise ValueError(f"escapes must be one of {ESCAPES}, got {escapes!r}")
    depth = 0
    i = start
    n = len(text) if end is None else min(end, len(text))
    while i < n:
        c = text[i]
        if c == "\\":
            nxt = text[i + 1 : i + 2]
            if escapes == "skip":
                yield i, depth
                i += 2
                continue
            if nxt and nxt in "{}":
                if nxt == "{":
                    yield i, depth
                    depth += 1
                else:
                    depth -= 1
                    yield i, depth
                i += 2
                continue
        if c in opens:
            yield i, depth
            depth += 1
        elif c in closes:
            depth -= 1
            yield i, depth
        else:
            yield i, depth
        i += 1


def matching_brace(text: str, start: int, end: int | None = None) -> int:
    """Index of the ``}`` that closes the ``{`` at ``text[start]``, or -1 when it is not closed
    before ``end`` (default: the end of ``text``). Escaped braces (``\\{``, ``\\}``) are
    skipped."""
    if text[start : start + 1] != "{":
        raise ValueError(f"text[{start}] must be '{{', got {text[start : start + 1]!r}")
    for j, depth in bracket_depths(text, start, end):
        if depth == 0 and j > start and text[j] == "}":
            return j
    return -1
