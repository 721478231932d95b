"""The conformance suite (PettingZoo's tests + the LLM checks) on every registered id."""

import pytest

import marft_envs
import tasks
from marft_envs.testing import check_env


def _missing_data(env_id: str) -> str | None:
    """Why the id's dataset cannot be loaded here (no local files, no Hub), else None."""
    kwargs = marft_envs.spec(env_id).kwargs
    try:
        tasks.load(kwargs.get("dataset", "arith"), split=kwargs.get("split"), **kwargs.get("dataset_kwargs", {}))
    except tasks.DataNotFoundError as e:
        return str(e).splitlines()[0]
    return None


@pytest.mark.parametrize("env_id", sorted(marft_envs.registry))
def test_check_env_on_every_registered_id(env_id):
    """Ids whose benchmark data is not on this machine (LiveCodeBench, APPS, CodeContests come
    from the Hub) are skipped here; tests/code/test_competitive.py runs the same checks on
    them with records in the upstream layout."""
    missing = _missing_data(env_id)
    if missing:
        pytest.skip(missing)
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
