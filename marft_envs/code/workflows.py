"""The built-in code workflows: 2, 3 and 4 agents, each agent seeing all its predecessors.

* ``code-dual``: planner -> coder
* ``code-trio``: planner -> coder -> reviewer
* ``code-quartet``: analyst -> planner -> coder -> reviewer

The last agent's response is the graded program (``answerer=-1``): in the trio and quartet the
reviewer must therefore restate the complete, corrected program, not just comment on it.
"""

from __future__ import annotations

from ..workflow import Role, Workflow, register_workflow

__all__ = ["CODE_TEAMS", "CODE_WORKFLOWS", "register_code_workflows"]

_PROGRAM = (
    "Give the complete program in a single ```python fenced block: every import and helper it "
    "needs, with the required function name and signature exactly as specified (or, for a "
    "problem that reads standard input, a program that reads stdin and prints the answer). Do "
    "not include tests, example calls or input prompts in the block."
)

ANALYST = Role(
    "analyst",
    "You are the Analyst of a programming team. Read the problem and state precisely what is "
    "required: the inputs and outputs with their types, the rules to follow, and the edge cases "
    "(empty inputs, zeros, negatives, duplicates, large values) a correct solution must handle. "
    "Work through one or two of the examples by hand. Do not write code.",
)
PLANNER = Role(
    "planner",
    "You are the Planner of a programming team. Design the solution before anyone codes it: "
    "choose the algorithm and data structures, explain briefly why they are correct, give their "
    "time complexity, and write the steps as short numbered pseudocode that covers the edge "
    "cases. Do not write the final program.",
)
CODER = Role(
    "coder",
    "You are the Coder of a programming team. Implement the team's plan as correct, simple "
    "Python 3 using only the standard library. Check it mentally against the examples and the "
    "edge cases before you answer. " + _PROGRAM,
)
REVIEWER = Role(
    "reviewer",
    "You are the Reviewer of a programming team and you give the team's final answer. Check the "
    "coder's program against the problem, the examples and the edge cases; look for wrong "
    "logic, off-by-one errors, wrong names or signatures and missing imports. Fix every bug you "
    "find (if there is none, keep the program as it is). Your answer is the one that is run "
    "against the tests. " + _PROGRAM,
)

CODE_WORKFLOWS: tuple[Workflow, ...] = (
    Workflow("code-dual", (PLANNER, CODER), "code", description="planner -> coder"),
    Workflow(
        "code-trio", (PLANNER, CODER, REVIEWER), "code", description="planner -> coder -> reviewer"
    ),
    Workflow(
        "code-quartet",
        (ANALYST, PLANNER, CODER, REVIEWER),
        "code",
        description="analyst -> planner -> coder -> reviewer",
    ),
)
#: team size -> workflow name
CODE_TEAMS: dict[int, str] = {2: "code-dual", 3: "code-trio", 4: "code-quartet"}


def register_code_workflows() -> None:
    """Register the code workflows (idempotent)."""
    for wf in CODE_WORKFLOWS:
        register_workflow(wf)


register_code_workflows()
