"""The result bundle: what an evaluation run hands to the leaderboard.

Pydantic only (no server dependency), so ``baselines.eval`` and third-party
trainers can build and write bundles without the web stack. The format is
documented, with an example, in ``docs/leaderboard.md``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SCHEMA_VERSION = 3
"""The bundle format version written by this package (bump on incompatible changes).

2 added ``grader_version``; 3 added ``fingerprint`` and versioned ids (``math-3agent-v1``).
Version 1 and 2 bundles (without them) are still read, as *unversioned* results: the
leaderboard lists the rows it stored from them but accepts new submissions only at version 3."""

SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3)
FINGERPRINT_SCHEMA_VERSION = 3
"""The first schema version whose bundles must carry ``fingerprint`` and a versioned id."""

# A copy, not a derivation: the method registry (baselines/core/methods.py, MethodSpec.leaderboard)
# names every method, but leaderboard may not import baselines, so this list repeats the
# repository's methods and tests/baselines/test_method_registry.py fails until the two agree.
# "other" is every method not listed here (a researcher's own: baselines.eval records it).
Method = Literal[
    "marft",
    "marft-shared",
    "ippo",
    "at-grpo",
    "at-grpo-shared",
    "magrpo",
    "magrpo-shared",
    "dr-grpo",
    "dr-mas",
    "other",
]
# the database stores the method as a plain string (no constraint), so adding one needs no migration
METHODS: tuple[str, ...] = get_args(Method)

BUNDLE_FILENAME = "bundle.json"


class _Strict(BaseModel):
    # Unknown fields are an error: a typo in a third-party bundle should fail loudly.
    model_config = ConfigDict(extra="forbid", frozen=True)


class TurnRecord(_Strict):
    """One AEC turn: one agent's whole response."""

    agent: str = Field(min_length=1)
    action: str


class EpisodeRecord(_Strict):
    """One evaluation episode: which task, under which seed, what was said, what is graded.

    ``final_output`` is the text the environment's verifier grades (the answering
    agent's last response: a math answer or a program). ``claimed_score`` is what the
    submitter's own run scored; it is displayed for comparison and never trusted.
    """

    task_id: str = Field(min_length=1)
    seed: int
    turns: list[TurnRecord] = Field(default_factory=list)
    final_output: str
    claimed_score: float | None = Field(default=None, ge=0.0, le=1.0)


class DatasetRef(_Strict):
    """The evaluation set: a registered dataset split, pinned by its content hash.

    ``size`` limits the evaluation set to the first ``size`` tasks of the split in
    dataset order (None: the whole split). A prefix, not a free choice of tasks, so
    nobody can pick the tasks they do well on.
    """

    name: str = Field(min_length=1)
    split: str = Field(min_length=1)
    hash: str = Field(min_length=1)
    size: int | None = Field(default=None, ge=1)


_SHA256 = r"^[0-9a-f]{64}$"


class FingerprintRef(_Strict):
    """The environment fingerprint a bundle was made on (``marft_envs.fingerprint``): the digest
    and the digests of its parts (workflow, prompts, dataset, verifier, grader, rules).

    The digest must be the one its parts give (a digest edited by hand is refused here); the
    leaderboard re-computes the parts from the claimed id and names those that differ.
    """

    digest: str = Field(pattern=_SHA256)
    parts: dict[str, str]

    @model_validator(mode="after")
    def _digest_of_parts(self) -> FingerprintRef:
        from marft_envs.fingerprint import PARTS, combine_parts

        missing = [p for p in PARTS if p not in self.parts]
        if missing:
            raise ValueError(f"fingerprint.parts lacks {missing}; a fingerprint has {list(PARTS)}")
        bad = sorted(k for k, v in self.parts.items() if not re.fullmatch(_SHA256, v))
        if bad:
            raise ValueError(f"fingerprint.parts {bad} are not sha256 hex digests")
        if combine_parts(self.parts) != self.digest:
            raise ValueError(
                "fingerprint.digest is not the digest of fingerprint.parts: the fingerprint was "
                "edited or forged; write bundles with Bundle.from_episodes"
            )
        return self


class Bundle(_Strict):
    """A complete, self-describing evaluation result.

    ``grader_version`` names the grader that produced ``claimed_score`` in the submitter's run
    (``marft_envs.grader_version(env)``); the leaderboard shows it next to the claimed score and
    re-grades with its own current grader anyway.

    ``env_id`` is the versioned id the episodes were played on (``math-3agent-v1``) and
    ``fingerprint`` that environment's fingerprint, with the bundle's overrides, under
    ``grader_version`` (``env.unwrapped.fingerprint``); both are required from schema 3 on.
    """

    schema_version: int = SCHEMA_VERSION
    env_id: str = Field(min_length=1)
    env_spec: dict[str, Any]
    dataset: DatasetRef
    package_version: str
    method: Method
    model: str = Field(min_length=1)
    config: dict[str, Any] = Field(default_factory=dict)
    seeds: list[int] = Field(min_length=1)
    team_size: int = Field(ge=1)
    claimed_score: float | None = Field(default=None, ge=0.0, le=1.0)
    grader_version: str | None = Field(default=None, min_length=1, max_length=100)
    fingerprint: FingerprintRef | None = None
    episodes: list[EpisodeRecord] = Field(min_length=1)

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v not in SUPPORTED_SCHEMA_VERSIONS:
            raise ValueError(
                f"schema_version {v} is not supported; supported: {list(SUPPORTED_SCHEMA_VERSIONS)}"
            )
        return v

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"seeds must be distinct, got {v}")
        return v

    @model_validator(mode="after")
    def _spec_matches_id(self) -> Bundle:
        spec_id = self.env_spec.get("id")
        if spec_id is not None and spec_id != self.env_id:
            raise ValueError(f"env_spec.id {spec_id!r} does not match env_id {self.env_id!r}")
        return self

    @model_validator(mode="after")
    def _versioned_from_schema_3(self) -> Bundle:
        if self.schema_version < FINGERPRINT_SCHEMA_VERSION:
            if self.fingerprint is not None:
                raise ValueError(
                    f"fingerprint needs schema_version {FINGERPRINT_SCHEMA_VERSION}, got "
                    f"{self.schema_version}"
                )
            return self
        from marft_envs.fingerprint import sha256_json
        from marft_envs.registry import parse_env_id

        if parse_env_id(self.env_id)[1] is None:
            raise ValueError(
                f"env_id {self.env_id!r} has no version: schema {self.schema_version} bundles "
                f"name the versioned id they were played on, e.g. {self.env_id + '-v1'!r}"
            )
        if self.fingerprint is None:
            raise ValueError(
                f"fingerprint is missing: schema {self.schema_version} bundles record the "
                "environment fingerprint (env.unwrapped.fingerprint); write them with "
                "Bundle.from_episodes"
            )
        if self.grader_version is None:
            raise ValueError(
                f"grader_version is missing: schema {self.schema_version} bundles name the "
                "grader their fingerprint was taken under"
            )
        if self.fingerprint.parts["grader"] != sha256_json({"version": self.grader_version}):
            raise ValueError(
                f"fingerprint was not taken under grader_version {self.grader_version!r} (its "
                "grader part is another version's)"
            )
        return self

    @property
    def versioned(self) -> bool:
        """Whether the bundle names a versioned id and a fingerprint (schema 3 and later)."""
        return self.fingerprint is not None

    # ------------------------------------------------------------------ builders

    @classmethod
    def from_episodes(
        cls,
        env: Any,
        episodes: Iterable[Any],
        *,
        method: str,
        model: str,
        config: Mapping[str, Any] | None = None,
        seeds: Iterable[int] | None = None,
        claimed_score: float | None = None,
        dataset_size: int | None = None,
    ) -> Bundle:
        """Build a bundle from an environment and its played episodes.

        ``env`` is an environment made by ``marft_envs.make`` (its spec, dataset and
        team are read from it) or an env id (made with its registered defaults).
        ``episodes`` are ``marft_envs.Episode`` records, ``EpisodeRecord``s or dicts
        with the same fields. ``seeds`` defaults to the seeds found in the episodes.
        """
        import marft_envs  # lazy: the schema itself needs only pydantic

        if isinstance(env, str):
            env = marft_envs.make(env)

        base = env.unwrapped
        spec = getattr(base, "spec", None) or getattr(env, "spec", None)
        if spec is None:
            raise ValueError("env has no spec: build it with marft_envs.make() or pass its id")
        env_spec = json.loads(spec.to_json())
        records = [episode_record(ep) for ep in episodes]
        ds = base.dataset
        fp = getattr(base, "fingerprint", None)
        if fp is None:
            raise ValueError(
                f"{type(base).__name__} has no fingerprint: bundles are made on a FlexMGEnv "
                "(marft_envs.make)"
            )
        return cls(
            env_id=env_spec["id"],
            env_spec=env_spec,
            dataset=DatasetRef(name=ds.name, split=ds.split, hash=ds.hash, size=dataset_size),
            package_version=getattr(marft_envs, "__version__", "unknown"),
            method=method,  # type: ignore[arg-type]
            model=model,
            config=dict(config or {}),
            seeds=list(seeds) if seeds is not None else sorted({r.seed for r in records}),
            team_size=len(base.possible_agents),
            claimed_score=claimed_score,
            grader_version=fp.grader_version,
            fingerprint=FingerprintRef(digest=fp.digest, parts=dict(fp.parts)),
            episodes=records,
        )


def episode_record(ep: Any) -> EpisodeRecord:
    """Convert a played episode (``marft_envs`` ``Episode``, mapping or record) to an
    ``EpisodeRecord``."""
    if isinstance(ep, EpisodeRecord):
        return ep
    if isinstance(ep, Mapping):
        return EpisodeRecord.model_validate(dict(ep))
    turns = [TurnRecord(agent=t.agent, action=str(t.action)) for t in ep.turns]
    final = getattr(ep, "final_output", None)
    if final is None:
        raise ValueError(f"episode for task {ep.task_id!r} has no final_output")
    if ep.seed is None:
        raise ValueError(
            f"episode for task {ep.task_id!r} has no seed: evaluate with env.reset(seed=s, ...) "
            "so the leaderboard can check every seed covers the evaluation set"
        )
    score = getattr(ep, "score", None)
    return EpisodeRecord(
        task_id=ep.task_id,
        seed=int(ep.seed),
        turns=turns,
        final_output=str(final),
        claimed_score=None if score is None else float(score),
    )


def write_bundle(bundle: Bundle, path: str | Path) -> Path:
    """Write ``bundle`` to ``path``: a ``.json`` file, or a directory that gets ``bundle.json``.

    Returns the path of the JSON file written.
    """
    path = Path(path)
    target = path if path.suffix == ".json" else path / BUNDLE_FILENAME
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(bundle.model_dump_json(indent=1), encoding="utf-8")
    return target


def bundle_path(path: str | Path) -> Path:
    """The JSON file of a bundle given as a file or as a directory holding ``bundle.json``."""
    path = Path(path)
    target = path / BUNDLE_FILENAME if path.is_dir() else path
    if not target.is_file():
        raise FileNotFoundError(
            f"no bundle at {path}: expected a .json file or a directory containing "
            f"{BUNDLE_FILENAME}"
        )
    return target


def read_bundle(path: str | Path) -> Bundle:
    """Read and validate a bundle from a ``.json`` file or a bundle directory."""
    return Bundle.model_validate_json(bundle_path(path).read_text(encoding="utf-8"))
