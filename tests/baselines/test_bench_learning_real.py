"""benchmarks/bench_learning_real.py runs end to end (tiny model): every method's row, the pooled
row, and one results.jsonl record per finished run with the before/after scores it printed."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_bench_learning_real_compares_methods_at_equal_responses(tmp_path):
    out = tmp_path / "bench"
    cmd = [
        sys.executable, str(ROOT / "benchmarks" / "bench_learning_real.py"),
        "--envs", "arith0-2agent", "--methods", "marft", "magrpo", "--seeds", "0",
        "--iterations", "1", "--eval-episodes", "3", "--model", "tiny-random", "--threads", "1",
        "--out", str(out),
        "env.num_envs=2", "env.eval_num_envs=3", "train.episodes_per_iteration=4",
        "model.max_new_tokens=3",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    table = run.stdout.splitlines()
    head = next(i for i, line in enumerate(table) if line.startswith("env "))
    rows = [line.split() for line in table[head + 1 :] if line.strip()]
    assert [(r[1], r[2]) for r in rows] == [
        ("marft", "0"), ("marft", "pooled"), ("magrpo", "0"), ("magrpo", "pooled")
    ]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["method"] for r in records] == ["marft", "magrpo"]
    for r in records:
        assert len(r["before"]) == len(r["after"]) == 3  # the same 3 test problems
        assert r["generated_tokens"] > 0 and len(r["seconds_per_iteration"]) == 1
    # the table printed again from results.jsonl is the live one
    again = subprocess.run(
        [sys.executable, cmd[1], "--from-results", str(out / "results.jsonl")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.splitlines() == table[head:]
    # equal responses per iteration: MAGRPO plays 4 episodes as 1 problem x K=4, MARFT 4 episodes
    from baselines.core.config import load_config

    for record, preset in zip(records, ("marft", "magrpo"), strict=True):
        cfg = load_config(preset, overrides=record["overrides"])
        assert cfg.algo.method == preset and cfg.train.episodes_per_iteration == 4
    assert load_config("magrpo", overrides=records[1]["overrides"]).algo.group_size == 4


def load_bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_learning_real", ROOT / "benchmarks" / "bench_learning_real.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented_reprints() -> list[tuple[str, list[str]]]:
    """(command, table) of every block of docs/learning.md that reprints records: a ```text
    block whose first line is a `bench_learning_real.py --from-results FILE` command."""
    blocks = re.findall(r"^```text\n(.*?)^```", (ROOT / "docs" / "learning.md").read_text(), re.S | re.M)
    return [
        (lines[0], lines[1:])
        for lines in (b.splitlines() for b in blocks)
        if lines and "bench_learning_real.py --from-results" in lines[0]
    ]


def test_the_page_shows_the_tables_its_records_reprint():
    """docs/learning.md's reprinted tables are what its own commands print from the committed
    records today: the page cannot drift from the records (or from the bench's arithmetic)."""
    reprints = documented_reprints()
    assert [shlex.split(cmd)[-1] for cmd, _ in reprints] == [
        "docs/img/learning_real/marft_arith0_results.jsonl",
        "docs/img/learning_real/arith0-2agent_methods_seeds01.jsonl",
    ]
    for cmd, table in reprints:
        words = shlex.split(cmd)
        assert words[:3] == ["PYTHONPATH=.", "python", "benchmarks/bench_learning_real.py"], cmd
        run = subprocess.run(
            [sys.executable, *words[2:]], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.splitlines() == table, cmd


def test_the_seeds_interval_needs_three_seeds():
    bench = load_bench()
    records_file = ROOT / "docs" / "img" / "learning_real" / "marft_arith0_results.jsonl"
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    assert all(r[6] != "-" for r in bench.table_rows(records) if r[2] == "pooled")  # 3 seeds
    # with 2 seeds the across-seed interval is not printed
    assert all(r[6] == "-" for r in bench.table_rows(records[:2]) if r[2] == "pooled")


def test_a_run_recorded_twice_is_refused():
    bench = load_bench()
    records_file = ROOT / "docs" / "img" / "learning_real" / "marft_arith0_results.jsonl"
    records = [json.loads(line) for line in records_file.read_text().splitlines()]
    with pytest.raises(ValueError, match="seed 0 is recorded twice"):
        bench.table_rows(records + records[:1])
