"""Unit tests of the pure advantage and loss functions (hand-computed examples)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.core.algos import (
    NonFiniteError,
    check_finite,
    clipped_value_loss,
    entropy_bonus,
    explained_variance,
    independent_gae,
    kl_penalty,
    masked_mean,
    masked_mean_std,
    masked_sum,
    masked_var,
    masked_whiten,
    mean_kl,
    ppo_policy_loss,
    round_end_from_agents,
    sequential_gae,
    token_level_gae,
)

T = torch.tensor


def close(a, b, tol=1e-5):
    a = torch.as_tensor(a).detach().float()
    b = torch.as_tensor(b).detach().float()
    return torch.allclose(a, b, atol=tol)


# ---------------------------------------------------------------- masked stats


def test_masked_sum_mean_ignore_padding_even_nan():
    x = T([[1.0, 2.0, float("nan")], [3.0, float("inf"), 5.0]])
    m = T([[1, 1, 0], [1, 0, 1]])
    assert float(masked_sum(x, m)) == 11.0
    assert float(masked_mean(x, m)) == 11.0 / 4
    assert close(masked_mean(x, m, dim=1), [1.5, 4.0])
    assert close(masked_sum(x, m, dim=0), [4.0, 2.0, 5.0])


def test_masked_mean_of_nothing_is_zero():
    assert float(masked_mean(T([1.0, 2.0]), T([0, 0]))) == 0.0


def test_masked_var_matches_torch_on_real_entries():
    x = T([[1.0, 2.0, 99.0], [4.0, 99.0, 99.0]])
    m = T([[1, 1, 0], [1, 0, 0]])
    assert close(masked_var(x, m), torch.var(T([1.0, 2.0, 4.0])))
    assert close(masked_var(x, m, unbiased=False), torch.var(T([1.0, 2.0, 4.0]), correction=0))
    assert float(masked_var(T([5.0, 1.0]), T([1, 0]))) == 0.0


def test_masked_whiten_uses_real_entries_only_and_zeroes_padding():
    x = T([[1.0, 2.0, 1000.0], [3.0, -1000.0, 1000.0]])
    m = T([[1, 1, 0], [1, 0, 0]])
    w = masked_whiten(x, m)
    real = T([1.0, 2.0, 3.0])
    expected = (real - 2.0) / torch.sqrt(torch.var(real) + 1e-8)
    assert close(w[m.bool()], expected)
    assert torch.all(w[~m.bool()] == 0)
    # padding values do not matter
    x2 = x.clone()
    x2[~m.bool()] = T([-7.0, 7.0, 0.5])
    assert torch.equal(masked_whiten(x2, m), w)


def test_masked_whiten_without_mean_shift_keeps_mean():
    x = T([2.0, 4.0, 6.0])
    m = T([1, 1, 1])
    w = masked_whiten(x, m, shift_mean=False)
    assert close(w, (x - 4.0) / 2.0 + 4.0)


def test_mask_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="mask shape"):
        masked_mean(torch.ones(2, 3), torch.ones(2, 2))


# ---------------------------------------------------------------- round ends


def test_round_end_from_agents_marks_round_last_and_episode_last():
    m = T([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    re = round_end_from_agents(m, 3)
    assert re.tolist() == [
        [False, False, True, False, False, True],
        [False, False, True, True, False, False],  # episode cut after round 1's agent 0
    ]
    with pytest.raises(ValueError):
        round_end_from_agents(m, 0)


# ---------------------------------------------------------------- sequential GAE


def test_sequential_gae_hand_example_two_agents_two_rounds():
    # play order: r0a0, r0a1, r1a0, r1a1
    r = T([[0.0, 1.0, 0.0, 2.0]])
    v = T([[0.5, 0.4, 0.3, 0.2]])
    m = torch.ones(1, 4)
    re = T([[0, 1, 0, 1]])
    g, lam = 0.9, 0.5
    adv, ret = sequential_gae(r, v, m, re, g, lam)
    # deltas: within a round no discount, round boundary gamma, last bootstraps 0
    d3 = 2.0 - 0.2
    d2 = 0.0 + 0.2 - 0.3
    d1 = 1.0 + g * 0.3 - 0.4
    d0 = 0.0 + 0.4 - 0.5
    a3 = d3
    a2 = d2 + lam * a3
    a1 = d1 + g * lam * a2
    a0 = d0 + lam * a1
    assert close(adv, [[a0, a1, a2, a3]])
    assert close(ret, [[a0 + 0.5, a1 + 0.4, a2 + 0.3, a3 + 0.2]])


def test_sequential_gae_lambda_one_gives_discounted_round_returns():
    r = T([[0.0, 0.0, 1.0, 0.0, 0.0, 1.0]])
    v = torch.rand(1, 6)
    adv, ret = sequential_gae(r, v, torch.ones(1, 6), round_end_from_agents(torch.ones(1, 6), 3),
                              0.9, 1.0)
    assert close(ret, [[1.9, 1.9, 1.9, 1.0, 1.0, 1.0]])
    assert close(adv, ret - v)


def test_sequential_gae_truncated_episode_bootstraps_given_value():
    r = T([[0.0, 1.0]])
    v = T([[0.2, 0.3]])
    re = T([[0, 1]])
    _, ret = sequential_gae(r, v, torch.ones(1, 2), re, 0.5, 1.0, bootstrap=T([4.0]))
    assert close(ret, [[1.0 + 0.5 * 4.0, 1.0 + 0.5 * 4.0]])
    with pytest.raises(ValueError, match="bootstrap"):
        sequential_gae(r, v, torch.ones(1, 2), re, 0.5, 1.0, bootstrap=T([4.0, 1.0]))


def test_sequential_gae_padding_never_changes_results():
    torch.manual_seed(0)
    r, v = torch.randn(1, 5), torch.randn(1, 5)
    m = torch.ones(1, 5)
    re = round_end_from_agents(m, 2)
    adv, ret = sequential_gae(r, v, m, re, 0.95, 0.9)
    # pad to length 8 with garbage, and batch with another row
    rp = torch.cat([r, T([[float("nan"), 5.0, -3.0]])], 1)
    vp = torch.cat([v, T([[7.0, float("inf"), 1.0]])], 1)
    mp = torch.cat([m, torch.zeros(1, 3)], 1)
    rp, vp, mp = torch.cat([rp, torch.randn(1, 8)]), torch.cat([vp, torch.randn(1, 8)]), \
        torch.cat([mp, torch.ones(1, 8)])
    advp, retp = sequential_gae(rp, vp, mp, round_end_from_agents(mp, 2), 0.95, 0.9)
    assert torch.allclose(advp[0, :5], adv[0]) and torch.allclose(retp[0, :5], ret[0])
    assert torch.all(advp[0, 5:] == 0) and torch.all(retp[0, 5:] == 0)


def test_sequential_gae_has_no_gradient():
    v = torch.randn(1, 3, requires_grad=True)
    adv, ret = sequential_gae(torch.ones(1, 3), v, torch.ones(1, 3), T([[0, 0, 1]]), 0.9, 0.9)
    assert not adv.requires_grad and not ret.requires_grad


def test_independent_gae_is_plain_gae_between_own_turns():
    r = T([[1.0, 0.0, 2.0]])
    v = T([[0.1, 0.2, 0.3]])
    g, lam = 0.9, 0.8
    adv, ret = independent_gae(r, v, torch.ones(1, 3), g, lam)
    d2 = 2.0 - 0.3
    d1 = 0.0 + g * 0.3 - 0.2
    d0 = 1.0 + g * 0.2 - 0.1
    a2 = d2
    a1 = d1 + g * lam * a2
    a0 = d0 + g * lam * a1
    assert close(adv, [[a0, a1, a2]])
    assert close(ret, adv + v)


# ---------------------------------------------------------------- token level


def test_token_level_gae_hand_example():
    # two actions of 2 tokens each, in one round: [a0 t0, a0 t1 | a1 t0, a1 t1]
    r = T([[0.0, 1.0, 0.0, 2.0]])
    v = T([[0.5, 0.6, 0.7, 0.8]])
    ae = T([[0, 1, 0, 1]])
    re = T([[0, 0, 0, 1]])
    tg, tl, g, lam = 0.5, 0.25, 0.9, 0.8
    adv, ret = token_level_gae(r, v, torch.ones(1, 4), ae, re, g, lam, tg, tl)
    d3 = 2.0 - 0.8                       # last token: bootstrap 0
    d2 = 0.0 + tg * 0.8 - 0.7            # in-action edge
    d1 = 1.0 + 1.0 * 0.7 - 0.6           # action edge within a round: discount 1
    d0 = 0.0 + tg * 0.6 - 0.5
    a3 = d3
    a2 = d2 + tg * tl * a3
    a1 = d1 + 1.0 * lam * a2
    a0 = d0 + tg * tl * a1
    assert close(adv, [[a0, a1, a2, a3]])
    assert close(ret, adv + v)


def test_token_level_round_end_must_be_an_action_end():
    with pytest.raises(ValueError, match="action_end"):
        token_level_gae(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), T([[0, 1]]),
                        T([[1, 0]]), 0.9, 0.9)


def _expand_actions(lengths: list[int], num_agents: int, r_act, v_act, gen):
    """Token tensors for actions of the given lengths: reward on the last token, the
    action value on the first token and random values elsewhere."""
    total = sum(lengths)
    tr, tv = torch.zeros(1, total), torch.randn(1, total, generator=gen)
    ae, re, first = torch.zeros(1, total), torch.zeros(1, total), []
    pos = 0
    for k, n in enumerate(lengths):
        first.append(pos)
        tv[0, pos] = v_act[0, k]
        tr[0, pos + n - 1] = r_act[0, k]
        ae[0, pos + n - 1] = 1
        if (k + 1) % num_agents == 0 or k == len(lengths) - 1:
            re[0, pos + n - 1] = 1
        pos += n
    return tr, tv, ae, re, first


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=9),
    num_agents=st.integers(1, 4),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
    truncated=st.booleans(),
)
def test_token_returns_equal_action_returns_when_in_action_discount_is_one(
    lengths, num_agents, gamma, lam, seed, truncated
):
    """The paper's consistency property: with token_gamma = token_lam = 1, the return
    (and advantage) at each action's first token equals the action-level one."""
    gen = torch.Generator().manual_seed(seed)
    n = len(lengths)
    r_act, v_act = torch.randn(1, n, generator=gen), torch.randn(1, n, generator=gen)
    m_act = torch.ones(1, n)
    boot = torch.randn(1, generator=gen) if truncated else None
    adv_a, ret_a = sequential_gae(r_act, v_act, m_act, round_end_from_agents(m_act, num_agents),
                                  gamma, lam, bootstrap=boot)
    tr, tv, ae, re, first = _expand_actions(lengths, num_agents, r_act, v_act, gen)
    adv_t, ret_t = token_level_gae(tr, tv, torch.ones_like(tr), ae, re, gamma, lam,
                                   token_gamma=1.0, token_lam=1.0, bootstrap=boot)
    assert torch.allclose(ret_t[0, first], ret_a[0], atol=1e-4)
    assert torch.allclose(adv_t[0, first], adv_a[0], atol=1e-4)


def test_token_level_with_one_token_actions_is_action_level():
    torch.manual_seed(1)
    r, v = torch.randn(2, 6), torch.randn(2, 6)
    m = T([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
    re = round_end_from_agents(m, 3)
    a1, r1 = sequential_gae(r, v, m, re, 0.9, 0.7)
    a2, r2 = token_level_gae(r, v, m, m, re, 0.9, 0.7, token_gamma=0.3, token_lam=0.2)
    assert torch.allclose(a1, a2) and torch.allclose(r1, r2)


def test_token_level_with_discount_below_one_differs():
    r = T([[0.0, 1.0]])
    v = torch.zeros(1, 2)
    _, ret = token_level_gae(r, v, torch.ones(1, 2), T([[0, 1]]), T([[0, 1]]), 1.0, 1.0,
                             token_gamma=0.5, token_lam=1.0)
    assert close(ret, [[0.5, 1.0]])


# ---------------------------------------------------------------- policy loss


def test_ppo_policy_loss_unclipped_equals_minus_advantage_weighted_ratio():
    logp = T([[-1.0, -2.0]], requires_grad=True)
    old = T([[-1.0, -2.0]])
    adv = T([[1.0, -2.0]])
    loss, stats = ppo_policy_loss(logp, old, adv, torch.ones(1, 2), 0.2)
    assert close(loss, (-1.0 + 2.0) / 2)
    assert stats["clipfrac"] == 0.0 and abs(stats["kl_rollout"]) < 1e-7
    loss.backward()
    # d/dlogp of -A * exp(logp - old) at ratio 1 is -A, averaged over 2 tokens
    assert close(logp.grad, [[-0.5, 1.0]])


def test_ppo_policy_loss_clipping_stops_gradient_beyond_the_trust_region():
    # ratio = e^0.5 ~ 1.65 > 1.2 with positive advantage: clipped, no gradient.
    # ratio = e^-0.5 ~ 0.61 < 0.8 with positive advantage: unclipped branch is the max.
    logp = T([[0.5, -0.5, 0.5]], requires_grad=True)
    old = torch.zeros(1, 3)
    adv = T([[1.0, 1.0, -1.0]])
    loss, stats = ppo_policy_loss(logp, old, adv, torch.ones(1, 3), 0.2)
    expected = (-1.2 + -math.exp(-0.5) + math.exp(0.5)) / 3
    assert close(loss, expected)
    loss.backward()
    assert logp.grad[0, 0] == 0.0
    assert close(logp.grad[0, 1], -math.exp(-0.5) / 3)
    assert close(logp.grad[0, 2], math.exp(0.5) / 3)  # negative advantage, ratio high: kept
    assert close(stats["clipfrac"], 1 / 3)


def test_ppo_policy_loss_clip_higher():
    logp = T([[0.24]])  # ratio 1.271: above 1.2, below 1.28
    old = torch.zeros(1, 1)
    adv = T([[1.0]])
    loss_sym, _ = ppo_policy_loss(logp, old, adv, torch.ones(1, 1), 0.2)
    loss_high, _ = ppo_policy_loss(logp, old, adv, torch.ones(1, 1), 0.2, clip_eps_high=0.28)
    assert close(loss_sym, -1.2) and close(loss_high, -math.exp(0.24))


def test_ppo_policy_loss_broadcasts_action_advantages_and_ignores_padding():
    logp = T([[-1.0, -1.0, 50.0], [-1.0, 80.0, 80.0]], requires_grad=True)
    old = T([[-1.0, -1.0, -50.0], [-1.0, float("nan"), 0.0]])
    m = T([[1, 1, 0], [1, 0, 0]])
    loss, stats = ppo_policy_loss(logp, old, T([2.0, -1.0]), m, 0.2)
    assert close(loss, (-2.0 - 2.0 + 1.0) / 3)
    assert math.isfinite(stats["ratio_max"])
    loss.backward()
    assert torch.all(logp.grad[~m.bool()] == 0)
    assert torch.isfinite(logp.grad).all()


def test_ppo_policy_loss_is_token_mean_over_the_batch():
    logp = torch.zeros(2, 3, requires_grad=True)
    m = T([[1, 1, 1], [1, 0, 0]])
    loss, _ = ppo_policy_loss(logp, torch.zeros(2, 3), T([1.0, 4.0]), m, 0.2)
    assert close(loss, -(1 + 1 + 1 + 4) / 4)


# ---------------------------------------------------------------- value loss


def test_clipped_value_loss_hand_example_and_gradient():
    v = T([1.0, 0.0, 0.5], requires_grad=True)
    old = T([0.0, 0.0, 0.0])
    ret = T([2.0, 1.0, 0.0])
    loss, stats = clipped_value_loss(v, old, ret, T([1, 1, 1]), clip_eps=0.2)
    # entry 0: err (1-2)^2=1, clipped v=0.2 -> (0.2-2)^2=3.24 -> 3.24 (clipped, no grad)
    # entry 1: err 1, clip same -> 1
    # entry 2: err 0.25, clipped 0.2 -> 0.04 -> 0.25 (unclipped)
    assert close(loss, 0.5 * (3.24 + 1.0 + 0.25) / 3)
    loss.backward()
    assert v.grad[0] == 0.0
    assert close(v.grad[1], 0.5 * 2 * (0.0 - 1.0) / 3)
    assert close(v.grad[2], 0.5 * 2 * 0.5 / 3)
    assert close(stats["vf_clipfrac"], 1 / 3)


def test_unclipped_value_loss_and_padding():
    v = T([[1.0, 9.0]], requires_grad=True)
    loss, stats = clipped_value_loss(v, T([[0.0, float("nan")]]), T([[3.0, 0.0]]), T([[1, 0]]),
                                     clip_eps=None)
    assert close(loss, 0.5 * 4.0)
    loss.backward()
    assert v.grad[0, 1] == 0.0
    assert stats["vf_clipfrac"] == 0.0


# ---------------------------------------------------------------- entropy and KL


def test_entropy_bonus_is_masked_mean():
    assert close(entropy_bonus(T([[1.0, 3.0, float("nan")]]), T([[1, 1, 0]])), 2.0)


def test_kl_estimators():
    logp, ref = T([0.0, -1.0]), T([-1.0, 0.0])
    assert close(kl_penalty(logp, ref, "k1"), [1.0, -1.0])
    assert close(kl_penalty(logp, ref, "k2"), [0.5, 0.5])
    assert close(kl_penalty(logp, ref, "k3"), [math.exp(-1) - 1 + 1, math.exp(1) - 1 - 1])
    assert torch.all(kl_penalty(torch.randn(100), torch.randn(100), "k3") >= 0)
    assert torch.all(kl_penalty(logp, logp, "k3") == 0)
    with pytest.raises(ValueError, match="k1"):
        kl_penalty(logp, ref, "k4")


def test_kl_gradient_flows_to_policy_only():
    logp = T([0.5], requires_grad=True)
    ref = T([0.0], requires_grad=True)
    kl_penalty(logp, ref, "k3").sum().backward()
    assert close(logp.grad, [1 - math.exp(-0.5)])
    assert ref.grad is None


def test_k3_is_finite_far_from_reference():
    assert torch.isfinite(kl_penalty(T([-500.0]), T([0.0]), "k3")).all()


# ---------------------------------------------------------------- check_finite


def test_check_finite_passes_through_and_names_the_culprit():
    x = T([1.0, 2.0])
    assert check_finite("loss", x) is x
    with pytest.raises(NonFiniteError, match=r"agent/actor_1/policy_loss is not finite: 1 NaN"):
        check_finite("agent/actor_1/policy_loss", T([float("nan"), 1.0]))
    with pytest.raises(FloatingPointError, match="1 inf"):
        check_finite("x", T([float("inf")]))


# ---------------------------------------------------------------- run-health metrics


def test_explained_variance_perfect_mean_and_worse_critics():
    ret = T([[1.0, 2.0, 3.0, 99.0]])
    mask = T([[1, 1, 1, 0]])
    assert close(explained_variance(ret.clone(), ret, mask), 1.0)  # padding is ignored
    assert close(explained_variance(torch.full_like(ret, 2.0), ret, mask), 0.0)  # the mean
    # errors (-1, 1, -1): Var = 4/3 against Var(R) = 1
    assert close(explained_variance(T([[2.0, 1.0, 4.0, 0.0]]), ret, mask), 1 - 4 / 3)
    assert explained_variance(T([[0.0, 5.0]]), T([[1.0, 1.0]]), torch.ones(1, 2)) == 0.0


def test_explained_variance_of_returns_constant_up_to_rounding_is_zero():
    """Every episode scored 0: returns rebuilt as (0 - V) + V differ from 0 by float rounding
    only; the critic explains nothing there, and the metric said -4e14 in a real run."""
    gen = torch.Generator().manual_seed(0)
    values = torch.rand(16, 2, generator=gen) * 0.02
    ones = torch.ones(16, 2)
    _, returns = sequential_gae(torch.zeros(16, 2), values, ones, T([[0, 1]] * 16), 1.0, 1.0)
    assert 0 < float(returns.var()) < 1e-18  # rounding, not signal
    assert explained_variance(values, returns, ones) == 0.0
    # rounding grows with the returns: every episode scored 100
    big = values * 1000 + 3
    _, returns = sequential_gae(torch.full((16, 2), 100.0) * T([[0, 1]]), big, ones,
                                T([[0, 1]] * 16), 1.0, 1.0)
    assert 0 < float(returns.var()) and explained_variance(big, returns, ones) == 0.0
    # a small but real spread of returns is still explained: errors (1e-3, -1e-3, 0, 0)
    v, r = T([0.01, 0.02, 0.03, 0.04]), T([0.011, 0.019, 0.03, 0.04])
    assert close(explained_variance(v, r, torch.ones(4)), 1 - (2e-6 / 3) / float(r.var()), tol=1e-4)


def test_masked_mean_std_uses_real_entries_only():
    mean, std = masked_mean_std(T([1.0, 3.0, 1e9]), T([1, 1, 0]))
    assert close(mean, 2.0) and close(std, math.sqrt(2.0))
    assert masked_mean_std(T([5.0]), T([1])) == (5.0, 0.0)


def test_mean_kl_is_zero_for_the_same_policy_and_matches_k3_by_hand():
    logp = T([[-1.0, -2.0, float("nan")]])
    mask = T([[1, 1, 0]])
    assert float(mean_kl(logp, logp, mask)) == 0.0  # NaN padding does not leak
    other = T([[-1.5, -1.0, 0.0]])
    d = torch.tensor([0.5, -1.0])  # logp - other on the real tokens
    assert close(mean_kl(logp, other, mask), float((torch.exp(-d) - 1 + d).mean()))
    assert float(mean_kl(logp, other, mask)) >= 0.0
