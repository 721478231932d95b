"""The vLLM backend on CPU: its adapter-sync logic against a stand-in engine.

The stand-in plays vLLM's part with transformers: it loads the base from the folder the backend
exported and each adapter from the folder a sync wrote, exactly as vLLM would, so a wrong file,
a stale id or a base-weight leak shows up as a wrong generation here.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
from pathlib import Path

import pytest
import torch

from baselines.core.generation import HFGenerator, SamplingSpec, left_pad
from baselines.core.models import AdapterModel, LoraSpec, build_char_tokenizer, build_tiny_model
from baselines.distributed.vllm_generator import (
    ADAPTER_WEIGHTS,
    VLLM_LORA_RANKS,
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


API = json.loads((Path(__file__).parent / "vllm_api.json").read_text())


def signature(params: list[dict]) -> inspect.Signature:
    """An ``inspect.Signature`` from a recorded parameter list (defaults are placeholders)."""
    kinds = {"FIELD": inspect.Parameter.POSITIONAL_OR_KEYWORD}
    return inspect.Signature(
        [
            inspect.Parameter(
                p["name"],
                kinds.get(p["kind"]) or getattr(inspect.Parameter, p["kind"]),
                default=None if p["default"] else inspect.Parameter.empty,
            )
            for p in params
        ]
    )


def checked(key: str, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    """Bind a call against vLLM's recorded signature of ``key``; a wrong call raises TypeError."""
    table = API["callables"].get(key) or API["fields"][key]
    try:
        return signature(table).bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"call does not fit vLLM {API['vllm_version']}'s {key}: {exc}") from None


class Recorded:
    """An instance of a recorded vLLM struct: only its recorded fields exist."""

    def __init__(self, key: str, *args, **kwargs):
        fields = [f["name"] for f in API["fields"][key]]
        bound = checked(key, args, kwargs)
        self.__dict__.update(dict.fromkeys(fields))
        self.__dict__.update(bound.arguments)
        self._key = key

    def __getattr__(self, name):
        raise AttributeError(f"vLLM {API['vllm_version']}'s {self._key} has no field {name!r}")


class LoRARequest(Recorded):
    def __init__(self, *args, **kwargs):
        super().__init__("LoRARequest", *args, **kwargs)
        self.load_inplace = bool(self.load_inplace)


class SamplingParams(Recorded):
    def __init__(self, *args, **kwargs):
        super().__init__("SamplingParams", *args, **kwargs)


class StandInEngine:
    """``vllm.LLM`` with LoRA enabled, played by transformers on CPU, with vLLM 0.33's adapter
    cache rules (``vllm/lora/worker_manager.py``): ``add_lora`` of a cached id is a no-op unless
    ``load_inplace``; a request for a cached id serves the cached weights, whatever its path."""

    def __init__(self, *args, **kwargs):
        from transformers import AutoModelForCausalLM

        bound = checked("LLM.__init__", args, kwargs).arguments
        engine_fields = {f["name"] for f in API["fields"]["EngineArgs"]}
        unknown = set(bound.get("kwargs", {})) - engine_fields
        assert not unknown, f"not EngineArgs fields in vLLM {API['vllm_version']}: {unknown}"
        self.kwargs = {k: v for k, v in bound.items() if k != "kwargs"} | bound.get("kwargs", {})
        literals = API["literals"]
        assert self.kwargs["max_lora_rank"] in literals["MaxLoRARanks"]
        assert self.kwargs.get("logprobs_mode", "raw_logprobs") in literals["LogprobsMode"]
        self.base = AutoModelForCausalLM.from_pretrained(self.kwargs["model"])
        self.llm_engine = self
        self.loaded: dict[int, str] = {}
        self.add_calls: list = []

    def add_lora(self, *args, **kwargs):
        request = checked("LLMEngine.add_lora", args, kwargs).arguments["lora_request"]
        self.add_calls.append(request)
        if request.lora_int_id not in self.loaded or request.load_inplace:
            self.loaded[request.lora_int_id] = request.lora_path
        return True

    def remove_lora(self, *args, **kwargs):
        lora_id = checked("LLMEngine.remove_lora", args, kwargs).arguments["lora_id"]
        return self.loaded.pop(lora_id, None) is not None

    def generate(self, *args, **kwargs):
        from peft import PeftModel

        bound = checked("LLM.generate", args, kwargs).arguments
        prompts, params = bound["prompts"], bound["sampling_params"]
        lora_request = bound.get("lora_request")
        model = self.base
        if lora_request is not None:
            assert not lora_request.load_inplace, (
                "load_inplace on a generate request reloads every step"
            )
            path = self.loaded.setdefault(lora_request.lora_int_id, lora_request.lora_path)
            model = PeftModel.from_pretrained(self.base, path)
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
                output_logits=True,
                return_dict_in_generate=True,
            )
        if lora_request is not None:
            model.unload()  # leave the shared base clean for the next request
        steps = torch.stack(out.logits, dim=1).log_softmax(-1)  # greedy: temperature 1
        results = []
        for b, row in enumerate(out.sequences[:, ids.shape[1] :].tolist()):
            cut = next((i for i, t in enumerate(row) if t in p.stop_token_ids), None)
            tokens = row if cut is None else row[:cut]  # like vLLM for EOS: stop token not in ids
            logprobs = None
            if p.logprobs is not None:
                logprobs = [
                    {t: types.SimpleNamespace(logprob=float(steps[b, i, t]))}
                    for i, t in enumerate(tokens)
                ]
            done = Recorded(
                "CompletionOutput",
                index=0,
                text="",
                token_ids=tokens,
                cumulative_logprob=None,
                logprobs=logprobs,
                finish_reason="length" if cut is None else "stop",
                stop_reason=None,
            )
            results.append(
                Recorded(
                    "RequestOutput",
                    request_id=str(b),
                    prompt=None,
                    prompt_token_ids=prompts[b]["prompt_token_ids"],
                    prompt_logprobs=None,
                    outputs=[done],
                    finished=True,
                )
            )
        return results


@pytest.fixture
def fake_vllm(monkeypatch):
    """A ``vllm`` module whose classes check every call against vLLM's recorded API."""
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
    assert [vllm_lora_rank(r) for r in (1, 2, 8, 9, 64)] == [1, 8, 8, 16, 64]
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
    # one id per adapter for the generator's life, new weights loaded in place under it
    ids = {r.lora_int_id for r in gen.requests.values()}
    assert ids == {r.lora_int_id for r in old.values()} and set(engine.loaded) == ids
    assert all(engine.loaded[r.lora_int_id] == r.lora_path for r in gen.requests.values())
    assert [r.load_inplace for r in engine.add_calls] == [True] * 4
    assert all(
        gen.requests[n].lora_name != old[n].lora_name for n in old
    )  # fresh prefix-cache keys
    assert not any(
        __import__("os").path.exists(r.lora_path) for r in old.values()
    )  # old versions removed

    # the log-probs vLLM reports come back aligned with the response tokens
    served, reference = (g.generate("agent_b", CONVERSATIONS, GREEDY) for g in (gen, hf))
    for a, b in zip(served.logprobs, reference.logprobs):
        assert len(a) >= len(b) - 1  # vLLM does not report the stop token it appended
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b[: len(a)]), rtol=0, atol=1e-5)

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
    assert greedy.temperature == 0.0 and greedy.seed is None


def test_recorded_api_is_the_vllm_version_the_extra_resolves_to():
    """The table was read from the source of the release ``pyproject.toml``'s vllm extra floors;
    re-record it (scripts/record_vllm_api.py) when the floor moves."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    (req,) = pyproject["project"]["optional-dependencies"]["vllm"]
    assert req == f"vllm>={'.'.join(API['vllm_version'].split('.')[:2])}"
    assert VLLM_LORA_RANKS == tuple(API["literals"]["MaxLoRARanks"])


def test_recorded_api_matches_the_installed_vllm():
    """Where vLLM is installed (a GPU machine), the table must be its API."""
    vllm = pytest.importorskip("vllm")
    from vllm.lora.request import LoRARequest as Real
    from vllm.v1.engine.llm_engine import LLMEngine

    def names(fn):
        return [n for n in inspect.signature(fn).parameters if n != "self"]

    for key, fn in {
        "LLM.generate": vllm.LLM.generate,
        "LLMEngine.add_lora": LLMEngine.add_lora,
        "LLMEngine.remove_lora": LLMEngine.remove_lora,
    }.items():
        assert names(fn) == [p["name"] for p in API["callables"][key]], key
    assert set(Real.__struct_fields__) == {f["name"] for f in API["fields"]["LoRARequest"]}
