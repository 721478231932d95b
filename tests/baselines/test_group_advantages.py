"""Group-relative advantages and loss reductions of the critic-free methods, against values
worked out by hand."""

import math

import pytest
import torch

from baselines.core.algos import (
    group_relative_advantages,
    policy_loss_aggregate,
    ppo_policy_loss,
)

REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0])
GROUPS = ["a"] * 4 + ["b"] * 4


def test_std_normalised_advantages_by_hand():
    # the sample std (ddof=1, torch.std's default, as verl's GRPO under PettingLLMs and TRL):
    # a: mean 0.5, std sqrt(4 * 0.25 / 3) = sqrt(1/3) -> +-0.5 / sqrt(1/3) = +-0.8660254;
    # b: mean 0.75, std sqrt((3 * 0.0625 + 0.5625) / 3) = 0.5 -> 0.5, 0.5, 0.5, -1.5
    adv = group_relative_advantages(REWARDS, GROUPS, eps=0.0)
    s = math.sqrt(1 / 3)
    expected = [0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, 0.5, 0.5, 0.5, -1.5]
    assert adv.tolist() == pytest.approx(expected, abs=1e-6)
    # the default eps only nudges the scale
    assert group_relative_advantages(REWARDS, GROUPS).tolist() == pytest.approx(expected, abs=1e-5)


def test_without_std_normalisation_the_group_mean_is_subtracted_only():
    adv = group_relative_advantages(REWARDS, GROUPS, scale_by_std=False)
    assert adv.tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.25, 0.25, 0.25, -0.75])


def test_groups_are_keyed_not_positional_and_ties_give_zero():
    # interleaved keys: x = [2, 4] (mean 3, std sqrt(2)), y = [5, 5] (a tie: no signal)
    adv = group_relative_advantages(torch.tensor([2.0, 5.0, 4.0, 5.0]), ["x", "y", "x", "y"], eps=0)
    assert adv.tolist() == pytest.approx([-1 / math.sqrt(2), 0.0, 1 / math.sqrt(2), 0.0])
    # tuple keys as AT-GRPO uses them: (problem, turn, agent)
    keys = [(0, 0, "s"), (0, 0, "s"), (0, 0, "r"), (0, 0, "r")]
    adv = group_relative_advantages(torch.tensor([1.0, 0.0, 3.0, 1.0]), keys, scale_by_std=False)
    assert adv.tolist() == pytest.approx([0.5, -0.5, 1.0, -1.0])


def test_a_group_of_one_is_an_error_or_zero_by_choice():
    rewards, keys = torch.tensor([1.0, 0.0, 1.0]), ["a", "a", ("p", 1, "receiver_1")]
    with pytest.raises(ValueError, match=r"group \('p', 1, 'receiver_1'\) holds one sample"):
        group_relative_advantages(rewards, keys)
    adv = group_relative_advantages(rewards, keys, singletons="zero", eps=0)
    assert adv.tolist() == pytest.approx([1 / math.sqrt(2), -1 / math.sqrt(2), 0.0])
    with pytest.raises(ValueError, match="one group key each"):
        group_relative_advantages(rewards, ["a", "a"])


def test_loss_reductions_by_hand_and_padding_is_ignored():
    nan = float("nan")
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, nan, nan]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    assert float(policy_loss_aggregate(per_token, mask, "token_mean")) == pytest.approx(2.5)
    assert float(policy_loss_aggregate(per_token, mask, "seq_mean")) == pytest.approx(3.0)
    got = policy_loss_aggregate(per_token, mask, "seq_sum_norm", max_tokens=4)
    assert float(got) == pytest.approx((6 / 4 + 4 / 4) / 2)
    with pytest.raises(ValueError, match="max_tokens"):
        policy_loss_aggregate(per_token, mask, "seq_sum_norm")


def test_ppo_loss_uses_the_chosen_reduction():
    # ratio 1 everywhere: the per-token loss is -A; A = +1 on a 3-token response, -1 on a 1-token one
    logp = torch.zeros(2, 3)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    adv = torch.tensor([1.0, -1.0])
    expect = {"token_mean": (-3 + 1) / 4, "seq_mean": 0.0, "seq_sum_norm": (-3 / 4 + 1 / 4) / 2}
    for mode, value in expect.items():
        loss, _ = ppo_policy_loss(logp, logp, adv, mask, 0.2, aggregation=mode, max_tokens=4)
        assert float(loss) == pytest.approx(value), mode
