"""Environment overhead: agent-turns per second of a math team with a scripted policy,
verification excluded (a constant-time verifier stands in for the math checker).

    python benchmarks/bench_env.py [--env math-3agent] [--seconds 5]

Target (issue 2): above 20,000 agent-turns per second on one core.
"""

from __future__ import annotations

import argparse
import os
import time

import marft_envs
from marft_envs import Verdict


class ConstantVerifier:
    """Grades instantly, so the figure measures the environment alone."""

    name = "constant"

    def grade(self, response, task):
        return Verdict(False, None, "mismatch", 0.0)

    def feedback(self, response, task, verdict, mode):
        return ""


def aec_turns_per_second(env_id: str, seconds: float) -> float:
    env = marft_envs.make(env_id, verifier=ConstantVerifier())
    turns, start, ep = 0, time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        env.reset(seed=ep)
        ep += 1
        for _agent in env.agent_iter():
            obs, reward, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
            else:
                env.step("Step 1: add.\nThe answer is \\boxed{42}.")
                turns += 1
    return turns / (time.perf_counter() - start)


def vector_turns_per_second(env_id: str, seconds: float, num_envs: int = 16) -> float:
    venv = marft_envs.make_vec(env_id, num_envs=num_envs, seed=0, verifier=ConstantVerifier())
    venv.reset()
    turns, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        b = venv.next_batch()
        venv.step(b, ["The answer is \\boxed{42}."] * len(b))
        turns += len(b)
    return turns / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--env", default="math-3agent")
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the target says
    aec = aec_turns_per_second(args.env, args.seconds)
    vec = vector_turns_per_second(args.env, args.seconds)
    print(f"env overhead on {args.env} (one core, verification excluded)")
    print(f"  AEC loop (agent_iter/last/step): {aec:,.0f} agent-turns/s   target > 20,000  ratio {aec / 20000:.2f}x")
    print(f"  vector env (16 envs, batched):   {vec:,.0f} agent-turns/s   target > 20,000  ratio {vec / 20000:.2f}x")


if __name__ == "__main__":
    main()
