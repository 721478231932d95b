"""AT-GRPO and MAGRPO on the trainer core: adapters without critics, a training step, exact
resume, the command line and evaluation bundles, and config errors."""

import json

import pytest
import torch

from baselines import at_grpo, magrpo
from baselines import eval as eval_cli
from baselines.core.config import ConfigError, load_config
from baselines.relay import register_relay, relay_model
from baselines.trainer import Trainer

BASE = ["model.max_new_tokens=1", "env.num_envs=4", "train.episodes_per_iteration=8",
        "algo.group_size=4", "env.eval_episodes=4", "algo.minibatch_size=8", "algo.lr=1e-2",
        "algo.ent_coef=0.05", "train.checkpoint_every=0", "train.log=[]"]


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    env_id = register_relay()
    return env_id, str(relay_model(tmp_path_factory.mktemp("relay_model")))


def make(relay, out, method, extra=()):
    env_id, model = relay
    preset = method.removesuffix("_shared")
    cfg = load_config(preset, overrides=[f"env.id={env_id}", f"model.name={model}",
                                         f"algo.method={method}", *BASE, *extra])
    return Trainer(cfg, out)


def weights(trainer):
    return {n: trainer.model.adapter_state(n) for n in trainer.model.adapters}


@pytest.mark.parametrize("method,adapters", [
    ("at_grpo", {"sender_0", "receiver_1"}),
    ("at_grpo_shared", {"policy"}),
    ("magrpo", {"sender_0", "receiver_1"}),
    ("magrpo_shared", {"policy"}),
])
def test_critic_free_presets_build_policies_only_and_train(relay, tmp_path, method, adapters):
    tr = make(relay, tmp_path, method)
    assert set(tr.model.adapters) == adapters and tr.critic_names == []
    assert set(tr.optimizers) == {f"policy/{a}" for a in adapters}
    before = weights(tr)
    m = tr.step()
    after = weights(tr)
    for name in adapters:  # the entropy bonus moves every adapter even without a reward signal
        assert any(not torch.equal(before[name][k], after[name][k]) for k in before[name]), name
    assert not any(k.startswith("critic/") for k in m)
    # 2 problems x 4 branches: the sender's 4 + the 4 continuations + the receiver's 4 per
    # problem (AT-GRPO), or 8 episodes of 2 turns (MAGRPO); one token each
    assert m["train/generated_tokens"] == (24.0 if method.startswith("at_grpo") else 16.0)
    assert m["group/groups"] == (4.0 if method.startswith("at_grpo") else 2.0)
    assert m["group/samples"] == 16.0 and m["group/singletons"] == 0.0
    assert m["train/episodes"] == (2.0 if method.startswith("at_grpo") else 8.0)


def test_resume_continues_bit_for_bit(relay, tmp_path):
    straight = make(relay, tmp_path / "a", "at_grpo")
    for _ in range(3):
        straight.step()
    first = make(relay, tmp_path / "b", "at_grpo")
    for _ in range(2):
        first.step()
    first.save()
    resumed = make(relay, tmp_path / "c", "at_grpo")
    assert resumed.load(tmp_path / "b") == 2
    resumed.step()
    for name, state in weights(straight).items():
        for k, v in state.items():
            assert torch.equal(weights(resumed)[name][k], v), (name, k)


@pytest.mark.parametrize("overrides,message", [
    (["algo.group_size=1"], "needs >= 2 samples"),
    (["algo.group_size=3"], "multiple of algo.group_size=3"),
    (["algo.level=token"], "no critic"),
])
def test_config_errors_name_the_field(relay, overrides, message):
    env_id, model = relay
    with pytest.raises(ConfigError, match=message):
        load_config("at_grpo", overrides=[f"env.id={env_id}", f"model.name={model}", *BASE, *overrides])


SMALL = ["model.max_new_tokens=8", "env.num_envs=2", "train.episodes_per_iteration=4",
         "algo.group_size=2", "env.eval_episodes=2", "train.log=[jsonl]"]


@pytest.mark.parametrize("module,bundle_method", [(at_grpo, "at-grpo"), (magrpo, "magrpo")])
def test_command_line_resume_and_eval_bundle(tmp_path, module, bundle_method):
    out = tmp_path / "run"
    args = ["--env", "arith-2agent", "--model", "tiny-random", "--out", str(out), "--no-progress"]
    assert module.main(args + ["train.iterations=1", *SMALL]) == 0
    assert module.main(["--resume", str(out), "--no-progress", "train.iterations=2"]) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "train/score" in r] == [1, 2]
    assert all(r["train/generated_tokens"] > 0 for r in rows if "train/score" in r)
    assert eval_cli.main([str(out), "--env", "arith-2agent", "--out", str(tmp_path / "b.json")]) == 0
    bundle = json.loads((tmp_path / "b.json").read_text())
    assert bundle["method"] == bundle_method and len(bundle["episodes"]) == 2


def test_shared_variant_runs_from_its_module_and_other_methods_are_refused(tmp_path, capsys):
    args = ["--env", "arith-2agent", "--model", "tiny-random", "--no-progress", "train.iterations=0"]
    assert at_grpo.main(args + ["--out", str(tmp_path / "s"), "algo.method=at_grpo_shared", *SMALL]) == 0
    assert at_grpo.main(args + ["--out", str(tmp_path / "m"), "algo.method=magrpo", *SMALL]) == 2
    assert "run python -m baselines.magrpo instead" in capsys.readouterr().err


def test_presets_normalise_advantages_as_their_sources():
    # AT-GRPO runs verl's GRPO (std on); CoMLRL 1.4.3's MAGRPO centres on the group mean and,
    # by default (advantage_normalization=True), divides by the group std too
    assert load_config("at_grpo").algo.scale_by_std is True
    assert load_config("magrpo").algo.scale_by_std is True
    assert load_config("magrpo", overrides=["algo.scale_by_std=false"]).algo.scale_by_std is False
