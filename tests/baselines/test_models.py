"""Models: offline tiny model and tokenizer, adapters on one base, memory-lean log-probs."""

import warnings

import pytest
import torch

from baselines.core.critic import CENTRALIZED, Critics, centralized_messages
from baselines.core.generation import HFGenerator, SamplingSpec, left_pad, render_prompts
from baselines.core.models import (
    AdapterModel,
    LoraSpec,
    ModelNotFoundError,
    build_char_tokenizer,
    load_base,
    logprobs_from_hidden,
    pack_sequences,
)

CONV = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"}]


@pytest.fixture(scope="module")
def adapter_model():
    model, tok = load_base("tiny-random", seed=0)
    am = AdapterModel(model, tok, ["pa", "pb", "critic"], LoraSpec(r=4, alpha=8, dropout=0.0))
    # give the adapters distinct non-zero weights (peft initialises LoRA B to zero)
    with torch.no_grad():
        for i, name in enumerate(am.adapters):
            gen = torch.Generator().manual_seed(i)
            for p in am.parameters(name):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    return am


def test_char_tokenizer_roundtrip_and_chat_template():
    tok = build_char_tokenizer()
    text = "x = 3/4\n\\boxed{7}"
    assert tok.decode(tok(text)["input_ids"]) == text
    rendered = tok.apply_chat_template(CONV, add_generation_prompt=True, tokenize=False)
    assert rendered.endswith("<|im_start|>assistant\n")
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<pad>"


def test_drop_unknown_tokenizer_keeps_only_alphabet_and_specials():
    tok = build_char_tokenizer("ABCD", drop_unknown=True)
    ids = tok("<|im_start|>key: B, then c and D<|im_end|>")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["<|im_start|>", "B", "D", "<|im_end|>"]


def test_tiny_model_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    m1, _ = load_base("tiny-random", seed=5)
    assert torch.equal(torch.get_rng_state(), before)
    m2, _ = load_base("tiny-random", seed=5)
    m3, _ = load_base("tiny-random", seed=6)
    w1, w2, w3 = (m.get_input_embeddings().weight for m in (m1, m2, m3))
    assert torch.equal(w1, w2) and not torch.equal(w1, w3)


def test_local_directory_roundtrip(tmp_path):
    model, tok = load_base("tiny-random-llama")
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    model2, tok2 = load_base(str(tmp_path))
    assert type(model2).__name__ == "LlamaForCausalLM"
    assert tok2("héllo")["input_ids"] == tok("héllo")["input_ids"]
    assert torch.equal(model.get_input_embeddings().weight, model2.get_input_embeddings().weight)


def test_unknown_model_names_the_choices():
    with pytest.raises(ModelNotFoundError, match="tiny-random"):
        load_base("no-such-model")
    with pytest.raises(ModelNotFoundError, match="local directory"):
        load_base("./missing/dir")


def test_building_adapters_warns_nothing_the_user_cannot_act_on():
    model, tok = load_base("tiny-random", seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        AdapterModel(model, tok, ["pa"], LoraSpec(r=4, alpha=8, dropout=0.0))
    assert not [w for w in caught if issubclass(w.category, FutureWarning)], [str(w.message) for w in caught]


def test_a_hub_id_with_the_hub_unreachable_fails_at_once_naming_the_endpoint(monkeypatch):
    # port 9 (discard) refuses connections: the Hub client would retry before failing
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    for name in ("HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelNotFoundError, match=r"http://127\.0\.0\.1:9 is unreachable"):
        load_base("nobody-org/no-such-model-xyz")


def test_adapters_differ_and_reference_is_the_bare_base(adapter_model):
    am = adapter_model
    prompts = render_prompts(am.tokenizer, [CONV])
    batch = pack_sequences(prompts, [[5, 6, 7]], am.tokenizer.pad_token_id)
    with torch.no_grad():
        with am.using("pa"):
            la, _ = am.action_logprobs(batch)
        with am.using("pb"):
            lb, _ = am.action_logprobs(batch)
        with am.reference():
            lr, _ = am.action_logprobs(batch)
        base = am.peft.get_base_model()
        with am.reference():
            logits = base(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    assert not torch.allclose(la, lb) and not torch.allclose(la, lr)
    # reference log-probs equal a plain forward of the base with adapters disabled
    n = len(prompts[0])
    expected = torch.log_softmax(logits[0, n - 1:n + 2].float(), -1).gather(-1, torch.tensor([[5], [6], [7]]))
    torch.testing.assert_close(lr[0], expected.squeeze(-1), rtol=1e-5, atol=1e-5)


def test_only_the_active_adapter_gets_gradients_and_all_stay_trainable(adapter_model):
    am = adapter_model
    prompts = render_prompts(am.tokenizer, [CONV, CONV[1:]])
    batch = pack_sequences(prompts, [[5, 6], [7]], am.tokenizer.pad_token_id)
    for p in am.peft.parameters():
        p.grad = None
    with am.using("pb"):
        logp, ent = am.action_logprobs(batch)
    (logp.sum() + ent.sum()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in am.parameters("pb"))
    assert all(p.grad is None for p in am.parameters("pa"))
    assert all(p.requires_grad for n in am.adapters for p in am.parameters(n))
    assert all(not p.requires_grad for n, p in am.peft.named_parameters() if "lora_" not in n)
    assert not logp[1, 1:].any() and not ent[1, 1:].any()  # padding stays zero


def test_fast_adapter_switch_computes_what_peft_set_adapter_computes(adapter_model):
    """``AdapterModel.use`` writes peft's private ``_active_adapter`` on each LoRA layer (public
    ``set_adapter`` re-freezes every adapter on each switch: 21 ms vs 0.5 ms per switch on a
    24-layer model with 5 adapters). pyproject.toml bounds peft to the minor versions where this
    test passed: the fast switch must give the forward pass peft's own switch gives."""
    am = adapter_model
    previous = am.active
    ids = torch.tensor([render_prompts(am.tokenizer, [CONV])[0]])
    mask = torch.ones_like(ids)
    with torch.no_grad():
        fast = {}
        for name in am.adapters:
            with am.using(name):
                fast[name] = am.hidden_states(ids, mask)
        with am.reference():
            fast[None] = am.hidden_states(ids, mask)
        for name in am.adapters:
            am.peft.set_adapter(name)
            torch.testing.assert_close(am.hidden_states(ids, mask), fast[name], rtol=0, atol=0)
            assert not torch.equal(fast[name], fast[None])  # the adapter really takes part
    for name in am.adapters:  # set_adapter froze the others: leave the fixture as it was
        am.load_adapter_state(name, am.adapter_state(name))
    am.use(next(n for n in am.adapters if n != previous))  # use() skips a no-op switch
    am.use(previous)


def test_chunked_logprobs_match_full_softmax_with_gradients():
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    hidden = torch.randn(37, 16, requires_grad=True)
    targets = torch.randint(0, 50, (37,))
    lp, ent = logprobs_from_hidden(hidden, head, targets, temperature=0.7, chunk_size=8)
    full = torch.log_softmax(head(hidden) / 0.7, -1)
    torch.testing.assert_close(lp, full.gather(-1, targets[:, None]).squeeze(-1))
    torch.testing.assert_close(ent, -(full.exp() * full).sum(-1))
    g1 = torch.autograd.grad(lp.sum() + ent.sum(), hidden)[0]
    g2 = torch.autograd.grad(full.gather(-1, targets[:, None]).sum() - (full.exp() * full).sum(), hidden)[0]
    torch.testing.assert_close(g1, g2)


def test_adapter_state_roundtrip(adapter_model):
    am = adapter_model
    saved = am.adapter_state("pa")
    with torch.no_grad():
        for p in am.parameters("pa"):
            p.add_(1.0)
    am.load_adapter_state("pa", saved)
    after = am.adapter_state("pa")
    assert saved.keys() == after.keys() and all(torch.equal(saved[k], after[k]) for k in saved)
    assert all(p.requires_grad for p in am.parameters("pa"))


def test_generator_batches_left_padded_and_matches_single_generation(adapter_model):
    am = adapter_model
    gen = HFGenerator(am, batch_size=8)
    convs = [CONV, [{"role": "user", "content": "hi"}]]
    greedy = SamplingSpec(max_new_tokens=6, greedy=True)
    both = gen.generate("pa", convs, greedy)
    alone = gen.generate("pa", convs[1:], greedy)
    assert both.action_ids[1] == alone.action_ids[0]
    assert both.prompt_ids == render_prompts(am.tokenizer, convs)
    for ids, text, trunc in zip(both.action_ids, both.texts, both.truncated):
        assert 1 <= len(ids) <= 6
        assert text == am.tokenizer.decode(ids, skip_special_tokens=True)
        assert trunc == (am.tokenizer.eos_token_id not in ids)
    other = gen.generate("pb", convs, greedy)
    assert other.action_ids != both.action_ids
    ids, mask = left_pad([[1, 2, 3], [4]], 0)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_critic_values_action_and_token_level(adapter_model):
    am = adapter_model
    critics = Critics(am, ["critic"], CENTRALIZED)
    with torch.no_grad():
        critics.heads["critic"].linear.weight.normal_()
    prompts = render_prompts(am.tokenizer, [centralized_messages("## Problem\n1+1", "actor_1", "actor")])
    act = pack_sequences(prompts, [[]], am.tokenizer.pad_token_id)
    tok = pack_sequences(prompts, [[5, 6, 7]], am.tokenizer.pad_token_id)
    with torch.no_grad():
        v_action = critics.values("critic", act)
        v_token = critics.values("critic", tok)
    assert v_token.shape == (1, 3)
    # the first token-level value is the action-level value: both read V(context)
    torch.testing.assert_close(v_action[0, 0], v_token[0, 0])
    assert len({round(float(v), 6) for v in v_token[0]}) == 3
    params = critics.parameters("critic")
    assert any(p is critics.heads["critic"].linear.weight for p in params)
