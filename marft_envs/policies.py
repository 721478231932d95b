"""Scripted policies for demos, smoke tests and benchmarks (no model needed).

A scripted policy is ``policy(env, agent, observation) -> str``. ``oracle`` reads the reference
from ``env.unwrapped.task``: it exists to exercise the plumbing, not to be fair.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

ScriptedPolicy = Callable[[Any, str, dict[str, Any]], str]


def oracle(env: Any, agent: str, obs: dict[str, Any]) -> str:
    """Role-flavoured text that ends with the correct answer (math) or the reference program
    (code)."""
    task = env.unwrapped.task
    if task.kind == "math":
        return (
            f"As {obs['role']}, I worked through the problem step by step.\nThe answer is "
            f"\\boxed{{{task.answer}}}."
        )
    solution = (
        task.metadata.get("canonical_solution") or task.metadata.get("reference_solution") or "pass"
    )
    return f"As {obs['role']}, here is the program:\n```python\n{solution}\n```"


def echo(env: Any, agent: str, obs: dict[str, Any]) -> str:
    """Repeat the last visible predecessor (or say there is nothing to build on)."""
    preds = obs["predecessors"]
    return preds[-1]["action"] if preds else f"I am {agent}; I have no predecessor to build on."


def make_random(seed: int = 0) -> ScriptedPolicy:
    """Seeded random text with a random boxed digit (right about a tenth of the time on 0-9
    answers)."""
    rng = random.Random(seed)

    def policy(env: Any, agent: str, obs: dict[str, Any]) -> str:
        return f"guess from {agent}: \\boxed{{{rng.randint(0, 9)}}}"

    return policy


def human(env: Any, agent: str, obs: dict[str, Any]) -> str:
    """Read a response from the terminal: lines until a line with a single '.' (or end of input)."""
    print(f"\n--- {agent} ({obs['role']}), round {obs['round'] + 1} ---\n{obs['prompt']}\n")
    print("Type the response; end with a line containing only '.'")
    lines: list[str] = []
    while True:
        try:
            line = input()
        except EOFError:
            break
        if line.strip() == ".":
            break
        lines.append(line)
    return "\n".join(lines)


POLICIES: dict[str, Callable[[], ScriptedPolicy]] = {
    "oracle": lambda: oracle,
    "echo": lambda: echo,
    "random": lambda: make_random(0),
    "human": lambda: human,
}


def get_policy(name: str) -> ScriptedPolicy:
    try:
        return POLICIES[name]()
    except KeyError:
        raise KeyError(f"Unknown policy {name!r}; choose from {sorted(POLICIES)}") from None


def play_episode(
    env: Any, policy: ScriptedPolicy, *, seed: int | None = None, options: dict | None = None
) -> Any:
    """Play one episode with a scripted policy and return its :class:`~marft_envs.Episode`."""
    env.reset(seed=seed, options=options)
    for agent in env.agent_iter():
        obs, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else policy(env, agent, obs))
    return env.unwrapped.episode()


def resolve_others(
    agents: Sequence[str], others: Any, *, names: Sequence[str] | None = None
) -> dict[str, ScriptedPolicy]:
    """One scripted policy per agent of ``agents`` from ``others`` (a name, a callable or a
    mapping).

    ``names`` restricts which policy names are allowed (a server refuses ``human``). A mapping
    must cover every agent of ``agents`` and nothing else.
    """
    allowed = sorted(names if names is not None else POLICIES)

    def one(agent: str, p: Any) -> ScriptedPolicy:
        if callable(p):
            return p
        if isinstance(p, str) and p in allowed:
            return get_policy(p)
        raise ValueError(f"policy for {agent!r} must be a callable or one of {allowed}, got {p!r}")

    if isinstance(others, Mapping):
        missing, extra = sorted(set(agents) - set(others)), sorted(set(others) - set(agents))
        if missing or extra:
            raise ValueError(
                f"others must name a policy for exactly {list(agents)}; "
                f"missing {missing}, unexpected {extra}"
            )
        return {a: one(a, others[a]) for a in agents}
    if agents and others is None:
        raise ValueError(
            f"agents {list(agents)} need a policy: pass others= (a callable or one of {allowed})"
        )
    return {a: one(a, others) for a in agents}


def episode_over(env: Any) -> bool:
    """True once the episode has ended (the agent to act is terminated or truncated)."""
    agent = env.agent_selection
    return not env.agents or env.terminations[agent] or env.truncations[agent]


def advance(
    env: Any, policies: Mapping[str, ScriptedPolicy], rewards: dict[str, float]
) -> list[tuple[str, str]]:
    """Let ``policies`` play their agents until another agent is to act or the episode ends.

    Each step's rewards are added to ``rewards`` (agent -> sum); returns the (agent, action) pairs
    played, in order.
    """
    played: list[tuple[str, str]] = []
    while not episode_over(env) and env.agent_selection in policies:
        agent = env.agent_selection
        action = policies[agent](env, agent, env.observe(agent))
        env.step(action)
        played.append((agent, action))
        for a, r in env.rewards.items():
            rewards[a] = rewards.get(a, 0.0) + r
    return played
