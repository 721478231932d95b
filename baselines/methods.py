"""The baselines as small specs over one trainer core.

A spec says which adapters play which agent, which critics value which turn (and what they
see), and how advantages are computed; :mod:`baselines.trainer` does the rest.

| method       | policy adapters   | critic                           | advantages                |
|--------------|-------------------|----------------------------------|---------------------------|
| marft        | one per agent     | centralized, role-conditioned    | sequential, chained       |
| marft_shared | one shared by all | centralized, role-conditioned    | sequential, chained       |
| ippo         | one per agent     | one per agent, own observation   | independent               |
| at_grpo      | one per agent     | none                             | (problem, turn, agent)    |
| magrpo       | one per agent     | none                             | joint episodes of a task  |

``at_grpo_shared`` and ``magrpo_shared`` are the same with one adapter shared by all agents.
"""

from __future__ import annotations

from dataclasses import dataclass

from .core.critic import CENTRALIZED, OWN_OBSERVATION
from .core.groups import AT_GRPO, MAGRPO

SHARED_POLICY = "policy"

CENTRAL_CRITIC = "critic"


@dataclass(frozen=True)
class MethodSpec:
    """What distinguishes one baseline from another."""

    name: str
    bundle_name: str  # the name used by leaderboard bundles
    shared_policy: bool
    critic_kind: str | None  # CENTRALIZED, OWN_OBSERVATION, or None (critic-free)
    sequential: bool  # MARFT's chained decomposition (else independent per-agent GAE)
    grouping: str | None = None  # critic-free: AT_GRPO (tree branches) or MAGRPO (episodes)

    @property
    def critic_free(self) -> bool:
        """True for the group-relative methods (no critic, no value function)."""
        return self.critic_kind is None

    def policy_adapter(self, agent: str) -> str:
        """The adapter that plays ``agent``."""
        return SHARED_POLICY if self.shared_policy else agent

    def critic_name(self, agent: str) -> str:
        """The critic (adapter + value head) that values ``agent``'s turns."""
        return CENTRAL_CRITIC if self.critic_kind == CENTRALIZED else f"critic_{agent}"

    def policy_adapters(self, agents: list[str]) -> list[str]:
        return list(dict.fromkeys(self.policy_adapter(a) for a in agents))

    def critic_names(self, agents: list[str]) -> list[str]:
        if self.critic_free:
            return []
        return list(dict.fromkeys(self.critic_name(a) for a in agents))


METHODS: dict[str, MethodSpec] = {
    "marft": MethodSpec(
        "marft", "marft", shared_policy=False, critic_kind=CENTRALIZED, sequential=True
    ),
    "marft_shared": MethodSpec(
        "marft_shared", "marft-shared", shared_policy=True, critic_kind=CENTRALIZED, sequential=True
    ),
    "ippo": MethodSpec(
        "ippo", "ippo", shared_policy=False, critic_kind=OWN_OBSERVATION, sequential=False
    ),
    **{
        f"{group}{suffix}": MethodSpec(
            f"{group}{suffix}",
            group.replace("_", "-") + suffix.replace("_", "-"),
            shared_policy=bool(suffix),
            critic_kind=None,
            sequential=False,
            grouping=group,
        )
        for group in (AT_GRPO, MAGRPO)
        for suffix in ("", "_shared")
    },
}


def get_method(name: str) -> MethodSpec:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; valid: {sorted(METHODS)}") from None


def preset_of(method: str) -> str:
    """The config preset (and ``baselines.<module>``) that runs ``method``: a critic-free
    method's shared-adapter variant runs from its preset (``at_grpo_shared`` -> ``at_grpo``)."""
    spec = get_method(method)
    return spec.grouping if spec.grouping is not None else spec.name


def equal_compute_overrides(
    method: str, episodes: int, agents: int, group_size: int = 4
) -> list[str]:
    """Overrides giving ``method`` the generated responses per iteration of ``episodes`` PPO
    episodes of ``agents`` turns (one round each; docs/baselines.md, "Comparing at equal compute").

    A PPO method plays ``episodes``; MAGRPO plays them as ``episodes / group_size`` problems x K;
    AT-GRPO generates ``K n (n + 1) / 2`` responses per problem (branches plus the round's
    continuations), so it gets ``round(2 episodes / (K (n + 1)))`` problems, at least one.
    """
    spec = get_method(method)
    if agents < 1:
        raise ValueError(f"agents must be >= 1 (the team size), got {agents}")
    if spec.grouping is None:
        return [f"train.episodes_per_iteration={episodes}"]
    if spec.grouping == MAGRPO:
        problems = episodes // group_size
    else:
        problems = max(1, round(2 * episodes / (group_size * (agents + 1))))
    return [
        f"algo.group_size={group_size}",
        f"train.episodes_per_iteration={problems * group_size}",
    ]
