import json

import pytest

import tasks
from tasks import DataNotFoundError, MalformedRecordError
from tasks import math_loaders as ml
from tasks.math_loaders import (
    aime_record_to_task,
    gsm8k_record_to_task,
    math500_record_to_task,
    math_record_to_task,
)

# Record counts from ../shared/data/README.md.
COUNTS = [
    ("math", "train", 7500),
    ("math", "test", 5000),
    ("math500", "test", 500),
    ("gsm8k", "train", 7473),
    ("gsm8k", "test", 1319),
    ("aime", "2024", 30),
    ("aime", "validation", 90),
]


@pytest.mark.parametrize("name, split, n", COUNTS)
def test_counts_and_ids(name, split, n, data_dir):
    ds = tasks.load(name, split, data_dir=data_dir)
    assert (ds.name, ds.split, ds.kind, len(ds)) == (name, split, "math", n)
    assert len(set(ds.ids)) == n
    assert all(t.answer and t.answer.strip() == t.answer and t.prompt for t in ds)
    assert all(t.metadata["split"] == split for t in ds)
    assert str(data_dir) in ds.source
    assert len(ds.hash) == 64


def test_default_data_dir_is_shared_data(data_dir):
    # No data_dir=, no MARFT_DATA_DIR (conftest unsets it): <repo root>/../shared/data.
    assert tasks.resolve_data_dir() == data_dir.resolve()
    assert tasks.load("math500").source == str(data_dir.resolve() / "math" / "math500_test.jsonl")


def test_marft_data_dir_env(tmp_path, monkeypatch, data_dir):
    (tmp_path / "aime").mkdir()
    recs = json.loads((data_dir / "aime" / "aime_2024.json").read_text())[:4]
    (tmp_path / "aime" / "aime_2024.json").write_text(json.dumps(recs))
    monkeypatch.setenv("MARFT_DATA_DIR", str(tmp_path))
    assert len(tasks.load("aime")) == 4
    assert len(tasks.load("aime", data_dir=data_dir)) == 30  # data_dir= wins over the variable


def test_math_records(data_dir):
    ds = tasks.load("math", "test", data_dir=data_dir)
    t = ds.by_id("math/test/algebra/0000")
    assert t.answer == "920.25"
    assert t.metadata == {
        "source": "MATH",
        "split": "test",
        "subject": "Algebra",
        "level": 4,
        "solution": t.metadata["solution"],
    }
    subjects = {t.id.split("/")[2] for t in ds}
    assert subjects == set(ml.MATH_SUBJECTS)
    assert {t.metadata["level"] for t in ds} <= {1, 2, 3, 4, 5, None}
    # Nested braces survive extraction.
    assert any(t.answer.startswith("\\frac{") for t in ds)


def test_math_errata_and_braceless_box(data_dir):
    ds = tasks.load("math", "train", data_dir=data_dir)
    # Upstream solutions end in an empty \boxed{}; the errata table supplies the answer.
    assert ds.by_id("math/train/number_theory/0398").answer == "0"
    assert ds.by_id("math/train/number_theory/0776").answer == "0"
    assert sum(t.answer == "2" and "\\boxed 2" in t.metadata["solution"] for t in ds) == 1


def test_math500_gsm8k_aime_records(data_dir):
    t = tasks.load("math500", data_dir=data_dir).by_id("math500/test/precalculus/807")
    assert t.answer == r"\left( 3, \frac{\pi}{2} \right)" and t.metadata["level"] == 2
    g = tasks.load("gsm8k", "test", data_dir=data_dir)[0]
    assert (g.id, g.answer) == ("gsm8k/test/0000", "18") and g.prompt.startswith("Janet")
    assert all("," not in t.answer for t in tasks.load("gsm8k", "train", data_dir=data_dir))
    a = tasks.load("aime", "2024", data_dir=data_dir)
    assert a.by_id("aime/2024-I-01").answer == "204"
    assert a.by_id("aime/2024-II-15").metadata["contest"] == "II"
    assert {t.metadata["year"] for t in a} == {2024}
    assert all(
        t.answer.isdigit() and 0 <= int(t.answer) <= 999 and t.answer == str(int(t.answer))
        for t in a
    )
    assert any(t.metadata["answer_raw"].startswith("0") for t in a)  # "025" -> "25"
    v = tasks.load("aime", "validation", data_dir=data_dir)
    assert {t.metadata["year"] for t in v} == {2022, 2023, 2024}
    # The same AoPS problem has the same id and record content in both splits.
    shared = set(a.ids) & set(v.ids)
    assert len(shared) == 30
    assert all(a.by_id(i).prompt == v.by_id(i).prompt for i in shared)


def test_gsm8k_jsonl_alternative(tmp_path, data_dir):
    rows = tasks.load("gsm8k", "test", data_dir=data_dir)[:3]
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text(
        "".join(
            json.dumps({"question": t.prompt, "answer": t.metadata["solution"]}) + "\n"
            for t in rows
        )
    )
    ds = tasks.load("gsm8k", "test", data_dir=tmp_path)
    assert ds.tasks == rows


# ---------------------------------------------------------------- Hub records use the same converters


def test_hub_shaped_records_convert_like_local(data_dir):
    # HuggingFaceH4/aime_2024 rows: int id, "answer" instead of "final_answer".
    local = json.loads((data_dir / "aime" / "aime_2024.json").read_text())[0]
    hub_row = {k: v for k, v in local.items() if k != "final_answer"} | {
        "id": int(local["id"]),
        "answer": local["final_answer"],
    }
    assert aime_record_to_task(hub_row, split="2024", index=0, where="hub") == aime_record_to_task(
        local, split="2024", index=0, where="file"
    )


@pytest.mark.parametrize(
    "name, split",
    [("math", "test"), ("math500", "test"), ("gsm8k", "test"), ("aime", "validation")],
)
def test_hub_path_gives_same_dataset_hash(name, split, data_dir, tmp_path, monkeypatch):
    """The Hub cannot be reached from tests; stand in for it with the upstream rows
    (the local files hold the same records) and check the Hub path converts them to
    exactly the local dataset."""
    local = tasks.load(name, split, data_dir=data_dir)

    def rows(source):
        if source.repo == ml.MATH_HUB_REPO:
            return ml.read_json_list(data_dir / "math" / "raw" / split / f"{source.config}.json")
        return {
            ml.MATH500_HUB.repo: lambda: ml.read_jsonl(data_dir / "math" / "math500_test.jsonl"),
            ml.GSM8K_HUB_REPO: lambda: ml.read_parquet(
                data_dir / "gsm8k" / f"{split}-00000-of-00001.parquet"
            ),
            ml.AIME_HUB[split if name == "aime" else "2024"].repo: lambda: ml.read_json_list(
                data_dir / ml.AIME_FILES["validation"]
            ),
        }[source.repo]()

    monkeypatch.setattr(ml, "load_hub_records", rows)
    hub = tasks.load(name, split, data_dir=tmp_path)
    assert hub.source.startswith("hf://") and hub.hash == local.hash


# ---------------------------------------------------------------- missing data


@pytest.mark.parametrize(
    "name, split, expected, hub_id",
    [
        ("math", "train", "math/raw/train/algebra.json", "EleutherAI/hendrycks_math"),
        ("math500", "test", "math/math500_test.jsonl", "HuggingFaceH4/MATH-500"),
        (
            "gsm8k",
            "test",
            "gsm8k/test-00000-of-00001.parquet",
            "openai/gsm8k (split test, config main)",
        ),
        ("aime", "2024", "aime/aime_2024.json", "HuggingFaceH4/aime_2024"),
        ("aime", "validation", "aime/aimo_validation_aime.json", "AI-MO/aimo-validation-aime"),
    ],
)
def test_missing_data_message(name, split, expected, hub_id, tmp_path):
    with pytest.raises(DataNotFoundError) as err:
        tasks.load(name, split, data_dir=tmp_path)
    msg = str(err.value)
    for needle in (
        expected,
        str(tmp_path),
        "data_dir=",
        "MARFT_DATA_DIR",
        hub_id,
        "pip install 'marft-envs[hub]'",
        "MARFT_NO_HUB is set",
    ):
        assert needle in msg, (needle, msg)
    assert isinstance(err.value, FileNotFoundError)


def test_errors_survive_pickling(tmp_path):
    # Vector environments may run loaders in worker processes.
    import pickle

    with pytest.raises(DataNotFoundError) as missing:
        tasks.load("gsm8k", "train", data_dir=tmp_path)
    copy = pickle.loads(pickle.dumps(missing.value))
    assert str(copy) == str(missing.value) and copy.expected == missing.value.expected
    bad = MalformedRecordError("f.json", "3 (x)", "missing field 'problem'")
    assert str(pickle.loads(pickle.dumps(bad))) == str(bad)


def test_missing_data_offline_hub_probe(tmp_path, monkeypatch):
    # The real Hub path: `datasets` is installed, the Hub host does not resolve.
    pytest.importorskip("datasets")
    monkeypatch.delenv("MARFT_NO_HUB")
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")
    with pytest.raises(
        DataNotFoundError,
        match=r"(?s)Hub fallback not used: the Hub \(hub.invalid:443\) is unreachable",
    ):
        tasks.load("math500", data_dir=tmp_path)


def test_missing_data_without_any_folder(monkeypatch, tmp_path):
    monkeypatch.setattr(tasks.dataset, "SHARED_DATA_DIR", tmp_path / "absent")
    with pytest.raises(
        DataNotFoundError, match=r"no data folder \(data_dir= not given, \$MARFT_DATA_DIR not set"
    ):
        tasks.load("aime", hub=False)


def test_partial_math_folder_lists_missing_files(tmp_path, data_dir):
    (tmp_path / "math" / "raw" / "test").mkdir(parents=True)
    src = data_dir / "math" / "raw" / "test" / "algebra.json"
    (tmp_path / "math" / "raw" / "test" / "algebra.json").write_text(src.read_text())
    with pytest.raises(DataNotFoundError) as err:
        tasks.load("math", "test", data_dir=tmp_path, hub=False)
    assert "math/raw/test/algebra.json" not in str(err.value)
    assert "math/raw/test/geometry.json" in str(err.value) and "hub=False" in str(err.value)


# ---------------------------------------------------------------- malformed records


def _write_aime(tmp_path, records):
    (tmp_path / "aime").mkdir()
    path = tmp_path / "aime" / "aime_2024.json"
    path.write_text(json.dumps(records) if not isinstance(records, str) else records)
    return path


GOOD_AIME = {"id": "1", "problem": "p", "solution": "s", "final_answer": "12", "url": ""}


@pytest.mark.parametrize(
    "records, match",
    [
        (
            [GOOD_AIME, {k: v for k, v in GOOD_AIME.items() if k != "problem"}],
            r"record 1 \(id 1\): missing field 'problem'",
        ),
        (
            [{k: v for k, v in GOOD_AIME.items() if k != "final_answer"}],
            r"record 0 \(id 1\): missing field 'final_answer' or 'answer'",
        ),
        ([GOOD_AIME | {"problem": 7}], r"field 'problem' must be str, got int"),
        ([GOOD_AIME | {"problem": "  "}], r"field 'problem' is empty"),
        ([GOOD_AIME, "oops"], r"record 1: expected a JSON object, got str"),
        ({"not": "a list"}, r"\(whole file\): expected a JSON list, got dict"),
        ("[{", r"\(whole file\): invalid JSON"),
    ],
)
def test_malformed_aime(tmp_path, records, match):
    path = _write_aime(tmp_path, records)
    with pytest.raises(MalformedRecordError, match=match) as err:
        tasks.load("aime", "2024", data_dir=tmp_path)
    assert str(err.value).startswith(str(path))


def test_malformed_math_no_boxed(tmp_path, data_dir):
    folder = tmp_path / "math" / "raw" / "test"
    folder.mkdir(parents=True)
    for s in ml.MATH_SUBJECTS:
        (folder / f"{s}.json").write_text(
            (data_dir / "math" / "raw" / "test" / f"{s}.json").read_text()
        )
    recs = json.loads((folder / "geometry.json").read_text())
    recs[3]["solution"] = "no box"
    (folder / "geometry.json").write_text(json.dumps(recs))
    with pytest.raises(
        MalformedRecordError,
        match=r"geometry.json: record 3 \(math/test/geometry/0003\): field 'solution' has no \\boxed",
    ):
        tasks.load("math", "test", data_dir=tmp_path)


def test_malformed_jsonl_and_gsm8k(tmp_path):
    (tmp_path / "math").mkdir()
    (tmp_path / "math" / "math500_test.jsonl").write_text(
        '{"problem": "p", "answer": "1", "unique_id": "a.json"}\n{bad\n'
    )
    with pytest.raises(
        MalformedRecordError, match=r"math500_test.jsonl: record at line 2: invalid JSON"
    ):
        tasks.load("math500", data_dir=tmp_path)
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "train.jsonl").write_text(
        json.dumps({"question": "q", "answer": "no marker"}) + "\n"
    )
    with pytest.raises(
        MalformedRecordError,
        match=r"train.jsonl: record 0 \(gsm8k/train/0000\): field 'answer' has no '#### <answer>'",
    ):
        tasks.load("gsm8k", "train", data_dir=tmp_path)


def test_converters_name_the_record():
    with pytest.raises(
        MalformedRecordError, match=r"^f: record 5 \(math/test/x/0005\): missing field 'solution'"
    ):
        math_record_to_task({"problem": "p"}, split="test", subject="x", index=5, where="f")
    with pytest.raises(MalformedRecordError, match=r"^f: record 2 \(u\): missing field 'answer'"):
        math500_record_to_task({"problem": "p", "unique_id": "u"}, index=2, where="f")
    with pytest.raises(MalformedRecordError, match=r"^f: record 0: missing field 'unique_id'"):
        math500_record_to_task({"problem": "p"}, index=0, where="f")
    with pytest.raises(MalformedRecordError, match=r"missing field 'question'"):
        gsm8k_record_to_task({"answer": "#### 3"}, split="test", index=0, where="f")
