"""Registration of the built-in environment ids: ``<family>-<n>agent-v<N>``.

Every built-in id is at version 1. A change of what an agent sees or how it is scored (a role
prompt, the workflow, the dataset, the verifier's settings, an episode rule) registers the id
again as ``-v2`` beside ``-v1``, which keeps its old definition (docs/environments.md); the test
tests/envs/test_env_versions.py fails until that is done.
"""

from __future__ import annotations

from .registry import register_team_env

#: family -> (dataset, default split, description)
MATH_FAMILIES: dict[str, tuple[str, str, str]] = {
    "math": ("math", "test", "MATH (Hendrycks et al.)"),
    "math500": ("math500", "test", "MATH-500 (PRM800K subset)"),
    "gsm8k": ("gsm8k", "test", "GSM8K grade-school math"),
    "aime": ("aime", "2024", "AIME 2024"),
    "arith": ("arith", "test", "procedural arithmetic/algebra, no data needed"),
}
MATH_TEAMS: dict[int, str] = {2: "math-dual", 3: "math-trio", 4: "math-quartet"}
#: arith level 0 (sums a + b, a, b in 0..20): sized so a 135M model starts above zero
SUM_TEAMS: dict[int, str] = {2: "sum-duo", 3: "sum-trio"}
SUM_FEWSHOT_TEAMS: dict[int, str] = {2: "sum-duo-shots", 3: "sum-trio-shots"}


def register_math_envs() -> None:
    for family, (dataset, split, desc) in MATH_FAMILIES.items():
        for n, workflow in MATH_TEAMS.items():
            register_team_env(
                f"{family}-{n}agent-v1",
                dataset=dataset,
                split=split,
                workflow=workflow,
                verifier="math",
                description=f"{desc}; {workflow}",
            )


def register_sum_envs() -> None:
    """``arith0-2agent`` and ``arith0-3agent``: arith level 0. ``-v1`` shows each role's worked
    example inside its system prompt; ``-v2`` (the newest) shows worked examples as earlier chat
    turns, so a reply ends where the answer ends."""
    for version, teams in ((1, SUM_TEAMS), (2, SUM_FEWSHOT_TEAMS)):
        for n, workflow in teams.items():
            register_team_env(
                f"arith0-{n}agent-v{version}",
                dataset="arith",
                split="test",
                workflow=workflow,
                verifier="math",
                description=(
                    f"arith level 0 (sums a + b, a, b in 0..20), no data needed; {workflow}"
                ),
                dataset_kwargs={"level": 0},
            )


def register_builtin_envs() -> None:
    """Register every built-in id (idempotent)."""
    from .code.env import register_code_envs  # stdlib and core dependencies only
    from .credit import register_credit_envs
    from .games import register_game_envs

    register_math_envs()
    register_credit_envs()
    register_sum_envs()
    register_game_envs()
    register_code_envs()
