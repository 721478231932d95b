"""The code grader's version: recorded in every code verdict, result bundle and leaderboard grade.

Bump ``GRADER_VERSION`` (``code-<n>`` -> ``code-<n+1>``) in the same commit as any change that can
change a verdict's outcome or score for some program: program extraction, the test harness, the
outcome rules (what counts as pass, timeout, memory), the reward formula, or the default time and
memory limits. The sandbox backend is not part of it (every backend must grade alike; the verdict
names the backend it used). See docs/leaderboard.md for what a bump does to stored grades.

History: ``code-1`` the first; ``code-2`` the special judge (marft_envs/code/judge.py): APPS
stdin/stdout tasks whose statement states a float tolerance or output in any order, and tasks
whose data gives a checker, accept outputs the single expected output rejected; ``code-3`` the
special judge reviewed: "in any order" counts only after an output verb in one clause, not about
the input and not negated; a statement freeing the order of the lines gets lines compared as a
multiset (each line's tokens in order); a checker program that does not compile is refused.
"""

GRADER_VERSION = "code-3"
