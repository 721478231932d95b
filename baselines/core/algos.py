"""Pure tensor functions for the MARFT / MARFT-shared / IPPO trainer core.

Every function takes and returns tensors, has no state and touches no model, in the
style of verl's ``core_algos.py``. Shapes use these letters:

- ``B``: batch (episodes, or agent sequences for IPPO, or actions for token losses)
- ``L``: agent turns (actions) of one episode in play order, padded
- ``T``: tokens, padded

Masks are 1 (or True) on real entries and 0 on padding. Padding never changes a
result: padded entries are replaced, not multiplied, so even NaN/inf padding is
harmless, and every output is 0 on padding. The maths is in
``docs/baselines_algorithms.md``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import torch
from torch import Tensor

__all__ = [
    "NonFiniteError",
    "check_finite",
    "clipped_value_loss",
    "entropy_bonus",
    "explained_variance",
    "group_relative_advantages",
    "independent_gae",
    "kl_penalty",
    "logprob_mismatch",
    "masked_mean",
    "masked_mean_std",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "mean_kl",
    "normalize_advantages",
    "policy_loss_aggregate",
    "ppo_policy_loss",
    "rollout_is_weights",
    "round_end_from_agents",
    "sequential_gae",
    "token_level_gae",
]


# ---------------------------------------------------------------------------
# errors


class NonFiniteError(FloatingPointError):
    """A loss, advantage or gradient holds NaN or inf."""


def check_finite(name: str, tensor: Tensor) -> Tensor:
    """Raise :class:`NonFiniteError` naming ``name`` if ``tensor`` has NaN or inf.

    Args:
        name: what the tensor is (``"agent/reasoner_0/policy_loss"``), used in the message.
        tensor: any shape.

    Returns:
        ``tensor`` unchanged, so calls can be chained.
    """
    finite = torch.isfinite(tensor)
    if bool(finite.all()):
        return tensor
    n_nan = int(torch.isnan(tensor).sum())
    n_inf = int(torch.isinf(tensor).sum())
    raise NonFiniteError(
        f"{name} is not finite: {n_nan} NaN and {n_inf} inf of {tensor.numel()} values "
        f"(shape {tuple(tensor.shape)}, dtype {tensor.dtype}). Usual causes: a learning rate "
        "too high (lower algo.lr / algo.critic_lr), float16 without loss scaling (use "
        "model.dtype=float32 or bfloat16), non-finite rewards from the environment, or a "
        "clip range so wide that exp(logp - old_logp) overflows."
    )


# ---------------------------------------------------------------------------
# masked statistics


def _as_bool(mask: Tensor, like: Tensor) -> Tensor:
    if mask.shape != like.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != values shape {tuple(like.shape)}")
    return mask.bool()


def masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of ``values`` over entries where ``mask`` is set.

    Args:
        values: any shape ``S``.
        mask: shape ``S``; 1 on real entries.
        dim: reduce over this dimension only; ``None`` reduces over everything.

    Returns:
        Scalar, or ``S`` without ``dim``.
    """
    m = _as_bool(mask, values)
    picked = torch.where(m, values, torch.zeros((), dtype=values.dtype, device=values.device))
    return picked.sum() if dim is None else picked.sum(dim=dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of ``values`` over real entries (0 where there are none).

    Args:
        values: any shape ``S``.
        mask: shape ``S``.
        dim: as in :func:`masked_sum`.

    Returns:
        Scalar, or ``S`` without ``dim``.
    """
    m = _as_bool(mask, values)
    count = m.sum() if dim is None else m.sum(dim=dim)
    return masked_sum(values, m, dim) / count.clamp(min=1).to(values.dtype)


def masked_var(values: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Variance of ``values`` over all real entries (scalar).

    Args:
        values: any shape ``S``.
        mask: shape ``S``.
        unbiased: Bessel's correction (divide by n - 1) when n > 1.

    Returns:
        Scalar; 0 when fewer than two real entries.
    """
    m = _as_bool(mask, values)
    mean = masked_mean(values, m)
    sq = masked_sum((values - mean) ** 2, m)
    n = m.sum()
    denom = (n - 1) if unbiased else n
    if int(n) < 2:
        return torch.zeros((), dtype=values.dtype, device=values.device)
    return sq / denom.to(values.dtype)


def masked_mean_std(values: Tensor, mask: Tensor) -> tuple[float, float]:
    """Mean and (Bessel-corrected) standard deviation of the real entries, as floats.

    Args:
        values: any shape ``S``.
        mask: shape ``S``.

    Returns:
        ``(mean, std)``; ``(0.0, 0.0)`` with no real entry, std 0 with one.
    """
    m = _as_bool(mask, values)
    return float(masked_mean(values, m)), float(masked_var(values, m).clamp(min=0).sqrt())


#: Below this variance (relative to the returns' mean square, at least 1) the returns of a batch
#: are constant up to float rounding.
CONSTANT_RETURNS_VAR = 1e-12


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """``1 - Var(R - V) / Var(R)`` over real entries: how much of the returns the critic predicts.

    1 is perfect, 0 is no better than predicting the mean, negative is worse than that.

    Args:
        values: critic values, any shape ``S``.
        returns: their targets, shape ``S``.
        mask: shape ``S``.

    Returns:
        A float; 0.0 when the returns have no variance (nothing to explain). Returns rebuilt as
        ``advantage + value`` carry float rounding, which grows with their size, so a variance
        under :data:`CONSTANT_RETURNS_VAR` times ``max(1, mean(R^2))`` counts as none (a batch
        where every episode scored 0 gave ``-4e14`` before).
    """
    m = _as_bool(mask, values)
    var_r = masked_var(returns, m)
    scale = max(1.0, float(masked_mean(returns.square(), m)))
    if float(var_r) <= CONSTANT_RETURNS_VAR * scale:
        return 0.0
    return float(1.0 - masked_var(returns - values, m) / var_r)


def masked_whiten(
    values: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8
) -> Tensor:
    """Normalise ``values`` to mean 0, std 1 using statistics of real entries only.

    Args:
        values: any shape ``S`` (typically advantages ``[B, T]`` or ``[B, L]``).
        mask: shape ``S``.
        shift_mean: subtract the mean (if False, only divide by the std, then the
            mean is added back, as in verl).
        eps: added to the variance.

    Returns:
        Shape ``S``; padded entries are 0.
    """
    m = _as_bool(mask, values)
    mean = masked_mean(values, m)
    var = masked_var(values, m)
    out = (values - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return torch.where(m, out, torch.zeros_like(out))


def normalize_advantages(
    advantages: Tensor,
    mask: Tensor,
    mode: Literal["batch", "agent", "none"] = "batch",
    groups: Tensor | None = None,
    std_floor: float = 0.0,
    eps: float = 1e-8,
) -> Tensor:
    """Whiten advantages over the batch (``batch``), over each agent's entries (``agent``) or
    not at all (``none``), and leave a set whose spread is below ``std_floor`` unscaled.

    ``batch``: one mean and std over every real entry (PPO's usual whitening; it mixes the
    agents, so an agent whose raw advantages sit apart from the others' keeps a non-zero
    mean). ``agent``: each group (``groups``, e.g. the agent index of every token) is centred
    and scaled on its own statistics (Dr. MAS, arXiv 2602.08847: per-agent normalisation
    removes the gradient spikes of mixing agents with different advantage scales). A set whose
    (Bessel-corrected) std is below ``std_floor`` is only centred: when every reward of a batch
    ties its advantages are critic noise (std ~1e-3), and whitening would blow that noise up to
    unit size and train on it; below the floor it stays as small as it is.

    Args:
        advantages: any shape ``S``.
        mask: shape ``S``; 1 on real entries.
        mode: ``"batch"``, ``"agent"`` or ``"none"``.
        groups: shape ``S`` integer group ids (``mode="agent"`` only).
        std_floor: sets with std below this are centred but not divided by their std (0:
            always whiten, as :func:`masked_whiten`).
        eps: added to the variance.

    Returns:
        Shape ``S``; padded entries are 0.
    """
    m = _as_bool(mask, advantages)
    zero = torch.zeros_like(advantages)
    if mode == "none":
        return torch.where(m, advantages, zero)
    if mode == "batch":
        sets = [m]
    elif mode == "agent":
        if groups is None or groups.shape != advantages.shape:
            raise ValueError("mode='agent' needs groups of the advantages' shape (agent ids)")
        sets = [m & (groups == g) for g in torch.unique(groups[m])]
    else:
        raise ValueError(f"mode must be 'batch', 'agent' or 'none', got {mode!r}")
    if std_floor < 0:
        raise ValueError(f"std_floor must be >= 0, got {std_floor}")
    out = zero
    for part in sets:
        mean, var = masked_mean(advantages, part), masked_var(advantages, part)
        centred = advantages - mean
        scaled = centred if float(var.sqrt()) < std_floor else centred * torch.rsqrt(var + eps)
        out = torch.where(part, scaled, out)
    return out


# ---------------------------------------------------------------------------
# advantages


def round_end_from_agents(mask: Tensor, num_agents: int) -> Tensor:
    """Mark the last turn of every round in play-ordered episodes.

    Turn ``l`` (0-based) ends a round when ``(l + 1) % num_agents == 0``; the last real
    turn of a row always ends its round too (an episode cut mid-round).

    Args:
        mask: ``[B, L]`` real turns, right-padded.
        num_agents: agents per round.

    Returns:
        ``[B, L]`` bool; False on padding.
    """
    if num_agents < 1:
        raise ValueError(f"num_agents must be >= 1, got {num_agents}")
    m = mask.bool()
    idx = torch.arange(m.shape[-1], device=m.device)
    by_position = ((idx + 1) % num_agents == 0).expand_as(m)
    lengths = m.sum(dim=-1, keepdim=True)
    last = idx.expand_as(m) == (lengths - 1)
    return (by_position | last) & m


def _gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    discount: Tensor,
    trace: Tensor,
    bootstrap: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation with a per-step discount and trace factor.

    ``A_t = delta_t + discount_t * trace_t * A_next``, ``delta_t = r_t +
    discount_t * V_next - V_t``, where "next" is the next REAL step of the row
    (padding is skipped) and after the last real step ``V_next = bootstrap`` (0
    when None) and ``A_next = 0``. ``discount_t`` and ``trace_t`` are the factors on
    the edge from step t to its successor. All inputs ``[B, N]``; bootstrap ``[B]``.
    """
    for name, x in (("values", values), ("mask", mask), ("discount", discount), ("trace", trace)):
        if x.shape != rewards.shape:
            raise ValueError(
                f"{name} shape {tuple(x.shape)} != rewards shape {tuple(rewards.shape)}"
            )
    m = mask.bool()
    dtype, device = values.dtype, values.device
    zero = torch.zeros((), dtype=dtype, device=device)
    r = torch.where(m, rewards.to(dtype), zero)
    v = torch.where(m, values, zero)
    g = discount.to(dtype)
    batch, steps = rewards.shape
    if bootstrap is None:
        boot = torch.zeros(batch, 1, dtype=dtype, device=device)
    else:
        if bootstrap.shape != (batch,):
            raise ValueError(f"bootstrap must have shape ({batch},), got {tuple(bootstrap.shape)}")
        boot = bootstrap.to(dtype).unsqueeze(1)
    # Value of the next REAL step: index of the first real step after t (reverse cummin),
    # `steps` (-> bootstrap) when there is none.
    idx = torch.arange(steps, device=device).expand(batch, steps)
    real_idx = torch.where(m, idx, torch.full_like(idx, steps))
    after = torch.cat([real_idx[:, 1:], torch.full_like(real_idx[:, :1], steps)], dim=1)
    next_idx = after.flip(1).cummin(dim=1).values.flip(1)
    next_value = torch.cat([v, boot], dim=1).gather(1, next_idx)
    # Padding passes the next advantage through unchanged (delta 0, factor 1).
    delta = torch.where(m, r + g * next_value - v, zero).T.contiguous()
    factor = torch.where(m, g * trace.to(dtype), torch.ones_like(g)).T.contiguous()
    adv_t = torch.zeros(steps + 1, batch, dtype=dtype, device=device)
    for t in reversed(range(steps)):  # A_t = delta_t + factor_t * A_{t+1}
        torch.addcmul(delta[t], factor[t], adv_t[t + 1], out=adv_t[t])
    advantages = torch.where(m, adv_t[:steps].T, zero)
    returns = torch.where(m, advantages + v, zero)
    return advantages, returns


@torch.no_grad()
def sequential_gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    round_end: Tensor,
    gamma: float,
    lam: float,
    bootstrap: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Action-level GAE with MARFT's sequential (agent-by-agent) decomposition.

    Each row is one episode's agent turns flattened in play order (round 0 agent 0,
    agent 1, ..., round 1 agent 0, ...). Agent i's value bootstraps from its successor's
    value in the same round with no discount; the round's last agent bootstraps from
    the next round's first agent with discount ``gamma``; the last real turn bootstraps
    from ``bootstrap`` (a truncated episode) or 0 (terminated). ``lam`` applies on
    every edge.

    Args:
        rewards: ``[B, L]`` reward of each turn.
        values: ``[B, L]`` critic value of each turn (its role-conditioned context).
        mask: ``[B, L]`` 1 on real turns (right padding).
        round_end: ``[B, L]`` 1 at the last turn of each round
            (see :func:`round_end_from_agents`).
        gamma: discount between rounds.
        lam: GAE lambda.
        bootstrap: ``[B]`` value after the last real turn, or None for 0.

    Returns:
        ``(advantages, returns)``, both ``[B, L]`` and 0 on padding; no gradient.
    """
    discount = torch.where(
        round_end.bool(),
        torch.full_like(values, gamma),
        torch.ones_like(values),
    )
    return _gae(rewards, values, mask, discount, torch.full_like(values, lam), bootstrap)


@torch.no_grad()
def independent_gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    gamma: float,
    lam: float,
    bootstrap: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Action-level GAE for IPPO: one agent's own turns, its own critic.

    Each row is ONE agent's turns of one episode (one per round), so every edge is a
    round boundary: plain GAE with discount ``gamma``. No sequential decomposition.

    Args:
        rewards: ``[B, L]`` the agent's reward per turn.
        values: ``[B, L]`` the agent's own critic's value per turn.
        mask: ``[B, L]`` 1 on real turns (right padding).
        gamma: discount between the agent's turns.
        lam: GAE lambda.
        bootstrap: ``[B]`` value after the last real turn, or None for 0.

    Returns:
        ``(advantages, returns)``, both ``[B, L]`` and 0 on padding; no gradient.
    """
    return sequential_gae(
        rewards, values, mask, torch.ones_like(mask, dtype=torch.bool), gamma, lam, bootstrap
    )


@torch.no_grad()
def token_level_gae(
    token_rewards: Tensor,
    token_values: Tensor,
    token_mask: Tensor,
    action_end: Tensor,
    round_end: Tensor,
    gamma: float,
    lam: float,
    token_gamma: float = 1.0,
    token_lam: float = 1.0,
    bootstrap: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Token-level GAE across the agents' actions of one episode.

    Each row is one episode's response tokens, every action's tokens concatenated in
    play order. Inside an action the edge from a token to the next uses ``token_gamma``
    and ``token_lam``; from an action's last token to the next action's first token it
    uses discount 1 (same round) or ``gamma`` (round end) and ``lam``, exactly as
    :func:`sequential_gae`. With ``token_gamma = token_lam = 1`` and each action's
    reward on its last token, the returns at each action's first token equal the
    action-level returns (the consistency property; see the docs).

    Args:
        token_rewards: ``[B, T]`` (usually 0 except the last token of an action).
        token_values: ``[B, T]`` critic value per token.
        token_mask: ``[B, T]`` 1 on real tokens.
        action_end: ``[B, T]`` 1 at the last token of each action.
        round_end: ``[B, T]`` 1 at the last token of each round's last action (a
            subset of ``action_end``).
        gamma, lam: between actions, as in :func:`sequential_gae`.
        token_gamma, token_lam: inside an action.
        bootstrap: ``[B]`` value after the last real token, or None for 0.

    Returns:
        ``(advantages, returns)``, both ``[B, T]`` and 0 on padding; no gradient.
    """
    ends = action_end.bool()
    if bool((round_end.bool() & ~ends).any()):
        raise ValueError("round_end is set on a token that is not an action_end")
    ones = torch.ones_like(token_values)
    between = torch.where(round_end.bool(), ones * gamma, ones)
    discount = torch.where(ends, between, ones * token_gamma)
    trace = torch.where(ends, ones * lam, ones * token_lam)
    return _gae(token_rewards, token_values, token_mask, discount, trace, bootstrap)


# ---------------------------------------------------------------------------
# losses


def group_relative_advantages(
    rewards: Tensor,
    groups: Sequence[Hashable],
    *,
    scale_by_std: bool = True,
    eps: float = 1e-6,
    singletons: Literal["error", "zero"] = "error",
) -> Tensor:
    """GRPO's group-relative advantages: each reward minus its group's mean, optionally divided
    by the group's standard deviation.

    ``A_i = (r_i - mean_{g(i)}) / (std_{g(i)} + eps)`` with the sample std (Bessel-corrected,
    ``ddof=1``: ``torch.std``'s default, which both references call: verl's
    ``compute_grpo_outcome_advantage``, the GRPO that PettingLLMs' AT-GRPO runs, and TRL's
    ``GRPOTrainer``); with ``scale_by_std=False`` (Dr.GRPO)
    ``A_i = r_i - mean_{g(i)}``. A group whose rewards all tie gives 0 advantages either way.

    Args:
        rewards: ``[B]`` one scalar reward per sample.
        groups: ``B`` hashable keys; samples with equal keys form a group (AT-GRPO: ``(problem,
            turn, agent)``; MAGRPO: the problem).
        scale_by_std: divide by the group's std.
        eps: added to the std.
        singletons: a group of one sample has no baseline: ``"error"`` raises ``ValueError``
            naming the key; ``"zero"`` gives it advantage 0 (it is not trained on).

    Returns:
        ``[B]`` advantages, in the order of ``rewards``.
    """
    if rewards.dim() != 1 or rewards.numel() != len(groups):
        raise ValueError(
            f"rewards must be [B] with one group key each; got shape {tuple(rewards.shape)} "
            f"and {len(groups)} keys"
        )
    if singletons not in ("error", "zero"):
        raise ValueError(f"singletons must be 'error' or 'zero', got {singletons!r}")
    members: dict[Hashable, list[int]] = {}
    for i, key in enumerate(groups):
        members.setdefault(key, []).append(i)
    r = rewards.double()
    out = torch.zeros_like(r)
    for key, idx in members.items():
        if len(idx) == 1:
            if singletons == "error":
                raise ValueError(
                    f"group {key!r} holds one sample: a group-relative advantage needs >= 2 "
                    "samples from the same state (is the group key too fine, or were its "
                    "siblings dropped?); pass singletons='zero' to give it advantage 0"
                )
            continue
        g = r[idx]
        centred = g - g.mean()
        std = g.std()  # ddof=1, as verl and TRL
        if scale_by_std and std > 0:  # a tie stays 0 (no 0/0 with eps=0)
            centred = centred / (std + eps)
        out[idx] = centred
    return out.to(rewards.dtype if rewards.is_floating_point() else torch.float32)


def policy_loss_aggregate(
    per_token: Tensor,
    mask: Tensor,
    mode: Literal["token_mean", "seq_mean", "seq_sum_norm"] = "token_mean",
    max_tokens: int | None = None,
) -> Tensor:
    """Reduce a ``[B, T]`` per-token loss to a scalar over the real tokens.

    - ``token_mean``: mean over every real token of the batch (long responses weigh more).
    - ``seq_mean``: mean over each sequence's tokens, then over sequences (the original GRPO
      ``1/|o_i|`` length normalisation: a short response's tokens weigh more).
    - ``seq_sum_norm``: each sequence's token sum divided by the constant ``max_tokens``, then
      the mean over sequences (Dr.GRPO: no per-response length normalisation, so the loss has
      no length bias).
    """
    m = _as_bool(mask, per_token)
    zero = torch.zeros((), dtype=per_token.dtype, device=per_token.device)
    vals = torch.where(m, per_token, zero)
    if mode == "token_mean":
        return masked_mean(per_token, m)
    rows = m.any(dim=-1)
    if not rows.any():
        return vals.sum() * 0.0
    if mode == "seq_mean":
        per_seq = vals.sum(-1) / m.sum(-1).clamp(min=1)
        return per_seq[rows].mean()
    if mode == "seq_sum_norm":
        if max_tokens is None or max_tokens < 1:
            raise ValueError("mode='seq_sum_norm' needs max_tokens >= 1 (the generation limit)")
        return (vals.sum(-1) / max_tokens)[rows].mean()
    raise ValueError(f"mode must be token_mean, seq_mean or seq_sum_norm, got {mode!r}")


def _broadcast_like(x: Tensor, like: Tensor) -> Tensor:
    """Let per-action quantities ``[B]`` apply to every token ``[B, T]``."""
    while x.dim() < like.dim():
        x = x.unsqueeze(-1)
    return x.expand_as(like)


#: Log-ratios are clamped to this before ``exp`` (as verl): a whole action's summed log-ratio
#: (``ratio_level="action"``) can reach hundreds on a long response and overflow float32.
MAX_LOG_RATIO = 20.0


def ppo_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_eps: float,
    clip_eps_high: float | None = None,
    aggregation: Literal["token_mean", "seq_mean", "seq_sum_norm"] = "token_mean",
    max_tokens: int | None = None,
    *,
    ratio_level: Literal["token", "action"] = "token",
    clip_ratio_c: float | None = None,
    weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate loss, token-mean over real tokens (by default).

    ``loss = mean_t max(-A_t r_t, -A_t clip(r_t, 1 - eps, 1 + eps_high))`` with
    ``r_t = exp(logp_t - old_logp_t)``; the mean is over all real tokens of the batch
    (each token weighs the same, so long responses weigh more than short ones).

    Args:
        logp: ``[B, T]`` log-probabilities of the taken tokens under the current policy
            (carries the gradient).
        old_logp: ``[B, T]`` the same under the rollout policy (no gradient needed).
        advantages: ``[B, T]`` per token, or ``[B]`` per action (broadcast over tokens).
        mask: ``[B, T]`` 1 on real response tokens.
        clip_eps: lower clip range.
        clip_eps_high: upper clip range (DAPO's clip-higher); defaults to ``clip_eps``.
        aggregation, max_tokens: how the per-token loss is reduced
            (:func:`policy_loss_aggregate`; ``seq_sum_norm`` is Dr.GRPO's).
        ratio_level: ``"token"``: one ratio and one clip per token (verl, TRL; an action-level
            advantage is copied to each token). ``"action"``: one ratio per row,
            ``exp(sum_t logp_t - sum_t old_logp_t)``, clipped once, with the row's advantage
            (the MARFT paper and reference code; the row's loss is then reduced by
            ``aggregation`` as if each of its tokens carried it: ``seq_mean`` is the
            reference's mean over actions).
        clip_ratio_c: dual-clip (verl's ``clip_ratio_c``, Ye et al. 2020): where ``A < 0`` the
            loss is at most ``-A * clip_ratio_c``, so a ratio far above 1 on a bad action
            cannot produce an unbounded loss; ``None`` = off. Must be > 1.
        weights: ``[B, T]`` (or ``[B]``) non-negative per-token factors applied to the
            per-token loss before the reduction, no gradient (the rollout importance
            correction, :func:`rollout_is_weights`); ``None`` = 1.

    Returns:
        ``(loss, stats)``; loss is a scalar; stats (floats): ``clipfrac`` (share of real
        tokens where the clipped branch is active), ``kl_rollout`` (KL from the rollout
        policy to the current one, :func:`mean_kl` with k3: the approximate KL that
        ``algo.target_kl`` compares), ``ratio_mean``, ``ratio_max``, and with dual-clip
        ``dualclip_frac`` (share of real tokens where the ``-A * c`` bound is active).
    """
    eps_high = clip_eps if clip_eps_high is None else clip_eps_high
    if clip_ratio_c is not None and clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (dual-clip bound), got {clip_ratio_c}")
    m = _as_bool(mask, logp)
    adv = _broadcast_like(advantages, logp).detach()
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    # Padding may hold anything: zero the log-ratio there so exp() cannot overflow.
    token_log_ratio = torch.where(m, logp - old_logp.detach(), zero)
    if ratio_level == "token":
        log_ratio = token_log_ratio
    elif ratio_level == "action":
        # one ratio per action: the product of its token ratios, on every token of the row
        log_ratio = _broadcast_like(token_log_ratio.sum(dim=-1), logp)
        # the row's advantage (an action-level advantage is the same on every token)
        adv = _broadcast_like(masked_mean(torch.where(m, adv, zero), m, dim=-1), logp)
    else:
        raise ValueError(f"ratio_level must be 'token' or 'action', got {ratio_level!r}")
    ratio = torch.exp(log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - clip_eps, 1.0 + eps_high)
    per_token = torch.maximum(unclipped, clipped)
    dual = torch.zeros_like(m)
    if clip_ratio_c is not None:
        bound = -adv * clip_ratio_c
        dual = (adv < 0) & (per_token > bound)
        per_token = torch.where(adv < 0, torch.minimum(per_token, bound), per_token)
    if weights is not None:
        per_token = per_token * _broadcast_like(weights, logp).detach()
    loss = policy_loss_aggregate(per_token, m, aggregation, max_tokens)
    with torch.no_grad():
        stats = {
            "clipfrac": float(masked_mean((clipped > unclipped).to(logp.dtype), m)),
            "kl_rollout": float(mean_kl(old_logp.detach(), logp.detach(), m)),
            "ratio_mean": float(masked_mean(ratio, m)),
            "ratio_max": float(torch.where(m, ratio, zero).max()) if m.any() else 0.0,
        }
        if clip_ratio_c is not None:
            stats["dualclip_frac"] = float(masked_mean(dual.to(logp.dtype), m))
    return loss, stats


def rollout_is_weights(
    train_logp: Tensor,
    rollout_logp: Tensor,
    mask: Tensor,
    cap: float,
    reported: Tensor | None = None,
    level: Literal["token", "action"] = "token",
) -> tuple[Tensor, dict[str, float]]:
    """Truncated importance weights for the rollout/trainer mismatch (TRL's vLLM correction).

    The tokens were sampled by the generator (vLLM, or the KV-cached ``generate``), whose
    probabilities differ slightly from the training forward's ``pi_old`` that PPO's ratio is
    taken against; the sampled tokens are reweighted by ``w = min(exp(train_logp -
    rollout_logp), cap)`` (truncated IS, Ionides 2008; TRL's vLLM correction).
    ``level="action"`` uses one weight per row, ``min(exp(sum_t (train_logp - rollout_logp)),
    cap)``, to go with ``ratio_level="action"``.

    Args:
        train_logp: ``[B, T]`` the training forward's log-probs of the sampled tokens (pi_old).
        rollout_logp: ``[B, T]`` the generator's log-probs of the same tokens.
        mask: ``[B, T]`` real response tokens.
        cap: upper truncation (> 0).
        reported: ``[B, T]`` where the generator reported a log-prob (vLLM may omit the stop
            token's); elsewhere the weight is 1. ``None`` = wherever ``mask`` is set.
        level: ``"token"`` or ``"action"``.

    Returns:
        ``(weights, stats)``: weights ``[B, T]``, no gradient, 1 on padding and unreported
        tokens; stats ``is_weight_mean`` and ``is_capped_frac`` over real tokens.
    """
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    m = _as_bool(mask, train_logp)
    rep = m if reported is None else (m & _as_bool(reported, train_logp))
    zero = torch.zeros((), dtype=train_logp.dtype, device=train_logp.device)
    diff = torch.where(rep, train_logp.detach() - rollout_logp.detach(), zero)
    if level == "action":
        diff = _broadcast_like(diff.sum(dim=-1), train_logp)
        rep = _broadcast_like(rep.any(dim=-1), train_logp) & m
    elif level != "token":
        raise ValueError(f"level must be 'token' or 'action', got {level!r}")
    raw = torch.exp(diff.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    weights = torch.where(rep, raw.clamp(max=cap), torch.ones_like(raw))
    stats = {
        "is_weight_mean": float(masked_mean(weights, m)),
        "is_capped_frac": float(masked_mean((rep & (raw > cap)).to(train_logp.dtype), m)),
    }
    return weights, stats


def clipped_value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip_eps: float | None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped value loss, ``0.5 * max((V - R)^2, (V_clip - R)^2)`` mean over real entries.

    ``V_clip = old_V + clamp(V - old_V, -clip_eps, clip_eps)``; ``clip_eps=None`` gives
    the plain squared error.

    Args:
        values: ``[B, T]`` or ``[B]`` current critic values (carry the gradient).
        old_values: same shape, the values at rollout time.
        returns: same shape, GAE returns (targets).
        mask: same shape, 1 on real entries.
        clip_eps: value clip range, or None.

    Returns:
        ``(loss, stats)``; stats: ``vf_clipfrac``, ``value_mean``, ``return_mean`` (the
        critic's explained variance is :func:`explained_variance` over the whole batch).
    """
    m = _as_bool(mask, values)
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    old = torch.where(m, old_values.detach(), zero)
    target = torch.where(m, returns.detach(), zero)
    v = torch.where(m, values, zero)
    err = (v - target) ** 2
    if clip_eps is None:
        per = err
        clipfrac = torch.zeros((), dtype=values.dtype)
    else:
        v_clip = old + torch.clamp(v - old, -clip_eps, clip_eps)
        err_clip = (v_clip - target) ** 2
        per = torch.maximum(err, err_clip)
        clipfrac = masked_mean((err_clip > err).to(values.dtype), m)
    loss = 0.5 * masked_mean(per, m)
    with torch.no_grad():
        stats = {
            "vf_clipfrac": float(clipfrac),
            "value_mean": float(masked_mean(v, m)),
            "return_mean": float(masked_mean(target, m)),
        }
    return loss, stats


def entropy_bonus(
    entropy: Tensor,
    mask: Tensor,
    aggregation: Literal["token_mean", "seq_mean", "seq_sum_norm"] = "token_mean",
    max_tokens: int | None = None,
) -> Tensor:
    """Per-token entropy reduced as the policy loss is (the loss subtracts ``ent_coef`` times it).

    The trainer reduces the entropy bonus and the KL penalty with the policy loss's
    ``algo.loss_agg`` (as verl's ``agg_loss``), so ``seq_mean`` weighs every response the same in
    all three terms instead of the regularisers favouring long responses.

    Args:
        entropy: ``[B, T]`` entropy of the policy's next-token distribution.
        mask: ``[B, T]``.
        aggregation, max_tokens: as :func:`policy_loss_aggregate` (default: token mean).

    Returns:
        Scalar.
    """
    return policy_loss_aggregate(entropy, mask, aggregation, max_tokens)


def kl_penalty(logp: Tensor, ref_logp: Tensor, kind: Literal["k1", "k2", "k3"] = "k3") -> Tensor:
    """Per-token estimate of KL(policy || reference) from sampled-token log-probs.

    With ``d = logp - ref_logp`` (Schulman's estimators): ``k1 = d`` (unbiased, can be
    negative), ``k2 = d^2 / 2`` (low variance, biased), ``k3 = exp(-d) - 1 + d``
    (unbiased, always >= 0). Reduce with :func:`masked_mean`.

    Args:
        logp: ``[B, T]`` policy log-probabilities of the sampled tokens.
        ref_logp: ``[B, T]`` reference (base model, adapters disabled) log-probabilities.
        kind: ``"k1"``, ``"k2"`` or ``"k3"``.

    Returns:
        ``[B, T]`` per-token penalty.
    """
    d = logp - ref_logp.detach()
    if kind == "k1":
        return d
    if kind == "k2":
        return 0.5 * d * d
    if kind == "k3":
        # clamp keeps exp() finite when the policy drifted far from the reference
        return torch.exp(torch.clamp(-d, max=20.0)) - 1.0 + d
    raise ValueError(f"unknown KL estimator {kind!r}; valid: 'k1', 'k2', 'k3'")


def mean_kl(
    logp: Tensor, other_logp: Tensor, mask: Tensor, kind: Literal["k1", "k2", "k3"] = "k3"
) -> Tensor:
    """Mean over real tokens of :func:`kl_penalty`: KL(policy || other), estimated from tokens
    sampled from ``policy``.

    The trainer's ``kl_rollout`` is ``mean_kl(rollout_logp, current_logp)`` and ``kl_ref``
    ``mean_kl(rollout_logp, reference_logp)`` (the tokens were sampled by the rollout policy).

    Args:
        logp: ``[B, T]`` log-probabilities of the sampled tokens under the sampling policy.
        other_logp: ``[B, T]`` the same under the other policy.
        mask: ``[B, T]``.
        kind: the estimator (k3: unbiased and >= 0).

    Returns:
        Scalar.
    """
    m = _as_bool(mask, logp)
    zero = torch.zeros((), dtype=logp.dtype, device=logp.device)
    # padding may hold anything: compare real entries only
    return masked_mean(
        kl_penalty(torch.where(m, logp, zero), torch.where(m, other_logp, zero), kind), m
    )


def logprob_mismatch(
    rollout_logp: Tensor, train_logp: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor]:
    """How far the training forward's log-probs are from the ones the rollout sampled with.

    The same weights score the same tokens twice: once while generating (KV cache, left
    padding, the inference engine's kernels) and once in the training forward (full sequence,
    right padding). In float32 they agree to ~1e-6; bf16 and a separate engine (vLLM) make
    them drift, which biases PPO's importance ratio. This is the first number to read when a
    run on a new backend or dtype misbehaves.

    Args:
        rollout_logp: ``[B, T]`` log-probs reported by the generator.
        train_logp: ``[B, T]`` log-probs of the same tokens from the training forward.
        mask: ``[B, T]``, true where both are real.

    Returns:
        ``(mean, max)`` of ``|rollout_logp - train_logp|`` over the masked tokens (zeros when
        the mask is empty).
    """
    m = _as_bool(mask, train_logp)
    diff = torch.where(m, (rollout_logp - train_logp).abs(), torch.zeros_like(train_logp))
    peak = diff.max() if diff.numel() else diff.sum()
    return masked_mean(diff, m), peak
