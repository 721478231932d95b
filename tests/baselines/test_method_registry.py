"""The method registry is the one place a method is named: every other place agrees with it."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

import leaderboard
from baselines.cli import descriptions, method_main
from baselines.core.config import ConfigError, apply_overrides, config_help, load_config
from baselines.core.methods import (
    CENTRALIZED,
    EPISODES,
    JOINT,
    METHODS,
    OTHER,
    TREES,
    MethodSpec,
    get_method,
    register_method,
    resolve_method,
    unregister_method,
)
from tasks import AlreadyRegisteredError

ROOT = Path(__file__).resolve().parents[2]


def entry_modules() -> dict[str, str]:
    """``baselines/<module>.py`` files whose ``main`` is ``method_main(<name>)``: module -> name."""
    out = {}
    for path in sorted((ROOT / "baselines").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "method_main"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                out[path.stem] = node.args[0].value
    return out


def test_every_entry_module_runs_its_own_registered_method_and_nothing_else():
    modules = entry_modules()
    assert modules == {m: m for m in modules}  # baselines.<m> runs method_main("<m>")
    assert set(modules) == {spec.module for spec in METHODS.values()} == set(descriptions())
    for module in modules:
        assert importlib.import_module(f"baselines.{module}").main is not None


def test_a_module_describes_itself_with_its_method_summary():
    for module, description in descriptions().items():
        assert description == METHODS[module].summary


def test_the_leaderboard_lists_exactly_the_registered_methods():
    # leaderboard may not import baselines: its plain list must be kept equal to the registry
    assert set(leaderboard.METHODS) - {"other"} == {s.leaderboard for s in METHODS.values()}
    for name in leaderboard.METHODS:
        if name != "other":
            assert get_method(name).leaderboard == name  # a bundle's name resolves back


def test_the_leaderboard_docs_table_names_every_method():
    row = next(
        line
        for line in (ROOT / "docs/leaderboard.md").read_text().splitlines()
        if line.startswith("| `method` |")
    )
    for spec in METHODS.values():
        assert f"`{spec.leaderboard}`" in row


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_has_a_preset_that_names_it(name):
    spec = METHODS[name]
    cfg = load_config(name)
    assert cfg.algo.method == name
    assert cfg.algo.loss_agg == spec.loss_agg
    for key, value in spec.algo.items():
        assert getattr(cfg.algo, key) == value


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("at-grpo-shared", "at_grpo_shared"),  # the bundle spelling
        ("magrpo-shared", "magrpo_shared"),
        ("marft-shared", "marft_shared"),
        ("ippo", "ippo"),
    ],
)
def test_old_spellings_resolve_in_config_and_presets(spelling, name):
    assert resolve_method(spelling) == name
    assert load_config(spelling).algo.method == name
    assert apply_overrides(load_config("marft"), [f"algo.method={spelling}"]).algo.method == name


def test_an_unknown_method_names_the_valid_ones():
    with pytest.raises(ConfigError, match="'mappo' is not valid; choose one of 'marft'"):
        load_config("marft", overrides=["algo.method=mappo"])
    with pytest.raises(ConfigError, match="unknown preset 'mappo'"):
        load_config("mappo")
    with pytest.raises(ValueError, match=r"valid: \["):
        get_method("mappo")


def test_the_config_field_help_lists_the_registry():
    help_line = next(line for line in config_help().splitlines() if "a registered method" in line)
    assert all(name in help_line for name in METHODS)


def test_critic_free_validation_follows_the_registry():
    for name, spec in METHODS.items():
        overrides = [f"algo.method={name}", "algo.group_size=1"]
        if spec.critic_free:
            with pytest.raises(ConfigError, match="needs >= 2 samples per group"):
                load_config("marft", overrides=overrides)
        else:
            load_config("marft", overrides=overrides)  # PPO methods ignore group_size


def test_registering_a_taken_spelling_fails_and_changes_nothing():
    before = dict(METHODS)
    clash = MethodSpec("ippo2", "x", EPISODES, "gae", "own_observation", False, aliases=("ippo",))
    with pytest.raises(ValueError, match="already name 'ippo'"):
        register_method(clash)
    assert before == METHODS


@pytest.fixture
def scratch_methods():
    """Names a test registers are unregistered afterwards (the registry is global)."""
    names: list[str] = []
    yield names
    for name in names:
        if name in METHODS:
            unregister_method(name)


def test_an_equal_spec_again_is_a_no_op_and_a_different_one_names_the_name(scratch_methods):
    before = dict(METHODS)
    for name in METHODS:  # what importing a module twice does: equal specs, algo mappings too
        copy = dataclasses.replace(METHODS[name])
        assert copy == METHODS[name] and copy is not METHODS[name]
        assert register_method(copy) is before[name]
    assert METHODS == before
    other = dataclasses.replace(METHODS["magrpo"], algo={"scale_by_std": False})
    with pytest.raises(AlreadyRegisteredError, match="Method 'magrpo' is already registered to a "
                       "different value; pass overwrite=True"):  # fmt: skip
        register_method(other)
    assert METHODS == before
    scratch_methods.append("mine")
    mine = MethodSpec("mine", "x", JOINT, "group", None, False, aliases=("my-alias",))
    register_method(mine)
    changed = dataclasses.replace(mine, summary="y", aliases=())
    assert register_method(changed, overwrite=True) is changed and METHODS["mine"] is changed
    with pytest.raises(ValueError, match="unknown method 'my-alias'"):
        resolve_method("my-alias")  # the replaced spec's spellings went with it


def test_a_spec_whose_module_names_no_method_is_refused(scratch_methods):
    scratch_methods.append("orphan")
    orphan = MethodSpec("orphan", "x", JOINT, "group", None, False, module="no_such_module")
    with pytest.raises(ValueError, match="module 'no_such_module' names no registered method"):
        register_method(orphan)
    assert "orphan" not in METHODS
    assert set(descriptions()) == {s.module for s in METHODS.values()}  # still builds
    method_main("marft")


def test_other_is_a_leaderboard_name_many_methods_share_never_a_spelling(scratch_methods):
    scratch_methods.extend(["mine_a", "mine_b"])
    for name in ("mine_a", "mine_b"):
        register_method(MethodSpec(name, "x", JOINT, "group", None, False, leaderboard=OTHER))
        assert get_method(name).leaderboard == OTHER
    with pytest.raises(ValueError, match="unknown method 'other'"):
        resolve_method(OTHER)
    with pytest.raises(ValueError, match="'other' is the leaderboard's name"):
        MethodSpec("x", "x", JOINT, "group", None, False, aliases=(OTHER,))


def test_the_leaderboard_name_is_a_field_derived_from_the_name_by_default():
    assert get_method("at_grpo_shared").leaderboard == "at-grpo-shared"
    assert get_method("magrpo_shared").leaderboard == "magrpo-shared"
    spec = MethodSpec("my_m", "x", JOINT, "group", None, False, leaderboard="mine")
    assert spec.leaderboard == "mine"
    assert MethodSpec("my_m", "x", JOINT, "group", None, False).leaderboard == "my-m"


def test_sequential_is_an_explicit_field_defaulting_to_the_estimators_rows():
    assert [name for name, s in METHODS.items() if s.sequential] == ["marft", "marft_shared"]
    assert "sequential" in {f.name for f in dataclasses.fields(MethodSpec)}
    own = MethodSpec("m", "x", EPISODES, "my_mod:fn", CENTRALIZED, False, sequential=True)
    assert own.sequential is True
    assert MethodSpec("m", "x", EPISODES, "my_mod:fn", CENTRALIZED, False).sequential is False
    with pytest.raises(ValueError, match="sequential must be True"):
        MethodSpec("m", "x", EPISODES, "sequential_gae", CENTRALIZED, False, sequential=False)


@pytest.mark.parametrize(
    ("module", "shown"),
    [
        ("dr_grpo", ["algo.method (str) = dr_grpo", "algo.loss_agg", "= seq_sum_norm",
                     "algo.scale_by_std (bool) = false"]),
        ("magrpo", ["algo.method (str) = magrpo", "algo.normalize_advantages (bool) = false"]),
    ],
)  # fmt: skip
def test_a_method_modules_help_shows_its_presets_defaults(module, shown, capsys):
    with pytest.raises(SystemExit):
        importlib.import_module(f"baselines.{module}").main(["--help"])
    out = capsys.readouterr().out
    assert f"defaults of the {module} preset" in out
    for text in shown:
        assert text in out
    assert "algo.method (str) = marft\n" not in out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rollout": "beams"}, "rollout 'beams'"),
        ({"critic": "oracle"}, "critic 'oracle'"),
        ({"critic": None, "rollout": EPISODES}, "needs groups"),
    ],
)
def test_a_spec_that_cannot_run_is_refused(kwargs, message):
    base = {"rollout": JOINT, "estimator": "group", "critic": None, "shared_adapters": False}
    with pytest.raises(ValueError, match=message):
        MethodSpec("m", "summary", **{**base, **kwargs})


def test_shared_variants_run_from_their_per_agent_module_with_one_adapter():
    for name in ("at_grpo", "magrpo"):
        shared = get_method(f"{name}_shared")
        assert shared.module == name and shared.shared_adapters
        assert shared.policy_adapters(["a_0", "b_1"]) == ["policy"]
        assert get_method(name).policy_adapters(["a_0", "b_1"]) == ["a_0", "b_1"]
    assert get_method("at_grpo").rollout == TREES and get_method("magrpo").rollout == JOINT


def test_method_main_refuses_a_module_no_method_runs_from():
    with pytest.raises(ValueError, match="no method module 'mappo'"):
        method_main("mappo")


@pytest.fixture(scope="module")
def relay_model_path(tmp_path_factory):
    from baselines.relay import relay_model

    return str(relay_model(tmp_path_factory.mktemp("model"), seed=0))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_trains_from_its_module_with_its_preset(name, relay_model_path, tmp_path):
    import yaml

    spec = METHODS[name]
    module = importlib.import_module(f"baselines.{spec.module}")
    out = tmp_path / "run"
    argv = ["--env", "credit-chain-2agent", "--model", relay_model_path, "--out", str(out),
            "--no-progress", f"algo.method={name}", "model.max_new_tokens=1", "env.num_envs=4",
            "train.episodes_per_iteration=8", "algo.group_size=4", "train.iterations=1",
            "env.eval_episodes=0", "train.log=[]", "algo.minibatch_size=8"]  # fmt: skip
    assert module.main(argv) == 0
    saved = yaml.safe_load((out / "config.yaml").read_text())["algo"]
    assert saved["method"] == name and saved["loss_agg"] == spec.loss_agg
    assert all(saved[k] == v for k, v in spec.algo.items())
