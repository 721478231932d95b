"""The trainer on the paths GPU runs take (issue 24), checked on CPU with tiny random models:
gradient checkpointing under several adapters, rollouts that sample from exactly the policy,
one learning-rate horizon per optimiser, equal minibatch weights in a trailing accumulation
group, CUBLAS_WORKSPACE_CONFIG for deterministic runs, IPPO's bootstrap after a mid-round cut."""

import os

import pytest
import torch

from baselines.core.config import ConfigError, load_config
from baselines.core.generation import HFGenerator, SamplingSpec, render_prompts
from baselines.core.gradients import randomise_value_heads, record_step_gradients
from baselines.core.models import (
    AdapterModel,
    LoraSpec,
    build_char_tokenizer,
    build_tiny_model,
    pack_sequences,
)
from baselines.core.rollout import collect
from baselines.trainer import Trainer, use_deterministic_algorithms

SMALL = [
    "model.name=tiny-random",
    "model.max_new_tokens=6",
    "env.num_envs=4",
    "train.episodes_per_iteration=4",
    "env.eval_episodes=0",
    "train.device=cpu",
    "train.log=[]",
]


def tiny(**generation):
    """A tiny random model (the same weights every call) whose own generation_config sets
    ``generation`` (as a checkpoint's generation_config.json can)."""
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, seed=0)
    for k, v in generation.items():
        setattr(model.generation_config, k, v)
    return model, tok


def trainer(tmp_path, preset, extra=(), **generation) -> Trainer:
    cfg = load_config(preset, overrides=[*SMALL, *extra])
    return Trainer(cfg, tmp_path, base=tiny(**generation))


# ------------------------------------------------------------------ gradient checkpointing


def one_step_gradients(tmp_path, preset, extra, checkpointing: bool) -> dict[str, torch.Tensor]:
    """Every optimiser's gradient of one iteration taken at the initial weights (one minibatch,
    one step each), recorded as it lands."""
    tr = trainer(
        tmp_path,
        preset,
        [*extra, f"model.gradient_checkpointing={str(checkpointing).lower()}",
         "algo.minibatch_size=16", "algo.ppo_epochs=1", "algo.ent_coef=0.01"],
    )
    randomise_value_heads(tr.critics.heads.values(), seed=0)
    grads = record_step_gradients(tr.optimizers)
    torch.manual_seed(0)
    tr.step()
    tr.close()
    return {k: torch.cat([g.flatten() for g in v]) for k, v in grads.items()}


@pytest.mark.parametrize(
    "preset,extra",
    [
        ("marft", ["env.id=arith-2agent"]),  # per-agent adapters and the critic on one base
        ("marft", ["env.id=arith-2agent", "model.critic_shares_base=false"]),
        ("ippo", ["env.id=arith-2agent"]),  # two critics on the policies' base
    ],
)
def test_checkpointing_gives_every_adapter_and_critic_the_same_gradient(tmp_path, preset, extra):
    off = one_step_gradients(tmp_path / "off", preset, extra, False)
    on = one_step_gradients(tmp_path / "on", preset, extra, True)
    assert set(off) == set(on) and len(off) >= 3
    for key in off:
        assert off[key].norm() > 0, key
        torch.testing.assert_close(on[key], off[key], rtol=1e-4, atol=1e-6, msg=key)


# ------------------------------------------------------------------ sampling from the policy

CONVS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "user", "content": "Name a prime number, then another one."}],
]


def test_the_models_generation_config_does_not_change_what_is_sampled():
    """Sampling and log-probs agree although the model's own config sets every kind of logits
    processor; that config is the same object, unchanged, afterwards."""
    model, tok = tiny(
        repetition_penalty=1.3,
        no_repeat_ngram_size=2,
        min_new_tokens=4,
        suppress_tokens=[tok_id for tok_id in range(10, 20)],
        top_k=3,
        typical_p=0.5,
    )
    own = model.generation_config
    am = AdapterModel(model, tok, ["agent"], LoraSpec(r=4, alpha=8))
    torch.manual_seed(0)
    out = HFGenerator(am).generate("agent", CONVS, SamplingSpec(max_new_tokens=10))
    batch = pack_sequences(out.prompt_ids, out.action_ids, tok.pad_token_id)
    with torch.no_grad(), am.using("agent"):
        train, _ = am.action_logprobs(batch)
    for row, (recorded, m) in enumerate(zip(out.logprobs, batch.mask)):
        torch.testing.assert_close(torch.tensor(recorded), train[row][m], rtol=0, atol=1e-4)
    assert am.peft.get_base_model().generation_config is own and own.repetition_penalty == 1.3


def test_a_leaked_repetition_penalty_would_show_in_every_agents_logprob_mismatch(tmp_path):
    tr = trainer(tmp_path, "marft", ["env.id=arith-2agent", "algo.minibatch_size=4"],
                 repetition_penalty=1.3)
    m = tr.step()
    for agent in tr.agents:  # measured before the fix: 0.05-0.2 nats/token
        assert m[f"agent/{agent}/logprob_mismatch"] < 1e-4, agent


# ------------------------------------------------------------------ learning-rate horizons


@pytest.mark.parametrize(
    "kind,extra",
    [
        ("linear", []),
        ("cosine", ["algo.agent_by_agent=true"]),  # each adapter trains every other iteration
    ],
)
def test_every_scheduler_reaches_its_final_lr_at_its_last_step(tmp_path, kind, extra):
    """Per-agent adapters step n times less than a shared one and a critic of 3-round episodes
    3 times more: each decays over its own steps, to 0 exactly after its last one."""
    tr = trainer(
        tmp_path,
        "marft",
        ["env.id=arith-2agent", "env.overrides.horizon=3", "env.overrides.stop_on_correct=false",
         f"algo.scheduler={kind}", "train.iterations=3", "algo.minibatch_size=2",
         "algo.grad_accum=2", "algo.ppo_epochs=2", *extra],
    )
    used: dict[str, list[float]] = {k: [] for k in tr.optimizers}
    for key, opt in tr.optimizers.items():
        opt.register_step_pre_hook(
            lambda opt, args, kwargs, key=key: used[key].append(opt.param_groups[0]["lr"])
        )
    tr.train()
    for key, sched in tr.schedulers.items():
        lrs = used[key]
        assert lrs and sched.last_epoch == len(lrs), key
        assert all(lr > 0 for lr in lrs), (key, lrs)  # not before the last step
        assert lrs == sorted(lrs, reverse=True), (key, lrs)
        assert sched.get_last_lr()[0] == pytest.approx(0.0, abs=1e-12), (key, lrs)


# ------------------------------------------------------------------ gradient accumulation


def test_a_trailing_accumulation_group_weighs_its_minibatches_as_a_full_one(tmp_path):
    """Three minibatches with the same gradient, two per step: both steps' gradients are that
    gradient (a mean over the step's minibatches), the trailing one-minibatch step included."""
    tr = trainer(tmp_path, "marft", ["env.id=arith-2agent", "algo.grad_accum=2"])
    key = "policy/" + tr.policy_names[0]
    params = tr.model.parameters(tr.policy_names[0])
    direction = [torch.randn(p.shape, generator=torch.Generator().manual_seed(i))
                 for i, p in enumerate(params)]

    def loss_fn(mb):  # linear in the weights: the same gradient whatever the step did
        return sum((p * d).sum() for p, d in zip(params, direction)), {}

    stats = tr.learner._optimise(key, [[0], [1], [2]], loss_fn)
    norms = [st["grad_norm"] for st in stats if "grad_norm" in st]
    expected = torch.cat([d.flatten() for d in direction]).norm().item()
    assert norms == pytest.approx([expected, expected], rel=1e-5)  # before: [1.0, 0.5] x


# ------------------------------------------------------------------ deterministic runs


def test_deterministic_sets_the_cublas_workspace_before_torch_is_told(tmp_path, monkeypatch):
    saved = os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    seen = []
    real = torch.use_deterministic_algorithms

    def spy(mode, **kwargs):  # torch's own call, recording the environment it runs in
        seen.append((mode, os.environ.get("CUBLAS_WORKSPACE_CONFIG")))
        real(mode, **kwargs)

    monkeypatch.setattr(torch, "use_deterministic_algorithms", spy)
    try:
        trainer(tmp_path, "marft", ["env.id=arith-2agent", "train.deterministic=true"])
        assert seen == [(True, ":4096:8")]
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":16:8"  # the user's own setting is kept
        use_deterministic_algorithms()
        assert seen[-1] == (True, ":16:8")
        # CUDA already initialised without it: too late to set, so say what to export
        del os.environ["CUBLAS_WORKSPACE_CONFIG"]
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
        with pytest.raises(ConfigError, match="CUBLAS_WORKSPACE_CONFIG=:4096:8"):
            use_deterministic_algorithms()
    finally:
        real(False)
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        if saved is not None:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved


# ------------------------------------------------------------------ IPPO bootstrap


def test_ippo_bootstraps_an_agent_that_acted_in_the_cut_round_from_its_next_view(tmp_path):
    """arith-3agent, 3 rounds, cut after 4 turns: reasoner_0 has acted in the second round,
    actor_1 and verifier_2 have not. reasoner_0's bootstrap is its critic's value of the view it would act
    on next (its own round-2 action in it), not of the view it acted on (its last value)."""
    tr = trainer(
        tmp_path,
        "ippo",
        ["env.id=arith-3agent", "env.overrides.horizon=3", "env.overrides.max_turns=4",
         "algo.minibatch_size=4"],
    )
    with torch.no_grad():
        init = torch.Generator().manual_seed(0)
        for head in tr.critics.heads.values():
            for p in head.parameters():
                p.copy_(torch.randn(p.shape, generator=init) * 0.5)
    tr.learner.set_training(False)
    rollout = collect(tr.venv, tr.generator, tr.method.policy_adapter, 4, SamplingSpec(6), seed=0)
    samples = rollout.flat()
    values = tr.learner._score_values(samples, tr.learner._critic_prompts(samples))
    boot = tr.learner._bootstrap_values(rollout)
    for e, (episode, turns) in enumerate(zip(rollout.episodes, rollout.turns)):
        assert episode.truncated and [t.agent for t in turns][-1] == "reasoner_0"
        last = turns[-1]
        view = episode.final_view.messages["reasoner_0"]
        text = view[-1]["content"]  # the observation after its own action: every round's in it
        assert text.count("[reasoner_0]") == last.round + 1
        assert f"## Round {last.round + 1} of 3" in text
        assert episode.turns[-1].action in text
        ids = render_prompts(tr.model.tokenizer, [view], tr.cfg.model.max_prompt_tokens)
        batch = pack_sequences(ids, [[]], tr.pad_id)
        with torch.no_grad():
            expected = tr.critics.values("critic_reasoner_0", batch)[0, 0].item()
        assert boot[(e, "reasoner_0")] == pytest.approx(expected, abs=1e-5)
        assert boot[(e, "reasoner_0")] != pytest.approx(values[(e, last.index)].item(), abs=1e-6)
