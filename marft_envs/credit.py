"""Credit-assignment games: data-free environments where a team can only win by passing credit on.

Every game plays the ``keys`` dataset (one task per key letter, :mod:`tasks.keys`): only the
first role sees the key, only the last is graded, and it scores 1 when its response is exactly
the key (:class:`ExactVerifier`). What differs is who sees whom:

- ``credit-chain-<n>agent`` (n = 1-4): each agent sees only its immediate predecessor, so the
  key must pass through every seat; a wrong relay anywhere costs the team, and the seats far
  from the reward get their credit only through their successors. ``credit-chain-1agent`` is
  the single-agent baseline: one agent sees the key and answers.
- ``credit-silent-3agent``: a sender (sees the key), a bystander (sees nothing) and a receiver
  who reads both. The grader never reads the bystander, but whatever it says lands next to the
  key in the receiver's prompt, so the team does best when it stays silent (an empty message),
  a behaviour it must learn from the team reward alone.

The games are built only from the public workflow API (:class:`Workflow`, :class:`Role`,
:func:`register`, a verifier by name), so they are ordinary registered ids any trainer can use.
The tiny models that learn them are a baselines concern (``baselines.relay``).
"""

from __future__ import annotations

from typing import Any

from tasks import Task

from .registry import register_team_env
from .verdict import Verdict
from .verifiers import register_verifier, verdict_feedback
from .workflow import Role, Workflow, register_workflow, workflow_names

CHAIN_SIZES = (1, 2, 3, 4)


class ExactVerifier:
    """Correct iff the stripped response equals the task's answer (score 1, else 0)."""

    name = "exact"
    version = "exact-1"

    def fingerprint_settings(self) -> dict[str, Any]:
        """No settings: the rule is fixed (part of an environment's fingerprint)."""
        return {}

    def grade(self, response: str, task: Task) -> Verdict:
        text = response.strip() if isinstance(response, str) else ""
        ok = text == task.answer
        return Verdict(
            correct=ok, answer=text or None, reason="exact" if ok else "mismatch", score=float(ok)
        )

    def feedback(self, response: str, task: Task, verdict: Verdict, mode: str) -> str:
        if mode == "verdict":
            return verdict_feedback(verdict)
        if mode == "none":
            return ""
        raise ValueError(f"The exact verifier supports feedback 'none' or 'verdict', not {mode!r}")


# Each role prompt ends with a seat mark (one of ROLE_MARKS): a character-level model that keeps
# these characters can read which seat it plays, so the ``roles=False`` ablation removes it.
SENDER = Role("sender", "Send the key. >", sees_problem=True)
RELAY = Role("relay", "Pass on what you read. =", sees_problem=False)
RECEIVER = Role("receiver", "Name the key. <", sees_problem=False)
BYSTANDER = Role("bystander", "Keep quiet. ~", sees_problem=False)
SOLO = Role("solo", "Name the key. <", sees_problem=True)
ROLE_MARKS = "><=~"


def predecessor_matrix(n: int) -> tuple[tuple[int, ...], ...]:
    """Each agent sees only the agent just before it (a relay line, not MARFT's full chain)."""
    return tuple(tuple(1 if j == i - 1 else 0 for j in range(n)) for i in range(n))


def chain_workflow(n: int) -> Workflow:
    """``credit-chain-<n>``: sender, n - 2 relays, receiver; one agent (``solo``) for n = 1."""
    if n not in CHAIN_SIZES:
        raise ValueError(f"chain_workflow: n must be one of {CHAIN_SIZES}, got {n!r}")
    roles = (SOLO,) if n == 1 else (SENDER, *([RELAY] * (n - 2)), RECEIVER)
    return Workflow(
        f"credit-chain-{n}",
        roles,
        "math",
        dependency=predecessor_matrix(n),
        description=f"a key passes through {n} agent(s); each sees only its predecessor",
    )


SILENT_WORKFLOW = Workflow(
    "credit-silent",
    (SENDER, BYSTANDER, RECEIVER),
    "math",
    dependency=((0, 0, 0), (0, 0, 0), (1, 1, 0)),
    description="sender and a blind bystander both speak to the receiver; silence helps",
)


def credit_workflows() -> list[Workflow]:
    """Every credit workflow, registered by name on first use of :func:`register_credit_envs`."""
    return [*(chain_workflow(n) for n in CHAIN_SIZES), SILENT_WORKFLOW]


def credit_env_ids() -> list[str]:
    """The credit ids (without their version: ``make`` builds the newest), chain sizes first."""
    return [f"credit-chain-{n}agent" for n in CHAIN_SIZES] + ["credit-silent-3agent"]


def register_credit_envs() -> None:
    """Register the ``exact`` verifier, the credit workflows and their ids (idempotent)."""
    register_verifier(ExactVerifier.name, ExactVerifier)
    for wf in credit_workflows():
        if wf.name not in workflow_names():
            register_workflow(wf)
    for env_id, wf in zip(credit_env_ids(), credit_workflows(), strict=True):
        register_team_env(
            f"{env_id}-v1",
            dataset="keys",
            split="test",
            workflow=wf.name,
            verifier=ExactVerifier.name,
            description=f"credit game, no data: {wf.description}",
        )
