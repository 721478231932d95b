"""Conformance checks: PettingZoo's own tests plus the checks an LLM environment needs.

    from marft_envs.testing import check_env
    report = check_env("math-3agent")        # raises AssertionError naming the failed check
    print(report)

The LLM checks: arbitrary unicode and garbage actions never crash a step and are graded wrong;
a known-right action earns the full reward and a known-wrong one none, graded by the id's own
verifier; the predecessors in each observation equal what was actually played (per the
dependency matrix); replays with the same seed and actions are identical and other seeds reach
other tasks; ``reset`` never touches global RNG state; ``options={"task_id": ...}`` pins the task;
the math verifier's time limit holds on pathological input.

A check that cannot run on an environment (no known-right action for its verifier, no sandbox
for a code id, a verifier without a time limit) raises :class:`CheckSkipped`; the report lists it
under ``skipped`` with the reason, never under ``passed``.
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
from pathlib import Path
from typing import Any

import numpy as np
from pettingzoo.test import api_test, render_test, seed_test
from pettingzoo.test.state_test import test_state, test_state_space

from tasks import Dataset, Task

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


#: Seeds whose first tasks the replay check compares: a dataset of two tasks gives all eight
#: the same one with probability 2**-7, and the choice is a fixed hash, so this never flickers.
REPLAY_SEEDS = 8

#: The output of the known-wrong program of a stdin/stdout task: no task expects it.
WRONG_OUTPUT = "marft-conformance: a known-wrong output"

#: Lookup-table programs (a stdin/stdout task without a reference solution) are built only for
#: tasks whose tests are this small in total, so the program stays a reasonable response.
MAX_LOOKUP_CHARS = 200_000


class CheckSkipped(Exception):
    """Raised by a check that cannot run on the environment; ``check_env`` records the reason
    under ``ConformanceReport.skipped`` (never under ``passed``)."""


@dataclass
class ConformanceReport:
    env_id: str
    passed: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    #: check name -> why it did not run on this environment
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        head = f"conformance of {self.env_id}: {len(self.passed)} checks passed"
        lines = [head + (f", {len(self.skipped)} not run" if self.skipped else "")]
        lines += [f"  ok  {name:<28} {self.seconds[name]:7.2f}s" for name in self.passed]
        lines += [f"  --  {name:<28} not run: {why}" for name, why in self.skipped.items()]
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
    """Two runs with the same seed and actions are identical; other seeds reach other tasks
    (when the task source has more than one)."""
    assert _transcript(env_fn, 7) == _transcript(env_fn, 7), (
        "replay with the same seed and actions differs"
    )
    env = env_fn()
    u = _unwrap(env)
    reached = set()
    for s in range(REPLAY_SEEDS):
        env.reset(seed=s)
        assert u.task is not None  # reset picked one
        reached.add(u.task.id)
    env.close()
    if len(u.dataset) > 1:
        assert len(reached) > 1, (
            f"seeds 0-{REPLAY_SEEDS - 1} all reached task {reached.pop()!r} of "
            f"{len(u.dataset)}: other seeds must reach other tasks"
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
    name = getattr(u.verifier, "name", type(u.verifier).__name__)
    if u.dataset.kind != "math" or not hasattr(u.verifier, "timeout"):
        env.close()
        why = (
            f"the {name!r} verifier declares no time limit (no timeout attribute)"
            if u.dataset.kind == "math"
            else f"the pathological inputs are math answers; {u.dataset.kind} verifiers' limits "
            "are tested with their sandbox (tests/code)"
        )
        raise CheckSkipped(why)
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


def _fenced(program: str) -> str:
    return f"Here is the program:\n```python\n{program.rstrip()}\n```\n"


def _math_pair(ds: Dataset, task: Task) -> tuple[str, str] | None:
    """The boxed reference, and the reference plus one (never equal to it: answers are finite)."""
    ref = task.answer
    if ref is None or "infty" in ref:  # infinity plus one is infinity
        return None
    return f"The answer is \\boxed{{{ref}}}.", f"The answer is \\boxed{{{ref}+1}}."


def _exact_pair(ds: Dataset, task: Task) -> tuple[str, str] | None:
    """The answer itself, and another task's answer (the wrong key of a credit game)."""
    if task.answer is None:
        return None
    other = next((t.answer for t in ds if t.answer not in (None, task.answer)), None)
    return task.answer, other if other is not None else task.answer + "!"


@functools.lru_cache(maxsize=4)
def _reference_programs(name: str, source: str) -> dict[str, str]:
    """Known-correct programs by task id, for the datasets that ship them (never in a Task)."""
    if name == "code":
        from tasks.code_tasks import REFERENCE_SOLUTIONS

        return dict(REFERENCE_SOLUTIONS)
    if name == "humaneval":
        from tasks.code_loaders import humaneval_records

        return {r["task_id"]: r["prompt"] + r["canonical_solution"] for r in humaneval_records()}
    if name == "mbpp" and source.endswith(".jsonl") and Path(source).is_file():
        from tasks.code_loaders import read_jsonl

        return {
            f"mbpp/{r['task_id']}": r["code"] for r in read_jsonl(Path(source)) if r.get("code")
        }
    return {}


def _lookup_program(task: Task) -> str | None:
    """A program that prints each test's expected output for its input: known-right for a
    stdin/stdout task even when its records carry no solution (APPS test, LiveCodeBench)."""
    if not task.io_tests or sum(len(t.stdin) + len(t.expected_stdout) for t in task.io_tests) > (
        MAX_LOOKUP_CHARS
    ):
        return None
    table = {" ".join(t.stdin.split()): t.expected_stdout for t in task.io_tests}
    return (
        f"import sys\nTABLE = {table!r}\n"
        "sys.stdout.write(TABLE.get(' '.join(sys.stdin.read().split()), ''))\n"
    )


def _wrong_program(task: Task) -> str:
    """Runs cleanly and answers wrong: prints, or returns, a string no test expects."""
    if task.io_tests or not task.entry_point or not task.entry_point.isidentifier():
        return f"print({WRONG_OUTPUT!r})\n"
    return f"def {task.entry_point}(*args, **kwargs):\n    return {WRONG_OUTPUT!r}\n"


def _code_pair(ds: Dataset, task: Task) -> tuple[str, str] | None:
    """The task's reference solution (or, for stdin/stdout tests, a lookup table), and a
    program that runs but answers wrong."""
    program = _reference_programs(ds.name, ds.source).get(task.id) or _lookup_program(task)
    if program is None:
        return None
    return _fenced(program), _fenced(_wrong_program(task))


#: verifier name -> (dataset, task) -> (a known-right response, a known-wrong one), or None when
#: the task has no known-right response. A third-party verifier can add its own, or define
#: ``known_pair(dataset, task)`` with the same result (used when its name is not here).
KNOWN_PAIRS: dict[str, Callable[[Dataset, Task], tuple[str, str] | None]] = {
    "math": _math_pair,
    "exact": _exact_pair,
    "code": _code_pair,
}


def _expected_returns(u: FlexMGEnv, verdicts: list[dict[str, Any]]) -> dict[str, float]:
    """Each agent's return as ``reward_to`` attributes the verdicts' scores (``graded``: each
    agent's ``agent_scores`` entry where the verdict has them, else the answerer's score)."""
    agents = u.possible_agents
    out = dict.fromkeys(agents, 0.0)
    for v in verdicts:
        if u.reward_to == "graded" and v.get("agent_scores"):
            for a in agents:
                out[a] += float(v["agent_scores"].get(a, 0.0))
            continue
        if u.reward_to == "team":
            targets = agents
        else:
            targets = [agents[-1] if u.reward_to == "last" else v["answerer"]]
        for a in targets:
            out[a] += float(v["score"])
    return out


def _same(response: str, agent: str, obs: Any) -> str:
    """Every seat plays ``response``."""
    return response


def check_reward(env_fn: Callable[..., Any]) -> None:
    """A known-right response earns the full reward and a known-wrong one none, graded by the
    environment's own verifier and attributed by its ``reward_to``.

    Every seat plays the same response. Math: the boxed reference vs the reference plus one;
    ``exact`` (credit games): the key vs another key; code: the task's reference solution (or,
    for stdin/stdout tests, a program that looks the expected outputs up) vs a program that runs
    and answers wrong. Not run (:class:`CheckSkipped`) when no task of the dataset has a
    known-right response, or when the verifier cannot run programs here (infrastructure error).
    """
    env = env_fn()
    u = _unwrap(env)
    name = getattr(u.verifier, "name", type(u.verifier).__name__)
    make_pair = KNOWN_PAIRS.get(name) or getattr(u.verifier, "known_pair", None)
    if make_pair is None:
        env.close()
        raise CheckSkipped(f"no known-right response for the {name!r} verifier (KNOWN_PAIRS)")
    found = next(((t, p) for t in u.dataset if (p := make_pair(u.dataset, t)) is not None), None)
    if found is None:
        env.close()
        raise CheckSkipped(
            f"no task of {u.dataset.name!r}/{u.dataset.split!r} has a known-right response "
            "(no reference solution, and no stdin/stdout tests)"
        )
    task, (right, wrong) = found
    for response, is_right in ((right, True), (wrong, False)):
        env.reset(seed=0, options={"task_id": task.id})
        _play(env, functools.partial(_same, response))
        ep = u.episode()
        what = f"the known-{'right' if is_right else 'wrong'} response to {task.id!r}"
        assert ep.verdicts, f"{what} was never graded"
        infra = next((v for v in ep.verdicts if v["infra_error"]), None)
        if infra is not None:
            env.close()
            raise CheckSkipped(f"the {name!r} verifier could not grade here: {infra['reason']}")
        last = ep.verdicts[-1]
        graded = f"graded correct={last['correct']}, score {last['score']} ({last['reason']!r})"
        if is_right:
            assert last["correct"] and last["score"] == 1.0, f"{what} was {graded}"
        else:
            assert not any(v["correct"] or v["score"] != 0.0 for v in ep.verdicts), (
                f"{what} was {graded}"
            )
        expected = _expected_returns(u, ep.verdicts)
        assert ep.returns == expected, (
            f"{what}: returns {ep.returns} but reward_to={u.reward_to!r} gives {expected}"
        )
    env.close()


LLM_CHECKS: dict[str, Callable[[Callable[..., Any]], None]] = {
    "garbage_actions": check_garbage_actions,
    "reward": check_reward,
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
            except CheckSkipped as e:
                report.skipped[name] = str(e)
        report.seconds[name] = time.monotonic() - start
        if name not in report.skipped:
            report.passed.append(name)
        if verbose:
            said = (
                f"ok {name}" if name in report.passed else f"not run {name}: {report.skipped[name]}"
            )
            print(
                f"{said} ({report.seconds[name]:.2f}s)"
                + ("\n" + out.getvalue() if out.getvalue() else "")
            )
    return report
