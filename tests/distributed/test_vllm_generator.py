"""The vLLM backend on CPU: its adapter-sync logic against a stand-in engine.

The stand-in plays vLLM's part with transformers: it loads the base from the folder the backend
exported and each adapter from the folder a sync wrote, exactly as vLLM would, so a wrong file,
a stale id or a base-weight leak shows up as a wrong generation here.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest
import torch

from baselines.core.generation import HFGenerator, SamplingSpec, left_pad
from baselines.core.models import AdapterModel, LoraSpec, build_char_tokenizer, build_tiny_model
from baselines.distributed.vllm_generator import (
    ADAPTER_WEIGHTS,
    VLLMGenerator,
    action_ids,
    vllm_lora_rank,
    write_adapter,
)

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."}],
]
GREEDY = SamplingSpec(max_new_tokens=6, greedy=True)


@dataclass
class LoRARequest:
    lora_name: str
    lora_int_id: int
    lora_path: str


class SamplingParams:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class StandInEngine:
    """``vllm.LLM`` with LoRA enabled, played by transformers on CPU."""

    def __init__(self, **kwargs):
        from transformers import AutoModelForCausalLM

        self.kwargs = kwargs
        self.base = AutoModelForCausalLM.from_pretrained(kwargs["model"])
        self.llm_engine = self
        self.loaded: dict[int, str] = {}
        self.generated_with: list[int | None] = []

    def add_lora(self, request):
        assert request.lora_int_id not in self.loaded, (
            "vLLM caches by id: a reused id serves stale weights"
        )
        self.loaded[request.lora_int_id] = request.lora_path
        return True

    def remove_lora(self, lora_id):
        return self.loaded.pop(lora_id, None) is not None

    def generate(self, prompts, params, lora_request=None, use_tqdm=True):
        from peft import PeftModel

        model = self.base
        if lora_request is not None:
            assert self.loaded.get(lora_request.lora_int_id) == lora_request.lora_path
            model = PeftModel.from_pretrained(self.base, lora_request.lora_path)
        self.generated_with.append(None if lora_request is None else lora_request.lora_int_id)
        p = params[0]
        ids, mask = left_pad(
            [x["prompt_token_ids"] for x in prompts], self.base.config.pad_token_id
        )
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=p.max_tokens,
                do_sample=False,
                eos_token_id=p.stop_token_ids,
                pad_token_id=self.base.config.pad_token_id,
            )
        if lora_request is not None:
            model.unload()  # leave the shared base clean for the next request
        results = []
        for row in out[:, ids.shape[1] :].tolist():
            cut = next((i for i, t in enumerate(row) if t in p.stop_token_ids), None)
            tokens = row if cut is None else row[:cut]  # like vLLM for EOS: stop token not in ids
            done = types.SimpleNamespace(
                token_ids=tokens,
                finish_reason="length" if cut is None else "stop",
                stop_reason=None,
            )
            results.append(types.SimpleNamespace(outputs=[done]))
        return results


@pytest.fixture
def fake_vllm(monkeypatch):
    """A ``vllm`` module whose ``LLM`` is the stand-in engine."""
    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = StandInEngine, SamplingParams
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    for name, mod in {"vllm": vllm, "vllm.lora": lora, "vllm.lora.request": request}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    return vllm


@pytest.fixture
def model():
    tokenizer = build_char_tokenizer()
    base = build_tiny_model(tokenizer, seed=3)
    return AdapterModel(
        base,
        tokenizer,
        ["agent_a", "agent_b", "critic"],
        LoraSpec(r=4, alpha=8, target_modules=["q_proj", "v_proj"]),
    )


def train_step(model, name: str, seed: int) -> None:
    """Stand-in for a PPO update: move adapter ``name``'s weights."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters(name):
            p.add_(torch.randn(p.shape, generator=gen) * 0.5)


def test_action_ids_end_with_the_stop_token_exactly_once():
    assert action_ids([5, 6], "stop", None, eos_id=2) == [5, 6, 2]
    assert action_ids([5, 6, 2], "stop", None, eos_id=2) == [5, 6, 2]
    assert action_ids([5, 6], "stop", 9, eos_id=2) == [5, 6, 9]  # a stop_token_ids entry
    assert action_ids([5, 6], "length", None, eos_id=2) == [5, 6]


def test_vllm_lora_rank_rounds_up_to_a_supported_rank():
    assert [vllm_lora_rank(r) for r in (1, 8, 9, 64)] == [8, 8, 16, 64]
    with pytest.raises(ValueError, match="exceeds"):
        vllm_lora_rank(1024)


def test_write_adapter_refuses_base_weights(tmp_path, model):
    state = model.adapter_state("agent_a")
    state["model.embed_tokens.weight"] = torch.zeros(3)
    with pytest.raises(ValueError, match="never the base model"):
        write_adapter(tmp_path / "a", state, {"r": 4})


def test_vllm_backend_serves_each_agent_adapter_and_syncs_only_adapters(tmp_path, model, fake_vllm):
    train_step(model, "agent_b", seed=1)  # the two agents differ from the start
    gen = VLLMGenerator.build(model, tmp_path, adapters=["agent_a", "agent_b"])
    engine = gen.engine
    assert engine.kwargs["enable_lora"] and engine.kwargs["max_loras"] == 2
    assert engine.kwargs["max_lora_rank"] == 8
    hf = HFGenerator(model)

    def same_as_transformers(adapter):
        a, b = (
            gen.generate(adapter, CONVERSATIONS, GREEDY),
            hf.generate(adapter, CONVERSATIONS, GREEDY),
        )
        return (a.texts, a.prompt_ids, a.action_ids, a.truncated) == (
            b.texts,
            b.prompt_ids,
            b.action_ids,
            b.truncated,
        )

    assert all(same_as_transformers(a) for a in ("agent_a", "agent_b", None))
    assert (
        gen.generate("agent_a", CONVERSATIONS, GREEDY).texts
        != gen.generate("agent_b", CONVERSATIONS, GREEDY).texts
    )  # one engine, two adapters really served
    old = dict(gen.requests)

    train_step(model, "agent_a", seed=2)
    assert not same_as_transformers("agent_a")  # the engine still serves the old weights
    fresh = gen.sync_from(model)
    assert set(fresh) == {"agent_a", "agent_b"} and gen.version == 2
    assert all(same_as_transformers(a) for a in ("agent_a", "agent_b"))
    new_ids = {r.lora_int_id for r in gen.requests.values()}
    assert set(engine.loaded) == new_ids and not new_ids & {r.lora_int_id for r in old.values()}
    assert not any(
        __import__("os").path.exists(r.lora_path) for r in old.values()
    )  # old versions removed

    # what travelled: exactly the adapter's LoRA tensors, a small fraction of the base
    from safetensors.torch import load_file

    written = load_file(f"{gen.requests['agent_a'].lora_path}/{ADAPTER_WEIGHTS}")
    expected = model.adapter_state("agent_a")
    assert written.keys() == expected.keys() and all(
        torch.equal(written[k], expected[k]) for k in written
    )
    adapter_numel = sum(t.numel() for t in written.values())
    base_numel = sum(p.numel() for p in model.peft.get_base_model().parameters())
    assert adapter_numel < 0.1 * base_numel

    with pytest.raises(KeyError, match="never synced"):
        gen.generate("critic", CONVERSATIONS, GREEDY)


def test_sampling_seeds_replay_from_the_torch_rng(tmp_path, model, fake_vllm):
    gen = VLLMGenerator(engine=None, tokenizer=model.tokenizer, sync_dir=tmp_path, stop_ids=[3])
    sampling = SamplingSpec(max_new_tokens=4, temperature=0.7, top_p=0.9)
    torch.manual_seed(0)
    first = [gen._sampling_params(fake_vllm, sampling).seed for _ in range(3)]
    torch.manual_seed(0)
    again = [gen._sampling_params(fake_vllm, sampling).seed for _ in range(3)]
    assert first == again and len(set(first)) == 3
    greedy = gen._sampling_params(fake_vllm, GREEDY)
    assert greedy.temperature == 0.0 and not hasattr(greedy, "seed")
