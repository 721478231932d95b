"""Rollout vs training log-probs: recorded while sampling, compared after, in both dtypes."""

import math

import pytest
import torch

from baselines.core import algos
from baselines.core.config import load_config
from baselines.core.generation import HFGenerator, SamplingSpec
from baselines.core.models import AdapterModel, LoraSpec, load_base, pack_sequences
from baselines.trainer import Trainer

CONVS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a prime."}],
    [{"role": "user", "content": "7 * 6 = ?"}],
]


def test_logprob_mismatch_is_the_masked_absolute_difference():
    rollout = torch.tensor([[-1.0, -2.0, float("nan")], [-0.5, 0.0, 0.0]])
    train = torch.tensor([[-1.5, -2.0, -3.0], [-0.25, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    mean, peak = algos.logprob_mismatch(rollout, train, mask)
    assert mean.item() == pytest.approx((0.5 + 0.0 + 0.25) / 3)
    assert peak.item() == pytest.approx(0.5)
    empty = algos.logprob_mismatch(rollout, train, torch.zeros_like(mask))
    assert [t.item() for t in empty] == [0.0, 0.0]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_hf_generator_reports_the_log_probs_the_training_forward_computes(temperature):
    """In float32 the log-probs recorded while sampling are the training forward's (same
    tokens, same temperature), which pins their alignment: one token off would differ by ~1."""
    model, tok = load_base("tiny-random", seed=0)
    am = AdapterModel(model, tok, ["agent"], LoraSpec(r=4, alpha=8))
    torch.manual_seed(0)
    out = HFGenerator(am).generate(
        "agent", CONVS, SamplingSpec(max_new_tokens=12, temperature=temperature)
    )
    assert [len(r) for r in out.logprobs] == [len(a) for a in out.action_ids]
    assert any(len(a) > 1 for a in out.action_ids)
    batch = pack_sequences(out.prompt_ids, out.action_ids, tok.pad_token_id)
    with torch.no_grad(), am.using("agent"):
        train, _ = am.action_logprobs(batch, temperature=temperature)
    for row, (recorded, m) in enumerate(zip(out.logprobs, batch.mask)):
        torch.testing.assert_close(torch.tensor(recorded), train[row][m], rtol=0, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_one_marft_iteration_logs_the_mismatch_with_finite_losses(tmp_path, dtype):
    cfg = load_config(
        "marft",
        overrides=[
            "env.id=arith-2agent",
            "model.name=tiny-random",
            f"model.dtype={dtype}",
            "model.max_new_tokens=8",
            "env.num_envs=4",
            "train.episodes_per_iteration=4",
            "env.eval_episodes=0",
            "algo.minibatch_size=4",
            "algo.kl_coef=0.1",
            "train.device=cpu",
            "train.log=[]",
        ],
    )
    trainer = Trainer(cfg, tmp_path)
    assert next(trainer.model.peft.parameters()).dtype == getattr(torch, dtype)
    m = trainer.step()
    losses = {k: v for k, v in m.items() if k.endswith(("policy_loss", "value_loss", "/kl"))}
    assert losses and all(math.isfinite(v) for v in losses.values()), losses
    mismatch = m["train/logprob_mismatch"]
    assert math.isfinite(mismatch) and math.isfinite(m["train/logprob_mismatch_max"])
    assert all(f"agent/{a}/logprob_mismatch" in m for a in trainer.agents)
    if dtype == "float32":
        assert mismatch < 1e-4  # the same forward twice, up to float32 rounding
    else:
        assert 0.0 < mismatch < 1.0  # bf16 rounding differs between the two forwards
