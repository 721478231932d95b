"""The training loop shared by MARFT, MARFT-shared and IPPO.

One iteration: roll out episodes (one batched ``generate`` per agent), score the played turns
(old log-probabilities, reference log-probabilities when ``algo.kl_coef > 0`` or on the
``algo.kl_ref_every`` schedule, critic values),
compute advantages (action or token level), then PPO epochs over shuffled minibatches with
gradient accumulation, one optimiser per policy adapter and per critic. With
``algo.agent_by_agent`` only one agent's turns train the policy in an iteration, rotating every
``algo.rotate_every`` iterations (critics always train).

Determinism: the rollout of iteration ``k`` resets the environments with a seed derived from
``(train.seed, k)``, sampling and dropout draw from the global torch RNG, and minibatch order
from a generator seeded with ``(train.seed, k)``. A checkpoint stores every adapter, value
head, optimiser, scheduler, the RNG states and ``k``, so ``--resume`` continues bit for bit.
"""

from __future__ import annotations

import copy
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

import marft_envs
from marft_envs import VectorEnv

from .core import algos, diagnostics
from .core.advantages import RowKey, compute_advantages, normalize
from .core.checkpoint import (
    capture_rng_state,
    latest_checkpoint,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from .core.config import Config, ConfigError
from .core.critic import CENTRALIZED, Critics, centralized_messages
from .core.generation import (
    Generator,
    HFGenerator,
    SamplingSpec,
    render_prompts,
    stop_token_ids,
)
from .core.groups import (
    AT_GRPO,
    GroupBatch,
    group_advantages,
    joint_rollout,
    pick_tasks,
    tree_rollout,
)
from .core.models import AdapterModel, LoraSpec, load_base, pack_sequences
from .core.rollout import Rollout, TurnSample, collect
from .distributed import make_worker_group
from .methods import get_method

EVAL_SEED = 1_000_003  # evaluation episodes are the same for every run and method


@dataclass(frozen=True)
class EvalSet:
    """An evaluation: environment, seeds, size (first ``size`` tasks of the split) and the
    ``(seed, task_id)`` plan they expand to; a bundle declares the same seeds and size."""

    env_id: str
    overrides: dict[str, Any]
    seeds: list[int]
    size: int
    plan: list[tuple[int, str]]


LOGPROB_CHUNK = 1024


def resolve_device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"train.device={name!r} but CUDA is not available; use cpu or auto")
    return name


def resolve_dtype(name: str, device: str) -> str:
    if name == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    return name


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


CUBLAS_WORKSPACE = ":4096:8"  # what torch's reproducibility notes ask cuBLAS for


def use_deterministic_algorithms() -> None:
    """``torch.use_deterministic_algorithms(True)`` (``train.deterministic``), with
    ``CUBLAS_WORKSPACE_CONFIG`` set first: on CUDA >= 10.2 deterministic cuBLAS needs it, and
    without it the first matmul raises. cuBLAS (and torch's workspace) read it once, at the
    first GPU matmul, which cannot be seen from here: once CUDA is initialised without it
    (a model already on the GPU), setting it may be too late, so the run stops here with
    what to set instead."""
    if "CUBLAS_WORKSPACE_CONFIG" not in os.environ:
        if torch.cuda.is_initialized():
            raise ConfigError(
                "train.deterministic=true needs CUBLAS_WORKSPACE_CONFIG set before CUDA "
                f"initialises, and CUDA is already initialised: export "
                f"CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} before starting Python"
            )
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    torch.use_deterministic_algorithms(True)


def env_overrides(cfg: Config, for_eval: bool) -> tuple[str, dict[str, Any]]:
    """The environment id (resolved to its version: ``arith-2agent`` -> ``arith-2agent-v1``, the
    id logs, checkpoints and bundles record) and ``make`` overrides of training or evaluation.

    Training uses ``split=train`` when the user set no split and the env's dataset has a
    train split (registered ids default to their test split, which is what evaluation uses).
    """
    env_id = cfg.env.eval_id if (for_eval and cfg.env.eval_id) else cfg.env.id
    if env_id is None:
        raise ConfigError("env.id is required: pass --env ID (see `marft-envs list`)")
    try:
        spec = marft_envs.spec(env_id)
    except KeyError as exc:
        raise ConfigError(str(exc.args[0])) from None
    overrides = dict(cfg.env.overrides)
    try:  # a typo in env.overrides fails here, before any model loads
        marft_envs.check_overrides(spec, overrides)
    except TypeError as exc:
        raise ConfigError(f"env.overrides: {exc}") from None
    if for_eval:
        overrides.pop("split", None)
    elif "split" not in overrides and isinstance(spec.kwargs.get("dataset"), str):
        import tasks

        try:
            if "train" in tasks.dataset_info(spec.kwargs["dataset"]).splits:
                overrides["split"] = "train"
        except (KeyError, ValueError):
            pass
    return spec.id, overrides


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


class Trainer:
    """Builds the model, adapters, critics, optimisers and environments of a run, and trains.

    Args:
        cfg: a :class:`Config` (``env.id`` required); validated here (:class:`ConfigError`).
        out_dir: run directory (config, metrics, checkpoints, plots).
        base: an already loaded ``(model, tokenizer)`` to use instead of ``cfg.model.name``.
        logger: object with ``log(step, metrics)`` and ``close()``; ``None`` keeps metrics in
            :attr:`history` only.
    """

    def __init__(self, cfg: Config, out_dir: str | Path, base=None, logger=None):
        cfg.validate()
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.method = get_method(cfg.algo.method)
        self.device = resolve_device(cfg.train.device)
        if cfg.train.deterministic:
            use_deterministic_algorithms()
        seed_everything(cfg.train.seed)
        env_id, overrides = env_overrides(cfg, for_eval=False)
        self.env_id = env_id
        try:
            self.venv = self._make_envs(env_id, cfg.train.seed, overrides)
        except TypeError as exc:  # marft_envs.make: a mistyped env.overrides key is a usage error
            if "unknown override" not in str(exc):
                raise
            raise ConfigError(f"env.overrides: {exc}") from exc
        self.agents = list(self.venv.possible_agents)
        self._train_overrides = overrides
        self._problem_envs: list[marft_envs.FlexMGEnv] = []  # critic-free methods' branching envs
        self._eval_venv: Any = None  # a worker group (_make_envs), built on first evaluation
        self._eval_sets: dict[tuple[int, int], EvalSet] = {}

        if base is not None:
            model, tokenizer = base
        elif cfg.model.name is None:
            raise ConfigError(
                "model.name is required (--model): a Hugging Face id, a local path, "
                "or a built-in such as tiny-random"
            )
        else:
            model, tokenizer = load_base(
                cfg.model.name,
                resolve_dtype(cfg.model.dtype, self.device),
                self.device,
                cfg.train.seed,
            )
        model.to(self.device)
        self.policy_names = self.method.policy_adapters(self.agents)
        self.critic_names = self.method.critic_names(self.agents)
        lora = LoraSpec(
            cfg.model.lora_r,
            cfg.model.lora_alpha,
            cfg.model.lora_dropout,
            list(cfg.model.target_modules),
        )
        if cfg.model.critic_shares_base or not self.critic_names:
            self.model = AdapterModel(model, tokenizer, self.policy_names + self.critic_names, lora)
            self.critic_model = self.model
        else:  # the critics' adapters on their own copy of the base (copied before peft wraps it)
            critic_base = copy.deepcopy(model)
            self.model = AdapterModel(model, tokenizer, self.policy_names, lora)
            self.critic_model = AdapterModel(critic_base, tokenizer, self.critic_names, lora)
        if cfg.model.gradient_checkpointing:  # each layer recomputed under its own adapter
            for m in self.adapter_models():
                m.enable_gradient_checkpointing()
        self.critics = Critics(self.critic_model, self.critic_names, self.method.critic_kind)
        self.pad_id = tokenizer.pad_token_id
        self.generator: Generator
        extra_stops = stop_token_ids(tokenizer, cfg.model.stop)
        if cfg.model.backend == "vllm":
            from .distributed.vllm_generator import VLLMGenerator

            self.generator = VLLMGenerator.build(
                self.model,
                self.out_dir / "vllm",
                adapters=self.policy_names,
                max_prompt_tokens=cfg.model.max_prompt_tokens,
                extra_stop_ids=extra_stops,
            )
        else:
            self.generator = HFGenerator(
                self.model,
                batch_size=max(cfg.env.num_envs, 1),
                max_prompt_tokens=cfg.model.max_prompt_tokens,
                extra_stop_ids=extra_stops,
            )

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
        self.iteration = 0
        # each optimiser decays over its own number of steps: a per-agent adapter sees only its
        # agent's turns, a critic every turn of every round (revised each iteration, lr_horizon)
        self.schedulers = {
            k: torch.optim.lr_scheduler.LambdaLR(
                opt, LRSchedule(a.scheduler, a.warmup_steps, self.lr_horizon(k, None))
            )
            for k, opt in self.optimizers.items()
        }
        self.history: list[dict[str, Any]] = []
        self.logger = logger
        # called as hook(iteration, episodes) after every evaluate(): what a caller needs to keep
        # the evaluation transcripts of train() (a result bundle) without re-playing them
        self.on_evaluate: list[Callable[[int, list[marft_envs.Episode]], None]] = []

    # ------------------------------------------------------------------ public API

    def train(self, progress: bool = False) -> list[dict[str, Any]]:
        """Run until ``train.iterations``; evaluate, checkpoint and log on the way."""
        t = self.cfg.train
        if self.iteration == 0 and self.cfg.env.eval_episodes > 0:
            self.log(0, self.evaluate(prefix="eval"))
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(
                total=t.iterations, initial=self.iteration, desc=f"{self.method.name}", unit="it"
            )
        while self.iteration < t.iterations:
            metrics = self.step()
            self.log(self.iteration, metrics)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(score=f"{metrics['train/score']:.3f}")
            done = self.iteration >= t.iterations
            if (
                t.eval_every
                and self.iteration % t.eval_every == 0
                and not done
                and self.cfg.env.eval_episodes
            ):
                self.log(self.iteration, self.evaluate(prefix="eval"))
            if t.checkpoint_every and self.iteration % t.checkpoint_every == 0 and not done:
                self.save()
        if bar is not None:
            bar.close()
        if (
            self.cfg.env.eval_episodes > 0
            and t.iterations > 0
            and not any(h["step"] == self.iteration and "eval/score" in h for h in self.history)
        ):
            self.log(self.iteration, self.evaluate(prefix="eval"))
        self.save()
        return self.history

    def step(self) -> dict[str, float]:
        """One iteration: rollout, scoring, advantages, PPO update. Returns its metrics."""
        cfg, a = self.cfg, self.cfg.algo
        it = self.iteration
        t_start = time.perf_counter()
        self._set_training(False)
        sampling = SamplingSpec(
            cfg.model.max_new_tokens, cfg.model.temperature, cfg.model.top_p, greedy=False
        )
        if self.method.critic_free:
            group = self._collect_groups(it, sampling)
            rollout, samples = group.rollout, group.samples
            t_scored = time.perf_counter()
            old_logp, ref_logp = self._score_policy(samples)
            critic_ids: dict = {}
            old_values: dict = {}
            ret: dict = {}
            adv, singles = group_advantages(group, scale_by_std=a.scale_by_std)
            t_model = time.perf_counter() - t_scored
            keys = [(s.episode, s.index) for s in samples]
            metrics = self._rollout_metrics(rollout, rollout.flat())
            metrics.update(group_metrics(group, singles))
            metrics.update(
                self._scoring_metrics(rollout, samples, old_logp, ref_logp, adv, old_values, ret)
            )
        else:
            # infrastructure-error episodes are dropped (and counted) by collect, never trained on
            rollout = collect(
                self.venv,
                self.generator,
                self.method.policy_adapter,
                cfg.train.episodes_per_iteration,
                sampling,
                seed=self.data_seed(it),
            )
            samples = rollout.flat()
            t_scored = time.perf_counter()
            old_logp, ref_logp = self._score_policy(samples)
            critic_ids = self._critic_prompts(samples)
            old_values = self._score_values(samples, critic_ids)
            bootstrap = self._bootstrap_values(rollout)
            t_model = time.perf_counter() - t_scored
            adv, ret = compute_advantages(
                rollout,
                old_values,
                sequential=self.method.sequential,
                token_level=a.level == "token",
                gamma=a.gamma,
                lam=a.lam,
                token_gamma=a.token_gamma,
                token_lam=a.token_lam,
                bootstrap=bootstrap,
            )
            keys = [(s.episode, s.index) for s in samples]
            metrics = self._rollout_metrics(rollout, samples)
            metrics.update(
                self._scoring_metrics(rollout, samples, old_logp, ref_logp, adv, old_values, ret)
            )
            if a.normalize_advantages and a.adv_norm != "none":
                agent_of = {(s.episode, s.index): s.agent for s in samples}
                adv = normalize(adv, keys, a.adv_norm, agent_of, a.adv_std_floor)
        for k in keys:
            algos.check_finite(f"advantages of turn {k}", adv[k])

        self._set_training(True)
        t_update = time.perf_counter()
        trained = self.agents_to_train(it)
        generator = torch.Generator().manual_seed(cfg.train.seed * 1_000_003 + it)
        metrics.update(logprob_mismatch_metrics(samples, old_logp))
        metrics.update(self._update_policies(samples, trained, old_logp, ref_logp, adv, generator))
        metrics.update(self._update_critics(samples, critic_ids, old_values, ret, generator))
        self.sync_generator()
        t_model += time.perf_counter() - t_update
        total = time.perf_counter() - t_start
        metrics.update(
            {
                "time/iteration": total,
                "time/generate": rollout.generate_seconds,
                "time/model": t_model,
                "time/env": rollout.env_seconds,
                "time/other_fraction": max(0.0, total - rollout.generate_seconds - t_model) / total,
            }
        )
        self.iteration += 1
        return metrics

    def _collect_groups(self, iteration: int, sampling: SamplingSpec) -> GroupBatch:
        """A critic-free method's rollout: ``episodes_per_iteration / group_size`` problems
        (seeds ``data_seed + p``, tasks drawn as the vector environment draws them), K
        branches per node (AT-GRPO) or K episodes each (MAGRPO)."""
        a, n = self.cfg.algo, self.cfg.train.episodes_per_iteration // self.cfg.algo.group_size
        count = n if self.method.grouping == AT_GRPO else 1
        while len(self._problem_envs) < count:
            self._problem_envs.append(marft_envs.make(self.env_id, **self._train_overrides))
        seed = self.data_seed(iteration)
        problems = pick_tasks(self._problem_envs[0], [seed + p for p in range(n)])
        if self.method.grouping == AT_GRPO:
            return tree_rollout(
                self._problem_envs,
                self.generator,
                self.method.policy_adapter,
                problems,
                a.group_size,
                sampling,
                select=a.branch_select,
            )
        return joint_rollout(
            self.venv, self.generator, self.method.policy_adapter, problems, a.group_size, sampling
        )

    def sync_generator(self) -> None:
        """Give a generator that holds its own copy of the adapters (vLLM) the current weights;
        the transformers generator is the training model itself and needs nothing."""
        sync = getattr(self.generator, "sync_from", None)
        if sync is not None:
            sync(self.model, self.policy_names)

    def close(self) -> None:
        """Release the environments (and their workers: Ray actors, sandboxes)."""
        for venv in (self.venv, self._eval_venv, *self._problem_envs):
            if venv is not None:
                venv.close()

    def data_seed(self, iteration: int) -> int:
        """The environment seed of iteration ``iteration`` (the data position)."""
        return self.cfg.train.seed * 1_000_000 + iteration * self.cfg.env.num_envs

    def agents_to_train(self, iteration: int) -> list[str]:
        """Agents whose turns train the policy in ``iteration`` (all, or one in rotation)."""
        if not self.cfg.algo.agent_by_agent:
            return list(self.agents)
        return [self.agents[(iteration // self.cfg.algo.rotate_every) % len(self.agents)]]

    @torch.no_grad()
    def evaluate(
        self, episodes: int | None = None, greedy: bool | None = None, prefix: str = "eval"
    ) -> dict[str, float]:
        """Play ``env.eval_episodes`` evaluation episodes; metrics ``<prefix>/score`` etc.
        (:func:`eval_metrics`: infrastructure errors are counted, not scored).

        Runs under a forked RNG so evaluating never changes what training does next. Each hook of
        :attr:`on_evaluate` then receives ``(iteration, episodes)``.
        """
        played = self.play_eval(episodes, greedy)
        for hook in self.on_evaluate:
            hook(self.iteration, played)
        return eval_metrics(played, self.agents, prefix)

    def eval_set(self, episodes: int | None = None, seed: int = EVAL_SEED) -> EvalSet:
        """What an evaluation plays: every seed times the first ``size`` tasks of the evaluation
        split (``env.eval_episodes``, capped at the split's size), as the leaderboard requires."""
        n = self.cfg.env.eval_episodes if episodes is None else episodes
        if (n, seed) not in self._eval_sets:  # cached: making an env may start a sandbox
            env_id, overrides = env_overrides(self.cfg, for_eval=True)
            env = marft_envs.make(env_id, **overrides)
            try:
                size = min(n, len(env.unwrapped.dataset))
                plan = marft_envs.evaluation_plan(env, seeds=[seed], size=size)
            finally:
                env.close()
            self._eval_sets[(n, seed)] = EvalSet(env_id, overrides, [seed], size, plan)
        return self._eval_sets[(n, seed)]

    @torch.no_grad()
    def play_eval(
        self, episodes: int | None = None, greedy: bool | None = None, seed: int = EVAL_SEED
    ):
        """The evaluation episodes themselves (``marft_envs.Episode`` records): exactly the
        plan of :meth:`eval_set`, each ``(seed, task)`` once, in finishing order."""
        cfg = self.cfg
        greedy = cfg.env.eval_greedy if greedy is None else greedy
        spec = self.eval_set(episodes, seed)
        width = min(self.eval_num_envs, max(1, len(spec.plan)))
        if self._eval_venv is None or self._eval_venv.num_envs < width:
            if self._eval_venv is not None:  # a larger plan than the last: rebuild wider
                self._eval_venv.close()
            self._eval_venv = self._make_envs(spec.env_id, seed, spec.overrides, num_envs=width)
        sampling = SamplingSpec(
            cfg.model.max_new_tokens, cfg.model.temperature, cfg.model.top_p, greedy=greedy
        )
        was_training = self.model.peft.training
        self.model.peft.eval()
        with torch.random.fork_rng(devices=[self.device] if self.device.startswith("cuda") else []):
            torch.manual_seed(seed)
            rollout = collect(
                self._eval_venv,
                self.eval_generator,
                self.method.policy_adapter,
                None,
                sampling,
                plan=spec.plan,
            )
        self.model.peft.train(was_training)
        return rollout.episodes

    # ------------------------------------------------------------------ checkpoints

    def adapter_models(self) -> list[AdapterModel]:
        """The policy model, and the critics' model when it is a separate base copy."""
        return [self.model] if self.critic_model is self.model else [self.model, self.critic_model]

    def _set_training(self, training: bool) -> None:
        for m in self.adapter_models():
            m.peft.train(training)

    def state(self) -> dict[str, Any]:
        return {
            "adapters": {n: m.adapter_state(n) for m in self.adapter_models() for n in m.adapters},
            "value_heads": self.critics.head_state(),
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
            "rng": capture_rng_state(),
            "iteration": self.iteration,
            "data_position": {
                "iteration": self.iteration,
                "next_seed": self.data_seed(self.iteration),
            },
            "history": self.history,
            "config": self.cfg.to_dict(),
            "env_id": self.env_id,  # the versioned id trained on
        }

    def save(self) -> Path:
        """Checkpoint everything needed to resume (plus peft-format adapters for reuse)."""
        return save_checkpoint(
            self.out_dir,
            step=self.iteration,
            state=self.state(),
            writers={
                ("peft" if i == 0 else "peft_critic"): m.peft.save_pretrained
                for i, m in enumerate(self.adapter_models())
            },
            keep_last=self.cfg.train.keep_checkpoints,
        )

    def load(self, path: str | Path) -> int:
        """Restore a checkpoint (a ``step_*`` folder or a run directory); returns its iteration."""
        state = load_checkpoint(path)
        trained_on = state.get("env_id", self.env_id)  # older checkpoints do not say
        if trained_on != self.env_id:
            raise ConfigError(
                f"checkpoint {state['path']} was trained on {trained_on!r} but this run builds "
                f"{self.env_id!r}; set env.id={trained_on} to resume on the same version"
            )
        models = self.adapter_models()
        missing = {n for m in models for n in m.adapters} - set(state["adapters"])
        if missing:
            raise ValueError(
                f"checkpoint {state['path']} lacks adapters {sorted(missing)}: "
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
        restore_rng_state(state["rng"])
        self.iteration = int(state["iteration"])
        self.history = list(state["history"])
        return self.iteration

    # ------------------------------------------------------------------ internals

    @property
    def eval_generator(self) -> Generator:
        """What evaluation generates with: :attr:`generator` as it is now (a generator assigned
        later is used too), for transformers batching ``env.eval_num_envs`` prompts per call
        (on a CPU, a batch of 32 greedy replies costs ~1.6x a batch of 8, not 4x)."""
        g = self.generator
        if not isinstance(g, HFGenerator) or g.batch_size == self.eval_num_envs:
            return g
        wide = copy.copy(g)  # shares the model, tokenizer and stop ids
        wide.batch_size = self.eval_num_envs
        return wide

    @property
    def eval_num_envs(self) -> int:
        """Environments stepped together in evaluation (``env.eval_num_envs``, else
        ``env.num_envs``)."""
        return self.cfg.env.eval_num_envs or self.cfg.env.num_envs

    def _make_envs(
        self, env_id: str, seed: int, overrides: dict[str, Any], num_envs: int | None = None
    ) -> VectorEnv:
        """The vector environment of training or evaluation: a worker group of ``train.workers``
        kind (in-process by default, Ray actors) with ``train.env_workers`` shards of
        ``num_envs`` environments (default ``env.num_envs``)."""
        t = self.cfg.train
        return make_worker_group(
            t.workers,
            env_id,
            num_envs or self.cfg.env.num_envs,
            num_workers=t.env_workers,
            seed=seed,
            **overrides,
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` at ``step`` in :attr:`history` (merged with what that step already
        has) and hand them to the run's ``logger``. :meth:`train` logs through here; a caller
        that drives :meth:`step` and :meth:`evaluate` itself uses it too, and a ``logger`` with
        its own ``log(step, metrics)`` sees every record (e.g. to print progress)."""
        record = {"step": step, **metrics}
        merged = next((h for h in self.history if h["step"] == step), None)
        if merged is None:
            self.history.append(record)
        else:
            merged.update(metrics)
        if self.logger is not None:
            self.logger.log(step, metrics)

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
            group = [s for s in samples if self.method.policy_adapter(s.agent) == adapter]
            for i in range(0, len(group), size):
                chunk = group[i : i + size]
                for which, store in ((adapter, old), *passes):
                    logp, _, mask = self._forward_policy(which, chunk)
                    for s, row, m in zip(chunk, logp.cpu(), mask.cpu(), strict=True):
                        store[(s.episode, s.index)] = row[m]
        return old, ref

    def _critic_prompts(self, samples: list[TurnSample]) -> dict[tuple[int, int], list[int]]:
        if self.method.critic_kind != CENTRALIZED:
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
            if self.method.sequential:
                rows = [((e, None), view.agent, view.role)]
            else:
                roles = {t.agent: t.role for t in turns}
                rows = [((e, agent), agent, role) for agent, role in roles.items()]
            for key, agent, role in rows:
                messages = (
                    centralized_messages(view.state, agent, role)
                    if self.method.critic_kind == CENTRALIZED
                    else view.messages[agent]
                )
                wanted.append((key, self.method.critic_name(agent), messages))
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
            group = [s for s in samples if self.method.critic_name(s.agent) == name]
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
                a for a in self.agents_to_train(iteration) if self.method.policy_adapter(a) == name
            ]
        else:
            agents = [a for a in self.agents if self.method.critic_name(a) == name]
        return self.cfg.train.episodes_per_iteration * self._horizon() * len(agents)

    def _horizon(self) -> int:
        """Rounds per training episode (``horizon`` of the env's spec or ``env.overrides``)."""
        spec = marft_envs.spec(self.env_id)
        return int({**spec.kwargs, **self._train_overrides}.get("horizon", 1))

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
        sched._last_lr = [float(g["lr"]) for g in opt.param_groups]

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
                if s.agent in trained and self.method.policy_adapter(s.agent) == adapter
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
            lr = self.schedulers[f"policy/{adapter}"].get_last_lr()[0]
            metrics[f"agent/{adapter}/lr"] = float(lr)
        return metrics

    def _update_critics(
        self, samples, critic_ids, old_values, returns, generator
    ) -> dict[str, float]:
        a = self.cfg.algo
        metrics: dict[str, float] = {}
        for name in self.critic_names:
            idx = [i for i, s in enumerate(samples) if self.method.critic_name(s.agent) == name]
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

    def _rollout_metrics(self, rollout: Rollout, samples: list[TurnSample]) -> dict[str, float]:
        """What was played: scores, dropped infrastructure errors, lengths, truncations."""
        eps = rollout.episodes
        n = max(1, len(eps))
        infra = rollout.stats.get("infra_errors", 0.0)
        out = {
            "train/score": sum(e.score for e in eps) / n,
            "train/correct": sum(e.correct for e in eps) / n,
            "train/episodes": float(len(eps)),
            "train/infra_errors": infra,
            "train/infra_error_rate": infra / max(1.0, infra + len(eps)),
            "train/truncated_episodes": sum(e.truncated for e in eps) / n,
            "train/rounds_per_episode": sum(t[-1].round + 1 for t in rollout.turns if t) / n,
            "train/turns_per_episode": len(samples) / n,
            "train/batch_size_per_generate": rollout.stats.get("mean_batch_size", 0.0),
            # every response generated this iteration (a critic-free method's unselected
            # branches and continuations included): the compute a comparison is sized by
            "train/generated_tokens": rollout.stats.get(
                "generated_tokens", float(sum(len(s.action_ids) for s in samples))
            ),
        }
        for agent in self.agents:
            mine = [s for s in samples if s.agent == agent]
            if mine:
                out[f"agent/{agent}/reward"] = sum(s.reward for s in mine) / len(mine)
                out[f"agent/{agent}/response_tokens"] = sum(len(s.action_ids) for s in mine) / len(
                    mine
                )
                out[f"agent/{agent}/truncated_frac"] = sum(s.truncated for s in mine) / len(mine)
        found = diagnostics.answer_in_predecessors(rollout)
        if "any" in found:
            out["collab/answer_in_predecessor"] = found.pop("any")
        out.update({f"agent/{a}/answer_in_message": v for a, v in found.items()})
        return out

    def _scoring_metrics(
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
        if self.method.critic_kind == CENTRALIZED:
            out.update(
                {
                    f"agent/{a}/value_change": v
                    for a, v in diagnostics.value_change(rollout, values).items()
                }
            )
        for name in self.critic_names:
            keys = [
                (s.episode, s.index) for s in samples if self.method.critic_name(s.agent) == name
            ]
            if keys:
                v, r = torch.cat([values[k] for k in keys]), torch.cat([returns[k] for k in keys])
                out[f"critic/{name}/explained_variance"] = algos.explained_variance(
                    v, r, torch.ones_like(v, dtype=torch.bool)
                )
        return out


def group_metrics(group: GroupBatch, singletons: int) -> dict[str, float]:
    """What a critic-free method's groups looked like: samples trained on, groups, groups of
    one (advantage 0), and the share of groups whose rewards all tie (no signal)."""
    by_group: dict[Any, list[float]] = {}
    for g, r in zip(group.groups, group.scores, strict=True):
        by_group.setdefault(g, []).append(r)
    n = max(1, len(by_group))
    return {
        "group/samples": float(len(group.samples)),
        "group/groups": float(len(by_group)),
        "group/singletons": float(singletons),
        "group/tied_fraction": sum(len(set(v)) == 1 for v in by_group.values()) / n,
        "group/reward_mean": sum(group.scores) / max(1, len(group.scores)),
    }


def eval_metrics(
    episodes: Sequence[marft_envs.Episode], agents: Sequence[str], prefix: str = "eval"
) -> dict[str, float]:
    """Scores of evaluation episodes over the gradable ones only: an infrastructure-error episode
    is counted (``<prefix>/infra_errors``), never scored as a wrong answer. With no gradable
    episode the scores are NaN (logged as null), not 0."""
    graded = [e for e in episodes if not e.infra_error]
    n = len(graded)

    def mean(xs) -> float:
        return sum(xs) / n if n else float("nan")

    out = {
        f"{prefix}/score": mean(e.score for e in graded),
        f"{prefix}/correct": mean(e.correct for e in graded),
        f"{prefix}/episodes": float(len(episodes)),
        f"{prefix}/infra_errors": float(len(episodes) - n),
    }
    for agent in agents:
        out[f"{prefix}/agent/{agent}/return"] = mean(e.returns.get(agent, 0.0) for e in graded)
    return out


def resume_path(path: str | Path) -> Path:
    """The checkpoint to resume from: ``path`` itself or the newest one of a run directory."""
    p = Path(path)
    if (p / "meta.json").is_file():
        return p
    latest = latest_checkpoint(p)
    if latest is None:
        raise FileNotFoundError(
            f"--resume {str(p)!r}: no checkpoint found (expected "
            f"{p}/checkpoints/step_*/ from an earlier run)"
        )
    return latest


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
