"""marft-envs: Flex-MG multi-agent text environments for reinforcement fine-tuning of LLM teams.

    import marft_envs
    env = marft_envs.make("math-3agent")       # a pettingzoo.AECEnv
    marft_envs.pprint_registry()

This package needs only the core dependencies of ``pyproject.toml`` (no extra): it never imports
torch, transformers, ``baselines`` or ``leaderboard``.
"""

from .envs import register_builtin_envs
from .episode import Episode, FinalView, Turn
from .errors import EnvOrderError
from .evaluation import evaluation_plan
from .flexmg import EnvSnapshot, FlexMGEnv
from .registry import EnvSpec, check_overrides, make, pprint_registry, register, registry, spec
from .spaces import UnicodeText
from .vector import Batch, VectorEnv, VectorFlexEnv, VectorScheduler, make_vec
from .verdict import RoundPlay, RoundVerifier, Verdict
from .verifiers import Verifier, get_verifier, grader_version, register_verifier
from .workflow import Role, Workflow, get_workflow, register_workflow, workflow_names

__version__ = "0.1.0"

register_builtin_envs()

__all__ = [
    "Batch",
    "EnvOrderError",
    "EnvSnapshot",
    "EnvSpec",
    "Episode",
    "FinalView",
    "FlexMGEnv",
    "Role",
    "RoundPlay",
    "RoundVerifier",
    "Turn",
    "UnicodeText",
    "VectorEnv",
    "VectorFlexEnv",
    "VectorScheduler",
    "Verdict",
    "Verifier",
    "Workflow",
    "__version__",
    "check_overrides",
    "evaluation_plan",
    "get_verifier",
    "get_workflow",
    "grader_version",
    "make",
    "make_vec",
    "pprint_registry",
    "register",
    "register_verifier",
    "register_workflow",
    "registry",
    "spec",
    "workflow_names",
]
