"""Program extraction: the Python program inside an LLM response.

Order of preference (the first that applies wins):

1. the last fenced block tagged ``python``/``py``/``python3`` (```` ```python ... ``` ````);
2. the last fenced block with any other tag or none (an unterminated final fence counts,
   as LLM outputs are often cut off);
3. the text from the first top-level ``def``/``class``/``import``/``from`` line on
   (a bare program surrounded by prose);
4. the whole text.

Extraction never raises: any input (non-strings included) gives a string.
"""

from __future__ import annotations

import re

__all__ = ["defines", "extract_program"]

# A fence opens with 3+ backticks (or tildes) and an optional info string; it closes with
# the same fence on its own line.
_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)(?:^[ "
    r"\t]*(?P=fence)[ \t]*$|\Z)",
    re.MULTILINE | re.DOTALL,
)
_PYTHON_TAGS = {"python", "py", "python3", "py3"}
_CODE_START = re.compile(r"^(?:def |class |import |from \S+ import |async def |@)", re.MULTILINE)


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of every fenced block, in order."""
    out = []
    for m in _FENCE.finditer(text):
        tag = (m.group("info").strip().split() or [""])[0].lower()
        body = m.group("body")
        indent = m.group("indent")
        if indent:  # a fence indented inside a list item: dedent its body by the same amount
            body = "\n".join(ln.removeprefix(indent) for ln in body.split("\n"))
        out.append((tag, body))
    return out


def extract_program(response: object) -> str:
    """The program in ``response`` (see the module docstring for the rules)."""
    if not isinstance(response, str):
        response = "" if response is None else str(response)
    blocks = _blocks(response)
    python = [body for tag, body in blocks if tag in _PYTHON_TAGS]
    if python:
        return python[-1]
    if blocks:
        return blocks[-1][1]
    m = _CODE_START.search(response)
    if m:
        return response[m.start() :]
    return response


def defines(program: str, name: str | None) -> bool:
    """True if ``program`` binds ``name`` at top level (``def``, ``class``, assignment, import).

    Used to tell a complete program from a bare function-body continuation (HumanEval's raw
    completion format). A program that does not parse is judged by a plain text search.
    """
    if not name:
        return False
    import ast

    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return (
            re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(", program, re.MULTILINE)
            is not None
        )
    for node in tree.body:
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.name == name
        ):
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == name for a in node.names
        ):
            return True
    return False
