"""bench_credit's additions for the literature games: the dependency variants, the power figure,
the best responses it checks, the vocabulary of the tiny model."""

import argparse
import math
import statistics

import pytest

from baselines.relay import vocabulary
from benchmarks.bench_credit import (
    T_95,
    RunResult,
    RunSpec,
    best_responses,
    detectable_difference,
    matrix_lines,
    plan_runs,
    power_lines,
    t_quantile,
)
from marft_envs.games import CLIMBING, PENALTY


def _args(**kw):
    base = dict(
        envs=["climbing-2agent"],
        methods=["marft", "ippo"],
        single="none",
        seeds=[0, 1],
        iterations=3,
        ablation="",
        ablation_methods=[],
        group_size=4,
        dependency=["chain", "parallel"],
    )
    return argparse.Namespace(**{**base, **kw})


def test_every_method_runs_once_per_dependency_and_seed():
    runs = plan_runs(_args())
    assert len(runs) == 2 * 2 * 2
    assert {(r.label, r.dependency) for r in runs} == {
        ("marft chain", "chain"),
        ("ippo chain", "chain"),
        ("marft parallel", "parallel"),
        ("ippo parallel", "parallel"),
    }
    plain = plan_runs(_args(dependency=[]))
    assert {r.label for r in plain} == {"marft", "ippo"} and {r.dependency for r in plain} == {""}


def test_t_quantiles_match_the_table():
    for df in (5, 9, 18, 29):
        assert t_quantile(0.975, df) == pytest.approx(T_95[df - 1], abs=0.01)


def test_the_detectable_difference_is_the_t_interval_of_a_difference():
    a, b = [0.5, 1.0, 0.5, 1.0], [1.0, 1.0, 0.5, 0.5]
    d, n, sd = detectable_difference([a, b])
    assert n == 4 and sd == pytest.approx(statistics.stdev(a))
    assert d == pytest.approx(T_95[5] * sd * math.sqrt(2 / 4), rel=0.01)  # df = 2n - 2 = 6
    d80, _, _ = detectable_difference([a, b], power=0.8)
    assert d80 > d
    assert math.isnan(detectable_difference([[1.0]])[0])  # one seed: no power figure


def _result(env_id, label, final, joint, replies=None):
    spec = RunSpec(label, "marft", env_id, 0, 1)
    return RunResult(spec, [final], [16.0], [32.0], final, 1.0, [joint], replies or {})


def test_power_and_joint_action_lines():
    rows = [
        _result("penalty-2agent", "marft chain", 1.0, "AA", {"A": "A", "B": "B", "C": "C"}),
        _result("penalty-2agent", "marft chain", 0.6, "BB", {"A": "B", "B": "B", "C": "B"}),
    ]
    power = power_lines(rows)
    assert power[1].split()[:2] == ["penalty-2agent", "2"]
    lines = matrix_lines(rows)
    assert "AA:1 BB:1" in lines[1] and "1/2 seeds" in lines[1]


def test_best_responses_of_the_games():
    assert best_responses(CLIMBING) == {"A": {"A"}, "B": {"B"}, "C": {"C"}}
    assert best_responses(PENALTY) == {"A": {"A"}, "B": {"B"}, "C": {"C"}}


def test_the_tiny_model_can_emit_every_option():
    assert vocabulary("climbing-2agent") == "ABC" and vocabulary("repair-2agent") == "ABC"
    assert vocabulary("credit-chain-2agent") == "AB"
