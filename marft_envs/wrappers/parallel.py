"""The PettingZoo Parallel view of a team whose agents never see same-round actions.

    from marft_envs.wrappers import parallel_env
    env = parallel_env("math-3agent", workflow=independent_workflow)
    observations, infos = env.reset(seed=0)
    observations, rewards, terminations, truncations, infos = env.step(
        {agent: my_llm(obs["prompt"]) for agent, obs in observations.items()})

One parallel step is one round. It is only offered when the dependency matrix is all zeros:
with any same-round dependency the agents are not simultaneous, and a parallel view would show
them observations that are not the ones they act on.
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils.conversions import aec_to_parallel_wrapper

from ..errors import require_episode
from ..registry import make


class FlexParallelEnv(aec_to_parallel_wrapper):
    """PettingZoo's ``aec_to_parallel`` view, with the AEC environment's order errors: its own
    ``step()`` silently returns empty dicts before ``reset()`` and after the episode ended."""

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        aec = self.aec_env
        require_episode("step", has_reset=aec.unwrapped.task is not None, ended=not aec.agents)
        return super().step(actions)


def parallel_env(env: Any, **overrides: Any) -> Any:
    """A ``pettingzoo.ParallelEnv`` of ``env`` (an AEC Flex-MG environment or a registered id)."""
    aec = make(env, **overrides) if isinstance(env, str) else env
    u = aec.unwrapped
    if not u.metadata.get("is_parallelizable"):
        raise ValueError(
            f"workflow {u.workflow.name!r} has a non-zero dependency matrix "
            f"{[list(r) for r in u.workflow.matrix]}: its agents see same-round actions, so "
            "they do "
            "not act simultaneously. The Parallel view needs an all-zero matrix (e.g. "
            "Workflow(..., dependency=marft_envs.workflow.independent_matrix(n))); use the AEC "
            "environment or marft_envs.wrappers.SingleSeat for this team."
        )
    return FlexParallelEnv(aec)
