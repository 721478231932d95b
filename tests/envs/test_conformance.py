"""The conformance suite (PettingZoo's tests + the LLM checks) on every registered id."""

import pytest

import marft_envs
from marft_envs.testing import check_env


@pytest.mark.parametrize("env_id", sorted(marft_envs.registry))
def test_check_env_on_every_registered_id(env_id):
    report = check_env(env_id)
    assert "pettingzoo.api_test" in report.passed and "predecessors" in report.passed
    assert len(report.passed) == 10


def test_check_env_detects_a_broken_environment():
    class Leaky(marft_envs.FlexMGEnv):
        def observe(self, agent):  # shows agents a predecessor the matrix hides... by lying about it
            obs = super().observe(agent)
            obs["predecessors"] = tuple(reversed(obs["predecessors"]))
            return obs

    marft_envs.register("leaky-3agent", Leaky, kwargs={"dataset": "arith", "workflow": "math-trio"}, overwrite=True)
    try:
        with pytest.raises(AssertionError, match="predecessors"):
            check_env("leaky-3agent")
    finally:
        del marft_envs.registry["leaky-3agent"]
