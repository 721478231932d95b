"""Environment fingerprints: a stable hash of everything that decides what agents see and how
they are scored.

A fingerprint is built from named *parts*, each the sha256 of the canonical JSON of one concern:

- ``workflow``: the roles (names, prompts, who sees the problem) in acting order, the task kind,
  the resolved dependency matrix and the answering seat; where the workflow has worked
  examples, also the examples, the example turns each agent is shown and their templates (keys
  that older ids lack, so their digests stay as they were);
- ``prompts``: the rendering templates (``marft_envs.prompts``) and the between-rounds verdict
  message, probed on a fixed synthetic transcript, so editing a template changes every id;
- ``dataset``: name, split, kind, size and the content hash of the records (``Dataset.hash``,
  computed once per dataset and cached);
- ``verifier``: its name and the settings that change verdicts (``fingerprint_settings()``);
- ``grader``: the grader version (``marft_envs.grader_version``);
- ``rules``: horizon, feedback, reward attribution, stop rule, turn and action-length limits,
  the rules' own version (:data:`marft_envs.rules.EPISODE_RULES_VERSION`) and a probe of the
  seed -> task rule.

The fingerprint's ``digest`` is the sha256 of the canonical JSON of ``{part: part digest}``, so a
digest can be checked against its parts (a forged digest is caught) and a mismatch can name the
parts that differ. Canonical JSON: sorted keys, no whitespace, UTF-8, no NaN.

The grader version is a part of its own because a grader bump is not an environment version
bump: graders change in place (the leaderboard re-grades stored results, docs/leaderboard.md),
so :func:`env_fingerprint` takes ``grader_version=`` to recompute the fingerprint a bundle made
under an older grader claims. Names, descriptions, the data folder, the render mode, the default
seed and the sandbox backend are not part of it: they change nothing an agent sees or a verdict.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from .rules import EPISODE_RULES_VERSION, task_index

__all__ = [
    "FINGERPRINT_RECIPE",
    "PARTS",
    "Fingerprint",
    "canonical_json",
    "combine_parts",
    "env_fingerprint",
    "fingerprint_content",
    "sha256_json",
]

FINGERPRINT_RECIPE = 2
"""The version of this recipe (which parts, what each holds); part of every digest. Bumped when
the recipe changes, which changes every fingerprint without any environment changing: the
committed table of fingerprints is then re-recorded as a whole (tests/env_fingerprints.py).
2: a verifier that declares its settings is identified by its name and settings, not its
class's module path (moving a class is a refactor, not a behaviour change)."""

PARTS = ("workflow", "prompts", "dataset", "verifier", "grader", "rules")
"""The parts of a fingerprint, in the order messages name them."""


def canonical_json(obj: Any) -> str:
    """``obj`` as canonical JSON (sorted keys, no whitespace, UTF-8 kept, NaN refused)."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_json(obj: Any) -> str:
    """sha256 (hex) of :func:`canonical_json` of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


def combine_parts(parts: Mapping[str, str]) -> str:
    """The digest of a fingerprint with these part digests (how a digest is checked)."""
    return sha256_json({"recipe": FINGERPRINT_RECIPE, "parts": dict(parts)})


@dataclass(frozen=True)
class Fingerprint:
    """An environment's fingerprint: ``digest`` and the digests of its :data:`PARTS`.

    ``str(fp)`` is the digest. :meth:`differing_parts` names what changed between two.
    """

    digest: str
    parts: Mapping[str, str] = field(repr=False)
    grader_version: str = ""

    def __str__(self) -> str:
        return self.digest

    def differing_parts(self, other: Fingerprint | Mapping[str, str]) -> list[str]:
        """The parts whose digests differ from ``other``'s (a Fingerprint or its parts)."""
        theirs = other.parts if isinstance(other, Fingerprint) else other
        names = [*PARTS, *sorted((set(self.parts) | set(theirs)) - set(PARTS))]
        return [p for p in names if self.parts.get(p) != theirs.get(p)]

    def to_dict(self) -> dict[str, Any]:
        """``{"digest", "parts", "grader_version"}`` (what a result bundle records)."""
        return {
            "digest": self.digest,
            "parts": dict(self.parts),
            "grader_version": self.grader_version,
        }


def _jsonable(value: Any) -> Any:
    """Settings as JSON data: dataclasses as dicts, tuples as lists, other objects by type."""
    if is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__qualname__, **_jsonable(asdict(value))}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}"}


def _prompt_probe() -> dict[str, Any]:
    """The templates rendered on a fixed two-round transcript (any template edit shows here)."""
    from .prompts import chat_messages, prompt_text, transcript_text, user_text
    from .verdict import Verdict
    from .verifiers import verdict_feedback

    past = ({"agent": "a_0", "role": "a", "position": 0, "round": 0, "action": "x = 1"},)
    pred = ({"agent": "a_0", "role": "a", "position": 0, "action": "y = 2"},)
    verdicts = (
        Verdict(correct=False, answer="3", reason="mismatch"),
        Verdict(correct=True, answer=None, reason="no_answer"),
        Verdict(correct=False, answer=None, reason="infra", infra_error=True),
    )
    return {
        "user": user_text(
            agent="b_1",
            role="b",
            problem="P",
            round_index=1,
            horizon=2,
            history=past,
            feedbacks=("F",),
            predecessors=pred,
        ),
        "user_blind": user_text(
            agent="b_1",
            role="b",
            problem="",
            round_index=0,
            horizon=1,
            history=(),
            feedbacks=(),
            predecessors=(),
        ),
        "prompt": prompt_text("I", "U"),
        "messages": chat_messages("I", "U"),
        "state": transcript_text(
            "P",
            past,
            ("F",),
            ({"correct": False, "answer": "3", "reason": "mismatch", "score": 0.0},),
        ),
        "verdict_feedback": [verdict_feedback(v) for v in verdicts],
    }


def _task_choice_probe() -> list[int]:
    """The seed -> task rule on a few seeds (a change of the rule reorders evaluations)."""
    return [task_index(s, k, 1009) for s in (0, 1, 12345) for k in (0, 1, 7)]


def verifier_settings(verifier: Any) -> dict[str, Any]:
    """What identifies a verifier's scoring: its name and ``fingerprint_settings()`` (the
    settings that change verdicts, e.g. the code reward mode); a verifier without that method
    is identified by its name and its class (module and name) instead."""
    settings = getattr(verifier, "fingerprint_settings", None)
    if callable(settings):
        return {"name": getattr(verifier, "name", ""), "settings": _jsonable(settings())}
    return {
        "name": getattr(verifier, "name", ""),
        "type": f"{type(verifier).__module__}.{type(verifier).__qualname__}",
        "settings": None,
    }


def fingerprint_content(env: Any, *, grader_version: str | None = None) -> dict[str, Any]:
    """The JSON data each part of ``env``'s fingerprint hashes, by part name.

    ``env`` is a :class:`~marft_envs.FlexMGEnv` (or a wrapper of one). ``grader_version``
    replaces the verifier's own (to recompute what a bundle graded by an older grader claims).
    """
    from .verifiers import grader_version as verifier_grader_version

    base = getattr(env, "unwrapped", env)
    wf = base.workflow
    ds = base.dataset
    workflow: dict[str, Any] = {
        "roles": [
            {"name": r.name, "instructions": r.instructions, "sees_problem": r.sees_problem}
            # worked examples only where there are some: older ids keep their digests
            | ({"example_replies": list(r.example_replies)} if r.example_replies else {})
            for r in wf.roles
        ],
        "task_kind": wf.task_kind,
        "matrix": [list(row) for row in wf.matrix],
        "answerer": wf.answerer_index,
    }
    if wf.examples:
        from .prompts import chat_messages, prompt_text

        # the examples as each agent is shown them, and their templates (a part of its own
        # would change every older id's digest)
        workflow["examples"] = list(wf.examples)
        workflow["example_turns"] = [
            [list(t) for t in wf.example_turns(i, base.horizon)] for i in range(wf.n_agents)
        ]
        workflow["example_templates"] = {
            "prompt": prompt_text("I", "U", [("E", "R")]),
            "messages": chat_messages("I", "U", [("E", "R")]),
        }
    return {
        "workflow": workflow,
        "prompts": _prompt_probe(),
        "dataset": {
            "name": ds.name,
            "split": ds.split,
            "kind": ds.kind,
            "size": len(ds),
            "hash": ds.hash,
        },
        "verifier": verifier_settings(base.verifier),
        "grader": {
            "version": grader_version
            if grader_version is not None
            else verifier_grader_version(base.verifier)
        },
        "rules": {
            "version": EPISODE_RULES_VERSION,
            "horizon": base.horizon,
            "feedback": base.feedback_mode,
            "reward_to": base.reward_to,
            "stop_on_correct": base.stop_on_correct,
            "max_turns": base.max_turns,
            "max_action_chars": base.max_action_chars,
            "task_choice": _task_choice_probe(),
        },
    }


def env_fingerprint(env: Any, *, grader_version: str | None = None) -> Fingerprint:
    """The :class:`Fingerprint` of a built environment (see the module docstring).

    Cheap after the first call on a dataset: the records' content hash is cached on the
    :class:`tasks.Dataset`, and the other parts are a few kilobytes of JSON.
    """
    content = fingerprint_content(env, grader_version=grader_version)
    parts = {name: sha256_json(content[name]) for name in PARTS}
    return Fingerprint(combine_parts(parts), parts, content["grader"]["version"])
