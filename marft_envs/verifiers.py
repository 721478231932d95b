"""The verifier protocol and the registry that maps names (``"math"``, ``"code"``) to verifiers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from tasks import Task
from tasks.registry import Registry

from .verdict import Verdict

FEEDBACK_MODES = ("none", "verdict", "tests")

UNVERSIONED = "unversioned"
"""What :func:`grader_version` says of a verifier that declares no ``version``."""


@runtime_checkable
class Verifier(Protocol):
    """Grades one response to one task. ``grade`` never raises on any response.

    A verifier may also declare ``version``: a string naming its grading rules, bumped whenever
    they change, that its verdicts carry as ``Verdict.grader_version`` (read it with
    :func:`grader_version`; it is not part of the protocol so older verifiers still conform).
    And ``fingerprint_settings()``: a JSON-able dict of the settings that change its verdicts
    (reward mode, time limits, extraction rules), part of every environment fingerprint
    (:mod:`marft_envs.fingerprint`).
    """

    name: str

    def grade(self, response: str, task: Task) -> Verdict: ...

    def feedback(self, response: str, task: Task, verdict: Verdict, mode: str) -> str: ...


def verdict_feedback(verdict: Verdict) -> str:
    """The between-rounds message of ``feedback="verdict"`` (as in the MARFT reference code)."""
    if verdict.infra_error:
        return "The team's answer could not be checked (infrastructure error)."
    shown = (
        "no final answer was found"
        if verdict.answer is None
        else f"the final answer {verdict.answer!r}"
    )
    return f"Feedback: {shown} was judged {'correct' if verdict.correct else 'incorrect'}."


class MathVerifier:
    """Adaptor from :func:`marft_envs.math.verify` to the :class:`Verifier` protocol."""

    name = "math"

    @property
    def version(self) -> str:
        """The math grading rules' version (:mod:`marft_envs.math.version`)."""
        from .math import version  # lazily, like verify: the package pulls in the whole checker

        return version.GRADER_VERSION

    def __init__(
        self, timeout: float | None = None, last_number_fallback: bool = True, config: Any = None
    ):
        """``config``: a ``marft_envs.math.ExtractionConfig`` choosing the extraction rules."""
        self.timeout = timeout
        self.last_number_fallback = last_number_fallback
        self.config = config

    def fingerprint_settings(self) -> dict[str, Any]:
        """The settings that change verdicts (part of an environment's fingerprint)."""
        return {
            "timeout": self.timeout,
            "last_number_fallback": self.last_number_fallback,
            "config": self.config,
        }

    def grade(self, response: str, task: Task) -> Verdict:
        from .math import verify  # imported lazily: sympy is slow to import

        return verify(
            response,
            task.answer,
            timeout=self.timeout,
            last_number_fallback=self.last_number_fallback,
            config=self.config,
        )

    def feedback(self, response: str, task: Task, verdict: Verdict, mode: str) -> str:
        if mode == "verdict":
            return verdict_feedback(verdict)
        if mode == "none":
            return ""
        raise ValueError(f"The math verifier supports feedback 'none' or 'verdict', not {mode!r}")


_VERIFIERS: Registry[Callable[..., Any]] = Registry("verifier", {"math": MathVerifier})


def grader_version(obj: Any) -> str:
    """The grader version of a verifier, of an environment's verifier, or of a registered id's.

    ``grader_version("math-3agent")`` (builds the environment once), ``grader_version(env)`` or
    ``grader_version(env.unwrapped.verifier)`` give e.g. ``"math-3"``; a verifier that declares
    no ``version`` gives :data:`UNVERSIONED`.
    """
    if isinstance(obj, str):
        from .registry import make

        env = make(obj)
        try:
            return grader_version(env)
        finally:
            env.close()
    verifier = getattr(getattr(obj, "unwrapped", obj), "verifier", obj)
    if not hasattr(verifier, "grade"):
        raise TypeError(
            "grader_version() takes an env id, an environment or a verifier, "
            f"not {type(obj).__name__}"
        )
    version = getattr(verifier, "version", None)
    return version if isinstance(version, str) and version else UNVERSIONED


def register_verifier(
    name: str, factory: Callable[..., Any], *, overwrite: bool = False
) -> Callable[..., Any]:
    """Make ``make(..., verifier=name)`` build verifiers with ``factory(**verifier_kwargs)``;
    returns the registered factory. The same factory under a taken name is a no-op; another
    raises :class:`~tasks.AlreadyRegisteredError` (a ValueError) unless ``overwrite=True``."""
    return _VERIFIERS.register(name, factory, overwrite=overwrite)


def get_verifier(name_or_verifier: str | Any, **kwargs: Any) -> Any:
    """Build a verifier by name, or pass an object that has ``grade`` through unchanged."""
    if not isinstance(name_or_verifier, str):
        if not hasattr(name_or_verifier, "grade"):
            raise TypeError(
                f"verifier must be a name {sorted(_VERIFIERS)} or an object with a grade() method"
            )
        return name_or_verifier
    try:
        factory = _VERIFIERS[name_or_verifier]
    except KeyError:
        raise KeyError(
            f"Unknown verifier {name_or_verifier!r}; registered: {sorted(_VERIFIERS)}"
        ) from None
    return factory(**kwargs)
