"""Environment shards in Ray actors (optional extra ``ray``).

Each shard of the group is one actor holding an :class:`~baselines.distributed.workers.EnvShard`;
a batch's ``step`` goes to every shard that has environments in it at once, so verification and
sandbox executions of different shards run in parallel, on this machine's cores or on other
machines of the cluster (``ray start --head`` here, ``ray start --address=HEAD:6379`` there).

Fault semantics (docs/distributed.md): every ``ray.get`` has a deadline. A shard whose actor
died, or that did not answer within ``call_timeout_s`` (it is killed), is rebuilt on a fresh
actor by replaying, from the driver's log, its reset and every step and restore since; the call
is then retried (a branch move of a tree rollout needs no replay: it restores its own
snapshot). Environments are deterministic in their seed and the actions played, so the rollout
continues exactly as if nothing happened, and the other shards' results of that call are kept.
After ``max_restarts`` replacements (per group), or if a replay does not reproduce the lost
state, the call raises :class:`~baselines.distributed.workers.WorkerError`: no partial batch is
ever returned to the loop.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from .workers import EnvFn, EnvShard, WorkerError, WorkerGroup, apply_step_views, touched


def import_ray():
    """``import ray`` with an install hint (the extra is optional)."""
    try:
        import ray
    except ImportError:
        raise ImportError("the Ray worker group needs Ray: pip install 'marft-envs[ray]'") from None
    return ray


def source_runtime_env() -> dict[str, Any]:
    """A runtime env that lets workers import this project from a source checkout.

    An installed package needs nothing; a checkout run with ``PYTHONPATH=.`` or pytest's
    ``pythonpath`` would otherwise be invisible to worker processes on this machine.
    """
    root = str(Path(__file__).resolve().parents[2])
    if not (Path(root) / "pyproject.toml").is_file():
        return {}
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {"env_vars": {"PYTHONPATH": path}}


class NotEnoughCPUs(ValueError):
    """The Ray cluster has fewer free CPUs than the group's actors reserve (they would never
    start)."""


def check_cpus(ray: Any, num_workers: int, options: dict[str, Any], wait_s: float = 10.0) -> None:
    """Raise :class:`NotEnoughCPUs` when ``num_workers`` actors reserving ``options["num_cpus"]``
    each cannot all be placed now: Ray would queue them forever, and the group would wait its
    start deadline in silence. Skipped for actors placed in a placement group (it reserved them)."""
    strategy = options.get("scheduling_strategy")
    if options.get("placement_group") is not None or not (
        strategy is None or isinstance(strategy, str)
    ):
        return
    per_actor = float(options.get("num_cpus", 1))
    needed = per_actor * num_workers
    # Ray frees a closed group's CPUs asynchronously: give them a few seconds to come back
    deadline = time.monotonic() + wait_s
    while (free := float(ray.available_resources().get("CPU", 0.0))) < needed:
        if time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    if needed > free:
        total = float(ray.cluster_resources().get("CPU", 0.0))
        raise NotEnoughCPUs(
            f"{num_workers} Ray env workers x num_cpus={per_actor:g} need {needed:g} CPUs, but the "
            f"Ray cluster has {free:g} free (of {total:g}); train.workers=ray runs a training and "
            "an evaluation group, 2 x train.env_workers actors in all. Use fewer env workers, "
            "fractional CPUs (ray_options={'num_cpus': 0.5}), or a bigger cluster"
        )


class RayWorkerGroup(WorkerGroup):
    """Environments split over ``num_workers`` Ray actors, presented as one vector environment.

    Args:
        env_fn: picklable factory of one environment (see
        :func:`~baselines.distributed.workers.env_factory`).
        num_envs: environments in the group; ``num_workers`` contiguous shards of them.
        seed: default reset seed (global environment ``i`` gets ``seed + i``).
        call_timeout_s: deadline of one call to one shard (a reset, a batch, a step); a shard
            that misses it is treated as hung, killed and rebuilt.
        start_timeout_s: deadline for a new actor to build its environments.
        max_restarts: shard replacements allowed over the group's life before giving up.
        num_cpus: CPUs reserved per actor (Ray schedules actors by it).
        actor_options: extra ``ray.remote`` options (``resources``, ``scheduling_strategy``,
            ``runtime_env``, ...); the default strategy spreads actors over the cluster's nodes.
        address: Ray address to join when Ray is not initialised yet (``None``: Ray's own
            discovery: ``RAY_ADDRESS``, a cluster started by ``ray start`` on this machine, or a
            new local one).
    """

    def __init__(
        self,
        env_fn: EnvFn,
        num_envs: int,
        num_workers: int = 2,
        seed: int | None = None,
        *,
        call_timeout_s: float = 300.0,
        start_timeout_s: float = 120.0,
        max_restarts: int = 3,
        num_cpus: float = 1,
        actor_options: dict[str, Any] | None = None,
        address: str | None = None,
    ):
        super().__init__(env_fn, num_envs, num_workers, seed)
        if call_timeout_s <= 0 or start_timeout_s <= 0:
            raise ValueError("call_timeout_s and start_timeout_s must be > 0")
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
        self._ray = ray = import_ray()
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False, runtime_env=source_runtime_env())
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_restarts = max_restarts
        self.restarts = 0
        options = {
            "num_cpus": num_cpus,
            "max_restarts": 0,
            "scheduling_strategy": "SPREAD",
            **(actor_options or {}),
        }
        check_cpus(ray, self.num_workers, options)
        self._actor_cls = ray.remote(EnvShard).options(**options)
        self._actors: list[Any] = [None] * self.num_workers
        agents = self._call(dict.fromkeys(range(self.num_workers), ("ready", ())), spawn=True)
        self.possible_agents = agents[0]

    # -- calls with deadlines and recovery ---------------------------------------------------

    def _call(self, calls: dict[int, tuple[str, tuple]], spawn: bool = False) -> dict[int, Any]:
        if spawn:
            for s in calls:
                self._actors[s] = self._spawn(s)
        results: dict[int, Any] = {}
        pending = dict(calls)
        while pending:
            refs = {
                s: getattr(self._actors[s], method).remote(*args)
                for s, (method, args) in pending.items()
            }
            timeout = self.start_timeout_s if spawn else self.call_timeout_s
            done, failed = self._gather(refs, timeout)
            results.update(done)
            for s, why in failed.items():
                self._recover(s, why)
            pending = {s: calls[s] for s in failed}
        return results

    def _gather(
        self, refs: dict[int, Any], timeout: float
    ) -> tuple[dict[int, Any], dict[int, str]]:
        """Results of the shards that answered in time; a reason for each one that did not."""
        ray = self._ray
        from ray.exceptions import GetTimeoutError, RayActorError, WorkerCrashedError

        shard_of = {ref: s for s, ref in refs.items()}
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
        done: dict[int, Any] = {}
        failed: dict[int, str] = {}
        for ref in ready:
            s = shard_of[ref]
            try:
                done[s] = ray.get(ref, timeout=timeout)
            except (RayActorError, WorkerCrashedError) as exc:
                failed[s] = f"its actor died ({type(exc).__name__})"
            except GetTimeoutError:
                failed[s] = f"it did not answer within {timeout:.0f} s"
            # any other exception is the environment's own error: it propagates, unretried
        for s in refs:
            if s not in done and s not in failed:
                failed[s] = f"it did not answer within {timeout:.0f} s"
        return done, failed

    def _spawn(self, s: int):
        offset, size = self.shards[s]
        return self._actor_cls.remote(self.env_fn, size, offset)

    def _recover(self, s: int, why: str) -> None:
        """Replace shard ``s`` with a fresh actor in the state the lost one was in."""
        ray = self._ray
        offset, size = self.shards[s]
        where = f"environment worker {s} (environments {offset}..{offset + size - 1})"
        self.restarts += 1
        if self.restarts > self.max_restarts:
            self._kill(s)
            raise WorkerError(
                f"{where} failed: {why}. {self.restarts - 1} replacement(s) already used "
                f"(max_restarts={self.max_restarts}), so the rollout is abandoned and no partial "
                "batch was returned. Check the worker's log (`ray logs`, or "
                "/tmp/ray/session_latest/logs) or raise max_restarts / call_timeout_s."
            )
        self._kill(s)
        self._actors[s] = actor = self._spawn(s)
        log = self._logs[s]
        refs = [actor.ready.remote()]
        if log.views is not None:  # the shard had been reset: rebuild its state
            refs.append(actor.reset.remote(log.seed, log.options, log.plan))
            refs += [getattr(actor, method).remote(*args) for method, args in log.ops]
        try:
            ray.get(refs[0], timeout=self.start_timeout_s)
            replayed = [ray.get(ref, timeout=self.call_timeout_s) for ref in refs[1:]]
        except Exception as exc:  # noqa: BLE001 - any failure of the replacement is a failure
            # of this recovery; recurse, which counts another restart or gives up
            return self._recover(
                s, f"{why}; then its replacement failed ({type(exc).__name__}: {exc})"
            )
        if replayed:
            views = dict(replayed[0])
            for (method, args), result in zip(log.ops, replayed[1:], strict=True):
                apply_step_views(views, touched(method, args), result.views)
            if views != log.views:
                old = log.views or {}
                differ = sorted(i for i in old if views.get(i) != old[i])
                raise WorkerError(
                    f"{where} was lost ({why}) and its replay does not reproduce what its "
                    f"environments showed (local environments {differ} differ): the environment "
                    "is not deterministic in its seed and actions, so the rollout is abandoned."
                )

    def _kill(self, s: int) -> None:
        if self._actors[s] is not None:
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(self._actors[s], no_restart=True)
            self._actors[s] = None

    # -- the rest ----------------------------------------------------------------------------

    def worker_pids(self) -> list[int]:
        """Process id of each shard's actor (for diagnostics and fault tests)."""
        pids = self._call(dict.fromkeys(range(self.num_workers), ("pid", ())))
        return [pids[s] for s in range(self.num_workers)]

    def close(self) -> None:
        """Close every shard's environments (bounded wait), then end the actors."""
        ray = self._ray
        refs = [a.close.remote() for a in self._actors if a is not None]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=min(10.0, self.call_timeout_s))
        for s in range(self.num_workers):
            self._kill(s)
