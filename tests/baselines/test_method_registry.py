"""The method registry is the one place a method is named: every other place agrees with it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import leaderboard
from baselines.cli import descriptions, method_main
from baselines.core.config import AlgoConfig, ConfigError, apply_overrides, load_config
from baselines.core.methods import (
    EPISODES,
    JOINT,
    METHODS,
    TREES,
    MethodSpec,
    get_method,
    register_method,
    resolve_method,
)

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
    from dataclasses import fields

    help_line = next(f for f in fields(AlgoConfig) if f.name == "method").metadata["help"]
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
