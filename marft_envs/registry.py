"""Environment registry with Gymnasium's semantics: ``register``, ``make``, ``spec``, ``registry``.

An id names a benchmark family, a team size and a version (``math-3agent-v1``). Its
:class:`EnvSpec` holds the entry point and default keyword arguments; ``make(id, **overrides)``
merges the overrides over the defaults, after checking that every override is a parameter the
entry point accepts.

Versions follow Gymnasium's convention: ``Name-vN``; anything that changes what an agent sees or
how it is scored is a new version, and older versions stay registered and playable.
``make("math-3agent")`` (no version) builds the newest version, silently: the advertised short
form, and what is recorded (``env.spec.id``, episodes, bundles) is the resolved versioned id.
Asking for an older version explicitly while a newer one exists warns
(:class:`OutdatedEnvWarning`), as Gymnasium does; an unknown version fails naming the versions
that exist. (Gymnasium also warns on the unversioned form; here that form is the documented API,
so it does not.)
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import json
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from tasks.registry import Registry

_ID_RE = re.compile(r"^.+-(\d+)agent$")
_VERSION_RE = re.compile(r"^(?P<name>.+?)-v(?P<version>\d+)$")


class OutdatedEnvWarning(UserWarning):
    """``make()`` was asked for an older version of an id while a newer one is registered."""


def parse_env_id(id: str) -> tuple[str, int | None]:
    """``("math-3agent", 1)`` for ``"math-3agent-v1"``; ``("math-3agent", None)`` without a
    version."""
    m = _VERSION_RE.match(id)
    return (m.group("name"), int(m.group("version"))) if m else (id, None)


def versions(name: str) -> list[int]:
    """The registered versions of an id name (``versions("math-3agent")`` -> ``[1]``), oldest
    first; empty when none is registered."""
    name = parse_env_id(name)[0]
    found = (parse_env_id(env_id) for env_id in registry)
    return sorted(v for n, v in found if n == name and v is not None)


@dataclass(frozen=True)
class EnvSpec:
    """How to build one registered environment."""

    id: str
    entry_point: str | Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    max_episode_turns: int | None = None
    """Gymnasium's ``max_episode_steps`` for turns: :func:`make` passes it to the entry point as
    ``max_turns`` (an episode that reaches it is truncated); ``make(id, max_turns=...)`` wins."""

    @property
    def name(self) -> str:
        """The id without its version: ``math-3agent`` for ``math-3agent-v1``."""
        return parse_env_id(self.id)[0]

    @property
    def version(self) -> int | None:
        """The N of ``-vN`` (None for an id registered without a version)."""
        return parse_env_id(self.id)[1]

    @property
    def family(self) -> str:
        """``math`` for ``math-3agent-v1``."""
        return self.name.rsplit("-", 1)[0]

    @property
    def team_size(self) -> int | None:
        m = _ID_RE.match(self.name)
        return int(m.group(1)) if m else None

    @property
    def fingerprint(self) -> Any:
        """The :class:`~marft_envs.fingerprint.Fingerprint` of this spec's environment with its
        default settings (None if its entry point's environment has none). Builds the
        environment once (its dataset is loaded and hashed) and remembers the answer per spec."""
        try:
            key: str | None = self.to_json()
        except ValueError:  # a callable entry point or non-JSON kwargs: not cached
            key = None
        if key is not None and key in _FINGERPRINTS:
            return _FINGERPRINTS[key]
        env = make(self)
        try:
            fp = getattr(getattr(env, "unwrapped", env), "fingerprint", None)
        finally:
            close = getattr(env, "close", None)
            if callable(close):
                close()
        if key is not None:
            _FINGERPRINTS[key] = fp
        return fp

    def make(self, **overrides: Any) -> Any:
        return make(self, **overrides)

    def to_json(self) -> str:
        """A JSON string that :meth:`from_json` turns back into an equal spec."""
        if not isinstance(self.entry_point, str):
            raise ValueError(
                f"EnvSpec {self.id!r}: a callable entry point cannot be serialised; register "
                "it as 'module:attr'"
            )
        d = dataclasses.asdict(self)
        try:
            return json.dumps(d, sort_keys=True)
        except TypeError as e:
            raise ValueError(
                f"EnvSpec {self.id!r}: kwargs are not JSON-serialisable ({e})"
            ) from None

    @classmethod
    def from_json(cls, text: str) -> EnvSpec:
        d = json.loads(text)
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"Unknown EnvSpec fields {sorted(unknown)}")
        return cls(**d)


#: Every registered id: a mapping (``in``, ``[id]``, ``get``, ``del``) under the one registry rule.
registry: Registry[EnvSpec] = Registry("environment id")
#: EnvSpec JSON -> its fingerprint (EnvSpec.fingerprint builds an environment once per spec)
_FINGERPRINTS: dict[str, Any] = {}


def register(
    id: str,
    entry_point: str | Callable[..., Any],
    *,
    kwargs: dict[str, Any] | None = None,
    description: str = "",
    max_episode_turns: int | None = None,
    overwrite: bool = False,
) -> EnvSpec:
    """Register an environment id. ``entry_point`` is ``"module:attr"`` or a callable.

    Ids are versioned, ``Name-vN`` (``math-3agent-v1``); a behaviour change is registered as a
    new version next to the old one (docs/environments.md). An unversioned id is allowed for
    quick experiments, but a name cannot be registered both with and without versions.
    Registering an id again with an equal spec does nothing; with a different one it raises
    :class:`~tasks.AlreadyRegisteredError` (a ValueError) unless ``overwrite=True``.
    """
    name, version = parse_env_id(id)
    if version is not None and id != f"{name}-v{version}":
        raise ValueError(
            f"cannot register {id!r}: write the version without leading zeros, {name}-v{version}"
        )
    if version is not None and name in registry:
        raise ValueError(
            f"cannot register {id!r}: the unversioned id {name!r} is registered; register "
            "versioned ids only (Name-vN) for one name"
        )
    if version is None and versions(name):
        raise ValueError(
            f"cannot register the unversioned id {id!r}: versions "
            f"{[f'{name}-v{v}' for v in versions(name)]} exist; register {name}-vN instead"
        )
    if max_episode_turns is not None and (
        isinstance(max_episode_turns, bool)
        or not isinstance(max_episode_turns, int)
        or max_episode_turns < 1
    ):
        raise ValueError(
            f"max_episode_turns must be an integer >= 1 or None, got {max_episode_turns!r}"
        )
    spec_ = EnvSpec(id, entry_point, dict(kwargs or {}), description, max_episode_turns)
    return registry.register(id, spec_, overwrite=overwrite)


def register_team_env(
    id: str,
    *,
    dataset: str,
    split: str,
    workflow: str,
    verifier: str,
    description: str,
    **kwargs: Any,
) -> None:
    """Register ``id`` as a one-round :class:`~marft_envs.FlexMGEnv` with a team reward (the
    built-in families register this way; :func:`register`'s rule for a taken id). ``kwargs``
    (e.g. ``dataset_kwargs``) go to the environment too. An ``id`` without a version is
    registered as its ``-v1``."""
    if parse_env_id(id)[1] is None:
        id = f"{id}-v1"
    register(
        id,
        "marft_envs.flexmg:FlexMGEnv",
        kwargs={
            "dataset": dataset,
            "split": split,
            "workflow": workflow,
            "verifier": verifier,
            "horizon": 1,
            "feedback": "none",
            "reward_to": "team",
            **kwargs,
        },
        description=description,
    )


def spec(id: str) -> EnvSpec:
    """The :class:`EnvSpec` of a registered id; an id without a version gives its newest
    version's spec. An unknown version names the versions that exist; other unknown ids name
    the closest valid ones."""
    hit = registry.get(id)
    if hit is not None:
        return hit
    name, version = parse_env_id(id)
    known = versions(name)
    if known and version is None:
        return registry[f"{name}-v{known[-1]}"]
    if known:
        listed = ", ".join(f"{name}-v{v}" for v in known)
        raise KeyError(
            f"No version v{version} of environment {name!r}: registered versions are {listed} "
            f"(make({name!r}) gives the newest, {name}-v{known[-1]})"
        )
    names = sorted({parse_env_id(i)[0] for i in registry})
    close = difflib.get_close_matches(id, names, n=5, cutoff=0.5)
    hint = f" Did you mean {close}?" if close else ""
    raise KeyError(
        f"No environment registered with id {id!r}.{hint} Registered ids: "
        f"{', '.join(sorted(registry))}"
    ) from None


def load_entry_point(entry_point: str | Callable[..., Any]) -> Callable[..., Any]:
    """The callable an :class:`EnvSpec` entry point names: ``"module:attr"`` is imported, a
    callable is returned as it is (what :func:`make` calls)."""
    if callable(entry_point):
        return entry_point
    module, sep, attr = entry_point.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"entry point {entry_point!r} is not of the form 'module:attr'")
    return getattr(importlib.import_module(module), attr)


def accepted_kwargs(fn: Callable[..., Any]) -> list[str] | None:
    """Names an entry point accepts (None if it takes ``**kwargs`` it does not forward to us)."""
    names: list[str] = []
    sig = inspect.signature(fn)
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            forwarded = getattr(fn, "__forwards_kwargs_to__", None)
            if forwarded is None:
                return None
            names += [n for n in (accepted_kwargs(forwarded) or []) if n not in names]
        elif p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self":
            names.append(p.name)
    return names


def check_overrides(id: str | EnvSpec, overrides: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` naming the valid ones if ``make(id, **overrides)`` would reject a key.

    Builds nothing, so a caller (a trainer's config check) can catch a typo before it loads a model.
    """
    spec_ = id if isinstance(id, EnvSpec) else spec(id)
    valid = accepted_kwargs(load_entry_point(spec_.entry_point))
    if valid is not None:
        bad = sorted(set(overrides) - set(valid))
        if bad:
            raise TypeError(
                f"make({spec_.id!r}): unknown override(s) {bad}. Valid overrides: "
                f"{', '.join(sorted(valid))}"
            )


def make(id: str | EnvSpec, **overrides: Any) -> Any:
    """Build a registered environment, applying keyword overrides to its spec's defaults.

    ``id`` without a version builds the newest version; ``env.spec.id`` is the versioned id. An
    explicit older version, while a newer one is registered, builds that version and warns
    (:class:`OutdatedEnvWarning`).
    """
    spec_ = id if isinstance(id, EnvSpec) else spec(id)
    if isinstance(id, str) and spec_.version is not None and spec_.id == id:
        newest = versions(spec_.name)[-1]
        if newest > spec_.version:
            warnings.warn(
                f"{id!r} is out of date: {spec_.name}-v{newest} is the newest version (results "
                "on different versions are not compared)",
                OutdatedEnvWarning,
                stacklevel=2,
            )
    fn = load_entry_point(spec_.entry_point)
    check_overrides(spec_, overrides)
    kwargs = {**spec_.kwargs, **overrides}
    call = dict(kwargs)
    if spec_.max_episode_turns is not None and "max_turns" not in call:
        valid = accepted_kwargs(fn)
        if valid is not None and "max_turns" not in valid:
            raise TypeError(
                f"make({spec_.id!r}): the spec sets max_episode_turns but its entry point takes "
                "no max_turns argument to apply it"
            )
        call["max_turns"] = spec_.max_episode_turns
    env = fn(**call)
    # Like Gymnasium: the instance knows the spec it was made from (with the overrides applied).
    try:
        env.spec = dataclasses.replace(spec_, kwargs=kwargs)
    except AttributeError:
        pass
    return env


def pprint_registry(*, print_output: bool = True, console: Console | None = None) -> str | None:
    """Print every registered id grouped by family, Gymnasium-style (or return the text).

    Every version is listed; ``newest`` marks the one ``make(name)`` builds."""
    table = Table(title="marft-envs registry")
    for col in ("id", "version", "dataset", "workflow", "agents", "description"):
        # the id and its version are what a reader copies: never folded (the others wrap)
        table.add_column(col, no_wrap=col in ("id", "version"))

    def order(env_id: str) -> tuple[str, int]:
        name, version = parse_env_id(env_id)
        return name, version or 0

    for env_id in sorted(registry, key=order):
        s = registry[env_id]
        wf = s.kwargs.get("workflow", "")
        if s.version is None:
            shown = "-"
        else:
            shown = f"v{s.version}" + (" newest" if versions(s.name)[-1] == s.version else "")
        table.add_row(
            env_id,
            shown,
            str(s.kwargs.get("dataset", "")),
            getattr(wf, "name", str(wf)),
            str(s.team_size or ""),
            s.description,
        )
    console = console or Console(width=140)
    if not print_output:
        with console.capture() as cap:
            console.print(table)
        return cap.get()
    console.print(table)
    return None
