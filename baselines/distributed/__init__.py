"""Scaling the baselines past one process: worker groups (in-process or Ray) and vLLM generation.

    from baselines.distributed import make_worker_group
    venv = make_worker_group("ray", "math-3agent", num_envs=16, num_workers=4, seed=0)
    rollout = collect(venv, generator, adapter_for, 32, sampling, seed=0)   # same loop as
    in-process

Ray and vLLM are optional extras (``ray``, ``vllm``) and are imported only when used.
See docs/distributed.md.
"""

from .groups import WORKER_KINDS, make_worker_group
from .workers import (
    EnvShard,
    InProcessWorkerGroup,
    WorkerError,
    WorkerGroup,
    env_factory,
    split_evenly,
)

__all__ = [
    "WORKER_KINDS",
    "EnvShard",
    "InProcessWorkerGroup",
    "WorkerError",
    "WorkerGroup",
    "env_factory",
    "make_worker_group",
    "split_evenly",
]
