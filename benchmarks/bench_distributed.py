"""Rollout throughput (episodes per second) in-process vs on Ray environment workers.

    python benchmarks/bench_distributed.py [--workers 2] [--num-envs 8] [--math-episodes 480]
                                           [--code-episodes 48]

A scripted policy plays ``math-3agent`` (answers verified by the math checker) and ``code-3agent``
(a program that defines the asked-for function, run against the task's tests in the sandbox),
so the figures measure environment stepping, verification and sandbox execution, not a model.
The anchor is the in-process group (one shard, what ``VectorFlexEnv`` does) measured in the
same run; the Ray group splits the same environments over ``--workers`` actors.
"""

from __future__ import annotations

import argparse
import os
import re
import time

from baselines.distributed import make_worker_group


def math_policy(agent, observations):
    return [f"{agent}: the answer is \\boxed{{{len(o['problem']) % 10}}}." for o in observations]


def code_policy(agent, observations):
    out = []
    for o in observations:
        m = re.search(r"function `(\w+)`", o["problem"])
        name = m.group(1) if m else "solve"
        out.append(f"```python\ndef {name}(*args, **kwargs):\n    return 0\n```")
    return out


def episodes_per_second(group, policy, episodes: int, seed: int = 0) -> float:
    group.reset(seed=seed + 10_000)
    group.run(policy, group.num_envs)  # warm-up: imports, every worker's sandbox pool, caches
    group.reset(seed=seed)
    start = time.perf_counter()
    group.run(policy, episodes)
    return episodes / (time.perf_counter() - start)


def compare(env_id: str, policy, episodes: int, num_envs: int, workers: int) -> None:
    results = {}
    for kind, n in (("inprocess", 1), ("ray", workers)):
        with make_worker_group(kind, env_id, num_envs, num_workers=n, seed=0) as group:
            results[kind] = episodes_per_second(group, policy, episodes)
    base, ray = results["inprocess"], results["ray"]
    print(f"{env_id}: {episodes} episodes, {num_envs} environments, scripted policy")
    print(f"  in-process (1 worker, anchor): {base:8.2f} episodes/s")
    print(f"  Ray ({workers} env workers):        {ray:8.2f} episodes/s   ratio {ray / base:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--math-episodes", type=int, default=480)
    p.add_argument("--code-episodes", type=int, default=48)
    args = p.parse_args()

    import ray

    from baselines.distributed.ray_group import source_runtime_env

    ray.init(
        num_cpus=os.cpu_count(),
        object_store_memory=200 * 1024**2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env=source_runtime_env(),
    )
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    try:
        compare("math-3agent", math_policy, args.math_episodes, args.num_envs, args.workers)
        try:
            import marft_envs

            env = marft_envs.make("code-3agent")
            env.close()
        except (ImportError, ModuleNotFoundError, AttributeError) as exc:
            print(f"code-3agent: skipped, the code environment is not available yet ({exc})")
        else:
            compare("code-3agent", code_policy, args.code_episodes, args.num_envs, args.workers)
    finally:
        ray.shutdown()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
