"""The method entry points: smoke runs, resume, evaluation bundles and clear errors on bad input."""

import importlib
import json
import subprocess
import sys

import pytest

from baselines import eval as eval_cli
from baselines import ippo, marft
from baselines.cli import descriptions, build_parser, method_main

SMALL = ["model.max_new_tokens=8", "env.num_envs=2", "train.episodes_per_iteration=2",
         "env.eval_episodes=2", "train.log=[jsonl]"]


def test_smoke_run_resume_and_eval_bundle(tmp_path):
    out = tmp_path / "run"
    args = ["--env", "arith-2agent", "--model", "tiny-random", "--out", str(out), "--no-progress"]
    assert marft.main(args + ["train.iterations=2", *SMALL]) == 0
    assert (out / "config.yaml").is_file() and (out / "learning_curves.png").is_file()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "train/score" in r] == [1, 2]
    assert "agent/reasoner_0/policy_loss" in rows[1] and "critic/critic/value_loss" in rows[1]
    # resume with more iterations continues from the saved checkpoint
    assert marft.main(["--resume", str(out), "--no-progress", "train.iterations=3"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "train/score" in r] == [1, 2, 3]
    # evaluation writes a leaderboard bundle with every episode's transcript
    assert eval_cli.main([str(out), "--env", "arith-2agent", "--out", str(tmp_path / "b.json")]) == 0
    bundle = json.loads((tmp_path / "b.json").read_text())
    assert bundle["method"] == "marft" and bundle["env_id"] == "arith-2agent-v1"
    assert len(bundle["episodes"]) == 2 and bundle["episodes"][0]["turns"][0]["agent"] == "reasoner_0"
    assert bundle["dataset"]["hash"]


def test_python_dash_m_entry_point(tmp_path):
    cmd = [sys.executable, "-m", "baselines.ippo", "--env", "arith-2agent", "--model", "tiny-random",
           "--out", str(tmp_path), "train.iterations=1", *SMALL]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "checkpoints").is_dir()
    # the run names what it is, and piped output carries no progress bar redraws
    assert f"method=ippo model=tiny-random env=arith-2agent out={tmp_path}" in done.stderr
    assert "\r" not in done.stderr


def test_existing_run_directory_needs_resume_or_overwrite(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 0}\n')
    args = ["--env", "arith-2agent", "--model", "tiny-random", "--out", str(out), "--no-progress",
            "train.iterations=0", *SMALL]
    assert marft.main(args) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--resume" in err and "--overwrite" in err
    assert (out / "metrics.jsonl").read_text() == '{"step": 0}\n'  # untouched
    assert marft.main(args + ["--overwrite"]) == 0
    assert not (out / "metrics.jsonl").exists() or '"step": 0}' not in (out / "metrics.jsonl").read_text()


def test_eval_on_a_team_the_run_did_not_train_fails_up_front(tmp_path, capsys):
    from baselines.core.config import load_config

    run = tmp_path / "run"
    run.mkdir()
    load_config("marft", None, ["env.id=arith-2agent", "model.name=tiny-random"]).save(run / "config.yaml")
    assert eval_cli.main([str(run), "--env", "arith-3agent"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "arith-3agent" in err and "verifier_2" in err
    assert "reasoner_0" in err  # names the agents the run has


@pytest.mark.parametrize("args,message", [
    (["--env", "no-such-env", "--model", "tiny-random"], "no-such-env"),
    (["--env", "arith-2agent", "--model", "no-such-model"], "not found"),
    (["--env", "arith-2agent", "--model", "tiny-random", "algo.lrr=1"], "did you mean"),
    (["--model", "tiny-random"], "--env"),
    (["--env", "arith-2agent"], "--model"),  # no silent default model
    (["--env", "arith-2agent", "--model", "tiny-random", "env.overrides.horizen=2"], "horizen"),
    (["--env", "arith-2agent", "--config", "/nonexistent.yaml"], "does not exist"),
    (["--resume", "/nonexistent/run"], "not found"),
])
def test_bad_input_gives_a_clear_message(args, message, capsys, tmp_path):
    assert ippo.main(args + ["--out", str(tmp_path), "--no-progress", *SMALL]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("error:") and message in err


def test_help_documents_every_config_field():
    text = build_parser("python -m baselines.marft", "MARFT").format_help()
    for key in ("--env", "--resume", "algo.lr", "algo.agent_by_agent", "model.lora_r", "train.iterations"):
        assert key in text


@pytest.mark.parametrize("method", sorted(descriptions()))
def test_every_method_module_runs_with_its_own_description(method, capsys):
    module = importlib.import_module(f"baselines.{method}")
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert f"python -m baselines.{method}" in out
    assert " ".join(descriptions()[method].split()[:4]) in " ".join(out.split())


def test_method_main_names_the_methods_for_an_unknown_one():
    with pytest.raises(ValueError, match="no method module 'mappo'; the methods are"):
        method_main("mappo")
