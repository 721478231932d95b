import json
import subprocess
import sys
from pathlib import Path

import pytest

import tasks
from tasks import Dataset, Loaded, Task, content_hash

REPO_ROOT = Path(__file__).resolve().parents[2]


def _tasks(n=5):
    return tuple(
        Task(id=f"t/{i}", kind="math", prompt=f"what is {i}+1?", answer=str(i + 1))
        for i in range(n)
    )


def test_dataset_basics():
    ts = _tasks()
    ds = Dataset(name="toy", split="test", kind="math", tasks=list(ts), source="here")
    assert isinstance(ds.tasks, tuple) and ds.tasks == ts
    assert len(ds) == 5 and ds[0] is ts[0] and ds[-1] is ts[-1] and ds[1:3] == ts[1:3]
    assert list(ds) == list(ts)
    assert ds.by_id("t/3") is ts[3] and "t/3" in ds and "t/9" not in ds
    assert ds.ids == tuple(t.id for t in ts)
    with pytest.raises(AttributeError):
        ds.name = "other"  # type: ignore[misc]
    assert "tasks=" not in repr(ds)


def test_filter_keeps_order_and_rehashes():
    ds = Dataset("toy", "test", "math", _tasks(), source="here")
    odd = ds.filter(lambda t: int(t.answer) % 2 == 1)
    assert odd.ids == ("t/0", "t/2", "t/4") and (odd.name, odd.split, odd.source) == (
        "toy",
        "test",
        "here",
    )
    assert odd.hash == content_hash(odd.tasks) != ds.hash
    assert ds.filter(lambda t: True) == ds


def test_by_id_unknown_names_valid_ids():
    ds = Dataset("toy", "test", "math", _tasks())
    with pytest.raises(KeyError, match=r"'nope'.*'t/0', 't/1', 't/2'"):
        ds.by_id("nope")


def test_duplicate_ids_and_kind_mismatch_rejected():
    t = _tasks(1)[0]
    with pytest.raises(ValueError, match="duplicate task id 't/0'"):
        Dataset("toy", "test", "math", (t, t))
    code = Task(id="c", kind="code", prompt="write f", entry_point="f")
    with pytest.raises(ValueError, match="kind 'code'"):
        Dataset("toy", "test", "math", (code,))


def test_content_hash_is_sha256_of_canonical_json():
    import hashlib

    ts = _tasks()
    canonical = json.dumps(
        [t.to_dict() for t in ts], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert content_hash(ts) == hashlib.sha256(canonical.encode()).hexdigest()
    assert (
        Dataset("a", "x", "math", ts).hash
        == Dataset("b", "y", "math", ts, source="s").hash
        == content_hash(ts)
    )


def test_content_hash_sensitive_to_every_change():
    ts = _tasks()
    base = content_hash(ts)
    changed_answer = (
        ts[:2] + (Task(id="t/2", kind="math", prompt=ts[2].prompt, answer="4 "),) + ts[3:]
    )
    changed_meta = ts[:4] + (
        Task(id="t/4", kind="math", prompt=ts[4].prompt, answer="5", metadata={"level": 1}),
    )
    for other in (changed_answer, changed_meta, ts[::-1], ts[:-1]):
        assert content_hash(other) != base
    assert content_hash(_tasks()) == base  # equal records, fresh objects


def test_metadata_is_read_only_so_the_hash_cannot_go_stale():
    import copy
    import dataclasses
    import pickle

    task = Task(id="t/0", kind="math", prompt="1+1", answer="2", metadata={"level": 1})
    ds = Dataset(name="d", split="test", kind="math", tasks=(task,), source="test")
    before = ds.hash
    for mutate in (lambda m: m.__setitem__("level", 5), lambda m: m.update(level=5),
                   lambda m: m.pop("level"), lambda m: m.clear(), lambda m: m.setdefault("x", 1)):
        with pytest.raises(TypeError, match="read-only"):
            mutate(task.metadata)
    assert dict(task.metadata) == {"level": 1} and ds.hash == before
    assert pickle.loads(pickle.dumps(task)) == task  # still travels to Ray workers
    assert copy.deepcopy(task) == task and type(task.to_dict()["metadata"]) is dict
    changed = dataclasses.replace(task, metadata={"level": 5})
    assert changed.metadata["level"] == 5 and content_hash((changed,)) != content_hash((task,))


def test_hash_stable_across_processes():
    # Fixed records must give the same hash in a fresh interpreter (no randomised hashing).
    code = "import tasks; print(tasks.load('arith', split='test', size=50, seed=3).hash)"
    out = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
        ).stdout
        for _ in range(2)
    }
    assert out == {tasks.load("arith", split="test", size=50, seed=3).hash + "\n"}


def test_registry_register_and_load():
    calls = []

    def loader(split, data_dir, *, n=2):
        calls.append((split, data_dir, n))
        return Loaded(_tasks(n), f"toy:{split}")

    tasks.register_dataset(
        "toy-reg", loader, splits=("a", "b"), kind="math", description="toy", needs_data=False
    )
    try:
        assert "toy-reg" in tasks.list_datasets()
        info = tasks.dataset_info("toy-reg")
        assert info.default_split == "a" and info.description == "toy"
        ds = tasks.load("toy-reg", n=3)
        assert (ds.name, ds.split, ds.kind, len(ds), ds.source) == (
            "toy-reg",
            "a",
            "math",
            3,
            "toy:a",
        )
        assert calls == [("a", None, 3)]
        with pytest.raises(ValueError, match=r"no split 'test'; valid splits: \('a', 'b'\)"):
            tasks.load("toy-reg", "test")
        with pytest.raises(ValueError, match="already registered"):
            tasks.register_dataset("toy-reg", loader, splits=("a",), kind="math", description="")
        tasks.register_dataset(
            "toy-reg", loader, splits=("a",), kind="math", description="v2", overwrite=True
        )
        assert tasks.dataset_info("toy-reg").description == "v2"
    finally:
        tasks.dataset._REGISTRY.pop("toy-reg", None)


def test_unknown_dataset_lists_registered():
    with pytest.raises(
        tasks.UnknownDatasetError, match="Unknown dataset 'nope'; registered: .*arith.*gsm8k.*math"
    ):
        tasks.load("nope")


def test_builtin_registry():
    assert {"arith", "math", "math500", "gsm8k", "aime"} <= set(tasks.list_datasets())
    assert tasks.dataset_info("aime").splits == ("2024", "validation")
    assert tasks.dataset_info("aime").default_split == "2024"
    assert tasks.dataset_info("math").default_split == "test"


def test_cache_per_name_split_path_kwargs(data_dir, tmp_path):
    a = tasks.load("aime", "2024", data_dir=data_dir)
    assert tasks.load("aime", "2024", data_dir=data_dir) is a
    assert tasks.load("aime", "2024", data_dir=str(data_dir) + "/") is a  # same resolved path
    assert tasks.load("aime", "2024", data_dir=data_dir, cache=False) is not a
    assert tasks.load("aime", "validation", data_dir=data_dir) is not a
    # Another folder with the same file is a different cache entry.
    (tmp_path / "aime").mkdir()
    (tmp_path / "aime" / "aime_2024.json").write_text(
        (data_dir / "aime" / "aime_2024.json").read_text()
    )
    b = tasks.load("aime", "2024", data_dir=tmp_path)
    assert b is not a and b.hash == a.hash and b.source == str(tmp_path / "aime" / "aime_2024.json")
    g = tasks.load("arith", "test", size=10)
    assert (
        tasks.load("arith", "test", size=10) is g and tasks.load("arith", "test", size=11) is not g
    )
    tasks.clear_cache()
    assert tasks.load("aime", "2024", data_dir=data_dir) is not a


def test_cache_sees_files_only_after_clear(tmp_path, data_dir):
    with pytest.raises(tasks.DataNotFoundError):
        tasks.load("aime", "2024", data_dir=tmp_path)
    (tmp_path / "aime").mkdir()
    (tmp_path / "aime" / "aime_2024.json").write_text(
        (data_dir / "aime" / "aime_2024.json").read_text()
    )
    assert len(tasks.load("aime", "2024", data_dir=tmp_path)) == 30  # failures are not cached


def test_import_pulls_no_heavy_dependency():
    code = (
        "import sys, tasks; tasks.load('arith', size=5);"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyarrow','datasets','numpy','torch','marft_envs','sympy'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    ).stdout
    assert out.strip() == "[]"
