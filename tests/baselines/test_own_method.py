"""A method in a researcher's own file: trained by running the file, evaluated into a bundle with
``baselines.eval RUN --import FILE`` (method ``other``), its ``--help`` and usage its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from baselines import eval as eval_cli
from baselines.cli import import_module_or_file
from baselines.core.config import ConfigError, config_help, load_config, presets
from baselines.core.methods import METHODS, JOINT, MethodSpec, register_method, unregister_method

NAME = "loo_own"  # the method of the file below: not a leaderboard method
OWN_FILE = f'''
"""{NAME}.py: leave-one-out baselines on joint groups (the tutorial's RLOO, shortened)."""
import torch

from baselines.cli import method_main
from baselines.core.estimators import Estimate, group_metrics, require_groups
from baselines.core.methods import JOINT, MethodSpec, register_method


def advantages(scored, algo):
    group = require_groups(scored, "{NAME}")
    members = {{}}
    for unit, key in enumerate(group.groups):
        members.setdefault(key, []).append(unit)
    adv = {{}}
    for s, u in zip(group.samples, group.units, strict=True):
        units = members[group.groups[u]]
        rest = [group.scores[v] for v in units if v != u]
        base = sum(rest) / len(rest) if rest else group.scores[u]
        adv[(s.episode, s.index)] = torch.full((len(s.action_ids),), group.scores[u] - base)
    return Estimate(adv, metrics=group_metrics(group, 0))


register_method(
    MethodSpec("{NAME}", "LOO: leave-one-out baselines.", rollout=JOINT,
               estimator=f"{{__name__}}:advantages", critic=None, shared_adapters=False,
               algo={{"normalize_advantages": False}})
)
main = method_main("{NAME}")

if __name__ == "__main__":
    raise SystemExit(main())
'''
SMALL = ["model.max_new_tokens=1", "env.num_envs=4", "train.episodes_per_iteration=8",
         "algo.group_size=4", "train.iterations=1", "env.eval_episodes=2", "train.log=[]",
         "algo.minibatch_size=8"]  # fmt: skip


def forget(name: str) -> None:
    """Undo what importing the file did: the method and the module (the registry is global)."""
    if name in METHODS:
        unregister_method(name)
    sys.modules.pop(name, None)


@pytest.fixture
def own_file(tmp_path):
    path = tmp_path / f"{NAME}.py"
    path.write_text(OWN_FILE)
    yield path
    forget(NAME)


@pytest.fixture(scope="module")
def relay_model_path(tmp_path_factory):
    from baselines.relay import relay_model

    return str(relay_model(tmp_path_factory.mktemp("model"), seed=0))


def test_a_run_of_an_own_method_is_evaluated_into_an_other_bundle(own_file, relay_model_path,
                                                                   tmp_path, capsys):
    run = tmp_path / "run"
    import_module_or_file(str(own_file))
    module = sys.modules[NAME]
    argv = ["--env", "credit-chain-2agent", "--model", relay_model_path, "--out", str(run),
            "--no-progress", *SMALL]  # fmt: skip
    assert module.main(argv) == 0
    forget(NAME)  # a fresh process: baselines.eval knows nothing of the file

    assert eval_cli.main([str(run), "--out", str(tmp_path / "no.json")]) == 2
    err = capsys.readouterr().err
    assert f"algo.method {NAME!r} is not a registered method" in err
    assert "pass --import <the file that registers it>" in err

    out = tmp_path / "bundle.json"
    assert eval_cli.main([str(run), "--import", str(own_file), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["method"] == "other"  # the leaderboard does not list it

    # --method applies to a run directory too, validated as for model directories
    assert eval_cli.main([str(run), "--import", str(own_file), "--method", NAME]) == 2
    assert "is not a leaderboard method" in capsys.readouterr().err
    claimed = tmp_path / "claimed.json"
    assert eval_cli.main([str(run), "--method", "magrpo", "--out", str(claimed)]) == 0
    assert json.loads(claimed.read_text())["method"] == "magrpo"


def test_a_run_of_ours_given_method_other_records_other(relay_model_path, tmp_path):
    from baselines import magrpo

    run = tmp_path / "run"
    argv = ["--env", "credit-chain-2agent", "--model", relay_model_path, "--out", str(run),
            "--no-progress", *SMALL, "train.iterations=0"]  # fmt: skip
    assert magrpo.main(argv) == 0
    plain, other = tmp_path / "plain.json", tmp_path / "other.json"
    assert eval_cli.main([str(run), "--out", str(plain)]) == 0
    assert eval_cli.main([str(run), "--method", "other", "--out", str(other)]) == 0
    assert json.loads(plain.read_text())["method"] == "magrpo"
    assert json.loads(other.read_text())["method"] == "other"


def test_import_takes_a_module_name_or_a_file_and_names_what_is_missing(own_file, monkeypatch):
    monkeypatch.syspath_prepend(str(own_file.parent))
    assert import_module_or_file(NAME) == NAME and NAME in METHODS  # a module name
    assert import_module_or_file(str(own_file)) == NAME  # the same file again: nothing new
    with pytest.raises(ConfigError, match="no such file"):
        import_module_or_file(str(own_file.parent / "missing.py"))
    with pytest.raises(ConfigError, match="no module 'no_such_module_xyz'"):
        import_module_or_file("no_such_module_xyz")
    shadow = own_file.parent / "json.py"  # would replace the json module everyone imported
    shadow.write_text("raise AssertionError('never run')\n")
    with pytest.raises(ConfigError, match="a module named 'json' is imported already"):
        import_module_or_file(str(shadow))


def test_an_unknown_import_is_a_usage_error(tmp_path, capsys):
    assert eval_cli.main([str(tmp_path), "--import", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_the_file_gets_its_own_usage_and_its_presets_defaults_in_help(own_file, monkeypatch,
                                                                      capsys):
    import_module_or_file(str(own_file))
    monkeypatch.setattr(sys, "argv", [str(own_file)])
    with pytest.raises(SystemExit) as done:
        sys.modules[NAME].main(["--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert f"usage: python {own_file}" in out and "baselines." + NAME not in out
    assert f"algo.method (str) = {NAME}" in out
    assert "algo.normalize_advantages (bool) = false" in out


def test_presets_and_the_method_help_read_the_registry_when_needed():
    spec = MethodSpec("late_method", "late.", JOINT, "group", None, False)
    assert "late_method" not in presets()
    register_method(spec)
    try:
        assert "late_method" in presets()
        assert load_config("late_method").algo.method == "late_method"
        method_help = next(line for line in config_help().splitlines() if "a registered method" in line)
        assert "late_method" in method_help
    finally:
        unregister_method("late_method")
    with pytest.raises(ConfigError, match="unknown preset 'late_method'; valid: marft"):
        load_config("late_method")


def test_an_own_file_registered_twice_is_a_no_op(own_file):
    """Running the file and importing it (or importing it again) must not fail."""
    import_module_or_file(str(own_file))
    first = METHODS[NAME]
    sys.modules.pop(NAME)
    import_module_or_file(str(own_file))  # executed again: an equal spec, except the function
    assert METHODS[NAME] == first


@pytest.mark.parametrize("name", ["marft", "at_grpo_shared", "dr_mas"])
def test_a_method_the_leaderboard_lists_keeps_its_name(name):
    assert eval_cli.leaderboard_method(name) == METHODS[name].leaderboard


def test_the_tutorial_file_runs_from_its_command_line():
    page = (Path(__file__).resolve().parents[2] / "docs/adding_a_method.md").read_text()
    block = page.split("<!-- docs-test: file rloo.py -->\n```python\n", 1)[1].split("```", 1)[0]
    # the script takes its arguments from the command line (the docs test passes small ones)
    assert block.rstrip().endswith('if __name__ == "__main__":\n    raise SystemExit(main())')
    assert "main([" not in block
    assert "python rloo.py --env" in page and "--import rloo.py" in page
