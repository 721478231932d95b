"""Every verdict names the grader version that produced it; the public API reads a verifier's."""

from __future__ import annotations

import pytest

import marft_envs
from marft_envs.code import CodeVerifier
from marft_envs.code import version as code_version
from marft_envs.math import verify
from marft_envs.math import version as math_version
from marft_envs.verdict import Verdict
from marft_envs.verifiers import UNVERSIONED, MathVerifier


def test_verifiers_declare_their_versions() -> None:
    assert MathVerifier().version == math_version.GRADER_VERSION
    assert CodeVerifier(sandbox="subprocess").version == code_version.GRADER_VERSION
    assert math_version.GRADER_VERSION != code_version.GRADER_VERSION  # self-describing
    assert marft_envs.grader_version("arith-2agent") == math_version.GRADER_VERSION
    assert marft_envs.grader_version("code-2agent") == code_version.GRADER_VERSION


def test_math_verdicts_carry_the_version_on_every_path() -> None:
    # exact, numeric, no answer, empty reference (an infrastructure verdict)
    for pred, ref in [("\\boxed{2}", "2"), ("\\boxed{0.5}", "1/2"), ("", "2"), ("\\boxed{2}", "")]:
        v = verify(pred, ref)
        assert v.grader_version == math_version.GRADER_VERSION, (pred, ref, v)
        assert v.to_dict()["grader_version"] == math_version.GRADER_VERSION


class _DeadSandbox:
    """A backend whose service has died: every run raises, as a lost Docker daemon does."""

    name = "dead"

    def run(self, *args: object, **kwargs: object) -> None:
        raise ConnectionError("the sandbox daemon is not answering")


def test_code_verdicts_carry_the_version() -> None:
    env = marft_envs.make("code-2agent")
    task = env.unwrapped.dataset[0]
    env.close()
    ran = CodeVerifier(sandbox="subprocess").grade("```python\nprint(1)\n```", task)
    assert not ran.infra_error and ran.grader_version == code_version.GRADER_VERSION
    broken = CodeVerifier(sandbox=_DeadSandbox())  # its daemon is gone: an infrastructure error
    v = broken.grade("```python\nprint(1)\n```", task)
    assert v.infra_error and v.grader_version == code_version.GRADER_VERSION


def test_env_infos_carry_the_grader_version() -> None:
    env = marft_envs.make("arith-2agent")
    env.reset(seed=0)
    env.step("x")
    env.step("\\boxed{999999}")
    assert env.infos["reasoner_0"]["verdict"]["grader_version"] == math_version.GRADER_VERSION
    assert env.episode().verdicts[0]["grader_version"] == math_version.GRADER_VERSION


class PlainVerifier:
    """A third-party verifier that declares no version and leaves Verdict.grader_version unset."""

    name = "plain"

    def grade(self, response: str, task) -> Verdict:
        return Verdict(correct=True, answer=response, reason="always", score=1.0)

    def feedback(self, response, task, verdict, mode) -> str:
        return ""


def test_an_unversioned_verifier_is_named_as_such() -> None:
    env = marft_envs.make("arith-2agent", verifier=PlainVerifier())
    assert marft_envs.grader_version(env) == UNVERSIONED
    env.reset(seed=0)
    env.step("a")
    env.step("b")
    assert env.infos["actor_1"]["verdict"]["grader_version"] == UNVERSIONED


def test_grader_version_of_something_else_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="env id, an environment or a verifier"):
        marft_envs.grader_version(42)
