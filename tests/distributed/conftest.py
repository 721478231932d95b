"""One local Ray cluster for the whole test session (a Ray start costs seconds)."""

from __future__ import annotations

import sys

import pytest

from baselines.distributed.ray_group import source_runtime_env


@pytest.fixture(scope="session")
def ray_cluster():
    """``ray.init(num_cpus=2)`` with a small object store and no dashboard; shut down at the end."""
    ray = pytest.importorskip("ray", reason="the Ray tests need the 'ray' extra")
    # test modules are not importable in worker processes: ship their functions by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__.rpartition(".")[0]])
    ray.init(
        num_cpus=2,
        object_store_memory=100 * 1024**2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env=source_runtime_env(),
    )
    yield ray
    ray.shutdown()


def scripted_policy(agent, observations):
    """Deterministic, observation-dependent answers (some right, most wrong on arith tasks)."""
    return [
        f"{agent} round {o['round']}: \\boxed{{{len(o['problem']) % 10}}}" for o in observations
    ]


def signature(episodes):
    """Everything that identifies a played episode."""
    return [
        (
            e.task_id,
            e.seed,
            e.score,
            e.correct,
            e.returns,
            [(t.agent, t.action, t.state, t.reward) for t in e.turns],
        )
        for e in episodes
    ]
