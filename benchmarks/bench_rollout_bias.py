"""Rollout bias: the share of short episodes in a training batch vs among started episodes.

    python benchmarks/bench_rollout_bias.py [--envs 32] [--episodes 48] [--rollouts 20]

A scripted team on the relay env (keys A and B, verdict feedback, ``stop_on_correct``) solves
every A task in round 1 and no B task, so with horizon H an A episode lasts 1 round and a B
episode H rounds; tasks are drawn uniformly, so half of the started episodes are short.
"before" is the old rule (the first N episodes to FINISH make the batch; still-running ones
are dropped), kept here only as the comparison; "after" is ``baselines.core.rollout.collect``
(the first N episodes to START, each played to its end). "started" counts every episode an
environment began during the rollout (for "after", also those begun by an auto-reset beyond
the first N, never played). Figures are means over ``--rollouts`` seeds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import marft_envs
from baselines.core.generation import Generation, SamplingSpec
from baselines.core.rollout import collect
from baselines.relay import register_relay

SHORT = "key-A"


def answer(agent: str, user: str) -> str:
    """The sender relays the key; the receiver answers right only when the key is A."""
    if agent == "sender_0":
        return user.split("## Problem\n")[1][0]
    return "A" if "[sender_0]\nA" in user else "wrong"


class ScriptedGenerator:
    """A Generator without a model (the rule above; token ids are placeholders)."""

    def generate(self, adapter, conversations, sampling):
        texts = [answer(adapter, conv[-1]["content"]) for conv in conversations]
        return Generation(texts, [[1]] * len(texts), [[2]] * len(texts), [False] * len(texts))


def first_to_finish(venv, n: int, seed: int) -> tuple[list[bool], list[bool]]:
    """The old rule: play until ``n`` episodes finished; (short flags of the batch, of every
    started episode)."""
    venv.reset(seed=seed)
    started = [env.task.id == SHORT for env in venv.envs]
    batch: list[bool] = []
    while len(batch) < n:
        b = venv.next_batch()
        texts = [answer(b.agent, m[-1]["content"]) for m in b.messages]
        for episode in venv.step(b, texts):
            if len(batch) < n:
                batch.append(episode.task_id == SHORT)
            started.append(venv.envs[episode.env_index].task.id == SHORT)  # its auto-reset
    return batch, started


def start_order(venv, n: int, seed: int) -> tuple[list[bool], list[bool]]:
    """The trainer's rule (``collect``); same return as :func:`first_to_finish`."""
    ro = collect(venv, ScriptedGenerator(), lambda a: a, n, SamplingSpec(1), seed=seed)
    batch = [ep.task_id == SHORT for ep in ro.episodes]
    # every environment's current episode began after its last wanted one (or at reset, beyond
    # the first n) and was never played: started, not collected
    return batch, batch + [env.task.id == SHORT for env in venv.envs]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--envs", type=int, default=32)
    p.add_argument("--episodes", type=int, default=48)
    p.add_argument("--rollouts", type=int, default=20)
    args = p.parse_args()
    env_id = register_relay("relay-AB-2agent", keys="AB")
    print(
        f"relay keys AB, {args.envs} environments, {args.episodes} episodes per batch, "
        f"{args.rollouts} rollouts; short = solved in round 1"
    )
    print(
        f"{'horizon':>7s} | {'before: batch':>13s} {'started':>8s} | {'after: batch':>12s} "
        f"{'started':>8s} | {'bias before':>11s} {'bias after':>10s}"
    )
    for horizon in (1, 2, 3):
        venv = marft_envs.make_vec(
            env_id, num_envs=args.envs, seed=0, horizon=horizon, feedback="verdict"
        )
        figures = []
        for rule in (first_to_finish, start_order):
            batch, started = [], []
            for r in range(args.rollouts):
                b, s = rule(venv, args.episodes, seed=1000 * r)
                batch += b
                started += s
            figures.append((sum(batch) / len(batch), sum(started) / len(started)))
        (bb, bs), (ab, as_) = figures
        print(
            f"{horizon:7d} | {bb:13.3f} {bs:8.3f} | {ab:12.3f} {as_:8.3f} | {bb - bs:+11.3f} "
            f"{ab - as_:+10.3f}"
        )
        venv.close()


if __name__ == "__main__":
    main()
