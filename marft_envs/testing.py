"""Conformance checks: PettingZoo's own tests plus the checks an LLM environment needs.

    from marft_envs.testing import check_env
    report = check_env("math-3agent")        # raises AssertionError naming the failed check
    print(report)

The LLM checks: arbitrary unicode and garbage actions never crash a step and are graded wrong;
the predecessors in each observation equal what was actually played (per the dependency matrix);
replays with the same seed and actions are identical; ``reset`` never touches global RNG state;
``options={"task_id": ...}`` pins the task; the verifier's time limit holds on pathological input.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import io
import random
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pettingzoo.test import api_test, render_test, seed_test
from pettingzoo.test.state_test import test_state, test_state_space

from .flexmg import FlexMGEnv
from .registry import make

#: Actions no step may crash on; each must be graded as a wrong answer.
GARBAGE_ACTIONS: tuple[Any, ...] = (
    None,
    "",
    12345,
    3.5,
    ["list"],
    {"d": 1},
    b"\xff\xfe bytes",
    "\x00\x01\x02",
    "\ud800 lone surrogate",
    "😀" * 1000,
    "\\boxed{",
    "}}}{{{\\boxed{}}}",
    "```python\n",
    "\u202e\u200b" * 100,
    "x" * 3_000_000,
    "\\frac{" * 5000,
)

#: (prediction, reference) pairs that make a careless symbolic checker hang; the last two
#: can only be settled by symbolic work, so they reach the time limit itself.
PATHOLOGICAL_PAIRS: tuple[tuple[str, str], ...] = (
    ("\\boxed{2^{2^{2^{2^{2^{100}}}}}}", "3"),
    ("\\boxed{(10^{10^{10}})!}", "5"),
    ("\\boxed{2^{2^{2^{2^{2^{100}}}}}}", "4^{2^{2^{2^{2^{99}}}}}"),
    ("\\boxed{(10^{8})!}", "\\frac{(10^{8}+1)!}{10^{8}+1}"),
)


@dataclass
class ConformanceReport:
    env_id: str
    passed: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"conformance of {self.env_id}: {len(self.passed)} checks passed"]
        lines += [f"  ok  {name:<28} {self.seconds[name]:7.2f}s" for name in self.passed]
        return "\n".join(lines)


def _unwrap(env: Any) -> FlexMGEnv:
    return getattr(env, "unwrapped", env)


def _play(env: Any, policy: Callable[[str, dict[str, Any]], Any]) -> None:
    for agent in env.agent_iter():
        obs, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else policy(agent, obs))


def check_garbage_actions(env_fn: Callable[..., Any]) -> None:
    """Every garbage action is accepted and graded wrong, never crashes."""
    env = env_fn()
    for k, garbage in enumerate(GARBAGE_ACTIONS):
        env.reset(seed=k)

        def act(agent: str, obs: Any, action: Any = garbage) -> Any:
            return action

        _play(env, act)
        ep = _unwrap(env).episode()
        assert ep.verdicts, f"garbage action {garbage!r:.40}: the round was never graded"
        assert not any(v["correct"] for v in ep.verdicts), (
            f"garbage action {garbage!r:.40} was graded correct"
        )
    env.close()


def check_predecessors(env_fn: Callable[..., Any], seed: int = 0) -> None:
    """Observed predecessors equal the actions played, exactly as the dependency matrix allows."""
    env = env_fn()
    wf = _unwrap(env).workflow
    env.reset(seed=seed)
    played: dict[tuple[int, int], str] = {}
    rng = random.Random(seed)
    for agent in env.agent_iter():
        obs, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
            continue
        i, r = obs["position"], obs["round"]
        expected = [played[(r, j)] for j in wf.sees(i)]
        got = [p["action"] for p in obs["predecessors"]]
        assert got == expected, f"{agent} in round {r} saw {got!r}, expected {expected!r}"
        for j in range(wf.n_agents):
            if j < i and j not in wf.sees(i):
                assert played[(r, j)] not in obs["prompt"], (
                    f"{agent} saw hidden predecessor {j}'s action"
                )
        action = f"action-{r}-{i}-{rng.random():.12f}"
        played[(r, i)] = action
        env.step(action)
    env.close()


def _transcript(env_fn: Callable[..., Any], seed: int) -> list[Any]:
    env = env_fn()
    env.reset(seed=seed)
    out: list[Any] = []
    rng = random.Random(seed)
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        out.append(
            (agent, obs["prompt"], reward, term, trunc, info.get("verdict", {}).get("correct"))
        )
        env.step(None if term or trunc else f"\\boxed{{{rng.randint(0, 9)}}}")
    out.append(_unwrap(env).episode().returns)
    env.close()
    return out


def check_replay(env_fn: Callable[..., Any]) -> None:
    """Two runs with the same seed and actions are identical; other seeds reach other tasks."""
    assert _transcript(env_fn, 7) == _transcript(env_fn, 7), (
        "replay with the same seed and actions differs"
    )


def _global_rng_state() -> tuple[object, bytes, int]:
    mt = np.random.get_state(legacy=False)["state"]
    return random.getstate(), mt["key"].tobytes(), mt["pos"]


def check_global_rng_untouched(env_fn: Callable[..., Any]) -> None:
    """Building, resetting and playing never reads or advances global random/numpy state."""
    random.seed(123)
    np.random.seed(123)
    before = _global_rng_state()
    env = env_fn()
    for s in range(3):
        env.reset(seed=s)
        _play(env, lambda agent, obs: "\\boxed{1}")
    env.close()
    after = _global_rng_state()
    assert before == after, "the environment touched the global random or numpy RNG state"


def check_task_pinning(env_fn: Callable[..., Any]) -> None:
    """``reset(options={"task_id": ...})`` pins the task, whatever the seed."""
    env = env_fn()
    ds = _unwrap(env).dataset
    target = ds[len(ds) // 2].id
    for s in (0, 1, 2):
        env.reset(seed=s, options={"task_id": target})
        task = _unwrap(env).task
        assert task is not None and task.id == target, (
            "options={'task_id': ...} did not pin the task"
        )
    env.close()


def check_verifier_time_limit(
    env_fn: Callable[..., Any], limit: float = 1.0, slack: float = 10.0
) -> None:
    """Pathological answers get a verdict within the verifier's limit (plus slack), never a hang.

    The check runs the environment's own verifier with its limit set to ``limit`` seconds, so the
    suite stays fast; what it proves is that the limit, whatever it is, holds.
    """
    env = env_fn()
    u = _unwrap(env)
    if u.dataset.kind != "math" or not hasattr(u.verifier, "timeout"):
        env.close()
        return
    verifier = copy.copy(u.verifier)
    verifier.timeout = limit
    env.reset(seed=0)
    task = u.task
    assert task is not None  # reset picked one
    for prediction, reference in PATHOLOGICAL_PAIRS:
        start = time.monotonic()
        verdict = verifier.grade(prediction, dataclasses.replace(task, answer=reference))
        took = time.monotonic() - start
        assert took < limit + slack, f"verifying {prediction!r} took {took:.1f}s (limit {limit}s)"
        assert not verdict.correct, f"{prediction!r} was graded equal to {reference!r}"
    env.close()


LLM_CHECKS: dict[str, Callable[[Callable[..., Any]], None]] = {
    "garbage_actions": check_garbage_actions,
    "predecessors": check_predecessors,
    "replay": check_replay,
    "global_rng_untouched": check_global_rng_untouched,
    "task_pinning": check_task_pinning,
    "verifier_time_limit": check_verifier_time_limit,
}


def check_env(
    env_or_id: Any, *, num_cycles: int = 50, verbose: bool = False, **overrides: Any
) -> ConformanceReport:
    """Run PettingZoo's ``api_test``, ``seed_test``, ``render_test`` and state checks, then the LLM
    checks.

    ``env_or_id`` is a registered id or an environment made by :func:`marft_envs.make` (its spec,
    overrides included, is used to build fresh copies). Raises ``AssertionError`` naming the check.
    """
    base: dict[str, Any] = {}
    if isinstance(env_or_id, str):
        env_id = env_or_id
        spec_or_id: Any = env_or_id
    else:
        spec_ = getattr(_unwrap(env_or_id), "spec", None)
        if spec_ is None:
            raise ValueError(
                "check_env needs an id or an environment built by marft_envs.make() (it has a spec)"
            )
        env_id, spec_or_id = spec_.id, spec_

    def env_fn(**kw: Any) -> Any:
        return make(spec_or_id, **{**base, **overrides, **kw})

    report = ConformanceReport(env_id)
    pz_checks: dict[str, Callable[[], object]] = {
        "pettingzoo.api_test": lambda: api_test(env_fn(), num_cycles=num_cycles),
        "pettingzoo.seed_test": lambda: seed_test(env_fn, num_cycles=num_cycles),
        "pettingzoo.render_test": lambda: render_test(env_fn),
        "pettingzoo.state_test": lambda: (
            test_state_space(e := env_fn()),
            test_state(e, num_cycles),
        ),
    }
    checks: dict[str, Callable[[], object]] = {
        **pz_checks,
        **{name: functools.partial(f, env_fn) for name, f in LLM_CHECKS.items()},
    }
    for name, run in checks.items():
        start = time.monotonic()
        # PettingZoo's tests print and warn about numpy-only conventions that text envs do not
        # follow.
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()) as out:
            warnings.simplefilter("ignore")
            try:
                run()
            except AssertionError as e:
                raise AssertionError(f"{env_id}: check {name} failed: {e}") from e
        report.passed.append(name)
        report.seconds[name] = time.monotonic() - start
        if verbose:
            print(
                f"ok {name} ({report.seconds[name]:.2f}s)"
                + ("\n" + out.getvalue() if out.getvalue() else "")
            )
    return report
