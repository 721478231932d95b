"""The method registry: every baseline as one :class:`MethodSpec`, the one place a method is named.

A method is data: where its samples come from (a rollout source), how their advantages are
computed (an estimator), how the policy loss is reduced, whether a critic values the turns, and
whether the agents share one adapter. Everything else is derived from the registry:

* the command line: ``python -m baselines.<spec.module>`` runs ``spec`` (:mod:`baselines.cli`);
* the presets: :meth:`MethodSpec.preset` is the config section ``algo`` the method sets
  (:func:`baselines.core.config.load_config`);
* config validation: ``algo.method`` takes a registered name or alias, and the critic-free rules
  follow :attr:`MethodSpec.critic_free`;
* the leaderboard's names: :attr:`MethodSpec.leaderboard` (``leaderboard`` may not import
  ``baselines``, so ``leaderboard.schema`` keeps a plain copy of the repository's methods that
  ``tests/baselines/test_method_registry.py`` compares with this registry; a bundle of a method
  the leaderboard does not list records :data:`OTHER`).

A name registered twice follows the rule of every registry (``docs/architecture.md``,
"Registries"): an equal spec is a no-op, a different one raises
:class:`~tasks.AlreadyRegisteredError` unless ``overwrite=True``.

| name           | rollout  | estimator      | critic          | adapters  |
|----------------|----------|----------------|-----------------|-----------|
| marft          | episodes | sequential_gae | centralized     | per agent |
| marft_shared   | episodes | sequential_gae | centralized     | shared    |
| ippo           | episodes | gae            | own observation | per agent |
| at_grpo        | trees    | group          | none            | per agent |
| at_grpo_shared | trees    | group          | none            | shared    |
| magrpo         | joint    | group          | none            | per agent |
| magrpo_shared  | joint    | group          | none            | shared    |

A researcher's method is one more :func:`register_method` entry (``docs/adding_a_method.md``);
an estimator of its own is named ``"module:function"`` and loaded when a run needs it, as
``marft_envs.register`` names an environment's entry point.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tasks import AlreadyRegisteredError

__all__ = [
    "CENTRALIZED",
    "EPISODES",
    "JOINT",
    "METHODS",
    "OTHER",
    "OWN_OBSERVATION",
    "ROLLOUTS",
    "TREES",
    "MethodSpec",
    "get_method",
    "register_method",
    "resolve_method",
    "unregister_method",
]

# rollout sources (baselines.core.sources)
EPISODES = "episodes"  # whole episodes in the order they start (PPO)
TREES = "trees"  # K branches per (problem, turn, agent) from one copied state (AT-GRPO)
JOINT = "joint"  # K joint episodes per problem (MAGRPO)
ROLLOUTS = (EPISODES, TREES, JOINT)

# critics (baselines.core.critic)
CENTRALIZED = "centralized"  # one critic, role-conditioned, reads the whole transcript
OWN_OBSERVATION = "own_observation"  # one critic per agent, its own observation only
CRITICS = (CENTRALIZED, OWN_OBSERVATION, None)

#: the leaderboard's name for every method it does not list (a researcher's own): a spec may name
#: it as its ``leaderboard``, and it is never a spelling of a method
OTHER = "other"

SHARED_POLICY = "policy"  # the adapter of a shared-adapter method
CENTRAL_CRITIC = "critic"  # the centralized critic's adapter


@dataclass(frozen=True)
class MethodSpec:
    """What distinguishes one method from another; the trainer's parts read nothing else.

    Attributes:
        name: the one spelling (``algo.method``, the preset, the bundle after ``_`` -> ``-``).
        summary: one line for ``python -m baselines.<module> --help``.
        rollout: :data:`EPISODES`, :data:`TREES` or :data:`JOINT`.
        estimator: a registered estimator name (``baselines.core.estimators``) or
            ``"module:function"``.
        critic: :data:`CENTRALIZED`, :data:`OWN_OBSERVATION`, or ``None`` (critic-free).
        shared_adapters: one LoRA adapter plays every agent (else one per agent).
        loss_agg: the policy loss reduction (``algo.loss_agg``).
        algo: further ``algo.*`` settings of the preset (``{"scale_by_std": False}``).
        aliases: other spellings that resolve to ``name`` (the leaderboard's is always one).
        module: the ``baselines.<module>`` (or the researcher's file) that runs it: ``name``
            (the default) or a registered method's (a shared-adapter variant runs from its
            per-agent method's module).
        leaderboard: the name bundles and the leaderboard use (default ``name`` with ``_`` ->
            ``-``: ``at_grpo_shared`` -> ``at-grpo-shared``); a bundle records it when the
            leaderboard lists it (``leaderboard.schema.METHODS``), else :data:`OTHER`.
        sequential: the advantage rows are whole episodes (MARFT's chained decomposition: a
            truncated episode is bootstrapped by one critic value where it stopped) rather than
            one row per agent (each agent's turns bootstrapped by its own value). Default: true
            for the ``sequential_gae`` estimator, false otherwise; a ``"module:function"``
            estimator that computes episode rows sets it. The learner reads it (nothing else).
    """

    name: str
    summary: str
    rollout: str
    estimator: str
    critic: str | None
    shared_adapters: bool
    loss_agg: str = "token_mean"
    algo: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    module: str = ""
    leaderboard: str = ""
    sequential: bool | None = None

    def __post_init__(self) -> None:
        if self.rollout not in ROLLOUTS:
            raise ValueError(f"{self.name}: rollout {self.rollout!r} is not one of {ROLLOUTS}")
        if self.critic not in CRITICS:
            raise ValueError(f"{self.name}: critic {self.critic!r} is not one of {CRITICS}")
        if self.critic is None and self.rollout == EPISODES:
            raise ValueError(
                f"{self.name}: a critic-free method needs groups (rollout {TREES!r} or {JOINT!r})"
            )
        if OTHER in (self.name, *self.aliases):
            raise ValueError(
                f"{self.name}: {OTHER!r} is the leaderboard's name for methods it does not list, "
                "not a method's name or alias (it may be the spec's leaderboard name)"
            )
        if not self.module:
            object.__setattr__(self, "module", self.name)
        if not self.leaderboard:
            object.__setattr__(self, "leaderboard", self.name.replace("_", "-"))
        built_in = {"sequential_gae": True, "gae": False}.get(self.estimator)
        if self.sequential is None:
            object.__setattr__(self, "sequential", bool(built_in))
        elif built_in is not None and self.sequential != built_in:
            raise ValueError(
                f"{self.name}: estimator {self.estimator!r} computes "
                f"{'episode' if built_in else 'per-agent'} rows, so sequential must be {built_in}"
            )
        object.__setattr__(self, "algo", types.MappingProxyType(dict(self.algo)))

    # --------------------------------------------------------------- derived names

    def preset(self) -> dict[str, dict[str, Any]]:
        """The config the method's preset sets over the dataclass defaults."""
        return {"algo": {"method": self.name, "loss_agg": self.loss_agg, **self.algo}}

    # --------------------------------------------------------------- what a run builds

    @property
    def critic_free(self) -> bool:
        """True for the group-relative methods (no critic, no value function)."""
        return self.critic is None

    def policy_adapter(self, agent: str) -> str:
        """The adapter that plays ``agent``."""
        return SHARED_POLICY if self.shared_adapters else agent

    def critic_name(self, agent: str) -> str:
        """The critic (adapter + value head) that values ``agent``'s turns."""
        return CENTRAL_CRITIC if self.critic == CENTRALIZED else f"critic_{agent}"

    def policy_adapters(self, agents: list[str]) -> list[str]:
        return list(dict.fromkeys(self.policy_adapter(a) for a in agents))

    def critic_names(self, agents: list[str]) -> list[str]:
        if self.critic_free:
            return []
        return list(dict.fromkeys(self.critic_name(a) for a in agents))


METHODS: dict[str, MethodSpec] = {}
_ALIASES: dict[str, str] = {}


def register_method(spec: MethodSpec, *, overwrite: bool = False) -> MethodSpec:
    """Add ``spec`` to :data:`METHODS` and return the spec now registered under its name.

    An equal spec under the same name is a no-op (a module imported twice, or run as a script
    and imported); a different one raises :class:`~tasks.AlreadyRegisteredError` (a
    ``ValueError``) unless ``overwrite`` is true, as every registry of the project does. A
    spelling (name, leaderboard name, alias) that names another method raises too, and so does
    a ``module`` that names no registered method (nothing could run the spec)."""
    existing = METHODS.get(spec.name)
    if existing is not None and not overwrite:
        if existing is spec or existing == spec:
            return existing
        raise AlreadyRegisteredError(
            f"Method {spec.name!r} is already registered to a different value; pass "
            "overwrite=True to replace it, or choose another name"
        )
    if spec.module != spec.name and spec.module not in METHODS:
        raise ValueError(
            f"method {spec.name!r}: module {spec.module!r} names no registered method; a module "
            "runs the method of its own name (and the variants registered with it), so register "
            f"{spec.module!r} first or leave module unset (default: {spec.name!r})"
        )
    spellings = {spec.name, spec.leaderboard, *spec.aliases} - {OTHER}
    taken = sorted(s for s in spellings if _ALIASES.get(s, spec.name) != spec.name)
    if taken:
        raise AlreadyRegisteredError(
            f"method {spec.name!r}: {taken} already name {_ALIASES[taken[0]]!r}"
        )
    if existing is not None:
        unregister_method(spec.name)
    METHODS[spec.name] = spec
    _ALIASES.update(dict.fromkeys(spellings, spec.name))
    return spec


def unregister_method(name: str) -> MethodSpec:
    """Remove the method ``name`` (its registered name) and its spellings; returns its spec.
    KeyError names the registered methods."""
    if name not in METHODS:
        raise KeyError(f"no method {name!r} is registered; registered: {sorted(METHODS)}")
    for spelling in [s for s, owner in _ALIASES.items() if owner == name]:
        del _ALIASES[spelling]
    return METHODS.pop(name)


def resolve_method(name: str) -> str:
    """The registered name ``name`` spells (itself, an alias or a leaderboard name)."""
    try:
        return _ALIASES[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; valid: {sorted(METHODS)}") from None


def get_method(name: str) -> MethodSpec:
    """The :class:`MethodSpec` of ``name`` (any spelling); ValueError names the valid ones."""
    return METHODS[resolve_method(name)]


# ------------------------------------------------------------------ the methods

register_method(
    MethodSpec(
        "marft",
        "MARFT: one LoRA adapter per agent on one base model, a centralized critic, sequential "
        "advantages.",
        rollout=EPISODES,
        estimator="sequential_gae",
        critic=CENTRALIZED,
        shared_adapters=False,
    )
)
register_method(
    MethodSpec(
        "marft_shared",
        "MARFT-shared: one LoRA adapter shared by all agents, a centralized critic, sequential "
        "advantages.",
        rollout=EPISODES,
        estimator="sequential_gae",
        critic=CENTRALIZED,
        shared_adapters=True,
    )
)
register_method(
    MethodSpec(
        "ippo",
        "IPPO: one LoRA adapter and one critic per agent; each critic sees only its agent's "
        "observation.",
        rollout=EPISODES,
        estimator="gae",
        critic=OWN_OBSERVATION,
        shared_adapters=False,
    )
)


def _with_shared_variant(spec: MethodSpec) -> None:
    """Register a critic-free ``spec`` and its ``<name>_shared`` variant (one adapter for all
    agents), which runs from the same module."""
    register_method(spec)
    register_method(
        dataclasses.replace(
            spec,
            name=f"{spec.name}_shared",
            shared_adapters=True,
            module=spec.module,
            leaderboard="",  # derived from the variant's name
        )
    )


# AT-GRPO (PettingLLMs / Stronger-MAS): the episode continues along the best branch; the
# branches' rewards are centred in their group and not whitened again over the batch.
_with_shared_variant(
    MethodSpec(
        "at_grpo",
        "AT-GRPO: no critic; tree sampling (K branches per problem, turn and agent from one "
        "copied state), group-relative advantages; one LoRA adapter per agent "
        "(algo.method=at_grpo_shared: one shared adapter).",
        rollout=TREES,
        estimator="group",
        critic=None,
        shared_adapters=False,
        algo={"normalize_advantages": False},
    )
)
# MAGRPO (CoMLRL 1.4.3): the return minus the group mean divided by the group's std
# (advantage_normalization=True, magrpo.py _compute_loss_with_gradients), hence scale_by_std.
_with_shared_variant(
    MethodSpec(
        "magrpo",
        "MAGRPO: no critic; K joint episodes per problem, group-relative advantages on the team "
        "reward; one LoRA adapter per agent (algo.method=magrpo_shared: one shared adapter).",
        rollout=JOINT,
        estimator="group",
        critic=None,
        shared_adapters=False,
        algo={"normalize_advantages": False, "scale_by_std": True},
    )
)
# Dr. GRPO (Liu et al., 2025): MAGRPO's groups with the unbiased loss: no std, no length
# normalisation (baselines/dr_grpo.py).
register_method(
    MethodSpec(
        "dr_grpo",
        "Dr. GRPO: no critic; K joint episodes per problem, advantages centred on the group "
        "mean without std scaling, token sums over a constant (unbiased loss); one LoRA adapter "
        "per agent.",
        rollout=JOINT,
        estimator="group",
        critic=None,
        shared_adapters=False,
        loss_agg="seq_sum_norm",
        algo={"normalize_advantages": False, "scale_by_std": False},
    )
)
# Dr. MAS (Feng et al., 2026, arXiv 2602.08847): MAGRPO's groups, advantages normalised per agent
# on its own rewards; the estimator lives in the method's file (baselines/dr_mas.py).
register_method(
    MethodSpec(
        "dr_mas",
        "Dr. MAS: no critic; K joint episodes per problem, each agent's advantages normalised on "
        "its own reward statistics; one LoRA adapter per agent.",
        rollout=JOINT,
        estimator="baselines.dr_mas:dr_mas_advantages",
        critic=None,
        shared_adapters=False,
        algo={"normalize_advantages": False, "scale_by_std": True},
    )
)
