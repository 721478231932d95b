"""Load the external evaluation set of the math verifier (``tests/data/verifier_external/``).

Two JSONL files, built from sources this project did not write (see that folder's README):

- ``pairs.jsonl``: labelled ``(gold, pred)`` equivalence pairs from other graders' test suites;
- ``completions.jsonl``: real SmolLM2-135M-Instruct completions with their human-read final
  answer and correctness.

    from benchmarks.verifier_sets import load_pairs, load_completions
    pairs = load_pairs()              # list[dict], file order, schema checked
    rows = load_completions()

Both raise :class:`VerifierSetError` naming the file, the line and the field when a row does
not match the schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SET_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "verifier_external"
PAIRS_PATH = SET_DIR / "pairs.jsonl"
COMPLETIONS_PATH = SET_DIR / "completions.jsonl"

GROUPS = ("math-verify-suite", "other-suites", "conventions", "hard-families")
DATASETS = ("math500", "gsm8k")
FORMATS = ("chat-boxed", "minerva")

# field -> allowed types (None allows JSON null)
PAIR_SCHEMA: dict[str, tuple[type | None, ...]] = {
    "id": (str,),
    "gold": (str,),
    "pred": (str,),
    "equal": (bool,),
    "unambiguous": (bool,),
    "class": (str,),
    "group": (str,),
    "source": (str,),
    "source_ref": (str,),
    "licence": (str,),
    "note": (str,),
}
COMPLETION_SCHEMA: dict[str, tuple[type | None, ...]] = {
    "id": (str,),
    "dataset": (str,),
    "format": (str,),
    "problem_id": (str,),
    "completion": (str,),
    "gold": (str,),
    "answer": (str, None),
    "correct": (bool,),
    "labels": (dict,),
    "reviewed": (bool,),
    "note": (str,),
    "source": (str,),
    "licence": (str,),
}
# fields that name where a row came from: an empty one makes the row unusable as evidence
NON_EMPTY = ("id", "class", "source", "source_ref", "licence", "problem_id", "gold")


class VerifierSetError(ValueError):
    """A row of the evaluation set does not match its schema."""


def _type_names(types: tuple[type | None, ...]) -> str:
    return " or ".join("null" if t is None else t.__name__ for t in types)


def check_row(row: Any, schema: dict[str, tuple[type | None, ...]], where: str) -> dict:
    """Return ``row`` if it has exactly ``schema``'s fields with the allowed types, else raise
    :class:`VerifierSetError` naming ``where`` (file and line) and what is wrong."""
    if not isinstance(row, dict):
        raise VerifierSetError(f"{where}: expected a JSON object, got {type(row).__name__}")
    missing = [k for k in schema if k not in row]
    extra = [k for k in row if k not in schema]
    if missing or extra:
        raise VerifierSetError(
            f"{where} (id={row.get('id')!r}): missing fields {missing}, unknown fields {extra}; "
            f"valid fields: {list(schema)}"
        )
    for key, types in schema.items():
        value = row[key]
        ok = (value is None and None in types) or any(
            t is not None and type(value) is t
            for t in types  # bool is not an int here
        )
        if not ok:
            raise VerifierSetError(
                f"{where} (id={row['id']!r}): field {key!r} is {type(value).__name__} "
                f"{value!r:.60}, expected {_type_names(types)}"
            )
        if key in NON_EMPTY and isinstance(value, str) and not value.strip():
            raise VerifierSetError(f"{where} (id={row['id']!r}): field {key!r} is empty")
    return row


def _check_choice(row: dict, key: str, valid: tuple[str, ...], where: str) -> None:
    if row[key] not in valid:
        raise VerifierSetError(
            f"{where} (id={row['id']!r}): {key} {row[key]!r} is not one of {list(valid)}"
        )


def check_pair(row: Any, where: str) -> dict:
    """One ``pairs.jsonl`` row, checked (see :func:`check_row`); ``group`` must be in
    :data:`GROUPS`."""
    check_row(row, PAIR_SCHEMA, where)
    _check_choice(row, "group", GROUPS, where)
    return row


def check_completion(row: Any, where: str) -> dict:
    """One ``completions.jsonl`` row, checked (see :func:`check_row`); ``dataset`` and
    ``format`` must be known and every grader label a bool."""
    check_row(row, COMPLETION_SCHEMA, where)
    _check_choice(row, "dataset", DATASETS, where)
    _check_choice(row, "format", FORMATS, where)
    for grader, label in row["labels"].items():
        if type(label) is not bool:
            raise VerifierSetError(
                f"{where} (id={row['id']!r}): labels[{grader!r}] is {label!r}, expected a bool"
            )
    return row


def read_rows(path: Path, check) -> list[dict]:
    """Every line of a JSONL file through ``check``; ids must be unique."""
    rows, seen = [], {}
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise VerifierSetError(f"{where}: not valid JSON ({exc.msg})") from exc
        check(row, where)
        if row["id"] in seen:
            raise VerifierSetError(f"{where}: id {row['id']!r} repeats line {seen[row['id']]}")
        seen[row["id"]] = n
        rows.append(row)
    return rows


def load_pairs(path: str | Path | None = None) -> list[dict]:
    """The labelled equivalence pairs (default :data:`PAIRS_PATH`), in file order."""
    return read_rows(Path(path) if path else PAIRS_PATH, check_pair)


def load_completions(path: str | Path | None = None) -> list[dict]:
    """The labelled model completions (default :data:`COMPLETIONS_PATH`), in file order."""
    return read_rows(Path(path) if path else COMPLETIONS_PATH, check_completion)
