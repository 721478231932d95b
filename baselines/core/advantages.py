"""From played turns to per-token advantages and value targets.

The maths lives in :mod:`baselines.core.algos` (pure tensor functions); this module only lays a
rollout's turns out as the rows those functions expect and maps the results back to turns:

- sequential (MARFT, MARFT-shared): one row per episode, every agent's turn in play order, so
  each agent's value bootstraps from its successor's and the round's last agent from the next
  round's first agent;
- independent (IPPO): one row per (episode, agent) with only that agent's turns.

Action level: one value per turn. Token level: the turns' tokens concatenated, one value per
token, the turn's reward on its last token.

Rewards: a sequential row is one team trajectory, so the round's team reward (the verifier's
score for that round) enters once, at the round's last turn; an independent row uses what the
environment attributed to that agent (``Turn.reward``, i.e. ``reward_to``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from . import algos
from .rollout import Rollout


def round_rewards(rollout: Rollout, episode: int) -> list[float]:
    """The team reward of each round of ``episode`` (the verdict score; 0 for an ungraded round)."""
    verdicts = rollout.episodes[episode].verdicts
    rounds = max((t.round for t in rollout.turns[episode]), default=-1) + 1
    by_round = {int(v.get("round", r)): float(v.get("score", 0.0)) for r, v in enumerate(verdicts)}
    return [by_round.get(r, 0.0) for r in range(rounds)]


RowKey = tuple[int, "str | None"]


def row_keys(rollout: Rollout, sequential: bool) -> list[tuple[RowKey, list[tuple[int, int]]]]:
    """The rows advantages are computed over, each with its key and ``(episode, turn)`` keys
    in play order: ``(e, None)`` for a sequential row (the whole episode), ``(e, agent)`` for
    an independent one (that agent's turns). A truncated row's bootstrap value is keyed so."""
    rows: list[tuple[RowKey, list[tuple[int, int]]]] = []
    for e, turns in enumerate(rollout.turns):
        if sequential:
            rows.append(((e, None), [(e, t.index) for t in turns]))
        else:
            agents = list(dict.fromkeys(t.agent for t in turns))
            rows.extend(((e, a), [(e, t.index) for t in turns if t.agent == a]) for a in agents)
    return rows


def _turn_reward(rollout: Rollout, e: int, i: int, sequential: bool, ends_round: bool) -> float:
    turn = rollout.turns[e][i]
    if not sequential:
        return turn.reward
    return round_rewards(rollout, e)[turn.round] if ends_round else 0.0


def compute_advantages(
    rollout: Rollout,
    values: dict[tuple[int, int], torch.Tensor],
    *,
    sequential: bool,
    token_level: bool,
    gamma: float,
    lam: float,
    token_gamma: float = 1.0,
    token_lam: float = 1.0,
    bootstrap: Mapping[RowKey, float] | None = None,
) -> tuple[dict[tuple[int, int], torch.Tensor], dict[tuple[int, int], torch.Tensor]]:
    """Advantages and returns for every turn ``(episode, index)``.

    ``values[key]`` is the critic's value: shape ``[1]`` (action level) or ``[n_tokens]``
    (token level). Returns ``(advantages, returns)`` keyed the same way; advantages are per
    token (``[n_tokens]``, an action-level advantage repeated), returns have the shape of values.

    A terminated episode's last turn bootstraps from 0. A truncated one (``Episode.truncated``:
    an outside limit stopped it) bootstraps from ``bootstrap[row key]`` (see :func:`row_keys`),
    the critic's value where it stopped; a truncated row without one raises ``ValueError``.
    """
    adv_out: dict[tuple[int, int], torch.Tensor] = {}
    ret_out: dict[tuple[int, int], torch.Tensor] = {}
    keyed = row_keys(rollout, sequential)
    rows = [keys for _, keys in keyed]
    if not rows:
        return adv_out, ret_out
    boot = torch.tensor([_bootstrap_of(rollout, key, bootstrap) for key, _ in keyed])
    width = (
        max(len(r) for r in rows)
        if not token_level
        else max(sum(len(rollout.turns[e][i].action_ids) for e, i in r) for r in rows)
    )
    n = len(rows)
    rewards = torch.zeros(n, width)
    vals = torch.zeros(n, width)
    mask = torch.zeros(n, width, dtype=torch.bool)
    action_end = torch.zeros(n, width, dtype=torch.bool)
    round_end = torch.zeros(n, width, dtype=torch.bool)
    spans: list[list[tuple[tuple[int, int], int, int]]] = []
    for b, row in enumerate(rows):
        col, row_spans = 0, []
        for k, (e, i) in enumerate(row):
            turn = rollout.turns[e][i]
            if not sequential:
                ends_round = True
            elif k < len(row) - 1:
                ends_round = rollout.turns[e][row[k + 1][1]].round != turn.round
            else:
                # an episode cut mid-round bootstraps from the same round's next agent: no discount
                ends_round = not _cut_mid_round(rollout, e)
            reward = _turn_reward(rollout, e, i, sequential, ends_round)
            v = values[(e, i)].float().flatten()
            length = len(turn.action_ids) if token_level else 1
            if token_level and v.numel() != length:
                raise ValueError(f"turn {(e, i)}: {v.numel()} token values for {length} tokens")
            if length == 0:
                raise ValueError(f"turn {(e, i)} of agent {turn.agent!r} has no action tokens")
            vals[b, col : col + length] = v[:length]
            mask[b, col : col + length] = True
            rewards[b, col + length - 1] = reward
            action_end[b, col + length - 1] = True
            round_end[b, col + length - 1] = ends_round
            row_spans.append(((e, i), col, length))
            col += length
        spans.append(row_spans)
    if token_level:
        adv, ret = algos.token_level_gae(
            rewards,
            vals,
            mask,
            action_end,
            round_end,
            gamma,
            lam,
            token_gamma,
            token_lam,
            bootstrap=boot,
        )
    elif sequential:
        adv, ret = algos.sequential_gae(rewards, vals, mask, round_end, gamma, lam, bootstrap=boot)
    else:
        adv, ret = algos.independent_gae(rewards, vals, mask, gamma, lam, bootstrap=boot)
    for b, row_spans in enumerate(spans):
        for key, col, length in row_spans:
            n_tokens = len(rollout.turns[key[0]][key[1]].action_ids)
            a = adv[b, col : col + length]
            adv_out[key] = a if token_level else a.expand(n_tokens).clone()
            ret_out[key] = ret[b, col : col + length].clone()
    return adv_out, ret_out


def _cut_mid_round(rollout: Rollout, e: int) -> bool:
    """True when truncated episode ``e`` stopped inside a round (its last round has no verdict),
    so its bootstrap value is the next agent's of the same round, reached without discount."""
    episode, turns = rollout.episodes[e], rollout.turns[e]
    if not episode.truncated or not turns:
        return False
    graded = {int(v.get("round", r)) for r, v in enumerate(episode.verdicts)}
    return turns[-1].round not in graded


def _bootstrap_of(rollout: Rollout, key: RowKey, bootstrap: Mapping[RowKey, float] | None) -> float:
    if not rollout.episodes[key[0]].truncated:
        return 0.0
    if bootstrap is None or key not in bootstrap:
        raise ValueError(
            f"episode {key[0]} (task {rollout.episodes[key[0]].task_id!r}) was "
            f"truncated but no bootstrap value was given for row {key}: pass the "
            "critic's value where it stopped"
        )
    return float(bootstrap[key])


def whiten(advantages: dict, keys: Sequence) -> dict:
    """Normalise the advantages of ``keys`` to mean 0, std 1 over their real tokens."""
    return normalize(advantages, keys)


def normalize(
    advantages: dict,
    keys: Sequence,
    mode: str = "batch",
    group_of: Mapping | None = None,
    std_floor: float = 0.0,
) -> dict:
    """The advantages of ``keys`` normalised by :func:`~baselines.core.algos.normalize_advantages`
    over their tokens: ``mode`` ``batch`` (all keys together), ``agent`` (``group_of[key]`` names
    each key's group, e.g. its agent id) or ``none``; sets with std below ``std_floor`` are only
    centred."""
    if not keys:
        return {}
    flat = torch.cat([advantages[k] for k in keys])
    groups = None
    if mode == "agent":
        if group_of is None:
            raise ValueError("mode='agent' needs group_of: each key's agent")
        ids = {g: i for i, g in enumerate(dict.fromkeys(group_of[k] for k in keys))}
        groups = torch.cat([torch.full((advantages[k].numel(),), ids[group_of[k]]) for k in keys])
    white = algos.normalize_advantages(
        flat,
        torch.ones_like(flat, dtype=torch.bool),
        mode,  # type: ignore[arg-type]  # checked by normalize_advantages
        groups=groups,
        std_floor=std_floor,
    )
    out, start = {}, 0
    for k in keys:
        n = advantages[k].numel()
        out[k] = white[start : start + n]
        start += n
    return out
