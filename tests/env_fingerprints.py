"""The committed table ``versioned id -> environment fingerprint``.

The table is tests/data/env_fingerprints.json.
tests/envs/test_env_versions.py re-computes every registered id's fingerprint and fails when one
differs from the table while the id keeps its version: a behaviour change needs a new version
(register ``Name-v(N+1)`` with the change, keep ``Name-vN`` as it was). Record a *new* id (or a
new grader version, which is not an environment change: the leaderboard re-grades) with

    .venv/bin/python -m tests.env_fingerprints --write

Recording never changes a recorded part of an existing id (that is what a version bump is for),
except when the fingerprint recipe itself changed (``FINGERPRINT_RECIPE``, recorded per entry):
then every fingerprint moves without any environment changing, and the entries of the older
recipe are recorded afresh.

Each entry holds the digest of every part of the fingerprint and the grader version it was taken
under. An id whose data is not on this machine (``DataNotFoundError``) is fingerprinted on a
stand-in dataset: every part but ``dataset`` is compared, and its ``dataset`` part is recorded as
null until a machine with the data records it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parent / "data" / "env_fingerprints.json"


def builtin_ids() -> list[str]:
    """Every id the package registers on import (the built-ins), sorted."""
    import marft_envs

    return sorted(marft_envs.registry)


def _stand_in(kind: str) -> Any:
    """A one-task dataset of ``kind``, for the parts of an id whose data is missing here."""
    from tasks import Dataset, Task

    if kind == "code":
        task = Task("stand-in/0", "code", "p", entry_point="f", tests=("assert f() == 1",))
    else:
        task = Task("stand-in/0", "math", "p", answer="1")
    return Dataset("stand-in", "test", kind, (task,), "generated:stand-in")


def fingerprint_entry(env_id: str, grader_version: str | None = None) -> dict[str, Any]:
    """``{"digest", "parts", "grader_version"}`` of ``env_id`` with its registered settings
    (under ``grader_version``, if given); ``digest`` and ``parts["dataset"]`` are None when the
    id's data is missing here."""
    import marft_envs
    from marft_envs.fingerprint import FINGERPRINT_RECIPE, env_fingerprint
    from marft_envs.workflow import get_workflow
    from tasks import DataNotFoundError

    spec = marft_envs.spec(env_id)
    try:
        env = marft_envs.make(env_id)
        complete = True
    except DataNotFoundError:
        kind = get_workflow(spec.kwargs["workflow"]).task_kind
        env = marft_envs.make(env_id, dataset=_stand_in(kind))
        complete = False
    try:
        fp = env_fingerprint(env, grader_version=grader_version)
    finally:
        env.close()
    parts = dict(fp.parts)
    if not complete:
        parts["dataset"] = None  # type: ignore[assignment]
    return {
        "digest": fp.digest if complete else None,
        "parts": parts,
        "grader_version": fp.grader_version,
        "recipe": FINGERPRINT_RECIPE,
    }


def load_table() -> dict[str, dict[str, Any]]:
    return json.loads(TABLE.read_text(encoding="utf-8")) if TABLE.is_file() else {}


def changed_parts(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The parts recorded for an id that differ now (a null on either side is not compared)."""
    return [
        p
        for p, digest in recorded["parts"].items()
        if digest is not None and now["parts"].get(p) is not None and now["parts"].get(p) != digest
    ]


def bump_message(env_id: str, parts: list[str]) -> str:
    """What the version test says when ``env_id``'s fingerprint changed in place."""
    import marft_envs

    spec = marft_envs.spec(env_id)
    nxt = f"{spec.name}-v{(spec.version or 0) + 1}"
    return (
        f"{env_id}: its fingerprint changed (parts: {', '.join(parts)}) but its version did "
        f"not: bump the version. Register the changed environment as {nxt} and keep {env_id} "
        "registered exactly as it was (docs/environments.md, 'Versions and fingerprints'); then "
        "record the new id with `.venv/bin/python -m tests.env_fingerprints --write`"
    )


def write_table() -> tuple[list[str], list[str]]:
    """Record new ids, grader versions and missing dataset parts; refuses any change of a
    recorded part. Returns (added ids, updated ids)."""
    from marft_envs.fingerprint import FINGERPRINT_RECIPE

    table = load_table()
    added, updated = [], []
    for env_id in builtin_ids():
        if env_id not in table:
            table[env_id] = fingerprint_entry(env_id)
            added.append(env_id)
            continue
        if table[env_id].get("recipe") != FINGERPRINT_RECIPE:  # the recipe moved, not the env
            table[env_id] = fingerprint_entry(env_id)
            updated.append(env_id)
            continue
        old = table[env_id]
        same_grader = fingerprint_entry(env_id, grader_version=old["grader_version"])
        parts = changed_parts(old, same_grader)
        if parts:
            raise SystemExit(bump_message(env_id, parts))
        now = fingerprint_entry(env_id)
        if now != old:
            # the grader moved on, or the data is here now: fill in, never change a recorded part
            merged = {p: old["parts"].get(p) or now["parts"][p] for p in now["parts"]}
            merged["grader"] = now["parts"]["grader"]
            from marft_envs.fingerprint import combine_parts

            complete = all(v is not None for v in merged.values())
            table[env_id] = {
                "digest": combine_parts(merged) if complete else None,
                "parts": merged,
                "grader_version": now["grader_version"],
                "recipe": FINGERPRINT_RECIPE,
            }
            if table[env_id] != old:
                updated.append(env_id)
    TABLE.parent.mkdir(parents=True, exist_ok=True)
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return added, updated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.env_fingerprints")
    parser.add_argument("--write", action="store_true", required=True)
    parser.parse_args(argv)
    added, updated = write_table()
    print(f"{TABLE}: {len(added)} id(s) added {added}, {len(updated)} updated {updated}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
