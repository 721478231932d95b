"""Re-grading in-process: the rules that decide what a bundle is worth."""

from __future__ import annotations

import pytest
from lb_helpers import play_bundle

import marft_envs
from leaderboard.regrade import (
    BundleRejected,
    GradingUnavailable,
    build_env,
    grade_episodes,
    overrides_for,
    regrade,
    wilson_interval,
)
from leaderboard.schema import Bundle
from marft_envs.verdict import Verdict


@pytest.mark.parametrize(
    "p, n, low, high",
    [
        (0.5, 10, 0.236593, 0.763407),
        (1.0, 5, 0.565518, 1.0),
        (0.0, 20, 0.0, 0.161125),
        (0.6, 100, 0.502002, 0.690599),
    ],
)
def test_wilson_interval_matches_reference_values(p: float, n: int, low: float, high: float) -> None:
    lo, hi = wilson_interval(p, n)
    assert lo == pytest.approx(low, abs=1e-6) and hi == pytest.approx(high, abs=1e-6)


def test_wilson_interval_without_samples_is_uninformative() -> None:
    assert wilson_interval(0.3, 0) == (0.0, 1.0)


def test_honest_bundle_scores_its_true_value(honest_bundle: Bundle) -> None:
    g = regrade(honest_bundle)
    assert g.env_family == "arith" and g.n_tasks == 5 and len(g.episodes) == 10
    assert g.score == pytest.approx(0.6)
    assert [e.correct for e in g.episodes[:5]] == [True, False, True, False, True]
    assert (g.ci_low, g.ci_high) == pytest.approx(wilson_interval(0.6, 5))


def test_parallel_grading_gives_the_serial_grades_in_bundle_order(honest_bundle: Bundle) -> None:
    env = build_env(honest_bundle)
    try:
        serial = grade_episodes(honest_bundle, env, workers=1)
        parallel = grade_episodes(honest_bundle, env, workers=4)
    finally:
        env.close()
    assert parallel == serial
    assert [g.index for g in parallel] == list(range(len(honest_bundle.episodes)))
    assert [g.correct for g in parallel] == [i % 2 == 0 for i in range(5)] * 2


def test_claimed_score_is_ignored(honest_bundle: Bundle) -> None:
    inflated = honest_bundle.model_copy(update={"claimed_score": 1.0})
    assert regrade(inflated).score == pytest.approx(0.6)


def test_three_agent_team_and_split_override() -> None:
    b = play_bundle("arith-3agent", n_tasks=3, split="train", correct=lambda i: i == 0)
    assert b.team_size == 3 and b.dataset.split == "train"
    g = regrade(b)
    assert g.score == pytest.approx(1 / 3)


def test_overrides_that_change_grading_are_rejected(honest_bundle: Bundle) -> None:
    registered = marft_envs.spec("arith-2agent").kwargs
    spec = dict(honest_bundle.env_spec)
    spec["kwargs"] = {**spec["kwargs"], "verifier_kwargs": {"last_number_fallback": True}}
    with pytest.raises(BundleRejected, match="verifier_kwargs"):
        overrides_for(honest_bundle.model_copy(update={"env_spec": spec}), registered)
    spec["kwargs"] = {**registered, "split": "train", "data_dir": "/home/someone/data"}
    assert overrides_for(honest_bundle.model_copy(update={"env_spec": spec}), registered) == {"split": "train"}


def test_final_output_must_come_from_the_transcript(honest_bundle: Bundle) -> None:
    eps = list(honest_bundle.episodes)
    eps[1] = eps[1].model_copy(update={"final_output": eps[0].final_output})
    with pytest.raises(BundleRejected, match="final_output is not the last action"):
        regrade(honest_bundle.model_copy(update={"episodes": eps}))


class AlwaysInfraError:
    """A verifier whose infrastructure is down (a real Verifier implementation, not a mock)."""

    name = "always-infra-error"

    def __init__(self) -> None:
        self.calls = 0

    def grade(self, response: str, task) -> Verdict:
        self.calls += 1
        return Verdict(correct=False, answer=None, reason="sandbox daemon unreachable", infra_error=True)

    def feedback(self, response, task, verdict, mode) -> str:
        return ""


@pytest.fixture
def infra_env_id():
    """A registered id whose verifier always reports an infrastructure error (removed afterwards)."""
    marft_envs.register_verifier("always-infra-error", AlwaysInfraError)
    registered = marft_envs.spec("arith-2agent")
    marft_envs.register(
        "lbinfra-2agent-v1", registered.entry_point,
        kwargs={**registered.kwargs, "verifier": "always-infra-error"}, overwrite=True,
    )
    try:
        yield "lbinfra-2agent-v1"
    finally:
        del marft_envs.registry["lbinfra-2agent-v1"]


def test_persistent_infrastructure_errors_refuse_the_submission(honest_bundle: Bundle, infra_env_id: str) -> None:
    spec = {**honest_bundle.env_spec, "id": infra_env_id,
            "kwargs": {**honest_bundle.env_spec["kwargs"], "verifier": "always-infra-error"}}
    fp = marft_envs.make(infra_env_id).unwrapped.fingerprint  # the bundle names that env's
    b = Bundle.model_validate({
        **honest_bundle.model_dump(), "env_id": infra_env_id, "env_spec": spec,
        "grader_version": fp.grader_version,
        "fingerprint": {"digest": fp.digest, "parts": dict(fp.parts)},
    })
    with pytest.raises(GradingUnavailable, match="infrastructure error on episode 0 .* 3 times"):
        regrade(b)
    env = build_env(b)
    try:  # graded four at a time, the submission still fails as a whole
        with pytest.raises(GradingUnavailable, match="infrastructure error on episode"):
            grade_episodes(b, env, workers=4)
    finally:
        env.close()
