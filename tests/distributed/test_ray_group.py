"""Environment shards in Ray actors: same episodes as in-process, and faults never hang or leak."""

from __future__ import annotations

import os
import signal
import time

import pytest

from baselines.distributed import WorkerError, make_worker_group

from .conftest import scripted_policy, signature
from .test_workers import ENV, OVERRIDES, reference

FAST_FAIL = {"call_timeout_s": 3.0, "start_timeout_s": 60.0}


def ray_group(ray_cluster, max_restarts: int, seed: int = 5):
    return make_worker_group(
        "ray",
        ENV,
        4,
        num_workers=2,
        seed=seed,
        ray_options={**FAST_FAIL, "max_restarts": max_restarts},
        **OVERRIDES,
    )


def killing_policy(pid: int, sig: int, at_call: int):
    """The scripted policy, which sends ``sig`` to ``pid`` when it is asked for batch ``at_call``."""
    calls = 0

    def policy(agent, observations):
        nonlocal calls
        calls += 1
        if calls == at_call:
            os.kill(pid, sig)
        return scripted_policy(agent, observations)

    return policy


def test_ray_group_plays_the_in_process_episodes_even_when_a_worker_is_killed(ray_cluster):
    with ray_group(ray_cluster, max_restarts=1) as group:
        pids = group.worker_pids()
        assert len(set(pids)) == 2 and os.getpid() not in pids  # two real worker processes
        assert signature(group.run(scripted_policy, 10)) == reference(4, 5, 10)

        group.reset(seed=99)  # a second rollout on the same actors; worker 1 dies in it
        policy = killing_policy(pids[1], signal.SIGKILL, at_call=4)
        assert signature(group.run(policy, 10)) == reference(4, 99, 10)
        assert group.restarts == 1
        assert group.worker_pids()[1] != pids[1]


def test_hung_worker_fails_fast_with_a_clear_error_and_no_batch(ray_cluster):
    with ray_group(ray_cluster, max_restarts=0) as group:
        group.reset()
        pid = group.worker_pids()[0]
        policy = killing_policy(pid, signal.SIGSTOP, at_call=3)  # alive but never answers
        episodes = []
        start = time.monotonic()
        try:
            with pytest.raises(
                WorkerError,
                match=r"environment worker 0 \(environments 0\.\.1\)"
                r".*did not answer within 3 s.*no partial batch",
            ):
                while True:  # the loop of collect(): nothing is kept from a failed step
                    batch = group.next_batch()
                    episodes += group.step(batch, policy(batch.agent, batch.observations))
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass  # the group killed it
        assert time.monotonic() - start < 3 * FAST_FAIL["call_timeout_s"]
        assert len(episodes) < 10


def test_ray_group_plays_a_plan_even_when_a_worker_is_killed(ray_cluster):
    from .test_workers import PLAN, planned

    with ray_group(ray_cluster, max_restarts=1) as group:
        pids = group.worker_pids()
        group.reset(plan=PLAN)
        episodes = group.run(killing_policy(pids[0], signal.SIGKILL, at_call=6))
        assert group.restarts == 1 and group.done
        assert sorted(signature(episodes)) == sorted(sig for sig, _ in planned(4, PLAN))


def test_more_actors_than_free_cpus_fail_at_once_naming_both(ray_cluster):
    # the session cluster has 2 CPUs: 4 actors of 1 CPU would queue forever
    with pytest.raises(ValueError, match=r"need 4 CPUs, but the Ray cluster has 2 free \(of 2\)"):
        make_worker_group("ray", ENV, 4, num_workers=4, seed=0,
                          ray_options={**FAST_FAIL, "start_timeout_s": 20.0}, **OVERRIDES)
    # fractional CPUs fit: 4 x 0.5
    with make_worker_group("ray", ENV, 4, num_workers=4, seed=0,
                           ray_options={**FAST_FAIL, "num_cpus": 0.5}, **OVERRIDES) as group:
        assert group.num_workers == 4
