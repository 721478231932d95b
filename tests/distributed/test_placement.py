"""A generator in its own Ray actor: same responses as in-process, adapter-only sync, deadlines."""

from __future__ import annotations

import time

import pytest

from baselines.core.generation import HFGenerator
from baselines.distributed.placement import GeneratorError, RemoteGenerator

from .test_vllm_generator import CONVERSATIONS, GREEDY, train_step


def tiny_adapter_model():
    from baselines.core.models import AdapterModel, LoraSpec, build_char_tokenizer, build_tiny_model

    tokenizer = build_char_tokenizer()
    return AdapterModel(
        build_tiny_model(tokenizer, seed=3),
        tokenizer,
        ["agent_a", "agent_b", "critic"],
        LoraSpec(r=4, alpha=8, target_modules=["q_proj", "v_proj"]),
    )


def syncing_generator():
    """Built inside the actor: transformers generation that accepts adapter tensors (a local
    class, so cloudpickle ships it by value to the worker)."""

    class SyncingHF(HFGenerator):
        def sync_adapters(self, states, configs):
            for name, state in states.items():
                assert all("lora_" in k for k in state), "only adapter tensors may travel"
                self.model.load_adapter_state(name, state)
            return list(states)

    return SyncingHF(tiny_adapter_model())


def test_remote_generator_matches_local_and_receives_adapter_updates(ray_cluster):
    local_model = tiny_adapter_model()
    local = HFGenerator(local_model)
    remote = RemoteGenerator(syncing_generator, num_gpus=0, timeout_s=120)
    try:

        def same(adapter):
            a, b = (
                remote.generate(adapter, CONVERSATIONS, GREEDY),
                local.generate(adapter, CONVERSATIONS, GREEDY),
            )
            return (a.texts, a.action_ids) == (b.texts, b.action_ids)

        assert same("agent_a")
        train_step(local_model, "agent_a", seed=2)  # the trainer updates its adapter...
        assert not same("agent_a")  # ...the remote engine still serves the old weights
        assert remote.sync_from(local_model, ["agent_a"]) == ["agent_a"]
        assert same("agent_a") and same("agent_b")
    finally:
        remote.close()


def test_remote_generator_that_never_starts_fails_within_its_deadline(ray_cluster):
    start = time.monotonic()
    with pytest.raises(GeneratorError, match="did not finish start within 2 s"):
        RemoteGenerator(lambda: time.sleep(60), num_gpus=0, timeout_s=2)
    assert time.monotonic() - start < 30
