"""Registration of the built-in environment ids: ``<family>-<n>agent``."""

from __future__ import annotations

from .registry import register, registry

#: family -> (dataset, default split, description)
MATH_FAMILIES: dict[str, tuple[str, str, str]] = {
    "math": ("math", "test", "MATH (Hendrycks et al.)"),
    "math500": ("math500", "test", "MATH-500 (PRM800K subset)"),
    "gsm8k": ("gsm8k", "test", "GSM8K grade-school math"),
    "aime": ("aime", "2024", "AIME 2024"),
    "arith": ("arith", "test", "procedural arithmetic/algebra, no data needed"),
}
MATH_TEAMS: dict[int, str] = {2: "math-dual", 3: "math-trio", 4: "math-quartet"}


def register_math_envs() -> None:
    for family, (dataset, split, desc) in MATH_FAMILIES.items():
        for n, workflow in MATH_TEAMS.items():
            env_id = f"{family}-{n}agent"
            if env_id in registry:
                continue
            register(
                env_id,
                "marft_envs.flexmg:FlexMGEnv",
                kwargs={
                    "dataset": dataset,
                    "split": split,
                    "workflow": workflow,
                    "verifier": "math",
                    "horizon": 1,
                    "feedback": "none",
                    "reward_to": "team",
                },
                description=f"{desc}; {workflow}",
            )


def register_builtin_envs() -> None:
    """Register every built-in id (idempotent)."""
    from .code.env import register_code_envs  # stdlib and core dependencies only
    from .credit import register_credit_envs

    register_math_envs()
    register_credit_envs()
    register_code_envs()
