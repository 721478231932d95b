"""Placing generation apart from training: a generator in its own Ray actor (its own GPU group).

Colocated (the default) means the generator lives in the trainer's process and shares its GPU:
:class:`~baselines.core.generation.HFGenerator` uses the training model itself, and
:class:`~baselines.distributed.vllm_generator.VLLMGenerator` takes a ``gpu_memory_utilization``
share of the same GPU. Separate means a :class:`RemoteGenerator`: the engine is built inside a
Ray actor that reserves ``num_gpus`` GPUs (optionally in a placement group bundle), the trainer
calls it like a local generator, and after each update only the adapter tensors travel, through
Ray's object store, to the actor (:meth:`RemoteGenerator.sync_from`).

Every call waits at most ``timeout_s``; a dead or silent generator actor raises
:class:`GeneratorError` rather than hanging the run (the rollout fails before any update).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from baselines.core.generation import Generation, Messages, SamplingSpec

from .ray_group import import_ray


class GeneratorError(RuntimeError):
    """The remote generator died or did not answer in time."""


class _GeneratorHost:
    """Actor body: builds the generator where the actor runs (on its GPUs) and serves it."""

    def __init__(self, factory: Callable[[], Any]):
        self.generator = factory()

    def ready(self) -> bool:
        return True

    def generate(self, adapter, conversations, sampling) -> Generation:
        return self.generator.generate(adapter, conversations, sampling)

    def sync_adapters(self, states, configs) -> list[str]:
        sync = getattr(self.generator, "sync_adapters", None)
        if sync is None:
            raise TypeError(
                f"{type(self.generator).__name__} has no sync_adapters(): it cannot "
                "receive adapter weights"
            )
        return sorted(sync(states, configs))


class RemoteGenerator:
    """A :class:`~baselines.core.generation.Generator` running in a Ray actor.

    Args:
        factory: picklable zero-argument callable that builds the generator inside the actor
            (e.g. ``functools.partial(VLLMGenerator.from_path, base_path, tokenizer, work_dir,
            ...)``).
        num_gpus: GPUs the actor reserves (fractions colocate with other actors on one GPU).
        timeout_s: deadline of every call (building the engine included).
        actor_options: more ``ray.remote`` options, e.g. ``scheduling_strategy=
            PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)``.
    """

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        num_gpus: float = 1,
        timeout_s: float = 600.0,
        actor_options: Mapping[str, Any] | None = None,
    ):
        self._ray = ray = import_ray()
        if not ray.is_initialized():
            from .ray_group import source_runtime_env

            ray.init(log_to_driver=False, runtime_env=source_runtime_env())
        self.timeout_s = timeout_s
        options = {"num_gpus": num_gpus, "num_cpus": 1, "max_restarts": 0, **(actor_options or {})}
        self._actor = ray.remote(_GeneratorHost).options(**options).remote(factory)
        self._get(self._actor.ready.remote(), "start")

    def generate(
        self, adapter: str | None, conversations: Sequence[Messages], sampling: SamplingSpec
    ) -> Generation:
        return self._get(
            self._actor.generate.remote(adapter, list(conversations), sampling), "generate"
        )

    def sync_adapters(self, states, configs) -> list[str]:
        """Ship adapter tensors (CPU copies, through the object store) and serve them."""
        return self._get(
            self._actor.sync_adapters.remote(dict(states), dict(configs)), "sync_adapters"
        )

    def sync_from(self, model, names: Sequence[str]) -> list[str]:
        """Sync the current weights of ``model``'s adapters ``names`` (adapter tensors only)."""
        from .vllm_generator import lora_config_dict

        return self.sync_adapters(
            {n: model.adapter_state(n) for n in names},
            {n: lora_config_dict(model, n) for n in names},
        )

    def close(self) -> None:
        self._ray.kill(self._actor, no_restart=True)

    def _get(self, ref, what: str):
        from ray.exceptions import GetTimeoutError, RayActorError

        try:
            return self._ray.get(ref, timeout=self.timeout_s)
        except GetTimeoutError:
            self.close()
            raise GeneratorError(
                f"the remote generator did not finish {what} within "
                f"{self.timeout_s:.0f} s; it was stopped (raise timeout_s for a "
                "slow engine start or very long generations)"
            ) from None
        except RayActorError as exc:
            raise GeneratorError(
                f"the remote generator's actor died during {what} "
                f"({type(exc).__name__}); see `ray logs`"
            ) from exc


def remote_vllm(
    model,
    work_dir: str | Path,
    adapters: Sequence[str],
    *,
    num_gpus: float = 1,
    base_path: str | Path | None = None,
    max_prompt_tokens: int | None = None,
    timeout_s: float = 900.0,
    actor_options: Mapping[str, Any] | None = None,
    **engine_kwargs: Any,
) -> RemoteGenerator:
    """A vLLM engine on its own GPUs for ``model``'s ``adapters``, synced once.

    ``base_path`` must be readable where the actor runs (a Hub id, or a shared folder); by default
    the base is exported to ``work_dir/base``, which is fine on one machine or a shared disk.
    """
    from functools import partial

    from .vllm_generator import VLLMGenerator, export_base, stop_ids_of

    if base_path is None:
        base_path = export_base(model, Path(work_dir) / "base")
    factory = partial(
        VLLMGenerator.from_path,
        str(base_path),
        model.tokenizer,
        str(work_dir),
        num_adapters=len(adapters),
        lora_rank=max(int(model.peft.peft_config[n].r) for n in adapters),
        stop_ids=stop_ids_of(model),
        max_prompt_tokens=max_prompt_tokens,
        gpu_memory_utilization=engine_kwargs.pop("gpu_memory_utilization", 0.9),
        **engine_kwargs,
    )
    generator = RemoteGenerator(
        factory, num_gpus=num_gpus, timeout_s=timeout_s, actor_options=actor_options
    )
    generator.sync_from(model, adapters)
    return generator
