"""Baselines tests run tiny models: one thread is faster than two on a busy machine."""

import pytest
import torch

import marft_envs

torch.set_num_threads(1)


def _register_infra_env(answers: list[str], env_id: str) -> str:
    """Register ``env_id``: the relay workflow graded by the real math verifier, one task per
    answer; a task whose reference answer is empty makes the verifier return an
    infrastructure error (``Verdict.infra_error``), as a broken math worker would."""
    from baselines.relay import RELAY_WORKFLOW
    from tasks import Dataset, Task

    if env_id not in marft_envs.registry:
        items = tuple(
            Task(id=f"t{i}", kind="math", prompt="AB"[i % 2], answer=a)
            for i, a in enumerate(answers)
        )
        marft_envs.register(
            env_id,
            "marft_envs.flexmg:FlexMGEnv",
            kwargs={
                "dataset": Dataset(
                    name=env_id, split="train", kind="math", tasks=items, source="generated:test"
                ),
                "workflow": RELAY_WORKFLOW,
                "verifier": "math",
                "horizon": 1,
                "feedback": "none",
            },
        )
    return env_id


@pytest.fixture
def infra_env():
    """``infra_env(answers, env_id) -> env_id`` (see :func:`_register_infra_env`)."""
    return _register_infra_env
