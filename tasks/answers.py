"""Reference-answer extraction from upstream solution texts (pure functions).

These read *dataset* solutions to build reference answers; grading model responses
is the job of ``marft_envs.math`` (which ``tasks`` must not import).
"""

from __future__ import annotations

import re

from tasks.brackets import matching_brace

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` or ``\\fbox{...}`` in ``text``, or None.

    Braces are matched, so nested groups survive (``\\boxed{\\frac{1}{2}}`` gives
    ``\\frac{1}{2}``). The brace-less form ``\\boxed 2`` (in a few MATH solutions)
    gives the token after the space, up to ``$`` or whitespace. An unclosed brace
    gives None; escaped braces (``\\{``, ``\\}``) neither open nor close a group.
    """
    start = max(text.rfind(cmd) for cmd in _BOX_COMMANDS)
    if start < 0:
        return None
    cmd = next(c for c in _BOX_COMMANDS if text.startswith(c, start))
    i = start + len(cmd)
    if text.startswith(" ", i):  # "\boxed 2$"
        m = re.match(r"\s+([^\s$]+)", text[i:])
        return m.group(1) if m else None
    if not text.startswith("{", i):
        return None
    j = matching_brace(text, i)
    return text[i + 1 : j] if j >= 0 else None


def gsm8k_final_answer(solution: str) -> str | None:
    """The GSM8K final answer: the text after the last ``####``, trimmed, with
    thousands separators removed (``"#### 1,000"`` gives ``"1000"``). None if absent."""
    if "####" not in solution:
        return None
    answer = solution.rsplit("####", 1)[1].strip()
    return _THOUSANDS_COMMA.sub("", answer) or None
