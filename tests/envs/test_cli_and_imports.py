import subprocess
import sys

from marft_envs.cli import main


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "marft_envs.cli", *args], capture_output=True, text=True, timeout=300)


def test_import_marft_envs_does_not_import_torch():
    code = "import sys, marft_envs, tasks; marft_envs.make('arith-2agent'); print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False False"


def test_list_and_show(capsys):
    assert main(["list"]) == 0
    assert "arith-3agent" in capsys.readouterr().out
    assert main(["show", "arith-3agent"]) == 0
    out = capsys.readouterr().out
    assert "verifier_2" in out and "Verifier of a math team" in out and "hash=" in out


def test_play_with_scripted_policy_prints_transcript_and_verdict():
    r = run_cli("play", "arith-3agent", "--policy", "oracle", "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert "[verifier_2]" in r.stdout and "correct=True" in r.stdout


def test_play_human_reads_the_terminal():
    p = subprocess.run([sys.executable, "-m", "marft_envs.cli", "play", "arith-2agent", "--policy", "human"],
                       input="my analysis\n.\nI give up \\boxed{123456789}\n.\n", capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "my analysis" in p.stdout and "correct=False" in p.stdout


def test_check_command():
    r = run_cli("check", "arith-2agent")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "checks passed" in r.stdout


def test_errors_are_clear(capsys):
    assert main(["show", "no-such-env"]) == 2
    assert "No environment registered" in capsys.readouterr().out
    assert main(["play", "arith-2agent", "--set", "horizn=2", "--policy", "oracle"]) == 2
    assert "horizon" in capsys.readouterr().out


def test_core_install_needs_no_deep_learning_stack():
    """`pip install marft-envs` (no extras) must not pull torch or transformers."""
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    for heavy in ("torch", "transformers", "peft", "vllm", "ray"):
        assert heavy not in core, f"{heavy} is a core dependency"
