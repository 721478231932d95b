"""Re-grading: never trust a bundle's score; rebuild its environment and grade every episode again.

The rules (documented in ``docs/leaderboard.md``):

* The environment is rebuilt with ``marft_envs.make(env_id, **overrides)`` where the
  overrides are the bundle's ``env_spec.kwargs`` that differ from the registered spec;
  only :data:`SAFE_OVERRIDES` may differ (they choose the split or the episode rules,
  not how answers are graded). Server-side overrides (``sandbox=...``) are added last.
* The bundle's dataset name, split and content hash must equal the rebuilt
  environment's dataset. The evaluation set is the first ``dataset.size`` tasks of the
  split (all of them when ``size`` is None).
* Coverage: for every seed in ``bundle.seeds``, exactly one episode per task of the
  evaluation set. Unknown task ids, duplicate (seed, task) pairs, missing pairs and
  seeds not declared in ``seeds`` are rejected.
* Every episode's ``final_output`` must be the last action of the workflow's answering
  agent in its transcript, and every turn's agent must be one of the team's agents.
* Each ``final_output`` is graded with ``env.unwrapped.verifier.grade``. Infrastructure
  errors are retried; if one persists the submission is refused as a whole
  (:class:`GradingUnavailable`), never scored as a failure.
* The score is the mean verified score; its 95% interval is Wilson's on the per-task
  means with n = number of tasks (see :func:`wilson_interval`).
* The grade names the grader version of the rebuilt environment's verifier
  (``marft_envs.grader_version``), so a stored grade says which rules produced it.
* Environment versions: a bundle names a versioned id (``math-3agent-v1``) and the fingerprint
  of the environment it was played on. The fingerprint of the rebuilt environment, taken under
  the bundle's ``grader_version``, must equal it (:func:`check_fingerprint`); otherwise the
  bundle was played on another environment than the id it claims and is refused, naming both
  fingerprints and the parts that differ. A grade keeps the id's version, and rows are ranked
  only against rows of the same version and the same settings: a grade keeps the bundle's
  overrides that change the fingerprint (:func:`ranking_overrides`; ``horizon=2``), and a row
  with overrides is ranked in a group of its own (``arith-v1 horizon=2``), never with rows on
  the registered settings. A schema 3 bundle without a fingerprint, or whose
  fingerprint is not the digest of its parts, is refused by the schema. Older bundles (schema 1
  and 2, written before versions) are still graded, against the newest version of their id, as
  *unversioned* grades: listed, never ranked.
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from leaderboard.schema import SCHEMA_VERSION, Bundle

SAFE_OVERRIDES = frozenset({"split", "horizon", "feedback", "reward_to", "seed", "stop_on_correct"})
"""``make()`` keyword arguments a bundle may set differently from the registered spec."""

NEUTRAL_OVERRIDES = frozenset({"seed"})
"""Safe overrides that change nothing an agent sees or a verdict (not in the fingerprint): a
bundle that sets them is ranked with the registered settings."""

IGNORED_KWARGS = frozenset({"data_dir", "render_mode", "sandbox"})
"""Submitter-machine settings: the server uses its own (the dataset hash pins the content)."""

INFRA_RETRIES = 2
"""Extra attempts for an episode whose verdict is an infrastructure error."""

Z_95 = 1.959963984540054


class BundleRejected(ValueError):
    """The bundle is inconsistent with its environment; the message says why."""


class GradingUnavailable(RuntimeError):
    """The verifier kept failing for reasons the submitter is not to blame for."""


@dataclass(frozen=True)
class EpisodeGrade:
    """The verifier's verdict on one episode."""

    index: int
    task_id: str
    seed: int
    score: float
    correct: bool
    answer: str | None
    reason: str


@dataclass(frozen=True)
class Grade:
    """The verified result of a bundle, and the grader version that produced it."""

    env_family: str
    score: float
    ci_low: float
    ci_high: float
    n_tasks: int
    episodes: tuple[EpisodeGrade, ...]
    grader_version: str
    env_version: int | None = None
    """The N of the bundle's ``-vN`` id (None: an unversioned bundle, never ranked)."""
    env_fingerprint: str | None = None
    """The fingerprint digest re-computed and matched (None: an unversioned bundle)."""
    env_overrides: dict[str, Any] = field(default_factory=dict)
    """The bundle's settings that differ from the registered ones (:func:`ranking_overrides`;
    empty: the registered settings). Rows are ranked only with rows of the same overrides."""


def wilson_interval(p: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a mean ``p`` of ``n`` samples in [0, 1].

    Exact-binomial-like for 0/1 scores; conservative for fractional scores, since a
    variable in [0, 1] with mean p has variance at most p(1 - p).
    """
    if n <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, p))
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def overrides_for(bundle: Bundle, registered_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``make()`` overrides a bundle's env_spec implies; rejects unsafe ones."""
    kwargs = bundle.env_spec.get("kwargs", {})
    if not isinstance(kwargs, Mapping):
        raise BundleRejected("env_spec.kwargs must be an object")
    keys = (set(kwargs) | set(registered_kwargs)) - IGNORED_KWARGS
    changed = sorted(
        k for k in keys if kwargs.get(k, registered_kwargs.get(k)) != registered_kwargs.get(k)
    )
    unsafe = [k for k in changed if k not in SAFE_OVERRIDES]
    if unsafe:
        raise BundleRejected(
            f"env_spec.kwargs changes {unsafe} from the registered {bundle.env_id!r}; the "
            "leaderboard "
            "grades with the registered settings and only allows overriding "
            f"{sorted(SAFE_OVERRIDES)}"
        )
    return {k: kwargs[k] for k in changed if k in kwargs}


def ranking_overrides(bundle: Bundle, registered_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The bundle's overrides that change its environment (:func:`overrides_for` without
    :data:`NEUTRAL_OVERRIDES`): ``{"horizon": 2}``; empty on the registered settings."""
    overrides = overrides_for(bundle, registered_kwargs)
    return {k: v for k, v in overrides.items() if k not in NEUTRAL_OVERRIDES}


def _applicable(spec: Any, server_overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The server overrides this spec's entry point accepts (``sandbox`` only means something to
    code envs)."""
    from marft_envs.registry import accepted_kwargs, load_entry_point

    valid = accepted_kwargs(load_entry_point(spec.entry_point))
    return {k: v for k, v in server_overrides.items() if valid is None or k in valid}


def build_env(bundle: Bundle, server_overrides: Mapping[str, Any] | None = None) -> Any:
    """Rebuild the bundle's environment (registered spec + safe overrides + server overrides)."""
    import marft_envs

    try:
        spec = marft_envs.spec(bundle.env_id)
    except KeyError as e:
        raise BundleRejected(
            str(e.args[0]) if e.args else f"unknown env id {bundle.env_id!r}"
        ) from None
    overrides = {**overrides_for(bundle, spec.kwargs), **_applicable(spec, server_overrides or {})}
    try:
        # by spec, not by id: re-grading an older version is no reason for an out-of-date warning
        return marft_envs.make(spec, **overrides)
    except (TypeError, ValueError, KeyError) as e:
        raise BundleRejected(
            f"cannot build {bundle.env_id!r} with overrides {overrides}: {e}"
        ) from None


def check_fingerprint(bundle: Bundle, env: Any) -> str:
    """The fingerprint of the rebuilt ``env`` under the bundle's grader version, which must be
    the bundle's own; returns its digest. Refuses (naming both digests and the parts that
    differ) a bundle played on another environment than the one its versioned id names."""
    from marft_envs.fingerprint import env_fingerprint

    claimed = bundle.fingerprint
    if claimed is None:
        raise BundleRejected(
            f"bundle (schema {bundle.schema_version}) has no environment fingerprint to check; "
            f"bundles of schema {SCHEMA_VERSION} (Bundle.from_episodes) carry one"
        )
    here = env_fingerprint(env, grader_version=bundle.grader_version)
    if here.digest != claimed.digest:
        parts = ", ".join(here.differing_parts(claimed.parts)) or "none named"
        raise BundleRejected(
            f"fingerprint mismatch for {bundle.env_id!r}: the bundle claims "
            f"{claimed.digest[:16]}... but {bundle.env_id!r} (with the bundle's overrides) has "
            f"{here.digest[:16]}... here; parts that differ: {parts}. The episodes were played "
            "on another environment than the id says (a changed prompt, workflow, dataset or "
            "episode rule); evaluate on the registered id, or register the change as a new "
            "version"
        )
    return here.digest


def check_bundle(bundle: Bundle, env: Any) -> list[str]:
    """Validate a bundle against its rebuilt environment; returns the evaluation set's task ids."""
    base = env.unwrapped
    ds = base.dataset
    ref = bundle.dataset
    if (ref.name, ref.split) != (ds.name, ds.split):
        raise BundleRejected(
            f"dataset {ref.name!r}/{ref.split!r} does not match the environment's "
            f"{ds.name!r}/{ds.split!r}"
        )
    if ref.hash != ds.hash:
        raise BundleRejected(
            f"dataset hash {ref.hash[:16]}... does not match the registered dataset "
            f"{ds.name!r}/{ds.split!r} (hash {ds.hash[:16]}...): the bundle was scored on "
            "other data"
        )
    agents = list(base.possible_agents)
    if bundle.team_size != len(agents):
        raise BundleRejected(
            f"team_size {bundle.team_size} but {bundle.env_id!r} has {len(agents)} agents"
        )
    if ref.size is not None and ref.size > len(ds):
        raise BundleRejected(
            f"dataset.size {ref.size} exceeds the {len(ds)} tasks of {ds.name!r}/{ds.split!r}"
        )
    eval_ids = list(ds.ids[: ref.size])
    _check_coverage(bundle, ds, eval_ids)
    _check_transcripts(bundle, agents, _answerer(base, agents))
    return eval_ids


def _check_coverage(bundle: Bundle, ds: Any, eval_ids: list[str]) -> None:
    unknown = sorted({e.task_id for e in bundle.episodes if e.task_id not in ds})
    if unknown:
        raise BundleRejected(
            f"{len(unknown)} unknown task id(s) for dataset {ds.name!r}/{ds.split!r}: {unknown[:5]}"
        )
    seeds = set(bundle.seeds)
    stray = sorted({e.seed for e in bundle.episodes} - seeds)
    if stray:
        raise BundleRejected(f"episodes use seed(s) {stray} not declared in seeds {bundle.seeds}")
    pairs = Counter((e.seed, e.task_id) for e in bundle.episodes)
    dup = sorted(p for p, c in pairs.items() if c > 1)
    if dup:
        raise BundleRejected(
            f"duplicate episodes: {len(dup)} (seed, task_id) pair(s) appear more than once, "
            f"e.g. {dup[:3]}; "
            "each task is evaluated at most once per seed"
        )
    in_set = set(eval_ids)
    extra = sorted(t for _, t in pairs if t not in in_set)
    if extra:
        raise BundleRejected(
            f"episodes for task(s) outside the evaluation set (the first {len(eval_ids)} "
            "tasks of the split): "
            f"{extra[:5]}"
        )
    missing = [(s, t) for s in bundle.seeds for t in eval_ids if (s, t) not in pairs]
    if missing:
        raise BundleRejected(
            f"{len(missing)} episode(s) missing: every seed must cover all {len(eval_ids)} "
            "tasks of the "
            f"evaluation set; missing (seed, task_id) e.g. {missing[:3]}"
        )


def _answerer(base: Any, agents: list[str]) -> str:
    workflow = getattr(base, "workflow", None)
    return agents[workflow.answerer_index] if workflow is not None else agents[-1]


def _check_transcripts(bundle: Bundle, agents: list[str], answerer: str) -> None:
    valid = set(agents)
    for i, ep in enumerate(bundle.episodes):
        if not ep.turns:
            raise BundleRejected(
                f"episode {i} (task {ep.task_id!r}) has no turns: transcripts are required"
            )
        bad = sorted({t.agent for t in ep.turns} - valid)
        if bad:
            raise BundleRejected(
                f"episode {i}: unknown agent(s) {bad}; {bundle.env_id!r} has {agents}"
            )
        answers = [t.action for t in ep.turns if t.agent == answerer]
        if not answers or answers[-1] != ep.final_output:
            raise BundleRejected(
                f"episode {i} (task {ep.task_id!r}): final_output is not the last action of the "
                f"answering agent {answerer!r} in its transcript"
            )


def grade_episodes(
    bundle: Bundle, env: Any, retries: int = INFRA_RETRIES, workers: int | None = None
) -> list[EpisodeGrade]:
    """Grade every episode's final output with the environment's own verifier.

    Episodes are graded ``workers`` at a time (default: up to 4, one per core): a code
    verdict waits on a sandbox run, and the verifiers are thread-safe. Grades keep the
    bundle's episode order.
    """
    base = env.unwrapped
    verifier, ds = base.verifier, base.dataset

    def grade(i: int, ep: Any) -> EpisodeGrade:
        task = ds.by_id(ep.task_id)
        for _ in range(retries + 1):
            v = verifier.grade(ep.final_output, task)
            if not v.infra_error:
                break
        else:
            raise GradingUnavailable(
                f"the verifier reported an infrastructure error on episode {i} (task "
                f"{ep.task_id!r}) "
                f"{retries + 1} times: {v.reason}; nothing was stored, please resubmit later"
            )
        return EpisodeGrade(
            i, ep.task_id, ep.seed, float(v.score), bool(v.correct), v.answer, v.reason
        )

    workers = workers or min(4, os.cpu_count() or 1)
    if workers == 1 or len(bundle.episodes) < 2:
        return [grade(i, ep) for i, ep in enumerate(bundle.episodes)]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="regrade") as pool:
        futures = [pool.submit(grade, i, ep) for i, ep in enumerate(bundle.episodes)]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:  # one episode cannot be graded: the submission fails, stop the rest
                f.cancel()
            raise


def summarise(grades: list[EpisodeGrade], n_tasks: int) -> tuple[float, float, float]:
    """(mean score, Wilson 95% low, high) with per-task means as the samples."""
    per_task: dict[str, list[float]] = defaultdict(list)
    for g in grades:
        per_task[g.task_id].append(g.score)
    means = [sum(v) / len(v) for v in per_task.values()]
    score = sum(means) / len(means) if means else 0.0
    low, high = wilson_interval(score, n_tasks)
    return score, low, high


def regrade(bundle: Bundle, server_overrides: Mapping[str, Any] | None = None) -> Grade:
    """Validate and re-grade a bundle. Raises :class:`BundleRejected` or
    :class:`GradingUnavailable`. A bundle without a fingerprint (schema 1 and 2) gets an
    unversioned grade (``env_version`` None: never ranked)."""
    import marft_envs
    from marft_envs.registry import parse_env_id

    env = build_env(bundle, server_overrides)
    try:
        fingerprint = None if bundle.fingerprint is None else check_fingerprint(bundle, env)
        eval_ids = check_bundle(bundle, env)
        version = marft_envs.grader_version(env)
        grades = grade_episodes(bundle, env)
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()
    score, low, high = summarise(grades, len(eval_ids))
    spec = marft_envs.spec(bundle.env_id)
    family = spec.family
    env_version = parse_env_id(bundle.env_id)[1] if fingerprint is not None else None
    return Grade(
        family,
        score,
        low,
        high,
        len(eval_ids),
        tuple(grades),
        version,
        env_version=env_version,
        env_fingerprint=fingerprint,
        env_overrides=ranking_overrides(bundle, spec.kwargs),
    )
