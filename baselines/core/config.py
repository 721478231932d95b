"""Typed configuration of a baseline run: nested dataclasses, presets, YAML files, overrides.

Precedence (later wins): dataclass defaults < the method's preset
(:meth:`baselines.core.methods.MethodSpec.preset`) < user YAML file < command-line overrides
``key=value``. Keys are dotted paths
(``algo.lr``) or, when unambiguous, a field's bare name (``lr``). Values are parsed as
YAML scalars and checked against the field's type. Unknown keys and wrong types raise
:class:`ConfigError` naming the key and what is valid. Defaults and their sources are
tabled in ``docs/baselines_algorithms.md``.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import yaml

from .methods import METHODS, get_method, resolve_method

__all__ = [
    "AlgoConfig",
    "Config",
    "ConfigError",
    "EnvConfig",
    "ModelConfig",
    "TrainConfig",
    "apply_overrides",
    "config_help",
    "load_config",
    "presets",
]

LOG_SINKS = ("console", "jsonl", "tensorboard")


def presets() -> tuple[str, ...]:
    """One preset per method registered now (:data:`baselines.core.methods.METHODS`): read when
    needed, so a method registered after this module was imported (a researcher's) has one."""
    return tuple(METHODS)


class ConfigError(ValueError):
    """A configuration key, value or file is invalid."""


def _f(default: Any, help: str, choices: Callable[[], Iterable[str]] | None = None) -> Any:
    """A dataclass field with a one-line description (shown by :func:`config_help`); ``choices``
    lists its valid values when the help is shown (a registry read then, not at import)."""
    meta: dict[str, Any] = {"help": help} if choices is None else {"help": help, "choices": choices}
    if isinstance(default, (list, dict)):
        return field(default_factory=partial(copy.copy, default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class ModelConfig:
    """The base language model, its LoRA adapters and sampling."""

    name: str | None = _f(
        None,
        "Hugging Face id or local path (required: --model); built-ins: "
        "tiny-random (tiny random model for smoke runs), smollm2-135m",
    )
    dtype: Literal["auto", "float32", "bfloat16"] = _f(
        "auto",
        "weights/compute dtype; auto = float32 on CPU, bfloat16 on GPU (no float16: it "
        "needs loss scaling)",
    )
    backend: Literal["transformers", "vllm"] = _f("transformers", "generation backend")
    lora_r: int = _f(8, "LoRA rank")
    lora_alpha: int = _f(16, "LoRA alpha (scale = alpha / r)")
    lora_dropout: float = _f(
        0.0, "LoRA dropout (0: dropout makes the PPO ratio differ from 1 on the first pass)"
    )
    target_modules: list[str] = _f(
        ["q_proj", "k_proj", "v_proj", "o_proj"], "module names that get LoRA adapters"
    )
    critic_shares_base: bool = _f(
        True,
        "critics are an adapter + value head on the policy's "
        "base model (False: a separate base model copy)",
    )
    max_prompt_tokens: int = _f(2048, "prompt tokens kept (left-truncated) per turn")
    max_new_tokens: int = _f(512, "tokens generated per action")
    temperature: float = _f(
        1.0, "sampling temperature in training rollouts (log-probs use the same temperature)"
    )
    top_p: float = _f(1.0, "nucleus sampling in training rollouts")
    stop: list[str] = _f(
        [],
        "a reply also ends at the first generated token whose text contains one of these "
        "strings (e.g. a newline: one-line replies); the token is kept, so the policy learns it",
    )
    gradient_checkpointing: bool = _f(False, "trade compute for memory in the backward pass")


@dataclass
class AlgoConfig:
    """The learning algorithm: advantages, PPO losses, optimisers."""

    method: str = _f(
        "marft",
        "a registered method (baselines.core.methods; other spellings resolve to it)",
        choices=presets,
    )
    group_size: int = _f(
        4,
        "critic-free methods: K samples per group (AT-GRPO: branches per (problem, turn, "
        "agent); MAGRPO: joint episodes per problem)",
    )
    scale_by_std: bool = _f(
        True, "critic-free methods: divide group-centred rewards by the group std (False: Dr.GRPO)"
    )
    loss_agg: Literal["token_mean", "seq_mean", "seq_sum_norm"] = _f(
        "token_mean",
        "policy loss reduction: token_mean; seq_mean (GRPO 1/|o|); seq_sum_norm (Dr.GRPO: "
        "token sums / model.max_new_tokens)",
    )
    branch_select: Literal["best", "first"] = _f(
        "best",
        "AT-GRPO: the branch an episode continues along: best by reward (ties: the first "
        "sampled), or the first sampled",
    )
    level: Literal["action", "token"] = _f(
        "action", "advantage granularity: a whole response is one action, or per-token values"
    )
    gamma: float = _f(0.99, "discount between rounds (1 inside a round)")
    lam: float = _f(0.95, "GAE lambda between actions")
    token_gamma: float = _f(1.0, "discount between tokens of one action (token level)")
    token_lam: float = _f(1.0, "GAE lambda between tokens of one action (token level)")
    clip_eps: float = _f(0.2, "PPO ratio clip range")
    clip_eps_high: float | None = _f(None, "upper ratio clip (clip-higher); null = clip_eps")
    value_clip_eps: float | None = _f(0.2, "value clip range; null = unclipped value loss")
    ent_coef: float = _f(0.0, "entropy bonus coefficient")
    kl_coef: float = _f(0.0, "KL-to-reference coefficient (reference = adapters disabled)")
    kl_ref_every: int = _f(
        1,
        "with kl_coef = 0: iterations between the reference passes that log agent/*/kl_ref "
        "(0 = never; each pass costs one forward over the batch); kl_coef > 0: every iteration",
    )
    kl_kind: Literal["k1", "k2", "k3"] = _f("k3", "KL estimator")
    vf_coef: float = _f(0.5, "value loss coefficient")
    normalize_advantages: bool = _f(
        True, "normalise advantages as algo.adv_norm says (False: none, whatever adv_norm says)"
    )
    adv_norm: Literal["batch", "agent", "none"] = _f(
        "batch",
        "advantage whitening: over every real token of the batch, over each agent's tokens "
        "(Dr. MAS), or none",
    )
    adv_std_floor: float = _f(
        0.0,
        "a normalisation set whose advantage std is below this is only centred, not scaled to "
        "std 1 (ties: critic noise stays small); 0 = always scale",
    )
    ratio_level: Literal["token", "action"] = _f(
        "token",
        "PPO ratio and clip per token (verl, TRL), or one per action: exp(sum of token "
        "log-ratios) (MARFT reference)",
    )
    clip_ratio_c: float | None = _f(
        None, "dual-clip bound (> 1) on the loss of negative-advantage tokens; null = off"
    )
    target_kl: float | None = _f(
        None,
        "approximate-KL early stop: an adapter's update stops for the iteration at the first "
        "minibatch whose KL to the rollout policy (k3) exceeds this; null = off",
    )
    rollout_is: Literal["none", "truncated"] = _f(
        "none",
        "importance correction for the generator/trainer log-prob mismatch: none, or truncated "
        "IS weights min(exp(train - rollout logp), rollout_is_cap) (TRL's vLLM correction)",
    )
    rollout_is_cap: float = _f(
        2.0, "upper truncation of the rollout IS weights (ms-swift's default threshold)"
    )
    ppo_epochs: int = _f(1, "passes over each rollout batch")
    minibatch_size: int = _f(4, "sequences per optimiser micro-step")
    grad_accum: int = _f(1, "micro-steps accumulated per optimiser step")
    max_grad_norm: float = _f(0.5, "gradient clipping norm (per optimiser)")
    agent_by_agent: bool = _f(False, "train one agent at a time, rotating")
    rotate_every: int = _f(1, "iterations before rotating to the next agent (agent_by_agent)")
    lr: float = _f(1e-5, "actor (LoRA) learning rate")
    critic_lr: float = _f(5e-5, "critic (adapter + value head) learning rate")
    weight_decay: float = _f(0.0, "AdamW weight decay")
    warmup_steps: int = _f(0, "linear learning-rate warmup, optimiser steps")
    scheduler: Literal["constant", "linear", "cosine"] = _f(
        "constant", "learning-rate schedule after warmup"
    )


@dataclass
class EnvConfig:
    """The marft_envs environment."""

    id: str | None = _f(None, "registered environment id, e.g. math-3agent (required)")
    num_envs: int = _f(8, "environments stepped together in a rollout")
    overrides: dict[str, Any] = _f(
        {},
        "keyword overrides for marft_envs.make (horizon, feedback, reward_to, dataset, split, ...)",
    )
    eval_id: str | None = _f(None, "evaluation environment id; null = env.id on its eval split")
    eval_episodes: int = _f(64, "episodes per evaluation")
    eval_num_envs: int | None = _f(
        None,
        "environments stepped together in evaluation (transformers: also its generate batch); "
        "null = num_envs; greedy verdicts do not depend on it, sampled ones do",
    )
    eval_greedy: bool = _f(True, "greedy decoding in evaluation (False: sample)")


@dataclass
class TrainConfig:
    """The run: length, seeds, outputs."""

    seed: int = _f(0, "seed of python, numpy, torch and the environments")
    iterations: int = _f(100, "rollout + update iterations")
    episodes_per_iteration: int = _f(32, "episodes collected per iteration")
    eval_every: int = _f(0, "iterations between evaluations; 0 = before and after training only")
    checkpoint_every: int = _f(10, "iterations between checkpoints (and one at the end)")
    keep_checkpoints: int = _f(3, "most recent checkpoints kept")
    out: str | None = _f(None, "run directory; null = runs/<method>-<env>-<time>")
    log: list[str] = _f(list(LOG_SINKS), "metric sinks: console, jsonl, tensorboard")
    device: str = _f("auto", "auto, cpu, cuda or cuda:N")
    deterministic: bool = _f(False, "torch deterministic algorithms (slower on GPU)")
    workers: Literal["inprocess", "ray"] = _f(
        "inprocess",
        "where the environments step: inprocess (this process) or ray (Ray actors; "
        "extra 'ray'); see docs/distributed.md",
    )
    env_workers: int = _f(
        1, "environment workers (shards of env.num_envs); must be <= env.num_envs"
    )


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "algo": AlgoConfig,
    "env": EnvConfig,
    "train": TrainConfig,
}


@dataclass
class Config:
    """The whole configuration of a run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict (YAML/JSON-ready)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """Build from a nested dict (missing keys keep defaults); strict about keys and types."""
        cfg = cls()
        _merge(cfg, data, source="dict")
        cfg.validate()
        return cfg

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def save(self, path: str | Path) -> None:
        """Write the config as YAML (a run directory's ``config.yaml``)."""
        Path(path).write_text(self.to_yaml())

    def validate(self) -> None:
        """Check value ranges and cross-field rules; raise :class:`ConfigError`."""
        a, m, t = self.algo, self.model, self.train
        critic_free = get_method(_method_name(a.method)).critic_free
        checks = [
            (0.0 <= a.gamma <= 1.0, "algo.gamma must be in [0, 1]"),
            (0.0 <= a.lam <= 1.0, "algo.lam must be in [0, 1]"),
            (0.0 <= a.token_gamma <= 1.0, "algo.token_gamma must be in [0, 1]"),
            (0.0 <= a.token_lam <= 1.0, "algo.token_lam must be in [0, 1]"),
            (a.clip_eps > 0, "algo.clip_eps must be > 0"),
            (a.clip_eps_high is None or a.clip_eps_high > 0, "algo.clip_eps_high must be > 0"),
            (
                a.value_clip_eps is None or a.value_clip_eps > 0,
                "algo.value_clip_eps must be > 0 or null",
            ),
            (
                a.ent_coef >= 0 and a.kl_coef >= 0 and a.vf_coef >= 0,
                "algo.ent_coef, algo.kl_coef and algo.vf_coef must be >= 0",
            ),
            (a.ppo_epochs >= 1, "algo.ppo_epochs must be >= 1"),
            (a.minibatch_size >= 1, "algo.minibatch_size must be >= 1"),
            (a.grad_accum >= 1, "algo.grad_accum must be >= 1"),
            (a.max_grad_norm > 0, "algo.max_grad_norm must be > 0"),
            (a.rotate_every >= 1, "algo.rotate_every must be >= 1"),
            (
                not critic_free or a.group_size >= 2,
                (
                    f"algo.group_size={a.group_size}: a group-relative method needs >= 2 "
                    "samples per group"
                ),
            ),
            (
                not critic_free or t.episodes_per_iteration % a.group_size == 0,
                (
                    f"train.episodes_per_iteration={t.episodes_per_iteration} must be a "
                    f"multiple of algo.group_size={a.group_size} for {a.method} (problems per "
                    "iteration = episodes_per_iteration / group_size)"
                ),
            ),
            (
                not critic_free or a.level == "action",
                (
                    f"algo.level={a.level!r}: {a.method} has no critic, so no token-level "
                    "values; use algo.level=action"
                ),
            ),
            (a.lr > 0 and a.critic_lr > 0, "algo.lr and algo.critic_lr must be > 0"),
            (a.warmup_steps >= 0, "algo.warmup_steps must be >= 0"),
            (m.lora_r >= 1, "model.lora_r must be >= 1"),
            (
                not {"lm_head", "embed_tokens"} & set(m.target_modules),
                (
                    "model.target_modules must not name lm_head or embed_tokens: log-probabilities "
                    "are projected with the base model's output embedding, so a LoRA there would "
                    "not train"
                ),
            ),
            (0.0 <= m.lora_dropout < 1.0, "model.lora_dropout must be in [0, 1)"),
            (
                m.max_new_tokens >= 1 and m.max_prompt_tokens >= 1,
                "model.max_new_tokens and model.max_prompt_tokens must be >= 1",
            ),
            (m.temperature > 0, "model.temperature must be > 0 (greedy is env.eval_greedy)"),
            (0.0 < m.top_p <= 1.0, "model.top_p must be in (0, 1]"),
            (self.env.num_envs >= 1, "env.num_envs must be >= 1"),
            (self.env.eval_episodes >= 0, "env.eval_episodes must be >= 0"),
            (
                self.env.eval_num_envs is None or self.env.eval_num_envs >= 1,
                "env.eval_num_envs must be >= 1 or null (= env.num_envs)",
            ),
            (a.kl_ref_every >= 0, "algo.kl_ref_every must be >= 0 (0 = never)"),
            (a.adv_std_floor >= 0, "algo.adv_std_floor must be >= 0"),
            (
                a.clip_ratio_c is None or a.clip_ratio_c > 1.0,
                "algo.clip_ratio_c must be > 1 (the dual-clip bound) or null",
            ),
            (a.target_kl is None or a.target_kl > 0, "algo.target_kl must be > 0 or null"),
            (a.rollout_is_cap > 0, "algo.rollout_is_cap must be > 0"),
            (all(m.stop), "model.stop must not hold an empty string"),
            (t.iterations >= 0, "train.iterations must be >= 0"),
            (t.episodes_per_iteration >= 1, "train.episodes_per_iteration must be >= 1"),
            (
                t.eval_every >= 0 and t.checkpoint_every >= 0,
                "train.eval_every and train.checkpoint_every must be >= 0",
            ),
            (t.keep_checkpoints >= 1, "train.keep_checkpoints must be >= 1"),
            (
                self.env.eval_num_envs is None or t.env_workers <= self.env.eval_num_envs,
                (
                    f"train.env_workers={t.env_workers} exceeds "
                    f"env.eval_num_envs={self.env.eval_num_envs}: each evaluation "
                    "worker needs at least one environment (raise env.eval_num_envs or lower "
                    "train.env_workers)"
                ),
            ),
            (t.env_workers >= 1, "train.env_workers must be >= 1"),
            (
                t.env_workers <= self.env.num_envs,
                (
                    f"train.env_workers={t.env_workers} exceeds "
                    f"env.num_envs={self.env.num_envs}: each "
                    "worker needs at least one environment"
                ),
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        bad_sinks = [s for s in t.log if s not in LOG_SINKS]
        if bad_sinks:
            raise ConfigError(f"train.log: unknown sink(s) {bad_sinks}; valid: {list(LOG_SINKS)}")
        if not (t.device in ("auto", "cpu", "cuda") or t.device.startswith("cuda:")):
            raise ConfigError(f"train.device={t.device!r}; valid: auto, cpu, cuda, cuda:N")


# ---------------------------------------------------------------------------
# keys and types


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _all_keys() -> list[str]:
    """Every dotted key, ``section.field``."""
    return [f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]


def _suggest(key: str) -> str:
    keys = _all_keys()
    leaves = {k.split(".", 1)[1]: k for k in keys}
    close = difflib.get_close_matches(key, keys, n=3, cutoff=0.5)
    for leaf in difflib.get_close_matches(key.rsplit(".", 1)[-1], list(leaves), n=3, cutoff=0.5):
        if leaves[leaf] not in close:
            close.append(leaves[leaf])
    if close:
        return "did you mean " + ", ".join(close[:4]) + "?"
    return "valid sections: " + ", ".join(SECTIONS) + " (see --help for every key)"


def _resolve_key(key: str) -> tuple[str, str, list[str]]:
    """Map ``algo.lr`` / ``lr`` / ``env.overrides.horizon`` to (section, field, dict path)."""
    parts = key.split(".")
    if parts[0] in SECTIONS:
        if len(parts) < 2:
            raise ConfigError(f"config key {key!r} names a section; use {key}.<field>")
        section, name, rest = parts[0], parts[1], parts[2:]
    else:
        owners = [
            s
            for s, cls in SECTIONS.items()
            if parts[0] in {f.name for f in dataclasses.fields(cls)}
        ]
        if len(owners) > 1:
            raise ConfigError(
                f"config key {key!r} is ambiguous: use one of "
                + ", ".join(f"{s}.{key}" for s in owners)
            )
        if not owners:
            raise ConfigError(f"unknown config key {key!r}; {_suggest(key)}")
        section, name, rest = owners[0], parts[0], parts[1:]
    fields = {f.name for f in dataclasses.fields(SECTIONS[section])}
    if name not in fields:
        dotted = f"{section}.{name}"
        raise ConfigError(f"unknown config key {dotted!r}; {_suggest(dotted)}")
    if rest and typing.get_origin(_hints(SECTIONS[section])[name]) is not dict:
        raise ConfigError(f"config key {key!r}: {section}.{name} is not a mapping")
    return section, name, rest


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(
            "null" if a is type(None) else _type_name(a) for a in typing.get_args(tp)
        )
    if origin is list:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return "mapping"
    return getattr(tp, "__name__", str(tp))


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Convert ``value`` to type ``tp`` or raise naming ``key`` and the expected type."""

    def fail() -> ConfigError:
        return ConfigError(
            f"{key}: expected {_type_name(tp)}, got {value!r} ({type(value).__name__})"
        )

    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null", "~")):
            if type(None) in args:
                return None
            raise fail()
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(key, value, arg)
            except ConfigError:
                pass
        raise fail()
    if origin is Literal:
        choices = typing.get_args(tp)
        if value in choices:
            return value
        raise ConfigError(
            f"{key}: {value!r} is not valid; choose one of " + ", ".join(repr(c) for c in choices)
        )
    if origin is list:
        (item,) = typing.get_args(tp)
        if isinstance(value, str):  # "a,b,c" from the command line
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise fail()
        return [_coerce(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise fail()
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise fail()
    if tp is int:
        if isinstance(value, bool):
            raise fail()
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise fail()
    if tp is float:
        if isinstance(value, bool):
            raise fail()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):  # PyYAML reads "2e-6" (no dot) as a string
            try:
                out = float(value)
            except ValueError:
                raise fail() from None
            if math.isfinite(out):
                return out
        raise fail()
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise fail()
    raise ConfigError(f"{key}: unsupported field type {tp!r}")  # pragma: no cover


def _method_name(value: Any) -> str:
    """The registered name ``value`` spells (``at-grpo-shared`` -> ``at_grpo_shared``)."""
    try:
        return resolve_method(str(value))
    except ValueError:
        raise ConfigError(
            f"algo.method: {value!r} is not valid; choose one of "
            + ", ".join(repr(m) for m in METHODS)
            + " (or another spelling of one)"
        ) from None


def _set(cfg: Config, key: str, value: Any) -> None:
    section, name, rest = _resolve_key(key)
    obj = getattr(cfg, section)
    dotted = f"{section}.{name}"
    if rest:  # a key inside a mapping field: env.overrides.horizon=2
        mapping = getattr(obj, name)
        for part in rest[:-1]:
            mapping = mapping.setdefault(part, {})
            if not isinstance(mapping, dict):
                raise ConfigError(f"config key {key!r}: {part!r} is not a mapping")
        mapping[rest[-1]] = value
        return
    if dotted == "algo.method":  # any spelling of a method: its registered name
        value = _method_name(value)
    if dotted == "model.dtype" and str(value).lower() in ("float16", "fp16", "half"):
        raise ConfigError(
            "model.dtype: float16 is not supported: it needs loss scaling to train "
            "without NaN; use float32 (CPU) or bfloat16 (GPU), or auto"
        )
    setattr(obj, name, _coerce(dotted, value, _hints(type(obj))[name]))


def _merge(cfg: Config, data: Any, source: str) -> None:
    """Apply a nested mapping ``{section: {field: value}}`` onto ``cfg``."""
    if data is None:
        return
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping of sections {list(SECTIONS)}, got {type(data).__name__}"
        )
    for section, values in data.items():
        if section not in SECTIONS:  # a section typo is matched against sections, not fields
            close = difflib.get_close_matches(str(section), list(SECTIONS), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"{source}: unknown config section {section!r}; {hint}"
                f"valid sections: {', '.join(SECTIONS)}"
            )
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: section {section!r} must be a mapping")
        for name, value in values.items():
            try:
                _set(cfg, f"{section}.{name}", value)
            except ConfigError as e:
                raise ConfigError(f"{source}: {e}") from None


def _read_yaml(path: Path, what: str) -> Any:
    if not path.is_file():
        raise ConfigError(f"{what} {str(path)!r} does not exist")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{what} {str(path)!r} is not valid YAML: {e}") from None


def apply_file(cfg: Config, file: str | Path) -> Config:
    """Apply a YAML config file (``{section: {field: value}}``) onto ``cfg``; returns ``cfg``."""
    _merge(cfg, _read_yaml(Path(file), "config file"), source=str(file))
    return cfg


def apply_overrides(cfg: Config, overrides: list[str]) -> Config:
    """Apply ``key=value`` strings in order (values parsed as YAML scalars); returns ``cfg``."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. algo.lr=2e-6)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        _set(cfg, key, value)
    return cfg


def load_config(
    preset: str = "marft", file: str | Path | None = None, overrides: list[str] | None = None
) -> Config:
    """Build a :class:`Config`: defaults, then the preset, the YAML ``file``, the overrides.

    Args:
        preset: a registered method (any spelling); its ``MethodSpec.preset()`` is applied.
        file: optional user YAML with the same nested layout (``algo: {lr: 2e-6}``).
        overrides: ``["algo.lr=2e-6", "iterations=2", "env.overrides.horizon=2"]``.

    Raises:
        ConfigError: unknown preset, file, key or section; wrong type; out-of-range value.
    """
    try:
        spec = get_method(preset)
    except ValueError:
        raise ConfigError(f"unknown preset {preset!r}; valid: {', '.join(presets())}") from None
    cfg = Config()
    _merge(cfg, spec.preset(), source=f"preset {spec.name}")
    if file is not None:
        apply_file(cfg, file)
    apply_overrides(cfg, list(overrides or []))
    cfg.validate()
    return cfg


def config_help(preset: str | None = None) -> str:
    """Every config field with its type, default and description (for ``--help``): the defaults
    of ``preset``'s method (its :meth:`~baselines.core.methods.MethodSpec.preset` over the
    dataclass defaults), or the dataclass defaults when ``preset`` is ``None``."""
    defaults = Config()
    if preset is None:
        lines = ["Config fields (override with key=value; a bare field name works when unique):"]
    else:
        spec = get_method(preset)
        _merge(defaults, spec.preset(), source=f"preset {spec.name}")
        header = f"Config fields, with the defaults of the {spec.name} preset (override with "
        lines = [header + "key=value; a bare field name works when unique):"]
    for section, cls in SECTIONS.items():
        lines.append(f"\n{section}: {(cls.__doc__ or cls.__name__).strip().splitlines()[0]}")
        hints = _hints(cls)
        for f in dataclasses.fields(cls):
            default = getattr(getattr(defaults, section), f.name)
            shown = yaml.safe_dump(default, default_flow_style=True).strip()
            shown = shown.removesuffix("\n...").removesuffix("...").strip()
            lines.append(f"  {section}.{f.name} ({_type_name(hints[f.name])}) = {shown}")
            text = f.metadata.get("help", "")
            if "choices" in f.metadata:
                text += ": " + ", ".join(f.metadata["choices"]())
            lines.append(f"      {text}")
    return "\n".join(lines)
