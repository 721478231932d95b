"""``python -m baselines.dr_mas``: Dr. MAS (Feng et al., 2026, arXiv 2602.08847): GRPO over K
joint episodes per problem, with each agent's advantages normalised on that agent's own reward
statistics; one LoRA adapter per agent.

Multi-agent GRPO normalises every agent's samples with one baseline, the group's mean and std
over trajectories. Dr. MAS shows that this baseline drifts from an agent's own reward
distribution when the agents' rewards (or how often each acts) differ, which inflates the
gradient norm, and normalises per agent instead (its Eq. 5): in each problem's group, agent
``k``'s steps ``Y_k`` are centred on ``mean_{Y_k} R`` and scaled by ``std_{Y_k} R``, where a
step's ``R`` is the reward of its agent in its episode. With the team reward and every agent
acting once a round this equals MAGRPO; it differs under ``env.overrides.reward_to`` other than
``team`` and when agents act a different number of times (multi-round episodes that end early).

This file is the whole method: the estimator below and the entry point; its
:class:`~baselines.core.methods.MethodSpec` names ``baselines.dr_mas:dr_mas_advantages``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from .cli import method_main
from .core.algos import group_relative_advantages
from .core.estimators import Estimate, Scored, group_metrics, require_groups


def agent_returns(scored: Scored) -> dict[tuple[int, str], float]:
    """Each agent's reward in each episode: the sum of what its turns received."""
    out: dict[tuple[int, str], float] = {}
    for s in scored.batch.samples:
        out[(s.episode, s.agent)] = out.get((s.episode, s.agent), 0.0) + s.reward
    return out


def dr_mas_advantages(scored: Scored, algo: Any) -> Estimate:
    """Per-agent group-relative advantages: every step of agent ``k`` in problem ``g``'s group
    is one sample of the ``(g, k)`` set; ``(R - mean) / std`` over that set (``algo.scale_by_std``
    off: centred only); a set of one step gets 0."""
    group = require_groups(scored, "dr_mas")
    samples = group.samples
    returns = agent_returns(scored)
    keys = [(group.groups[u], s.agent) for s, u in zip(samples, group.units, strict=True)]
    rewards = torch.tensor([returns[(s.episode, s.agent)] for s in samples], dtype=torch.float32)
    per_step = group_relative_advantages(
        rewards, keys, scale_by_std=algo.scale_by_std, singletons="zero"
    )
    singles = sum(1 for n in Counter(keys).values() if n == 1)
    adv = {
        (s.episode, s.index): per_step[i].expand(len(s.action_ids)).clone()
        for i, s in enumerate(samples)
    }
    return Estimate(adv, metrics=group_metrics(group, singles))


main = method_main("dr_mas")

if __name__ == "__main__":
    raise SystemExit(main())
