"""vLLM generation behind the :class:`~baselines.core.generation.Generator` interface (extra
``vllm``).

The base model is loaded once into a vLLM engine with LoRA enabled; every agent's adapter is
served as its own ``LoRARequest`` (multi-LoRA serving: one engine, one base, many adapters).
After each policy update the trainer calls :meth:`VLLMGenerator.sync_adapters` (or
:meth:`~VLLMGenerator.sync_from`): the new adapter tensors, and only those, are written in peft's
format to a fresh folder and loaded in place under the adapter's LoRA id (``load_inplace``). The
base weights never move, so a sync costs megabytes, not the model. The calls match vLLM
0.33.0's API (checked against the table in ``tests/distributed/vllm_api.json``).

Prompts are rendered by the same chat template code as the transformers backend and passed to
vLLM as token ids, and responses are decoded by the same tokenizer, so both backends hand the
trainer the same kind of :class:`~baselines.core.generation.Generation`. Sampling seeds are
drawn per request from the global torch RNG, so a restored RNG state replays a rollout on the
same engine.

``vllm`` is imported only when an engine is built (GPU machines); everything else here is plain
Python and is tested on CPU with a stand-in engine.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from baselines.core.generation import Generation, Messages, SamplingSpec, render_prompts

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vLLM 0.33's MaxLoRARanks


def import_vllm():
    """``import vllm`` with an install hint (the extra is optional and GPU-only)."""
    try:
        import vllm
    except ImportError:
        raise ImportError(
            "the vLLM generation backend needs vLLM and a GPU: pip install 'marft-envs[vllm]' "
            "(or use model.backend=transformers)"
        ) from None
    return vllm


def vllm_lora_rank(r: int) -> int:
    """The smallest ``max_lora_rank`` vLLM accepts that holds adapters of rank ``r``."""
    for rank in VLLM_LORA_RANKS:
        if rank >= r:
            return rank
    raise ValueError(f"LoRA rank {r} exceeds vLLM's largest supported rank {VLLM_LORA_RANKS[-1]}")


def clean_base_state_dict(peft_model) -> dict[str, torch.Tensor]:
    """The base model's own weights, without peft's LoRA wrappers (what vLLM loads as the base).

    peft injects its layers in place: base weights appear as ``...q_proj.base_layer.weight`` next to
    ``lora_A``/``lora_B`` tensors. This drops the LoRA tensors and restores the original names.
    """
    base = peft_model.get_base_model()
    return {
        k.replace(".base_layer.", "."): v
        for k, v in base.state_dict().items()
        if "lora_" not in k and "modules_to_save" not in k
    }


def export_base(model, folder: str | Path) -> Path:
    """Write the base of an :class:`~baselines.core.models.AdapterModel` (weights + tokenizer) for
    vLLM."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    base = model.peft.get_base_model()
    base.save_pretrained(
        folder, state_dict=clean_base_state_dict(model.peft), safe_serialization=True
    )
    model.tokenizer.save_pretrained(folder)
    return folder


def write_adapter(
    folder: str | Path, state: Mapping[str, torch.Tensor], config: Mapping[str, Any]
) -> Path:
    """Write one LoRA adapter in peft's on-disk format (what ``LoRARequest`` loads).

    Refuses anything but LoRA tensors: a sync must never ship base weights.
    """
    from safetensors.torch import save_file

    if not state:
        raise ValueError("empty adapter state: nothing to sync")
    foreign = [k for k in state if "lora_" not in k]
    if foreign:
        raise ValueError(
            f"adapter sync got non-LoRA tensors {foreign[:3]} (of {len(foreign)}): only "
            "adapter weights are synced to the generation engine, never the base model"
        )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in state.items()}
    save_file(tensors, str(folder / ADAPTER_WEIGHTS))
    plain = {
        k: sorted(v) if isinstance(v, (set, frozenset)) else v for k, v in dict(config).items()
    }
    (folder / ADAPTER_CONFIG).write_text(json.dumps(plain, indent=2, default=str))
    return folder


def stop_ids_of(model) -> list[int]:
    """Token ids that end a response: the tokenizer's EOS first, then the model's own EOS ids."""
    eos = model.tokenizer.eos_token_id
    extra = model.peft.get_base_model().generation_config.eos_token_id
    more = extra if isinstance(extra, (list, tuple)) else [extra]
    return [eos] + [i for i in more if i is not None and i != eos]


def lora_config_dict(model, name: str) -> dict[str, Any]:
    """peft's config of adapter ``name`` as a JSON-ready dict."""
    return dict(model.peft.peft_config[name].to_dict())


def action_ids(
    token_ids: Sequence[int], finish_reason: str | None, stop_reason: Any, eos_id: int | None
) -> list[int]:
    """The response ids as the trainer scores them: ending with the stop token when it stopped.

    vLLM's ``token_ids`` may or may not include the token that stopped the sequence (it depends on
    the version and on whether it was EOS or a ``stop_token_ids`` entry); the transformers backend
    always keeps it, because the policy must learn to emit it. This makes both agree.
    """
    out = list(token_ids)
    if finish_reason != "stop":
        return out
    stop = stop_reason if isinstance(stop_reason, int) else eos_id
    if stop is not None and (not out or out[-1] != stop):
        out.append(stop)
    return out


def sampled_logprobs(token_ids: Sequence[int], logprobs: Any) -> list[float]:
    """Each sampled token's log-prob from a ``CompletionOutput.logprobs`` (one ``{token_id:
    Logprob}`` per position; ``None`` when not requested): ``[]`` when absent."""
    if not logprobs:
        return []
    return [float(pos[tok].logprob) for pos, tok in zip(logprobs, token_ids, strict=True)]


class VLLMGenerator:
    """Multi-LoRA generation on one vLLM engine, with adapter-only weight sync.

    Args:
        engine: a ``vllm.LLM`` built with ``enable_lora=True`` (see :meth:`build`).
        tokenizer: the training tokenizer (renders prompts, decodes responses).
        sync_dir: where adapter versions are written (one folder per adapter and version).
        stop_ids: token ids that end a response (EOS first).
        max_prompt_tokens: prompts keep their last tokens beyond this (as the transformers backend).
    """

    def __init__(
        self,
        engine,
        tokenizer,
        sync_dir: str | Path,
        stop_ids: Sequence[int],
        max_prompt_tokens: int | None = None,
    ):
        if not stop_ids:
            raise ValueError("stop_ids must name at least one token (EOS)")
        self.engine = engine
        self.tokenizer = tokenizer
        self.sync_dir = Path(sync_dir)
        self.stop_ids = list(stop_ids)
        self.max_prompt_tokens = max_prompt_tokens
        self.version = 0
        self.requests: dict[str, Any] = {}  # adapter name -> its current LoRARequest
        self._next_id = 1

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        model,
        work_dir: str | Path,
        adapters: Sequence[str] | None = None,
        base_path: str | Path | None = None,
        max_prompt_tokens: int | None = None,
        extra_stop_ids: Sequence[int] = (),
        **engine_kwargs: Any,
    ) -> VLLMGenerator:
        """An engine in this process for an :class:`~baselines.core.models.AdapterModel`, its
        ``adapters`` (default: all; pass the policy adapters) synced once; ``extra_stop_ids``
        end a response as EOS does (``model.stop``, via ``stop_token_ids``).

        ``base_path``: a folder (or Hub id) vLLM can load the base from; by default the base is
        exported to ``work_dir/base`` (cheap for small models; pass the original path for big
        ones). ``engine_kwargs`` go to ``vllm.LLM`` (``gpu_memory_utilization`` to colocate with
        training on one GPU, ``tensor_parallel_size``, ``dtype``, ``max_model_len``, ...).
        """
        adapters = list(adapters if adapters is not None else model.adapters)
        if base_path is None:
            base_path = export_base(model, Path(work_dir) / "base")
        generator = cls.from_path(
            base_path,
            model.tokenizer,
            work_dir,
            num_adapters=len(adapters),
            lora_rank=max(int(model.peft.peft_config[n].r) for n in adapters),
            stop_ids=list(dict.fromkeys([*stop_ids_of(model), *extra_stop_ids])),
            max_prompt_tokens=max_prompt_tokens,
            **engine_kwargs,
        )
        generator.sync_from(model, adapters)
        return generator

    @classmethod
    def from_path(
        cls,
        base_path: str | Path,
        tokenizer,
        work_dir: str | Path,
        num_adapters: int,
        lora_rank: int,
        stop_ids: Sequence[int],
        max_prompt_tokens: int | None = None,
        **engine_kwargs: Any,
    ) -> VLLMGenerator:
        """An engine on a base model folder, with no adapter yet (sync them before generating).

        What a remote generator builds on its own GPUs (see ``baselines.distributed.placement``).
        """
        vllm = import_vllm()
        kwargs = {
            "model": str(base_path),
            "enable_lora": True,
            "max_loras": num_adapters,
            "max_lora_rank": vllm_lora_rank(lora_rank),
            "gpu_memory_utilization": 0.4,  # leaves room for training on the same GPU
            # report log-probs after temperature, as the training forward computes them (and
            # after top-p: with top_p < 1 they are renormalised over the nucleus, the training
            # forward's are not, see docs/distributed.md)
            "logprobs_mode": "processed_logprobs",
            **engine_kwargs,
        }
        return cls(
            vllm.LLM(**kwargs), tokenizer, Path(work_dir) / "adapters", stop_ids, max_prompt_tokens
        )

    # -- the Generator interface ---------------------------------------------------------------

    def generate(
        self, adapter: str | None, conversations: Sequence[Messages], sampling: SamplingSpec
    ) -> Generation:
        """Responses of ``conversations`` under ``adapter`` (``None``: the bare base)."""
        vllm = import_vllm()
        if adapter is not None and adapter not in self.requests:
            raise KeyError(
                f"adapter {adapter!r} was never synced to the engine; "
                f"synced: {sorted(self.requests)}"
            )
        prompts = render_prompts(self.tokenizer, conversations, self.max_prompt_tokens)
        params = [self._sampling_params(vllm, sampling) for _ in prompts]
        outputs = self.engine.generate(
            [{"prompt_token_ids": ids} for ids in prompts],
            params,
            lora_request=self.requests.get(adapter) if adapter is not None else None,
            use_tqdm=False,
        )
        result = Generation([], [], [], [], [])
        for ids, out in zip(prompts, outputs, strict=True):
            completion = out.outputs[0]
            action = action_ids(
                completion.token_ids,
                completion.finish_reason,
                getattr(completion, "stop_reason", None),
                self.stop_ids[0],
            )
            result.prompt_ids.append(list(ids))
            result.action_ids.append(action)
            result.texts.append(self.tokenizer.decode(action, skip_special_tokens=True))
            result.truncated.append(completion.finish_reason == "length")
            result.logprobs.append(sampled_logprobs(completion.token_ids, completion.logprobs))
        return result

    def _sampling_params(self, vllm, sampling: SamplingSpec):
        common = {
            "n": 1,
            "max_tokens": sampling.max_new_tokens,
            "stop_token_ids": self.stop_ids,
            "detokenize": False,
            "logprobs": 0,  # the sampled token's log-prob only (train/logprob_mismatch)
        }
        if sampling.greedy:
            return vllm.SamplingParams(temperature=0.0, **common)
        seed = int(torch.randint(0, 2**31 - 1, (1,)).item())  # replayable from the torch RNG
        return vllm.SamplingParams(
            temperature=sampling.temperature, top_p=sampling.top_p, seed=seed, **common
        )

    # -- adapter sync --------------------------------------------------------------------------

    def sync_adapters(
        self,
        states: Mapping[str, Mapping[str, torch.Tensor]],
        configs: Mapping[str, Mapping[str, Any]],
    ) -> dict[str, Any]:
        """Serve new weights for the named adapters: write a new version, load it in place.

        Each adapter keeps one LoRA id for the generator's life. A sync writes the new tensors to
        a fresh folder and calls ``add_lora`` with ``load_inplace=True``, which makes vLLM load
        them under that id even though the id is cached (without it vLLM would keep serving the
        cached weights), replacing the old weights in their slot without evicting the other
        agents' adapters. The request then used for generation has ``load_inplace=False`` (with
        it vLLM would reload from disk on every step) and a new name and path, which are what
        vLLM's prefix cache keys on, so no KV block computed with the old weights is reused.

        ``states[name]`` holds the adapter's LoRA tensors (peft names, as
        ``AdapterModel.adapter_state`` gives them), ``configs[name]`` its peft config. Returns the
        new ``LoRARequest`` of each synced adapter.
        """
        from vllm.lora.request import LoRARequest

        missing = set(states) - set(configs)
        if missing:
            raise ValueError(f"no LoRA config for adapter(s) {sorted(missing)}")
        self.version += 1
        fresh = {}
        for name, state in states.items():
            folder = write_adapter(self.sync_dir / name / f"v{self.version}", state, configs[name])
            old = self.requests.get(name)
            if old is None:
                lora_id, self._next_id = self._next_id, self._next_id + 1
            else:
                lora_id = old.lora_int_id
            label = f"{name}@v{self.version}"
            # load now: a bad adapter fails the sync, not a rollout
            reload = LoRARequest(label, lora_id, str(folder), load_inplace=True)
            self._engine_call("add_lora", reload)
            self.requests[name] = fresh[name] = LoRARequest(label, lora_id, str(folder))
            if old is not None:
                shutil.rmtree(old.lora_path, ignore_errors=True)
        return fresh

    def sync_from(self, model, names: Sequence[str] | None = None) -> dict[str, Any]:
        """:meth:`sync_adapters` with the current weights of ``model``'s adapters ``names``."""
        names = list(names if names is not None else self.requests or model.adapters)
        return self.sync_adapters(
            {n: model.adapter_state(n) for n in names},
            {n: lora_config_dict(model, n) for n in names},
        )

    def _engine_call(self, method: str, arg: Any) -> Any:
        # vLLM exposes LoRA management on its engine object, not on ``LLM`` itself
        target = getattr(self.engine, "llm_engine", self.engine)
        fn = getattr(target, method, None)
        if fn is None:
            raise RuntimeError(
                f"this vLLM version's engine has no {method}(); the adapter sync "
                "needs vLLM >= 0.33 with enable_lora=True"
            )
        return fn(arg)
