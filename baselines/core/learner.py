"""The learner: a run's trainable parts (policy adapters, critics and their value heads), one
optimiser and learning-rate schedule per adapter and critic; it scores a batch (old and
reference log-probabilities, the critics' values) and updates on an estimate (PPO epochs over
shuffled minibatches with gradient accumulation).

Which adapter plays an agent and which critic values it come from the run's
:class:`~baselines.core.methods.MethodSpec`; the learner never branches on the method's name.
With ``algo.agent_by_agent`` only one agent's turns train the policy in an iteration, rotating
every ``algo.rotate_every`` iterations (critics always train). Minibatch order is drawn from a
generator seeded with ``(train.seed, iteration)``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from . import algos, diagnostics
from .advantages import RowKey
from .config import Config
from .critic import CENTRALIZED, Critics, centralized_messages
from .estimators import Estimate, Scored
from .generation import render_prompts
from .methods import MethodSpec
from .models import AdapterModel, LoraSpec, pack_sequences
from .rollout import Rollout, TurnSample
from .sources import Batch

__all__ = [
    "LOGPROB_CHUNK",
    "LRSchedule",
    "Learner",
    "Scoring",
    "build_models",
    "logprob_mismatch_metrics",
    "optimiser_steps",
    "rollout_is",
]

LOGPROB_CHUNK = 1024


def _minibatches(indices: Sequence[int], size: int, generator: torch.Generator) -> list[list[int]]:
    order = torch.randperm(len(indices), generator=generator).tolist()
    shuffled = [indices[i] for i in order]
    return [shuffled[i : i + size] for i in range(0, len(shuffled), size)]


def _pad(rows: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width)
    for b, r in enumerate(rows):
        out[b, : r.numel()] = r.float()
    return out


class LRSchedule:
    """The learning-rate factor of one optimiser at its step ``step`` (a ``LambdaLR`` lambda):
    linear warmup over ``warmup`` steps, then constant, linear or cosine decay that reaches 0
    at step ``total``, that optimiser's own number of steps in the run
    (:meth:`Trainer.lr_horizon`). A plain object, so ``LambdaLR.state_dict`` checkpoints
    ``total`` with it."""

    def __init__(self, kind: str, warmup: int, total: int):
        self.kind, self.warmup, self.total = kind, warmup, total

    def __call__(self, step: int) -> float:
        warmup, total = self.warmup, self.total
        if warmup and step < warmup:
            return (step + 1) / warmup
        if self.kind == "constant" or total <= warmup:
            return 1.0
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        if self.kind == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))


def optimiser_steps(samples: int, minibatch_size: int, grad_accum: int, epochs: int) -> int:
    """Optimiser steps of one update on ``samples`` turns: every epoch splits them into
    minibatches of ``minibatch_size`` and steps once per ``grad_accum`` minibatches (a trailing
    smaller group steps too)."""
    if samples <= 0:
        return 0
    return epochs * math.ceil(math.ceil(samples / minibatch_size) / grad_accum)


def rollout_is(
    chunk: Sequence[TurnSample], train_logp: torch.Tensor, mask: torch.Tensor, cap: float, level
) -> tuple[torch.Tensor, dict[str, float]]:
    """``algo.rollout_is=truncated``: :func:`~baselines.core.algos.rollout_is_weights` of a
    minibatch from each turn's ``rollout_logprobs`` (tokens the generator did not report get
    weight 1)."""
    width = train_logp.shape[1]
    rollout = torch.zeros_like(train_logp)
    reported = torch.zeros_like(mask)
    for b, s in enumerate(chunk):
        n = min(len(s.rollout_logprobs), width)
        rollout[b, :n] = torch.tensor(s.rollout_logprobs[:n], dtype=train_logp.dtype)
        reported[b, :n] = True
    return algos.rollout_is_weights(train_logp, rollout, mask, cap, reported & mask, level)


def logprob_mismatch_metrics(
    samples: Sequence[TurnSample], train_logp: dict[tuple[int, int], torch.Tensor]
) -> dict[str, float]:
    """``train/logprob_mismatch`` (mean ``|rollout - training|`` log-prob of the sampled tokens),
    ``train/logprob_mismatch_max`` and ``agent/<id>/logprob_mismatch``, over the turns whose
    generator reported log-probs (no turn reported them: no metric)."""
    from torch.nn.utils.rnn import pad_sequence

    reported = [s for s in samples if s.rollout_logprobs]
    groups: dict[str, list[TurnSample]] = {"train": reported}
    for s in reported:
        groups.setdefault(f"agent/{s.agent}", []).append(s)
    out: dict[str, float] = {}
    for prefix, group in groups.items():
        if not group:
            continue
        sampled = [torch.tensor(s.rollout_logprobs, dtype=torch.float32) for s in group]
        scored = [
            train_logp[(s.episode, s.index)][: len(r)].float()
            for s, r in zip(group, sampled, strict=True)
        ]
        mask = [torch.ones(len(r), dtype=torch.bool) for r in sampled]
        padded = (pad_sequence(x, batch_first=True) for x in (sampled, scored, mask))
        mean, peak = algos.logprob_mismatch(*padded)
        out[f"{prefix}/logprob_mismatch"] = float(mean)
        if prefix == "train":
            out["train/logprob_mismatch_max"] = float(peak)
    return out


def build_models(
    cfg: Config, spec: MethodSpec, agents: Sequence[str], model, tokenizer
) -> tuple[AdapterModel, AdapterModel, Critics]:
    """The run's adapters on ``model`` (its policy adapters, then its critics', on the policy's
    base or, with ``model.critic_shares_base=false``, on a copy of it) and the critics' value
    heads: ``(policy model, critic model, critics)``."""
    policy_names = spec.policy_adapters(list(agents))
    critic_names = spec.critic_names(list(agents))
    lora = LoraSpec(
        cfg.model.lora_r,
        cfg.model.lora_alpha,
        cfg.model.lora_dropout,
        list(cfg.model.target_modules),
    )
    if cfg.model.critic_shares_base or not critic_names:
        policy = AdapterModel(model, tokenizer, policy_names + critic_names, lora)
        critic_model = policy
    else:  # the critics' adapters on their own copy of the base (copied before peft wraps it)
        critic_base = copy.deepcopy(model)
        policy = AdapterModel(model, tokenizer, policy_names, lora)
        critic_model = AdapterModel(critic_base, tokenizer, critic_names, lora)
    if cfg.model.gradient_checkpointing:  # each layer recomputed under its own adapter
        for m in dict.fromkeys((policy, critic_model)):
            m.enable_gradient_checkpointing()
    return policy, critic_model, Critics(critic_model, critic_names, spec.critic)


@dataclass
class Scoring:
    """A batch scored for its update: the rollout policy's log-probabilities of every turn, the
    reference's (empty unless :meth:`Learner.needs_reference`), the critics' inputs, and what
    the estimators read (:class:`~baselines.core.estimators.Scored`)."""

    old_logp: dict[tuple[int, int], torch.Tensor]
    ref_logp: dict[tuple[int, int], torch.Tensor]
    scored: Scored
    critic_ids: dict[tuple[int, int], list[int]] = field(default_factory=dict)


class Learner:
    """Losses, optimisers and schedules of a run's adapters and critics.

    Args:
        cfg: the run's config.
        spec: its method.
        agents: the team, in play order.
        models: :func:`build_models`' ``(policy model, critic model, critics)``.
        horizon: rounds per training episode (the learning-rate horizon's plan).
        device: where the models are.
    """

    def __init__(
        self,
        cfg: Config,
        spec: MethodSpec,
        agents: Sequence[str],
        models: tuple[AdapterModel, AdapterModel, Critics],
        horizon: int,
        device: str,
    ):
        self.cfg, self.spec, self.agents, self.horizon = cfg, spec, list(agents), horizon
        self.model, self.critic_model, self.critics = models
        self.device = device
        self.pad_id = self.model.tokenizer.pad_token_id
        self.policy_names = spec.policy_adapters(self.agents)
        self.critic_names = spec.critic_names(self.agents)
        self.iteration = 0  # updates done: the run's iteration
        a = cfg.algo
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        for name in self.policy_names:
            self.optimizers[f"policy/{name}"] = torch.optim.AdamW(
                self.model.parameters(name), lr=a.lr, weight_decay=a.weight_decay
            )
        for name in self.critic_names:
            self.optimizers[f"critic/{name}"] = torch.optim.AdamW(
                self.critics.parameters(name), lr=a.critic_lr, weight_decay=a.weight_decay
            )
        # each optimiser decays over its own number of steps: a per-agent adapter sees only its
        # agent's turns, a critic every turn of every round (revised each iteration, lr_horizon)
        self.schedulers = {
            k: torch.optim.lr_scheduler.LambdaLR(
                opt, LRSchedule(a.scheduler, a.warmup_steps, self.lr_horizon(k, None))
            )
            for k, opt in self.optimizers.items()
        }

    # ------------------------------------------------------------------ one iteration

    @torch.no_grad()
    def score(self, batch: Batch) -> Scoring:
        """Old (and, on schedule, reference) log-probabilities of ``batch``'s samples and, with
        critics, their values and the values truncated episodes bootstrap from."""
        samples = batch.samples
        old_logp, ref_logp = self._score_policy(samples)
        if not self.critic_names:
            return Scoring(old_logp, ref_logp, Scored(batch))
        critic_ids = self._critic_prompts(samples)
        values = self._score_values(samples, critic_ids)
        bootstrap = self._bootstrap_values(batch.rollout)
        return Scoring(old_logp, ref_logp, Scored(batch, values, bootstrap), critic_ids)

    def update(self, scoring: Scoring, estimate: Estimate) -> dict[str, float]:
        """PPO epochs on ``estimate``: every trained agent's policy adapter, then every critic;
        ends the iteration (:attr:`iteration` + 1). Returns the update's metrics."""
        samples = scoring.scored.batch.samples
        trained = self.agents_to_train(self.iteration)
        generator = torch.Generator().manual_seed(self.cfg.train.seed * 1_000_003 + self.iteration)
        metrics = logprob_mismatch_metrics(samples, scoring.old_logp)
        metrics.update(
            self._update_policies(
                samples, trained, scoring.old_logp, scoring.ref_logp, estimate.advantages, generator
            )
        )
        metrics.update(
            self._update_critics(
                samples,
                scoring.critic_ids,
                dict(scoring.scored.values),
                estimate.returns,
                generator,
            )
        )
        self.iteration += 1
        return metrics

    def state(self) -> dict[str, Any]:
        """Every adapter's and value head's weights, optimiser and scheduler (a checkpoint's)."""
        return {
            "adapters": {n: m.adapter_state(n) for m in self.adapter_models() for n in m.adapters},
            "value_heads": self.critics.head_state(),
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
        }

    def load_state(self, state: dict[str, Any], source: str = "checkpoint") -> None:
        """Restore :meth:`state`; ValueError when ``state`` lacks one of this run's adapters."""
        models = self.adapter_models()
        missing = {n for m in models for n in m.adapters} - set(state["adapters"])
        if missing:
            raise ValueError(
                f"{source} lacks adapters {sorted(missing)}: "
                f"was it written by another method or environment?"
            )
        for m in models:
            for name in m.adapters:
                m.load_adapter_state(
                    name, {k: v.to(self.device) for k, v in state["adapters"][name].items()}
                )
        self.critics.load_head_state(state["value_heads"])
        for k, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][k])
        for k, sched in self.schedulers.items():
            sched.load_state_dict(state["schedulers"][k])

    # ------------------------------------------------------------------ parts

    def agents_to_train(self, iteration: int) -> list[str]:
        """Agents whose turns train the policy in ``iteration`` (all, or one in rotation)."""
        if not self.cfg.algo.agent_by_agent:
            return list(self.agents)
        return [self.agents[(iteration // self.cfg.algo.rotate_every) % len(self.agents)]]

    def adapter_models(self) -> list[AdapterModel]:
        """The policy model, and the critics' model when it is a separate base copy."""
        return [self.model] if self.critic_model is self.model else [self.model, self.critic_model]

    def set_training(self, training: bool) -> None:
        for m in self.adapter_models():
            m.peft.train(training)

    def _forward_policy(self, adapter: str | None, samples: Sequence[TurnSample]):
        batch = pack_sequences(
            [s.prompt_ids for s in samples], [s.action_ids for s in samples], self.pad_id
        ).to(self.device)
        ctx = self.model.reference() if adapter is None else self.model.using(adapter)
        with ctx:
            logp, ent = self.model.action_logprobs(batch, self.cfg.model.temperature, LOGPROB_CHUNK)
        return logp, ent, batch.mask

    def needs_reference(self, iteration: int) -> bool:
        """Whether iteration ``iteration`` scores the reference (adapters disabled): always with a
        KL penalty, otherwise every ``algo.kl_ref_every`` iterations, only to log ``kl_ref``."""
        a = self.cfg.algo
        # iteration is 0-based and logged as step iteration + 1: steps N, 2N, ... as eval_every
        return a.kl_coef > 0 or (a.kl_ref_every > 0 and (iteration + 1) % a.kl_ref_every == 0)

    @torch.no_grad()
    def _score_policy(self, samples: list[TurnSample]):
        """Old (rollout-policy) log-probabilities of every turn and, when this iteration
        :meth:`needs_reference`, the reference's (otherwise the reference dict is empty)."""
        old: dict[tuple[int, int], torch.Tensor] = {}
        ref: dict[tuple[int, int], torch.Tensor] = {}
        size = self.cfg.algo.minibatch_size
        passes = [(None, ref)] if self.needs_reference(self.iteration) else []
        for adapter in self.policy_names:
            group = [s for s in samples if self.spec.policy_adapter(s.agent) == adapter]
            for i in range(0, len(group), size):
                chunk = group[i : i + size]
                for which, store in ((adapter, old), *passes):
                    logp, _, mask = self._forward_policy(which, chunk)
                    for s, row, m in zip(chunk, logp.cpu(), mask.cpu(), strict=True):
                        store[(s.episode, s.index)] = row[m]
        return old, ref

    def _critic_prompts(self, samples: list[TurnSample]) -> dict[tuple[int, int], list[int]]:
        if self.spec.critic != CENTRALIZED:
            return {(s.episode, s.index): s.prompt_ids for s in samples}
        convs = [centralized_messages(s.state, s.agent, s.role) for s in samples]
        ids = render_prompts(self.model.tokenizer, convs, self.cfg.model.max_prompt_tokens)
        return {(s.episode, s.index): p for s, p in zip(samples, ids, strict=True)}

    def _forward_values(self, name: str, samples: Sequence[TurnSample], critic_ids) -> torch.Tensor:
        token = self.cfg.algo.level == "token"
        batch = pack_sequences(
            [critic_ids[(s.episode, s.index)] for s in samples],
            [s.action_ids if token else [] for s in samples],
            self.pad_id,
        ).to(self.device)
        values = self.critics.values(name, batch)
        return values if token else values[:, :1]

    @torch.no_grad()
    def _bootstrap_values(self, rollout: Rollout) -> dict[RowKey, float]:
        """The critic's value where each truncated episode stopped (``Episode.final_view``),
        keyed by advantage row (:func:`~baselines.core.advantages.row_keys`)."""
        wanted: list[tuple[RowKey, str, list[dict]]] = []  # (row, critic, critic input messages)
        for e, (episode, turns) in enumerate(zip(rollout.episodes, rollout.turns, strict=True)):
            view = episode.final_view
            if not episode.truncated:
                continue
            if view is None:
                raise ValueError(
                    f"episode {e} (task {episode.task_id!r}) is truncated but has no "
                    "final_view to bootstrap from: is the environment a FlexMGEnv?"
                )
            rows: list[tuple[RowKey, str, str]]
            if self.spec.sequential:
                rows = [((e, None), view.agent, view.role)]
            else:
                roles = {t.agent: t.role for t in turns}
                rows = [((e, agent), agent, role) for agent, role in roles.items()]
            for key, agent, role in rows:
                messages = (
                    centralized_messages(view.state, agent, role)
                    if self.spec.critic == CENTRALIZED
                    else view.messages[agent]
                )
                wanted.append((key, self.spec.critic_name(agent), messages))
        out: dict[RowKey, float] = {}
        size = self.cfg.algo.minibatch_size
        for name in self.critic_names:
            group = [w for w in wanted if w[1] == name]
            for i in range(0, len(group), size):
                chunk = group[i : i + size]
                ids = render_prompts(
                    self.critic_model.tokenizer,
                    [m for _, _, m in chunk],
                    self.cfg.model.max_prompt_tokens,
                )
                batch = pack_sequences(ids, [[] for _ in ids], self.pad_id).to(self.device)
                values = self.critics.values(name, batch)[:, 0].cpu()
                out.update({key: float(v) for (key, _, _), v in zip(chunk, values, strict=True)})
        return out

    @torch.no_grad()
    def _score_values(self, samples, critic_ids) -> dict[tuple[int, int], torch.Tensor]:
        out = {}
        size = self.cfg.algo.minibatch_size
        for name in self.critic_names:
            group = [s for s in samples if self.spec.critic_name(s.agent) == name]
            for i in range(0, len(group), size):
                chunk = group[i : i + size]
                values = self._forward_values(name, chunk, critic_ids).cpu()
                for s, row in zip(chunk, values, strict=True):
                    n = len(s.action_ids) if self.cfg.algo.level == "token" else 1
                    out[(s.episode, s.index)] = row[:n].clone()
        return out

    def _optimise(
        self, key: str, groups: list[list[int]], loss_fn, stop=None
    ) -> list[dict[str, float]]:
        """Accumulate ``loss_fn(minibatch)`` over ``grad_accum`` minibatches per optimiser step.
        ``stop(stats)`` true (``algo.target_kl``) ends the loop before that minibatch's backward;
        a partly accumulated step is dropped."""
        opt, sched = self.optimizers[key], self.schedulers[key]
        params = [p for g in opt.param_groups for p in g["params"]]
        accum = self.cfg.algo.grad_accum
        stats = []
        opt.zero_grad(set_to_none=True)
        for k, mb in enumerate(groups):
            loss, st = loss_fn(mb)
            if stop is not None and stop(st):
                opt.zero_grad(set_to_none=True)
                break
            algos.check_finite(f"{key} loss", loss.detach())
            # the mean over the minibatches of this step: a trailing group holds fewer than
            # grad_accum, and dividing it by grad_accum would under-weight its minibatches
            size = min(accum, len(groups) - (k // accum) * accum)
            (loss / size).backward()
            stats.append(st)
            if (k + 1) % accum == 0 or k == len(groups) - 1:
                norm = torch.nn.utils.clip_grad_norm_(params, self.cfg.algo.max_grad_norm)
                algos.check_finite(f"{key} gradient norm", norm.detach())
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                st["grad_norm"] = float(norm)
        return stats

    def planned_turns(self, key: str, iteration: int) -> int:
        """Turns optimiser ``key`` (``policy/<adapter>`` or ``critic/<name>``) trains on in
        ``iteration`` when every episode plays all ``horizon`` rounds: the plan, an upper bound
        when episodes can end early (``stop_on_correct``, ``max_turns``)."""
        kind, name = key.split("/", 1)
        if kind == "policy":
            agents = [
                a for a in self.agents_to_train(iteration) if self.spec.policy_adapter(a) == name
            ]
        else:
            agents = [a for a in self.agents if self.spec.critic_name(a) == name]
        return self.cfg.train.episodes_per_iteration * self.horizon * len(agents)

    def lr_horizon(self, key: str, turns_now: int | None) -> int:
        """The total optimiser steps of ``key`` in the run: the steps taken so far, this
        iteration's (``turns_now`` turns, known once the rollout is played; ``None``: planned
        too) and the planned steps of every later iteration."""
        a = self.cfg.algo

        def steps(turns: int) -> int:
            return optimiser_steps(turns, a.minibatch_size, a.grad_accum, a.ppo_epochs)

        done = self.schedulers[key].last_epoch if turns_now is not None else 0
        start = self.iteration if turns_now is None else self.iteration + 1
        now = steps(turns_now) if turns_now is not None else 0
        later = sum(
            steps(self.planned_turns(key, k)) for k in range(start, self.cfg.train.iterations)
        )
        return done + now + later

    def _set_lr_horizon(self, key: str, turns_now: int) -> None:
        """Revise optimiser ``key``'s decay horizon with this iteration's actual turn count
        (episodes that ended early train fewer turns than planned), so its last step of the
        run is the one that reaches the final learning rate, and set the rate it steps with
        next accordingly."""
        opt, sched = self.optimizers[key], self.schedulers[key]
        fn = cast(LRSchedule, sched.lr_lambdas[0])  # built so in __init__
        fn.total = self.lr_horizon(key, turns_now)
        for group, base in zip(opt.param_groups, sched.base_lrs, strict=True):
            group["lr"] = base * fn(sched.last_epoch)

    @staticmethod
    def _mean_stats(prefix: str, stats: list[dict[str, float]]) -> dict[str, float]:
        """Each stat averaged over the minibatches that report it (``grad_norm`` only comes
        with the minibatch that ends an accumulation)."""
        out = {}
        for k in dict.fromkeys(k for st in stats for k in st):
            vals = [st[k] for st in stats if k in st]
            out[f"{prefix}/{k}"] = sum(vals) / len(vals)
        return out

    def _update_policies(
        self, samples, trained, old_logp, ref_logp, adv, generator
    ) -> dict[str, float]:
        a = self.cfg.algo
        metrics: dict[str, float] = {}
        for adapter in self.policy_names:
            idx = [
                i
                for i, s in enumerate(samples)
                if s.agent in trained and self.spec.policy_adapter(s.agent) == adapter
            ]
            if not idx:
                continue

            def loss_fn(mb: list[int], adapter=adapter):
                chunk = [samples[i] for i in mb]
                keys = [(s.episode, s.index) for s in chunk]
                logp, ent, mask = self._forward_policy(adapter, chunk)
                width = logp.shape[1]
                old = _pad([old_logp[k] for k in keys], width).to(logp.device)
                advantages = _pad([adv[k] for k in keys], width).to(logp.device)
                max_tokens = self.cfg.model.max_new_tokens
                weights, is_stats = None, dict[str, float]()
                if a.rollout_is == "truncated":
                    weights, is_stats = rollout_is(
                        chunk, old, mask, a.rollout_is_cap, a.ratio_level
                    )
                loss, st = algos.ppo_policy_loss(
                    logp,
                    old,
                    advantages,
                    mask,
                    a.clip_eps,
                    a.clip_eps_high,
                    aggregation=a.loss_agg,
                    max_tokens=max_tokens,
                    ratio_level=a.ratio_level,
                    clip_ratio_c=a.clip_ratio_c,
                    weights=weights,
                )
                st.update(is_stats)
                # entropy and KL are reduced as the policy loss is (algo.loss_agg)
                entropy = algos.entropy_bonus(ent, mask, a.loss_agg, max_tokens)
                st["policy_loss"] = float(loss.detach())
                st["entropy"] = float(algos.masked_mean(ent.detach(), mask))  # per token
                loss = loss - a.ent_coef * entropy
                if a.kl_coef > 0:
                    ref = _pad([ref_logp[k] for k in keys], width).to(logp.device)
                    kl_tok = algos.kl_penalty(logp, ref, a.kl_kind)
                    kl = algos.policy_loss_aggregate(kl_tok, mask, a.loss_agg, max_tokens)
                    st["kl"] = float(algos.masked_mean(kl_tok.detach(), mask))  # per token
                    loss = loss + a.kl_coef * kl
                return loss, st

            stats: list[dict[str, float]] = []
            stopped: list[dict[str, float]] = []  # the minibatch whose KL stopped the update

            def stop(st: dict[str, float], stopped: list = stopped) -> bool:
                if a.target_kl is not None and st["kl_rollout"] > a.target_kl:
                    stopped.append(st)
                return bool(stopped)

            self._set_lr_horizon(f"policy/{adapter}", len(idx))
            for _ in range(a.ppo_epochs):
                stats += self._optimise(
                    f"policy/{adapter}",
                    _minibatches(idx, a.minibatch_size, generator),
                    loss_fn,
                    stop if a.target_kl is not None else None,
                )
                if stopped:
                    break
            metrics.update(self._mean_stats(f"agent/{adapter}", stats or stopped))
            if a.target_kl is not None:
                metrics[f"agent/{adapter}/kl_early_stop"] = float(bool(stopped))
                metrics[f"agent/{adapter}/minibatches_applied"] = float(len(stats))
            # the rate it stepped with last (set by _set_lr_horizon and each scheduler step)
            lr = self.optimizers[f"policy/{adapter}"].param_groups[0]["lr"]
            metrics[f"agent/{adapter}/lr"] = float(lr)
        return metrics

    def _update_critics(
        self, samples, critic_ids, old_values, returns, generator
    ) -> dict[str, float]:
        a = self.cfg.algo
        metrics: dict[str, float] = {}
        for name in self.critic_names:
            idx = [i for i, s in enumerate(samples) if self.spec.critic_name(s.agent) == name]
            if not idx:
                continue

            def loss_fn(mb: list[int], name=name):
                chunk = [samples[i] for i in mb]
                keys = [(s.episode, s.index) for s in chunk]
                values = self._forward_values(name, chunk, critic_ids)
                width = values.shape[1]
                mask = torch.zeros(values.shape, dtype=torch.bool)
                for b, k in enumerate(keys):
                    mask[b, : old_values[k].numel()] = True
                mask = mask.to(values.device)
                old = _pad([old_values[k] for k in keys], width).to(values.device)
                ret = _pad([returns[k] for k in keys], width).to(values.device)
                loss, st = algos.clipped_value_loss(values, old, ret, mask, a.value_clip_eps)
                st["value_loss"] = float(loss.detach())
                return a.vf_coef * loss, st

            stats = []
            self._set_lr_horizon(f"critic/{name}", len(idx))
            for _ in range(a.ppo_epochs):
                stats += self._optimise(
                    f"critic/{name}", _minibatches(idx, a.minibatch_size, generator), loss_fn
                )
            metrics.update(self._mean_stats(f"critic/{name}", stats))
        return metrics

    def scoring_metrics(
        self, rollout, samples, old_logp, ref_logp, adv, values, returns
    ) -> dict[str, float]:
        """Per agent: KL of the rollout policy to the reference, raw advantage mean/std, the
        centralized critic's value change when the agent acts; per critic: explained variance
        of the rollout-time values."""
        out: dict[str, float] = {}
        for agent in self.agents:
            keys = [(s.episode, s.index) for s in samples if s.agent == agent]
            if not keys:
                continue
            old = torch.cat([old_logp[k] for k in keys])
            ones = torch.ones_like(old, dtype=torch.bool)
            if ref_logp:  # scored this iteration (Trainer.needs_reference)
                ref = torch.cat([ref_logp[k] for k in keys])
                out[f"agent/{agent}/kl_ref"] = float(algos.mean_kl(old, ref, ones))
            mean, std = algos.masked_mean_std(torch.cat([adv[k] for k in keys]), ones)
            out[f"agent/{agent}/adv_mean"], out[f"agent/{agent}/adv_std"] = mean, std
        if self.spec.critic == CENTRALIZED:
            out.update(
                {
                    f"agent/{a}/value_change": v
                    for a, v in diagnostics.value_change(rollout, values).items()
                }
            )
        for name in self.critic_names:
            keys = [(s.episode, s.index) for s in samples if self.spec.critic_name(s.agent) == name]
            if keys:
                v, r = torch.cat([values[k] for k in keys]), torch.cat([returns[k] for k in keys])
                out[f"critic/{name}/explained_variance"] = algos.explained_variance(
                    v, r, torch.ones_like(v, dtype=torch.bool)
                )
        return out
