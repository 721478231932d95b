"""Dr. MAS (baselines/dr_mas.py): per-agent group-relative advantages, against values worked out
by hand, and the method run like the others."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from baselines.core.estimators import get_estimator, group_estimator
from baselines.dr_mas import dr_mas_advantages
from tests.baselines.test_estimators import ALGO, joint, values


def test_the_registry_names_the_estimator_in_its_file():
    from baselines.core.methods import get_method

    assert get_estimator(get_method("dr_mas").estimator) is dr_mas_advantages


def test_dr_mas_equals_magrpo_under_the_team_reward_with_one_turn_each():
    scored = joint(
        [[("a", 1.0), ("b", 1.0)], [("a", 0.0), ("b", 0.0)], [("a", 1.0), ("b", 1.0)]], [0, 0, 0]
    )
    assert values(dr_mas_advantages(scored, ALGO).advantages) == pytest.approx(
        values(group_estimator(scored, ALGO).advantages)
    )


def test_dr_mas_normalises_each_agent_on_its_own_rewards():
    # reward to the last agent only: agent a always gets 0 (no signal: advantage 0), b gets
    # 1 then 0 (mean 0.5, sample std sqrt(0.5): +-0.7071); MAGRPO's team score would give a the
    # same +-0.7071 as b
    scored = joint([[("a", 0.0), ("b", 1.0)], [("a", 0.0), ("b", 0.0)]], [0, 0])
    adv = values(dr_mas_advantages(scored, SimpleNamespace(scale_by_std=True)).advantages)
    s = 1 / math.sqrt(2)
    assert adv == pytest.approx([0.0, s, 0.0, -s], abs=1e-5)


def test_dr_mas_weighs_an_agents_statistics_by_its_steps():
    # episode 0: agent a acts in two rounds (rewards 1, 0: return 1), episode 1: once (0):
    # a's steps carry R = [1, 1, 0]: mean 2/3, std sqrt(1/3) -> [0.577, 0.577, -1.155],
    # not the per-episode [+0.707, -0.707]
    scored = joint([[("a", 1.0), ("a", 0.0)], [("a", 0.0)]], [0, 0])
    adv = values(dr_mas_advantages(scored, ALGO).advantages)
    sd = math.sqrt(1 / 3)
    assert adv == pytest.approx([(1 / 3) / sd, (1 / 3) / sd, -(2 / 3) / sd], abs=1e-5)


def test_dr_mas_groups_of_one_step_get_zero_and_are_counted():
    scored = joint([[("a", 1.0), ("b", 1.0)], [("a", 0.0)]], [0, 0])  # b acted once: alone
    est = dr_mas_advantages(scored, SimpleNamespace(scale_by_std=False))
    assert values(est.advantages) == pytest.approx([0.5, 0.0, -0.5])
    assert est.metrics["group/singletons"] == 1.0
    assert all(v.shape == (2,) for v in est.advantages.values())  # over each response's tokens
    assert all(torch.isfinite(v).all() for v in est.advantages.values())


def test_dr_mas_runs_from_its_module_like_the_other_methods(tmp_path, capsys):
    from baselines import dr_mas
    from baselines.relay import FAST_CONFIG, relay_model

    model = relay_model(tmp_path / "model", seed=0)
    argv = [
        "--env",
        "credit-chain-2agent",
        "--model",
        str(model),
        "--out",
        str(tmp_path / "run"),
        "--no-progress",
        *FAST_CONFIG,
        "train.iterations=1",
        "train.log=[jsonl]",
        "env.overrides.reward_to=last",
    ]
    assert dr_mas.main(argv) == 0
    import json

    rows = [json.loads(line) for line in (tmp_path / "run/metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "train/score" in r)
    assert step["group/groups"] == 4.0  # 16 episodes / K=4 problems
    # reward to the last agent: the first agent's rewards all tie at 0, so its advantages are 0
    assert step["agent/sender_0/adv_std"] == 0.0 and step["agent/receiver_1/adv_std"] > 0.0


def test_the_tutorial_shows_the_code_of_the_file_and_the_registry():
    """docs/adding_a_method.md's worked example is Dr. MAS as it is: its estimator block is the
    file's code and its registry block is the registry's entry."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs/adding_a_method.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", page, flags=re.S)
    estimator = next(code for tag, code in blocks if "def dr_mas_advantages" in code)
    entry = next(
        code
        for tag, code in blocks
        if 'register_method(\n    MethodSpec(\n        "dr_mas"' in code
    )
    source = (root / "baselines/dr_mas.py").read_text()
    start = estimator.index("def agent_returns")
    assert estimator[start:].strip() in source
    assert entry.strip() in (root / "baselines/core/methods.py").read_text()
