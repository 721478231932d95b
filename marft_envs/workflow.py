"""Workflows: the roles of a team, their order and who sees whom (the Flex-MG dependency matrix).

A workflow is data, not code: a tuple of :class:`Role` in acting order plus a lower-triangular
dependency matrix ``D`` where ``D[i][j] = 1`` means agent ``i`` sees agent ``j``'s action of the
same round. The default (``dependency=None``) is the chain of MARFT, ``D[i][j] = 1`` for ``j < i``;
all zeros gives independent agents. Earlier rounds are visible to every agent.

Custom workflows are public API::

    from marft_envs import Role, Workflow, register_workflow, make
    wf = Workflow("math-critic", roles=(Role("solver", "Solve ..."), Role("critic", "Check ...")),
                  task_kind="math")
    register_workflow(wf)
    env = make("math-2agent", workflow="math-critic")   # or workflow=wf
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from tasks.registry import Registry

from .prompts import user_text

TaskKind = Literal["math", "code"]


@dataclass(frozen=True)
class Role:
    """One seat in a team.

    ``instructions`` is the role prompt (sent as the system message). ``sees_problem=False``
    hides the task statement from this role (it then works only from its predecessors' actions),
    which lets a workflow build information-relay games. ``example_replies`` are this role's
    replies to the workflow's worked examples (:attr:`Workflow.examples`), one per example: they
    are shown as earlier chat turns, so a small model learns where a reply ends (the chat
    template closes each shown reply with its end-of-turn token).
    """

    name: str
    instructions: str
    sees_problem: bool = True
    example_replies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(
                "Role name must be a Python identifier (it becomes part of agent ids), got "
                f"{self.name!r}"
            )


@dataclass(frozen=True)
class Workflow:
    """Roles in acting order, the dependency matrix and which agent's output is graded."""

    name: str
    roles: tuple[Role, ...]
    task_kind: TaskKind = "math"
    dependency: tuple[tuple[int, ...], ...] | None = None
    answerer: int = -1
    description: str = ""
    #: worked-example problems, each shown to every agent as an earlier chat turn (the
    #: problem, the example replies of the roles it sees, its own example reply) before the real
    #: turn; every role gives one reply per example (``Role.example_replies``)
    examples: tuple[str, ...] = ()
    _matrix: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)
    _sees: tuple[tuple[int, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.roles)
        if n < 1:
            raise ValueError(f"Workflow {self.name!r} needs at least one role")
        if self.task_kind not in ("math", "code"):
            raise ValueError(
                f"Workflow {self.name!r}: task_kind must be 'math' or 'code', got "
                f"{self.task_kind!r}"
            )
        if not -n <= self.answerer < n:
            raise ValueError(
                f"Workflow {self.name!r}: answerer {self.answerer} out of range for {n} roles"
            )
        for role in self.roles:
            if len(role.example_replies) != len(self.examples):
                raise ValueError(
                    f"Workflow {self.name!r}: role {role.name!r} gives "
                    f"{len(role.example_replies)} example replies for {len(self.examples)} "
                    "worked examples (one reply per example, or no examples at all)"
                )
        matrix = self.dependency if self.dependency is not None else chain_matrix(n)
        matrix = tuple(tuple(int(v) for v in row) for row in matrix)
        if len(matrix) != n or any(len(row) != n for row in matrix):
            raise ValueError(f"Workflow {self.name!r}: dependency matrix must be {n}x{n}")
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                if v not in (0, 1):
                    raise ValueError(
                        f"Workflow {self.name!r}: dependency entries must be 0 or 1, got {v} "
                        f"at [{i}][{j}]"
                    )
                if v and j >= i:
                    raise ValueError(
                        f"Workflow {self.name!r}: dependency matrix must be strictly lower "
                        "triangular "
                        f"(agent {i} cannot see agent {j}'s same-round action: {j} acts at "
                        f"or after {i})"
                    )
        object.__setattr__(self, "_matrix", matrix)
        object.__setattr__(
            self, "_sees", tuple(tuple(j for j, v in enumerate(row) if v) for row in matrix)
        )

    @property
    def n_agents(self) -> int:
        return len(self.roles)

    @property
    def matrix(self) -> tuple[tuple[int, ...], ...]:
        """The resolved n x n dependency matrix."""
        return self._matrix

    @property
    def is_independent(self) -> bool:
        """True when no agent sees a same-round action (all-zero matrix): a simultaneous game."""
        return not any(any(row) for row in self._matrix)

    @property
    def answerer_index(self) -> int:
        return self.answerer % self.n_agents

    def agent_ids(self) -> list[str]:
        """PettingZoo agent ids, ``<role>_<position>``."""
        return [f"{role.name}_{i}" for i, role in enumerate(self.roles)]

    def sees(self, i: int) -> list[int]:
        """Positions whose same-round actions agent ``i`` sees."""
        return list(self._sees[i])

    def example_turns(self, i: int, horizon: int = 1) -> tuple[tuple[str, str], ...]:
        """Agent ``i``'s worked examples as (user text, reply) pairs, rendered as its real turn
        is (:func:`~marft_envs.prompts.user_text`): the example problem if the role sees
        problems, the example replies of the positions it sees, then its own reply. Empty for a
        workflow without examples."""
        role, ids = self.roles[i], self.agent_ids()
        turns = []
        for k, problem in enumerate(self.examples):
            seen = [
                {
                    "agent": ids[j],
                    "role": self.roles[j].name,
                    "position": j,
                    "action": self.roles[j].example_replies[k],
                }
                for j in self._sees[i]
            ]
            user = user_text(
                agent=ids[i],
                role=role.name,
                problem=problem if role.sees_problem else "",
                round_index=0,
                horizon=horizon,
                history=(),
                feedbacks=(),
                predecessors=seen,
            )
            turns.append((user, role.example_replies[k]))
        return tuple(turns)

    def without_roles(self) -> Workflow:
        """The ``roles=False`` ablation: same order and matrix, every agent the generic prompt."""
        generic = GENERIC_INSTRUCTIONS[self.task_kind]
        # the generic prompt teaches no role's format, so the worked examples go too
        roles = tuple(Role("agent", generic, r.sees_problem) for r in self.roles)
        return replace(self, name=f"{self.name}-noroles", roles=roles, examples=())

    def reordered(self, order: str | Sequence[int]) -> Workflow:
        """The order ablation: the roles act in ``order`` (``"reversed"``, or a permutation where
        ``order[k]`` is the current position of the role that acts k-th).

        Who sees whom and who is graded stay attached to acting *positions*: the dependency
        matrix and the answering position are unchanged, so reversing MARFT's chain still gives a
        chain (the former last role acts first and sees nobody; the former first role acts last,
        sees everyone and is graded).
        """
        n = self.n_agents
        if isinstance(order, str):
            if order != "reversed":
                raise ValueError(
                    f"Workflow {self.name!r}: order must be 'reversed' or a permutation of "
                    f"{list(range(n))}, got {order!r}"
                )
            perm = tuple(range(n - 1, -1, -1))
        else:
            perm = tuple(int(k) for k in order)
            if sorted(perm) != list(range(n)):
                raise ValueError(
                    f"Workflow {self.name!r}: order must be a permutation of {list(range(n))} "
                    f"(each position once), got {list(order)!r}"
                )
        tag = "reversed" if isinstance(order, str) else "order" + ".".join(map(str, perm))
        roles = tuple(self.roles[k] for k in perm)
        return replace(self, name=f"{self.name}-{tag}", roles=roles, dependency=self.matrix)

    def with_dependency(self, dependency: str | Sequence[Sequence[int]]) -> Workflow:
        """The dependency ablation: ``"chain"`` (every predecessor, MARFT's default),
        ``"parallel"`` (nobody: independent agents) or an n x n strictly lower-triangular 0/1
        matrix."""
        n = self.n_agents
        if isinstance(dependency, str):
            if dependency not in DEPENDENCIES:
                raise ValueError(
                    f"Workflow {self.name!r}: dependency must be one of {DEPENDENCIES} or an "
                    f"{n}x{n} 0/1 matrix, got {dependency!r}"
                )
            matrix = chain_matrix(n) if dependency == "chain" else independent_matrix(n)
            tag = dependency
        else:
            matrix = tuple(tuple(int(v) for v in row) for row in dependency)
            tag = "dep" + "".join("".join(map(str, row)) for row in matrix)
        return replace(self, name=f"{self.name}-{tag}", dependency=matrix)

    def anonymised(self) -> Workflow:
        """The anonymous-roles ablation: every role is named ``agent`` (agent ids ``agent_0``,
        ``agent_1``, ..., and teammates' messages are labelled so), each keeping its own
        instructions and problem visibility. ``without_roles`` also replaces the instructions."""
        roles = tuple(replace(r, name="agent") for r in self.roles)
        return replace(self, name=f"{self.name}-anon", roles=roles)

    def ablated(
        self,
        *,
        order: str | Sequence[int] | None = None,
        dependency: str | Sequence[Sequence[int]] | None = None,
        anonymous_roles: bool = False,
    ) -> Workflow:
        """Apply the ablations ``make(id, order=..., dependency=..., anonymous_roles=...)``
        offers, in that order; all defaults give this workflow back unchanged."""
        wf = self
        if order is not None:
            wf = wf.reordered(order)
        if dependency is not None:
            wf = wf.with_dependency(dependency)
        if anonymous_roles:
            wf = wf.anonymised()
        return wf


#: The named dependency matrices of :meth:`Workflow.with_dependency`.
DEPENDENCIES = ("chain", "parallel")


def chain_matrix(n: int) -> tuple[tuple[int, ...], ...]:
    """MARFT's default: each agent sees every predecessor of the same round."""
    return tuple(tuple(1 if j < i else 0 for j in range(n)) for i in range(n))


def independent_matrix(n: int) -> tuple[tuple[int, ...], ...]:
    """No agent sees any same-round action (independent agents)."""
    return tuple((0,) * n for _ in range(n))


GENERIC_INSTRUCTIONS: dict[str, str] = {
    "math": (
        "You are a member of a team solving a math problem together. Read the problem and your "
        "teammates' messages, then contribute your best work. If you give a final answer, put it "
        "in \\boxed{}."
    ),
    "code": (
        "You are a member of a team writing a Python program together. Read the problem and your "
        "teammates' messages, then contribute your best work. If you write the program, give it "
        "complete in one ```python fenced block."
    ),
}

_BOXED = "End with the final answer alone in \\boxed{}, for example \\boxed{42}."

REASONER = Role(
    "reasoner",
    "You are the Reasoner of a math team. Analyse the problem: identify what is asked, the "
    "relevant "
    "facts and a plan of attack, and work through the key steps. Be concise and precise. Your "
    "teammates will build on your analysis.",
)
ACTOR = Role(
    "actor",
    "You are the Actor of a math team. Using the problem and your teammates' analysis, carry out "
    "the solution carefully, checking each computation. " + _BOXED,
)
VERIFIER = Role(
    "verifier",
    "You are the Verifier of a math team. Check the proposed solution step by step. If it is "
    "correct, restate its final answer; if not, fix the error and solve it correctly. " + _BOXED,
)
DECOMPOSER = Role(
    "decomposer",
    "You are the Decomposer of a math team. Break the problem into a short list of sub-problems "
    "whose answers together give the final answer. Do not solve them.",
)
PLANNER = Role(
    "planner",
    "You are the Planner of a math team. For each sub-problem of the decomposition, say which "
    "method, formula or theorem solves it and in what order to apply them.",
)
EXECUTOR = Role(
    "executor",
    "You are the Executor of a math team. Follow the plan and carry out every step, showing the "
    "computations. " + _BOXED,
)

MATH_WORKFLOWS: tuple[Workflow, ...] = (
    Workflow("math-dual", (REASONER, ACTOR), "math", description="reasoner -> actor (MARFT dual)"),
    Workflow(
        "math-trio",
        (REASONER, ACTOR, VERIFIER),
        "math",
        description="reasoner -> actor -> verifier (MARFT trio)",
    ),
    Workflow(
        "math-quartet",
        (DECOMPOSER, PLANNER, EXECUTOR, VERIFIER),
        "math",
        description="decomposer -> planner -> executor -> verifier (MARFT quartet)",
    ),
)

# Teams for arith level 0 (``arith0-*``): each role prompt shows its reply on a worked example,
# because SmolLM2-135M follows a shown format far more often than a described one (greedy, the
# untrained duo then answers a sizeable share of the sums right: a reward signal from the start).
SUM_SOLVER = Role("solver", "You add two numbers. Example: for Compute 2 + 3. you reply: 2 + 3 = 5")
SUM_CHECKER = Role(
    "checker",
    "You check a teammate's sum and write it correctly. Example: for Compute 2 + 3. you reply: "
    "2 + 3 = 5",
)
SUM_ANSWERER = Role(
    "answerer", "You give the final answer. Example: for Compute 2 + 3. you reply: 5"
)
SUM_WORKFLOWS: tuple[Workflow, ...] = (
    Workflow(
        "sum-duo",
        (SUM_SOLVER, SUM_ANSWERER),
        "math",
        description="solver -> answerer, worked-example prompts",
    ),
    Workflow(
        "sum-trio",
        (SUM_SOLVER, SUM_CHECKER, SUM_ANSWERER),
        "math",
        description="solver -> checker -> answerer, worked-example prompts",
    ),
)

# The same teams with the worked examples as earlier chat turns (``arith0-*-v2``): SmolLM2-135M
# then ends ~90% of its sampled replies after the sum (the template closes each shown reply with
# its end-of-turn token) where an example inside the system prompt ended ~20% (docs/learning.md).
SUM_EXAMPLES = ("Compute 2 + 3.", "Compute 14 + 9.")
SUM_FEWSHOT_WORKFLOWS: tuple[Workflow, ...] = (
    Workflow(
        "sum-duo-shots",
        (
            Role("solver", "You add two numbers.", example_replies=("2 + 3 = 5", "14 + 9 = 23")),
            Role("answerer", "You give the final answer.", example_replies=("5", "23")),
        ),
        "math",
        description="solver -> answerer, worked examples as earlier chat turns",
        examples=SUM_EXAMPLES,
    ),
    Workflow(
        "sum-trio-shots",
        (
            Role("solver", "You add two numbers.", example_replies=("2 + 3 = 5", "14 + 9 = 23")),
            Role(
                "checker",
                "You check a teammate's sum and write it correctly.",
                example_replies=("2 + 3 = 5", "14 + 9 = 23"),
            ),
            Role("answerer", "You give the final answer.", example_replies=("5", "23")),
        ),
        "math",
        description="solver -> checker -> answerer, worked examples as earlier chat turns",
        examples=SUM_EXAMPLES,
    ),
)

_WORKFLOWS: Registry[Workflow] = Registry("workflow")


def register_workflow(workflow: Workflow, *, overwrite: bool = False) -> Workflow:
    """Make a workflow available by name to ``make(..., workflow=name)``; returns the registered
    workflow. An equal workflow under a taken name is a no-op; a different one raises
    :class:`~tasks.AlreadyRegisteredError` (a ValueError) unless ``overwrite=True``."""
    return _WORKFLOWS.register(workflow.name, workflow, overwrite=overwrite)


def get_workflow(name_or_workflow: str | Workflow) -> Workflow:
    """Look a workflow up by name (or pass a :class:`Workflow` through)."""
    if isinstance(name_or_workflow, Workflow):
        return name_or_workflow
    try:
        return _WORKFLOWS[name_or_workflow]
    except KeyError:
        raise KeyError(
            f"Unknown workflow {name_or_workflow!r}; registered workflows: {sorted(_WORKFLOWS)}"
        ) from None


def workflow_names() -> list[str]:
    return sorted(_WORKFLOWS)


for _wf in (*MATH_WORKFLOWS, *SUM_WORKFLOWS, *SUM_FEWSHOT_WORKFLOWS):
    register_workflow(_wf)
