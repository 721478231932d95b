"""The conformance suite (PettingZoo's tests + the LLM checks) on every registered id."""

import dataclasses

import pytest

import marft_envs
import tasks
from marft_envs.code.sandbox.select import probe
from marft_envs.testing import CheckSkipped, check_env, check_replay, check_reward
from marft_envs.verdict import Verdict
from tests.services import docker_daemon, require_sandboxes

PZ = ["pettingzoo.api_test", "pettingzoo.seed_test", "pettingzoo.render_test", "pettingzoo.state_test"]
LLM = ["garbage_actions", "reward", "predecessors", "replay", "global_rng_untouched", "task_pinning"]


def _missing_data(env_id: str) -> str | None:
    """Why the id's dataset cannot be loaded here (no local files, no Hub), else None."""
    kwargs = marft_envs.spec(env_id).kwargs
    try:
        tasks.load(kwargs.get("dataset", "arith"), split=kwargs.get("split"), **kwargs.get("dataset_kwargs", {}))
    except tasks.DataNotFoundError as e:
        return str(e).splitlines()[0]
    return None


@pytest.fixture(scope="module")
def code_sandbox():
    """None when a code id's verifier finds an isolating sandbox (bubblewrap, else docker,
    started with scripts/services.sh as tests/code does), else the reason."""
    if probe("bwrap") is None:
        yield None
        return
    with docker_daemon() as reason:
        yield None if reason is None else f"neither bubblewrap ({probe('bwrap')}) nor docker ({reason})"


@pytest.mark.parametrize("env_id", sorted(marft_envs.registry))
def test_check_env_on_every_registered_id(env_id, request):
    """Ids whose benchmark data is not on this machine (LiveCodeBench, CodeContests come
    from the Hub) are skipped here; tests/code/test_competitive.py runs the same checks on
    them with records in the upstream layout."""
    missing = _missing_data(env_id)
    if missing:
        pytest.skip(missing)
    env = marft_envs.make(env_id)
    kind, verifier = env.unwrapped.dataset.kind, env.unwrapped.verifier.name
    env.close()
    if kind == "code":
        reason = request.getfixturevalue("code_sandbox")
        if reason is not None:
            message = f"{env_id}'s reward check needs a sandbox: {reason}"
            if require_sandboxes():
                pytest.fail(f"{message} (MARFT_REQUIRE_SANDBOXES is set)", pytrace=False)
            pytest.skip(message)
    report = check_env(env_id)
    # the reward check runs on every id: math, the credit games' exact verifier and code alike;
    # only the math verifier has a time limit that pathological answers can test
    # (a new verifier needs its known-right and known-wrong play: testing.KNOWN_PAIRS)
    if verifier == "math":
        assert report.passed == [*PZ, *LLM, "verifier_time_limit"], report.skipped
        assert report.skipped == {}
    else:
        assert report.passed == [*PZ, *LLM], report.skipped
        assert list(report.skipped) == ["verifier_time_limit"]


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


class NeverRight:
    """The exact verifier's name and feedback, but it grades every answer wrong."""

    name = "exact"

    def grade(self, response, task):
        return Verdict(correct=False, answer=str(response), reason="mismatch", score=0.0)

    def feedback(self, response, task, verdict, mode):
        return ""


def test_reward_check_fails_a_verifier_that_never_credits_the_right_answer():
    # the garbage check alone passes it: everything is graded wrong
    with pytest.raises(AssertionError, match="reward failed: the known-right response to 'key-A'"):
        check_env("credit-chain-2agent", verifier=NeverRight())


def test_reward_check_fails_a_wrong_attribution():
    class Stingy(marft_envs.FlexMGEnv):
        def _attributed(self, agent, answerer, *rest):  # the answerer's reward lost on the way
            return 0.0 if agent == answerer else super()._attributed(agent, answerer, *rest)

    env_fn = lambda: Stingy(dataset="keys", workflow="credit-chain-2", verifier="exact")  # noqa: E731
    with pytest.raises(AssertionError, match="returns .* but reward_to='team' gives"):
        check_reward(env_fn)


@pytest.mark.parametrize("env_id", ["climbing-2agent", "repair-2agent"])
def test_reward_check_follows_graded_attribution(env_id):
    """reward_to='graded' pays each seat its Verdict.agent_scores entry (the matrix games grade
    every seat): the check expects those shares, not the answerer's score alone."""
    check_reward(lambda **kw: marft_envs.make(env_id, reward_to="graded", **kw))


def test_reward_check_is_not_run_without_a_known_right_response():
    """A third-party verifier with no known pair, and a code dataset whose tasks carry neither a
    reference solution nor stdin/stdout tests (LiveCodeBench's call-based problems): not run,
    with the reason, never passed."""
    class Custom(NeverRight):
        name = "custom"

    report = check_env("credit-chain-2agent", verifier=Custom())
    assert "reward" not in report.passed and "KNOWN_PAIRS" in report.skipped["reward"]
    assert "not run: no known-right response for the 'custom' verifier" in str(report)
    base = tasks.load("code")
    call_only = tasks.Dataset("calls", "test", "code", tuple(
        dataclasses.replace(t, id=f"calls/{i}") for i, t in enumerate(base) if not t.io_tests))
    with pytest.raises(CheckSkipped, match="no task of 'calls'/'test' has a known-right response"):
        check_reward(lambda: marft_envs.make("code-2agent", dataset=call_only))


def test_replay_check_fails_when_every_seed_reaches_the_same_task():
    class Stuck(marft_envs.FlexMGEnv):
        def reset(self, seed=None, options=None):  # every seed plays the first task
            super().reset(seed=seed, options=options or {"task_index": 0})

    with pytest.raises(AssertionError, match="seeds 0-7 all reached task 'key-A' of 2"):
        check_replay(lambda: Stuck(dataset="keys", workflow="credit-chain-2", verifier="exact"))
    one = tasks.Dataset("one", "test", "math", (tasks.load("keys")[0],))
    check_replay(lambda: Stuck(dataset=one, workflow="credit-chain-2", verifier="exact"))  # one task: nothing to reach
