"""Typed configs: presets, YAML files, overrides, errors, help."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from baselines.core.config import (
    AlgoConfig,
    Config,
    ConfigError,
    ModelConfig,
    apply_overrides,
    config_help,
    load_config,
    presets,
)


@pytest.mark.parametrize("preset", presets())
def test_every_preset_loads_and_names_its_method(preset):
    cfg = load_config(preset)
    assert cfg.algo.method == preset
    assert isinstance(cfg.model, ModelConfig) and isinstance(cfg.algo, AlgoConfig)


def test_defaults_without_changes_match_the_dataclasses():
    cfg = load_config("marft")
    assert cfg.algo.gamma == AlgoConfig().gamma
    assert cfg.model.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]
    # mutable defaults are not shared between instances
    a, b = Config(), Config()
    a.model.target_modules.append("x")
    a.env.overrides["horizon"] = 3
    assert b.model.target_modules == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert b.env.overrides == {}


def test_precedence_preset_then_file_then_overrides(tmp_path):
    f = tmp_path / "my.yaml"
    f.write_text("algo:\n  lr: 3.0e-6\n  gamma: 0.5\nenv:\n  id: gsm8k-2agent\n")
    cfg = load_config("marft_shared", str(f), ["lr=2e-6"])
    assert cfg.algo.method == "marft_shared"
    assert cfg.algo.lr == 2e-6          # override beats file
    assert cfg.algo.gamma == 0.5        # file beats default
    assert cfg.env.id == "gsm8k-2agent"


def test_overrides_dotted_short_nested_and_typed():
    cfg = load_config("marft", None, [
        "algo.lr=2e-6",                 # PyYAML reads "2e-6" as a string: still a float
        "iterations=2",                  # short unique key
        "model.name=tiny-random",
        "normalize_advantages=false",
        "clip_eps_high=null",
        "value_clip_eps=0.3",
        "target_modules=q_proj,v_proj",
        "env.overrides.horizon=2",       # keys inside a mapping field
        "env.overrides.feedback=verdict",
        "log=[console, jsonl]",
        "critic_lr=1",                   # int accepted for a float field
    ])
    assert cfg.algo.lr == 2e-6 and isinstance(cfg.algo.lr, float)
    assert cfg.train.iterations == 2
    assert cfg.algo.normalize_advantages is False
    assert cfg.algo.clip_eps_high is None and cfg.algo.value_clip_eps == 0.3
    assert cfg.model.target_modules == ["q_proj", "v_proj"]
    assert cfg.env.overrides == {"horizon": 2, "feedback": "verdict"}
    assert cfg.train.log == ["console", "jsonl"]
    assert cfg.algo.critic_lr == 1.0 and isinstance(cfg.algo.critic_lr, float)


def test_string_field_keeps_numeric_looking_values_as_strings():
    assert load_config("marft", None, ["env.id=123"]).env.id == "123"


def test_unknown_key_suggests_the_closest():
    with pytest.raises(ConfigError, match=r"unknown config key 'algo.lrr'.*did you mean algo.lr"):
        load_config("marft", None, ["algo.lrr=1e-5"])
    with pytest.raises(ConfigError, match=r"'lrate'.*algo.lr"):
        load_config("marft", None, ["lrate=1e-5"])
    with pytest.raises(ConfigError, match="unknown config key 'nothing_like_it'"):
        load_config("marft", None, ["nothing_like_it=1"])


def test_unknown_key_or_section_in_a_file_names_the_file(tmp_path):
    f = tmp_path / "typo.yaml"
    f.write_text("algo:\n  gamam: 0.9\n")
    with pytest.raises(ConfigError, match=r"typo.yaml.*'algo.gamam'.*algo.gamma"):
        load_config("marft", str(f))
    f.write_text("algorithm:\n  gamma: 0.9\n")
    with pytest.raises(ConfigError, match=r"unknown config section 'algorithm'"):
        load_config("marft", str(f))
    f.write_text("trian:\n  iterations: 2\n")  # a section typo suggests the section
    with pytest.raises(ConfigError, match=r"section 'trian'; did you mean 'train'\?") as info:
        load_config("marft", str(f))
    assert "train.out" not in str(info.value)
    f.write_text("- just a list\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config("marft", str(f))
    f.write_text("algo: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config("marft", str(f))
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("marft", str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize("override, message", [
    ("seed=abc", r"train.seed: expected int, got 'abc'"),
    ("iterations=2.5", r"train.iterations: expected int"),
    ("gamma=x", r"algo.gamma: expected float"),
    ("normalize_advantages=maybe", r"algo.normalize_advantages: expected bool"),
    ("method=mappo", r"algo.method: 'mappo' is not valid; choose one of 'marft'"),
    ("level=sentence", r"algo.level: 'sentence' is not valid"),
    ("dtype=float16", r"float16 is not supported.*loss scaling"),
    ("env.overrides=3", r"env.overrides: expected mapping"),
    ("clip_eps=null", r"algo.clip_eps: expected float"),
    ("model=3", r"names a section"),
    ("lr", r"not of the form key=value"),
    ("algo.lr.x=1", r"algo.lr is not a mapping"),
])
def test_bad_values_name_the_field_and_the_expected_type(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config("marft", None, [override])


@pytest.mark.parametrize("override, message", [
    ("gamma=1.5", "algo.gamma must be in"),
    ("lr=0", "algo.lr and algo.critic_lr must be > 0"),
    ("log=[console, wandb]", r"unknown sink\(s\) \['wandb'\]"),
    ("device=tpu", "train.device"),
    ("temperature=0", "model.temperature must be > 0"),
    ("train.workers=threads", r"train.workers: 'threads' is not valid"),
    ("train.env_workers=0", "train.env_workers must be >= 1"),
    ("train.env_workers=9", r"train.env_workers=9 exceeds env.num_envs=8"),
    ("model.target_modules=q_proj,lm_head", r"must not name lm_head"),
])
def test_out_of_range_values_are_rejected(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config("marft", None, [override])


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset 'mappo'; valid: marft, marft_shared"):
        load_config("mappo")


def test_to_dict_from_dict_and_yaml_round_trip(tmp_path):
    cfg = load_config("ippo", None, ["lr=3e-6", "env.overrides.horizon=2", "env.id=math-3agent"])
    d = cfg.to_dict()
    assert d["algo"]["lr"] == 3e-6 and d["env"]["overrides"] == {"horizon": 2}
    assert Config.from_dict(d) == cfg
    cfg.save(tmp_path / "config.yaml")
    assert Config.from_dict(yaml.safe_load((tmp_path / "config.yaml").read_text())) == cfg
    # a saved run config reloads as a user file on top of any preset
    assert load_config("marft", str(tmp_path / "config.yaml")) == cfg
    with pytest.raises(ConfigError, match="unknown config key 'train.iters'"):
        Config.from_dict({"train": {"iters": 3}})


def test_config_help_lists_every_field_with_type_default_and_description():
    text = config_help()
    for section in ("model", "algo", "env", "train"):
        for f in dataclasses.fields(getattr(Config(), section)):
            assert f"{section}.{f.name} (" in text
            assert f.metadata["help"] in text
    assert "algo.lr (float) = 1.0e-05" in text
    assert "algo.method (str) = marft" in text  # the registry's names follow in its help line
    assert "marft, marft_shared, ippo, at_grpo, at_grpo_shared, magrpo, magrpo_shared" in text
    assert "env.id (str or null) = null" in text


def test_apply_overrides_returns_the_same_object():
    cfg = Config()
    assert apply_overrides(cfg, ["ppo_epochs=2"]) is cfg and cfg.algo.ppo_epochs == 2


def test_a_missing_extra_is_named():
    code = "import sys; sys.modules['yaml'] = None; import baselines.marft"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "'baselines' extra" in last and "pyyaml" in last and ".[baselines]" in last
