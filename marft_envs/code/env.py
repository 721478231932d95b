"""Code environments: `make_code_env` and the registered ids
``{humaneval,mbpp,code,lcb,apps,codecontests}-{2,3,4}agent``.

    env = marft_envs.make("humaneval-3agent")               # sandbox found automatically
    env = marft_envs.make("mbpp-2agent", sandbox="docker", reward="all", feedback="tests",
    horizon=2)
"""

from __future__ import annotations

from typing import Any

from ..flexmg import FlexMGEnv
from ..registry import register
from .verifier import CodeVerifier
from .workflows import CODE_TEAMS

__all__ = ["CODE_FAMILIES", "make_code_env", "register_code_envs"]

#: family -> (dataset, default split, description)
CODE_FAMILIES: dict[str, tuple[str, str, str]] = {
    "humaneval": ("humaneval", "test", "HumanEval (164 Python functions)"),
    "mbpp": ("mbpp", "test", "MBPP (Python functions; tests 11-510)"),
    "code": (
        "code",
        "test",
        "hand-written code tasks, no data needed (functions and stdin/stdout)",
    ),
    "lcb": ("livecodebench", "test", "LiveCodeBench code generation (call-based and stdin/stdout)"),
    "apps": ("apps", "test", "APPS (stdin/stdout and call-based)"),
    "codecontests": (
        "codecontests",
        "test",
        "CodeContests (stdin/stdout, many hidden tests, time limits)",
    ),
}


def _load_tasks() -> None:
    import tasks.code_loaders
    import tasks.competitive  # noqa: F401  (registers livecodebench, apps, codecontests)


def make_code_env(
    *,
    sandbox: Any = None,
    reward: str = "fraction",
    test_timeout: float | None = None,
    **env_kwargs: Any,
) -> FlexMGEnv:
    """A :class:`~marft_envs.flexmg.FlexMGEnv` graded by a :class:`CodeVerifier`.

    ``sandbox``: a backend name (``"docker"``, ``"bwrap"``, ``"subprocess"``), a Sandbox, or
    None to choose automatically on the first grade. ``reward``: ``"fraction"`` or ``"all"``.
    ``test_timeout``: seconds per test (None: the task's own limit, else 10 s). Everything else goes
    to ``FlexMGEnv``
    (dataset, split, workflow, horizon, feedback, reward_to, roles, seed, ...); an explicit
    ``verifier`` replaces the code verifier.
    """
    _load_tasks()
    env_kwargs.setdefault(
        "verifier", CodeVerifier(sandbox=sandbox, reward=reward, timeout=test_timeout)
    )
    return FlexMGEnv(**env_kwargs)


make_code_env.__forwards_kwargs_to__ = FlexMGEnv.__init__  # type: ignore[attr-defined]


def register_code_envs() -> None:
    """Register ``<family>-{2,3,4}agent`` for every family of `CODE_FAMILIES` (idempotent)."""
    for family, (dataset, split, desc) in CODE_FAMILIES.items():
        for n, workflow in CODE_TEAMS.items():
            register(
                f"{family}-{n}agent-v1",
                "marft_envs.code.env:make_code_env",
                kwargs={
                    "dataset": dataset,
                    "split": split,
                    "workflow": workflow,
                    "horizon": 1,
                    "feedback": "none",
                    "reward_to": "team",
                },
                description=f"{desc}; {workflow}",
            )
