"""HumanEval, MBPP and stdin/stdout loaders and converters; the data-free code set."""

import json

import pytest

import tasks
from marft_envs.code import check, get_sandbox
from tasks.code_loaders import (
    humaneval_records,
    humaneval_to_task,
    mbpp_entry_point,
    mbpp_to_task,
    stdio_dataset,
    stdio_to_task,
)
from tasks.code_tasks import REFERENCE_SOLUTIONS
from tasks.errors import DataNotFoundError, MalformedRecordError


@pytest.fixture(scope="module")
def sb():
    return get_sandbox("subprocess")


def test_humaneval_loads_from_the_package():
    ds = tasks.load("humaneval")
    assert len(ds) == 164 and ds.kind == "code" and ds.split == "test"
    t = ds.by_id("HumanEval/0")
    assert t.entry_point == "has_close_elements"
    assert t.tests and "def check(candidate)" in t.tests[0]
    assert t.metadata["code_prefix"] == t.prompt
    assert t.public_tests[0] == "assert has_close_elements([1.0, 2.0, 3.0], 0.5) == False"
    assert sum(bool(t.public_tests) for t in ds) >= 100
    assert ds.hash == tasks.load("humaneval", cache=False).hash


@pytest.mark.parametrize("index", [0, 10, 32, 38, 53, 87, 129, 163])
def test_humaneval_canonical_passes_and_empty_body_fails(sb, index):
    rec = humaneval_records()[index]
    task = humaneval_to_task(rec)
    good = check(rec["canonical_solution"], task, sandbox=sb, extract=False)
    assert good.outcome == "pass", good.reason
    assert check("    pass\n", task, sandbox=sb, extract=False).outcome != "pass"
    if task.public_tests:
        assert check(rec["canonical_solution"], task, sandbox=sb, extract=False, tests="public").outcome == "pass"


def test_humaneval_full_program_completion(sb):
    rec = humaneval_records()[2]  # truncate_number
    program = "```python\ndef truncate_number(number: float) -> float:\n    return number % 1.0\n```"
    assert check(program, humaneval_to_task(rec), sandbox=sb).outcome == "pass"


def test_mbpp_splits_and_fields(data_dir):
    sizes = {s: len(tasks.load("mbpp", s, data_dir=data_dir)) for s in ("test", "train", "validation", "prompt")}
    assert sizes == {"test": 500, "train": 374, "validation": 90, "prompt": 10}
    t = tasks.load("mbpp", "test", data_dir=data_dir).by_id("mbpp/11")
    assert t.entry_point == "remove_Occ"
    assert len(t.tests) == 3 and t.public_tests == t.tests[:1]
    assert t.public_tests[0] in t.prompt and t.metadata["split"] == "test"


def test_mbpp_from_env_folder_and_setup_code(tmp_path, monkeypatch, sb):
    recs = [json.loads(line) for line in (tasks.resolve_data_dir() / "mbpp" / "mbpp.jsonl").open()]
    (tmp_path / "mbpp").mkdir()
    chosen = [r for r in recs if r["task_id"] in (11, 12, 367)]
    (tmp_path / "mbpp" / "mbpp.jsonl").write_text("\n".join(json.dumps(r) for r in chosen))
    monkeypatch.setenv("MARFT_DATA_DIR", str(tmp_path))
    ds = tasks.load("mbpp", "test")
    assert ds.ids == ("mbpp/11", "mbpp/12", "mbpp/367") and ds.source.startswith(str(tmp_path))
    t = ds.by_id("mbpp/367")  # is_tree_balanced: the tests use objects built by test_setup_code
    assert "Node(" in t.setup_code
    assert check(chosen[2]["code"], t, sandbox=sb, extract=False).outcome == "pass"


def test_mbpp_missing_data_is_a_clear_error(tmp_path):
    with pytest.raises(DataNotFoundError, match="mbpp/mbpp.jsonl"):
        tasks.load("mbpp", "test", data_dir=tmp_path)


def test_mbpp_converter_rejects_bad_records():
    with pytest.raises(MalformedRecordError, match="test_list"):
        mbpp_to_task({"task_id": 1, "text": "x", "test_list": []})
    with pytest.raises(MalformedRecordError, match="text"):
        mbpp_to_task({"task_id": 1, "test_list": ["assert f(1) == 1"]})
    with pytest.raises(MalformedRecordError, match="which function"):
        mbpp_to_task({"task_id": 1, "text": "x", "test_list": ["assert len([1]) == 1"]})


def test_mbpp_entry_point():
    assert mbpp_entry_point("assert math.isclose(area(2), 12.5)") == "area"
    assert mbpp_entry_point("assert set(sim((1,), (1,))) == {1}") == "sim"
    assert mbpp_entry_point("assert sum(1, 2) == 3", "def sum(a, b):\n    return a + b") == "sum"


def test_stdio_converters_accept_common_layouts():
    a = stdio_to_task({"question": "add", "inputs": ["1 2\n"], "outputs": ["3\n"]}, index=4)
    b = stdio_to_task({"problem": "add", "problem_id": 7,
                       "input_output": json.dumps({"inputs": ["1 2\n", "2 2\n"], "outputs": ["3\n", "4\n"]})})
    c = stdio_to_task({"prompt": "add", "tests": [{"input": "1 2", "output": "3"}], "public_tests": 0})
    assert a.id == "stdio/4" and a.io_tests[0].expected_stdout == "3\n" and a.entry_point is None
    assert b.id == "7" and len(b.io_tests) == 2
    assert c.metadata["public_io_tests"] == 0
    for bad, match in (({"question": "q"}, "no tests"), ({"inputs": ["1"], "outputs": ["1"]}, "statement"),
                       ({"question": "q", "inputs": [[1, 2]], "outputs": [3]}, "string"),
                       ({"question": "q", "inputs": ["1"], "outputs": []}, "same length")):
        with pytest.raises(MalformedRecordError, match=match):
            stdio_to_task(bad)


def test_stdio_dataset_from_jsonl(tmp_path, sb):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "double", "question": "print 2n", "inputs": ["3\n", "5\n"], "outputs": ["6\n", "10\n"]}) + "\n")
    ds = stdio_dataset(path, name="mine")
    assert len(ds) == 1 and ds.name == "mine"
    assert check("print(2 * int(input()))", ds[0], sandbox=sb, extract=False).outcome == "pass"
    assert check("print(6)", ds[0], sandbox=sb, extract=False).passed == 1


def test_code_set_is_data_free_and_every_task_is_solvable(sb):
    ds = tasks.load("code")
    assert len(ds) == 20 and sum(bool(t.io_tests) for t in ds) == 5
    for t in ds:
        assert t.public_tests or t.io_tests
        assert set(t.public_tests) <= set(t.tests)
        report = check(REFERENCE_SOLUTIONS[t.id], t, sandbox=sb, extract=False)
        assert report.outcome == "pass", (t.id, report.reason)
        assert check("print('hello')", t, sandbox=sb, extract=False).passed == 0
