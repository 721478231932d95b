"""Checker programs (special judges) for APPS problems that accept any valid answer.

APPS ships one expected output per test, so a problem that says "if there are several answers,
print any" rejects every valid answer but that one. An upstream judge (Codeforces) grades such a
problem with a checker program; these are written for this project from the problem statements,
one per problem, keyed by ``(split, problem_id)`` (APPS's train and test splits reuse problem
ids). The APPS loader attaches the one of a record as ``metadata["checker"]`` (``{"type":
"program", "source": ..., "origin": ...}``) unless the record carries its own ``checker`` field.

A checker defines ``check(input, output, answer) -> bool``: ``input`` is the test's stdin,
``output`` the graded program's stdout, ``answer`` the expected stdout (an optimal answer, used
for the optimum's value). It returns True to accept; returning anything else or raising (the
output cannot be parsed) rejects. It runs in the sandbox (marft_envs.code.judge), after the
task's own comparison has rejected the output, and must read the output defensively: the graded
program wrote it.
"""

from __future__ import annotations

__all__ = ["APPS_CHECKERS", "apps_checker"]

# CF 1017C "The Phone Number": a permutation of 1..n whose LIS + LDS is minimal (the answer's).
_LIS_LDS = """
from bisect import bisect_left


def _lis(seq):
    tails = []
    for x in seq:
        i = bisect_left(tails, x)
        if i == len(tails):
            tails.append(x)
        else:
            tails[i] = x
    return len(tails)


def check(input, output, answer):
    n = int(input.split()[0])
    got = [int(t) for t in output.split()]
    want = [int(t) for t in answer.split()]
    if len(got) != n or sorted(got) != list(range(1, n + 1)):
        return False
    value = _lis(got) + _lis([-x for x in got])
    return value <= _lis(want) + _lis([-x for x in want])
"""

# CF 1385G "Columns Swaps": per test, -1 or the minimal k and k distinct columns whose swap makes
# both rows permutations of 1..n.
_COLUMN_SWAPS = """
def check(input, output, answer):
    inp = iter(input.split())
    out = output.split()
    ans = answer.split()
    po = pa = 0
    for _ in range(int(next(inp))):
        n = int(next(inp))
        top = [int(next(inp)) for _ in range(n)]
        bottom = [int(next(inp)) for _ in range(n)]
        want = int(ans[pa])
        pa += 1
        got = int(out[po])
        po += 1
        if want == -1 or got == -1:
            if want != got:
                return False
            continue
        pa += want
        if got != want:
            return False
        cols = [int(t) for t in out[po:po + got]]
        po += got
        if len(cols) != got or len(set(cols)) != got or not all(1 <= c <= n for c in cols):
            return False
        for c in cols:
            top[c - 1], bottom[c - 1] = bottom[c - 1], top[c - 1]
        if sorted(top) != list(range(1, n + 1)) or sorted(bottom) != list(range(1, n + 1)):
            return False
    return po == len(out)
"""

# CF 1328D "Carousel": per test, the minimal number of colours k and a colouring with colours
# 1..k where adjacent figures (cyclically) of different types differ in colour.
_CAROUSEL = """
def check(input, output, answer):
    inp = iter(input.split())
    out = output.split()
    ans = answer.split()
    po = pa = 0
    for _ in range(int(next(inp))):
        n = int(next(inp))
        types = [int(next(inp)) for _ in range(n)]
        want = int(ans[pa])
        pa += 1 + n
        got = int(out[po])
        colours = [int(t) for t in out[po + 1:po + 1 + n]]
        po += 1 + n
        if got != want or len(colours) != n or not all(1 <= c <= got for c in colours):
            return False
        for i in range(n):
            j = (i + 1) % n
            if types[i] != types[j] and colours[i] == colours[j]:
                return False
    return po == len(out)
"""

#: ``(split, problem_id) -> checker source``.
APPS_CHECKERS: dict[tuple[str, int], str] = {
    ("train", 2023): _LIS_LDS,
    ("train", 2398): _COLUMN_SWAPS,
    ("train", 2400): _CAROUSEL,
}


def apps_checker(split: str, problem_id: object) -> dict[str, str] | None:
    """The checker field this module gives APPS problem ``problem_id`` of ``split``, or None."""
    try:
        key = (split, int(problem_id))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None
    source = APPS_CHECKERS.get(key)
    if source is None:
        return None
    return {"type": "program", "source": source.lstrip(), "origin": "tasks/apps_checkers.py"}
