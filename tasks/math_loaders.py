"""MATH, MATH-500, GSM8K and AIME loaders: local files in the upstream formats, or the Hub.

One converter per upstream record format (``*_record_to_task``) is shared by the
local path and the Hub fallback, so the same record gives the same `Task` (and the
same dataset hash) whichever way it was read. Layout under the data folder:

    math/raw/{train,test}/<subject>.json      MATH, JSON list per subject
    math/math500_test.jsonl                   MATH-500
    gsm8k/{train,test}-00000-of-00001.parquet GSM8K main (or gsm8k/{train,test}.jsonl)
    aime/aime_2024.json                       AIME 2024 I+II        (split "2024")
    aime/aimo_validation_aime.json            AIMO validation AIME  (split "validation")
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks.answers import gsm8k_final_answer, last_boxed
from tasks.dataset import Loaded, register_dataset
from tasks.errors import DataNotFoundError, MalformedRecordError
from tasks.hub import HubSource, HubUnavailable, load_hub_records
from tasks.record import Task

MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)
MATH_HUB_REPO = "EleutherAI/hendrycks_math"
MATH500_HUB = HubSource("HuggingFaceH4/MATH-500", "test")
GSM8K_HUB_REPO = "openai/gsm8k"
AIME_FILES = {"2024": "aime/aime_2024.json", "validation": "aime/aimo_validation_aime.json"}
AIME_HUB = {
    "2024": HubSource("HuggingFaceH4/aime_2024", "train"),
    "validation": HubSource("AI-MO/aimo-validation-aime", "train"),
}

Record = Mapping[str, Any]

# Upstream MATH records whose solution ends in an empty ``\boxed{}`` (the answer was
# lost); keyed by the first 16 hex digits of sha256(problem). Both are train/
# number_theory multiple-choice items whose solutions prove the count is 0.
MATH_ERRATA = {
    "6bf518e40168794f": "0",  # train/number_theory/0398: primes between n!+1 and n!+n
    "debc168317355296": "0",  # train/number_theory/0776: primes among P+n, n=2..59
}


# ---------------------------------------------------------------- field checks


def _field(
    rec: Record,
    names: str | Sequence[str],
    where: str,
    record: str,
    kinds: tuple[type, ...] = (str,),
) -> Any:
    """The first present field of ``names``; absent or wrongly typed fields raise."""
    names = (names,) if isinstance(names, str) else tuple(names)
    if not isinstance(rec, Mapping):
        raise MalformedRecordError(
            where, record, f"expected a JSON object, got {type(rec).__name__}"
        )
    for name in names:
        if name in rec and rec[name] is not None:
            value = rec[name]
            if not isinstance(value, kinds) or isinstance(value, bool):
                want = " or ".join(k.__name__ for k in kinds)
                raise MalformedRecordError(
                    where, record, f"field {name!r} must be {want}, got {type(value).__name__}"
                )
            if isinstance(value, str) and not value.strip():
                raise MalformedRecordError(where, record, f"field {name!r} is empty")
            return value
    raise MalformedRecordError(
        where, record, f"missing field {' or '.join(map(repr, names))}; has {sorted(rec)}"
    )


def _level(value: Any) -> int | None:
    """``"Level 4"``/``"4"``/``4`` -> 4; ``"Level ?"`` -> None."""
    m = re.search(r"\d+", str(value))
    return int(m.group()) if m else None


# ---------------------------------------------------------------- converters (local and Hub)


def math_record_to_task(rec: Record, *, split: str, subject: str, index: int, where: str) -> Task:
    """A MATH record ``{problem, level, type, solution}`` -> Task
    ``math/<split>/<subject>/<index:04d>``."""
    tid = f"math/{split}/{subject}/{index:04d}"
    problem = _field(rec, "problem", where, f"{index} ({tid})")
    solution = _field(rec, "solution", where, f"{index} ({tid})")
    answer = last_boxed(solution)
    if answer is not None and not answer.strip():
        answer = MATH_ERRATA.get(hashlib.sha256(problem.encode("utf-8")).hexdigest()[:16])
    if answer is None:
        raise MalformedRecordError(
            where, f"{index} ({tid})", "field 'solution' has no \\boxed{...} answer"
        )
    return Task(
        id=tid,
        kind="math",
        prompt=problem,
        answer=answer.strip(),
        metadata={
            "source": "MATH",
            "split": split,
            "subject": str(rec.get("type") or subject),
            "level": _level(rec.get("level")),
            "solution": solution,
        },
    )


def math500_record_to_task(rec: Record, *, index: int, where: str) -> Task:
    """A MATH-500 record ``{problem, solution, answer, subject, level, unique_id}`` -> Task
    ``math500/<unique_id without .json>`` (e.g. ``math500/test/precalculus/807``)."""
    uid = _field(rec, "unique_id", where, str(index))
    label = f"{index} ({uid})"
    return Task(
        id="math500/" + uid.removesuffix(".json"),
        kind="math",
        prompt=_field(rec, "problem", where, label),
        answer=_field(rec, "answer", where, label).strip(),
        metadata={
            "source": "MATH-500",
            "split": "test",
            "subject": str(rec.get("subject", "")),
            "level": _level(rec.get("level")),
            "unique_id": uid,
            "solution": str(rec.get("solution", "")),
        },
    )


def gsm8k_record_to_task(rec: Record, *, split: str, index: int, where: str) -> Task:
    """A GSM8K record ``{question, answer}`` -> Task ``gsm8k/<split>/<index:04d>``;
    the reference answer is the text after ``####``."""
    tid = f"gsm8k/{split}/{index:04d}"
    solution = _field(rec, "answer", where, f"{index} ({tid})")
    answer = gsm8k_final_answer(solution)
    if answer is None:
        raise MalformedRecordError(
            where, f"{index} ({tid})", "field 'answer' has no '#### <answer>' line"
        )
    return Task(
        id=tid,
        kind="math",
        prompt=_field(rec, "question", where, f"{index} ({tid})"),
        answer=answer,
        metadata={"source": "GSM8K", "split": split, "solution": solution},
    )


_AIME_URL = re.compile(r"(\d{4})_AIME_(I{1,2})_Problems/Problem_(\d+)")


def aime_record_to_task(rec: Record, *, split: str, index: int, where: str) -> Task:
    """An AIME record ``{id, problem, solution, final_answer (or answer), url}`` -> Task.

    The id comes from the AoPS url, ``aime/<year>-<I|II>-<nn>`` (e.g. ``aime/2024-I-01``),
    so a problem keeps its id in every split; without a parsable url it is
    ``aime/<split>/<upstream id>``. Integer answers lose AIME's leading zeros
    (``"025"`` -> ``"25"``); the raw string stays in ``metadata["answer_raw"]``.
    """
    upstream = _field(rec, "id", where, str(index), (str, int))
    label = f"{index} (id {upstream})"
    raw = str(_field(rec, ("final_answer", "answer"), where, label, (str, int))).strip()
    answer = str(int(raw)) if raw.isdigit() else raw
    url = str(rec.get("url") or "")
    m = _AIME_URL.search(url)
    year = m.group(1) if m else (str(rec["year"]) if rec.get("year") else None)
    return Task(
        id=f"aime/{m.group(1)}-{m.group(2)}-{int(m.group(3)):02d}"
        if m
        else f"aime/{split}/{upstream}",
        kind="math",
        prompt=_field(rec, "problem", where, label),
        answer=answer,
        metadata={
            "source": "AIME",
            "split": split,
            "year": int(year) if year else None,
            "contest": m.group(2) if m else None,
            "number": int(m.group(3)) if m else None,
            "url": url,
            "upstream_id": str(upstream),
            "answer_raw": raw,
            "solution": str(rec.get("solution") or ""),
        },
    )


# ---------------------------------------------------------------- file readers


def read_json_list(path: Path) -> list[Any]:
    """A JSON file holding a list of records."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise MalformedRecordError(str(path), "(whole file)", f"invalid JSON: {e}") from e
    if not isinstance(data, list):
        raise MalformedRecordError(
            str(path), "(whole file)", f"expected a JSON list, got {type(data).__name__}"
        )
    return data


def read_jsonl(path: Path) -> list[Any]:
    """A JSON-lines file (blank lines skipped)."""
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise MalformedRecordError(str(path), f"at line {n}", f"invalid JSON: {e}") from e
    return records


def read_parquet(path: Path) -> list[dict[str, Any]]:
    """A parquet file as a list of row dicts (pyarrow, imported only here)."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def read_records(path: Path) -> list[Any]:
    """Records of a ``.json`` (list), ``.jsonl`` or ``.parquet`` file."""
    readers: dict[str, Callable[[Path], list[Any]]] = {
        ".json": read_json_list,
        ".jsonl": read_jsonl,
        ".parquet": read_parquet,
    }
    return readers[path.suffix](path)


# ---------------------------------------------------------------- local-or-Hub


def _first_existing(data_dir: Path | None, candidates: Sequence[str]) -> Path | None:
    if data_dir is None:
        return None
    return next((data_dir / c for c in candidates if (data_dir / c).is_file()), None)


def _from_hub(
    dataset: str,
    split: str,
    data_dir: Path | None,
    expected: Sequence[str],
    sources: Sequence[HubSource],
    convert: Callable[[Sequence[list[dict[str, Any]]]], list[Task]],
    use_hub: bool,
) -> Loaded:
    """Read ``sources`` from the Hub, or raise `DataNotFoundError` saying how to provide the
    data."""
    hub_id = (
        ", ".join(s.describe() for s in sources)
        if len(sources) == 1
        else (
            f"{sources[0].repo} (split {sources[0].split}, configs "
            f"{', '.join(s.config or '' for s in sources)})"
        )
    )
    reason = "disabled by hub=False"
    if use_hub:
        try:
            tables = [load_hub_records(s) for s in sources]
            source = (
                sources[0].uri
                if len(sources) == 1
                else f"hf://{sources[0].repo}:{sources[0].split}"
            )
            return Loaded(convert(tables), source)
        except HubUnavailable as e:
            reason = str(e)
    raise DataNotFoundError(
        dataset, split, expected=expected, data_dir=data_dir, hub_id=hub_id, hub_reason=reason
    )


def load_math(split: str, data_dir: Path | None, *, hub: bool = True) -> Loaded:
    """MATH (Hendrycks et al.), all seven subjects, in subject order then file order."""
    rel = [f"math/raw/{split}/{s}.json" for s in MATH_SUBJECTS]
    paths = [_first_existing(data_dir, [r]) for r in rel]
    if all(paths):
        tasks = [
            math_record_to_task(rec, split=split, subject=subject, index=i, where=str(path))
            for subject, path in zip(MATH_SUBJECTS, paths, strict=True)
            for i, rec in enumerate(read_json_list(path))  # type: ignore[arg-type]
        ]
        return Loaded(tasks, str(data_dir / "math" / "raw" / split))  # type: ignore[operator]
    sources = [HubSource(MATH_HUB_REPO, split, s) for s in MATH_SUBJECTS]

    def convert(tables: Sequence[list[dict[str, Any]]]) -> list[Task]:
        return [
            math_record_to_task(
                rec, split=split, subject=src.config or "", index=i, where=src.describe()
            )
            for src, table in zip(sources, tables, strict=True)
            for i, rec in enumerate(table)
        ]

    missing = [r for r, p in zip(rel, paths, strict=True) if p is None]
    return _from_hub("math", split, data_dir, missing, sources, convert, hub)


def load_math500(split: str, data_dir: Path | None, *, hub: bool = True) -> Loaded:
    """MATH-500, the PRM800K test subset of MATH."""
    rel = "math/math500_test.jsonl"
    path = _first_existing(data_dir, [rel])
    if path is not None:
        return Loaded(
            [
                math500_record_to_task(r, index=i, where=str(path))
                for i, r in enumerate(read_jsonl(path))
            ],
            str(path),
        )
    return _from_hub(
        "math500",
        split,
        data_dir,
        [rel],
        [MATH500_HUB],
        lambda tables: [
            math500_record_to_task(r, index=i, where=MATH500_HUB.describe())
            for i, r in enumerate(tables[0])
        ],
        hub,
    )


def load_gsm8k(split: str, data_dir: Path | None, *, hub: bool = True) -> Loaded:
    """GSM8K "main" (parquet as on the Hub, or the JSONL of the original repository)."""
    rel = [f"gsm8k/{split}-00000-of-00001.parquet", f"gsm8k/{split}.jsonl"]
    path = _first_existing(data_dir, rel)
    if path is not None:
        recs = read_records(path)
        return Loaded(
            [
                gsm8k_record_to_task(r, split=split, index=i, where=str(path))
                for i, r in enumerate(recs)
            ],
            str(path),
        )
    src = HubSource(GSM8K_HUB_REPO, split, "main")
    return _from_hub(
        "gsm8k",
        split,
        data_dir,
        [f"{rel[0]}  (or {rel[1]})"],
        [src],
        lambda tables: [
            gsm8k_record_to_task(r, split=split, index=i, where=src.describe())
            for i, r in enumerate(tables[0])
        ],
        hub,
    )


def load_aime(split: str, data_dir: Path | None, *, hub: bool = True) -> Loaded:
    """AIME: split "2024" (AIME 2024 I+II, 30) or "validation" (AIMO validation, AIME 2022-2024,
    90)."""
    rel = AIME_FILES[split]
    path = _first_existing(data_dir, [rel])
    if path is not None:
        return Loaded(
            [
                aime_record_to_task(r, split=split, index=i, where=str(path))
                for i, r in enumerate(read_json_list(path))
            ],
            str(path),
        )
    src = AIME_HUB[split]
    return _from_hub(
        "aime",
        split,
        data_dir,
        [rel],
        [src],
        lambda tables: [
            aime_record_to_task(r, split=split, index=i, where=src.describe())
            for i, r in enumerate(tables[0])
        ],
        hub,
    )


register_dataset(
    "math",
    load_math,
    splits=("train", "test"),
    kind="math",
    description="MATH (Hendrycks et al. 2021): 7,500 train / 5,000 test competition problems, 7 "
    "subjects, levels 1-5",
)
register_dataset(
    "math500",
    load_math500,
    splits=("test",),
    kind="math",
    description="MATH-500: the 500-problem PRM800K test subset of MATH",
)
register_dataset(
    "gsm8k",
    load_gsm8k,
    splits=("train", "test"),
    kind="math",
    description="GSM8K (main): 7,473 train / 1,319 test grade-school word problems",
)
register_dataset(
    "aime",
    load_aime,
    splits=("2024", "validation"),
    kind="math",
    default_split="2024",
    description=(
        "AIME: '2024' = AIME 2024 I+II (30); "
        "'validation' = AIMO validation set, AIME 2022-2024 (90)"
    ),
)
