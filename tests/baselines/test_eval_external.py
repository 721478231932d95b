"""``baselines.eval`` grades models trained elsewhere: a causal-LM directory, a PEFT LoRA adapter
directory, one model per seat; the bundles pass the leaderboard's re-grade."""

import json
import re
import shutil

import pytest
import torch

from baselines import eval as eval_cli
from baselines import marft
from baselines.core.models import (
    CAUSAL_LM,
    PEFT_ADAPTER,
    ModelNotFoundError,
    build_char_tokenizer,
    build_tiny_model,
    inspect_model_dir,
    load_pretrained,
)
from leaderboard.regrade import regrade
from leaderboard.schema import read_bundle

ENV = "arith-2agent"  # procedural: no data needed
EVAL = 3
# peft (in this file's own get_peft_model and PeftModel calls) reads a deprecated transformers API
pytestmark = pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing:FutureWarning")
SMALL = [
    "model.max_new_tokens=8", "env.num_envs=2", f"env.eval_episodes={EVAL}", "train.device=cpu",
]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """A full model saved as a plain causal-LM directory (what a full fine-tune saves), a LoRA
    adapter on it saved by peft (naming it as its base), and the same adapter naming no base."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("external")
    tok = build_char_tokenizer()
    # hidden 32: unlike the built-in tiny-random (64), so an adapter on the wrong base is caught
    model = build_tiny_model(tok, hidden_size=32, num_heads=2, seed=3)
    full = root / "sft-model"
    model.save_pretrained(full)
    tok.save_pretrained(full)

    base = AutoModelForCausalLM.from_pretrained(full)  # base_model_name_or_path = full
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                      task_type="CAUSAL_LM")
    tuned = get_peft_model(base, lora)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # a strong, seeded update (peft's default B is 0: no change at all)
        for name, p in tuned.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
    adapter = root / "lora-adapter"
    tuned.save_pretrained(adapter)

    bare = root / "lora-no-base"
    shutil.copytree(adapter, bare)
    meta = json.loads((bare / "adapter_config.json").read_text())
    meta["base_model_name_or_path"] = None
    (bare / "adapter_config.json").write_text(json.dumps(meta))
    return {"full": full, "adapter": adapter, "bare": bare, "root": root}


def evaluate(args, out):
    code = eval_cli.main([*args, "--env", ENV, "--out", str(out), *SMALL])
    assert code == 0
    bundle = read_bundle(out)
    grade = regrade(bundle)  # raises BundleRejected when coverage or transcripts are wrong
    assert grade.n_tasks == EVAL and len(bundle.episodes) == EVAL
    assert abs(grade.score - bundle.claimed_score) < 1e-9
    return bundle


@pytest.fixture(scope="module")
def full_bundle(dirs):
    return evaluate([str(dirs["full"])], dirs["root"] / "full" / "bundle.json")


def test_a_causal_lm_directory_is_graded_into_a_bundle_the_leaderboard_accepts(dirs, full_bundle):
    assert full_bundle.method == "other" and full_bundle.model == "sft-model"
    assert full_bundle.env_id == "arith-2agent-v1"
    models = full_bundle.config["models"]
    assert set(models) == {"reasoner_0", "actor_1"}
    assert all(m == {"path": str(dirs["full"].resolve()), "kind": CAUSAL_LM, "base": None}
               for m in models.values())
    assert "algo" not in full_bundle.config  # none of our algorithms' settings applied
    assert full_bundle.config["model"]["max_new_tokens"] == 8


def test_a_lora_adapter_directory_is_merged_into_the_base_it_names(dirs, full_bundle, tmp_path):
    bundle = evaluate([str(dirs["adapter"]), "--method", "magrpo", "--model-name", "my-team"],
                      tmp_path / "b.json")
    assert bundle.method == "magrpo" and bundle.model == "my-team"
    seat = bundle.config["models"]["reasoner_0"]
    assert seat == {"path": str(dirs["adapter"].resolve()), "kind": PEFT_ADAPTER,
                    "base": str(dirs["full"])}
    # the adapter was applied: the first agent's replies differ from the base model's
    first = {e.task_id: e.turns[0].action for e in bundle.episodes}
    base_first = {e.task_id: e.turns[0].action for e in full_bundle.episodes}
    assert first != base_first


def test_the_merged_adapter_computes_what_peft_computes(dirs):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    found = inspect_model_dir(dirs["adapter"])
    assert found.kind == PEFT_ADAPTER and found.base == str(dirs["full"])
    merged, tok = load_pretrained(found)
    ids = torch.tensor([tok("12 + 30 =")["input_ids"]])
    base = AutoModelForCausalLM.from_pretrained(dirs["full"]).eval()
    with torch.no_grad():
        plain = base(ids).logits
        peft = PeftModel.from_pretrained(base, str(dirs["adapter"])).eval()(ids).logits
        got = merged(ids).logits
    assert torch.allclose(got, peft, atol=1e-5) and not torch.allclose(got, plain, atol=1e-3)


def test_a_local_base_is_recorded_by_its_absolute_path(dirs, monkeypatch):
    """``--base sft-model/`` relative to the working directory: the bundle names the base so it
    can be found again from anywhere, and the label keeps the directory's name."""
    monkeypatch.chdir(dirs["root"])
    found = inspect_model_dir("lora-no-base", base="sft-model/")
    assert found.base == str(dirs["full"].resolve())
    assert found.describe()["base"] == str(dirs["full"].resolve())
    assert eval_cli.model_label({"reasoner_0": found}) == "sft-model + LoRA lora-no-base"
    assert inspect_model_dir("lora-no-base", base="tiny-random").base == "tiny-random"


def test_each_seat_plays_its_own_model_directory(dirs, full_bundle, tmp_path):
    bundle = evaluate(["--agent-model", f"reasoner_0={dirs['full']}",
                       "--agent-model", f"actor_1={dirs['bare']}", "--base", str(dirs["full"])],
                      tmp_path / "b.json")
    models = bundle.config["models"]
    assert models["reasoner_0"]["kind"] == CAUSAL_LM
    assert models["actor_1"] == {"path": str(dirs["bare"].resolve()), "kind": PEFT_ADAPTER,
                                 "base": str(dirs["full"])}
    assert bundle.model == "reasoner_0=sft-model, actor_1=sft-model + LoRA lora-no-base"
    # reasoner_0 acts first and sees nobody: its replies are the full model's, as when it
    # played every seat
    first = {e.task_id: e.turns[0].action for e in bundle.episodes}
    assert first == {e.task_id: e.turns[0].action for e in full_bundle.episodes}


def _junk(root):
    junk = root / "junk"
    junk.mkdir(exist_ok=True)
    (junk / "notes.txt").write_text("hello")
    (junk / "weights.pt").write_bytes(b"\0")
    return junk


def _no_tokenizer(root):
    where = root / "no-tokenizer"
    if not where.exists():
        shutil.copytree(root / "sft-model", where)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            (where / name).unlink(missing_ok=True)
    return where


@pytest.mark.parametrize("args,messages", [
    (lambda d: [str(_junk(d["root"]))], ["notes.txt", "weights.pt", "config.json",
                                          "adapter_config.json", "config.yaml"]),
    (lambda d: [str(d["root"])], ["holds model folders", "sft-model"]),
    (lambda d: [str(d["root"] / "missing")], ["does not exist"]),
    (lambda d: ["my-org/my-sft"], ["does not exist", "hf download my-org/my-sft --local-dir"]),
    (lambda d: [str(_no_tokenizer(d["root"]))], ["no tokenizer", "tokenizer.save_pretrained"]),
    (lambda d: [str(d["bare"])], ["names no base model", "--base"]),
    (lambda d: [str(d["adapter"]), "--base", "tiny-random"], ["does not fit the base", "--base"]),
    (lambda d: [str(d["full"]), "--base", "tiny-random"], ["--base", "none was given"]),
    (lambda d: ["--agent-model", f"verifier_2={d['full']}"],
     ["verifier_2", "reasoner_0", "actor_1"]),
    (lambda d: ["--agent-model", f"reasoner_0={d['full']}"], ["no model for ['actor_1']"]),
    (lambda d: ["--agent-model", "reasoner_0"], ["SEAT=DIR"]),
    (lambda d: [str(d["full"]), "--method", "sft"], ["not a leaderboard method", "other"]),
    (lambda d: [str(d["full"]), "--model", "tiny-random"], ["--model-name"]),
])
def test_what_is_not_a_model_directory_is_refused_naming_what_was_found(args, messages, dirs,
                                                                        tmp_path, capsys):
    code = eval_cli.main([*args(dirs), "--env", ENV, "--out", str(tmp_path / "b.json"), *SMALL])
    assert code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("error:")
    for message in messages:
        assert message in err
    assert not (tmp_path / "b.json").exists()


def test_a_model_directory_needs_an_environment(dirs, capsys):
    assert eval_cli.main([str(dirs["full"])]) == 2
    assert "--env ID is required" in capsys.readouterr().err


def test_a_run_directory_cannot_be_one_seats_model(dirs, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("env: {id: arith-2agent}\n")
    code = eval_cli.main(["--agent-model", f"reasoner_0={run}", "--agent-model",
                          f"actor_1={dirs['full']}", "--env", ENV, *SMALL])
    assert code == 2
    assert "training run directory" in capsys.readouterr().err


def test_our_own_adapters_graded_as_adapter_directories_play_as_our_evaluation(tmp_path):
    """One code path: a run's saved peft adapters, given one per seat, play exactly the
    transcripts ``baselines.eval RUN`` plays from its checkpoint."""
    run = tmp_path / "run"
    assert marft.main(["--env", ENV, "--model", "tiny-random", "--out", str(run), "--no-progress",
                       "train.iterations=1", "algo.lr=0.1", "env.num_envs=2",
                       "train.episodes_per_iteration=2", "model.max_new_tokens=8",
                       "env.eval_episodes=2", "train.log=[]"]) == 0
    ours = evaluate([str(run)], tmp_path / "ours.json")
    peft = next((run / "checkpoints").iterdir()) / "peft"
    theirs = evaluate(["--agent-model", f"reasoner_0={peft / 'reasoner_0'}",
                       "--agent-model", f"actor_1={peft / 'actor_1'}", "--base", "tiny-random"],
                      tmp_path / "theirs.json")
    def played(bundle):
        return {e.task_id: [t.action for t in e.turns] for e in bundle.episodes}
    assert played(theirs) == played(ours) and theirs.claimed_score == ours.claimed_score
    assert ours.method == "marft" and theirs.method == "other"


def _headless(root, name, *, tie, arch=None, bert=False):
    """A base model saved without its language-model head (LlamaModel, BertModel), with a
    tokenizer; ``arch`` rewrites the architectures its config.json names."""
    from transformers import BertConfig, BertModel, LlamaConfig, LlamaModel

    where = root / name
    if where.exists():
        return where
    tok = build_char_tokenizer()
    shape = dict(vocab_size=len(tok) + 8, hidden_size=16, intermediate_size=32,
                 num_hidden_layers=1, num_attention_heads=2)
    if bert:
        model = BertModel(BertConfig(**shape))
    else:
        model = LlamaModel(LlamaConfig(**shape, num_key_value_heads=2, tie_word_embeddings=tie))
    model.save_pretrained(where)
    tok.save_pretrained(where)
    if arch is not None:
        meta = json.loads((where / "config.json").read_text())
        meta["architectures"] = [arch]
        (where / "config.json").write_text(json.dumps(meta))
    return where


@pytest.mark.parametrize("make, messages", [
    (lambda root: _headless(root, "llama-base", tie=False),
     ["not a causal language model", "['LlamaModel']", "*ForCausalLM"]),
    (lambda root: _headless(root, "bert", tie=False, bert=True),
     ["not a causal language model", "['BertModel']"]),
    # the config claims a causal LM, the weights have no head: named, not randomly initialised
    (lambda root: _headless(root, "llama-no-head", tie=False, arch="LlamaForCausalLM"),
     ["lacks 1 weight(s)", "lm_head.weight", "randomly initialised"]),
])
def test_a_model_without_its_head_is_refused_before_a_bundle_is_written(make, messages,
                                                                        tmp_path, capsys):
    where = make(tmp_path)
    code = eval_cli.main([str(where), "--env", ENV, "--out", str(tmp_path / "b.json"), *SMALL])
    assert code == 2
    err = capsys.readouterr().err
    for message in messages:
        assert message in err
    assert not (tmp_path / "b.json").exists()
    with pytest.raises(ModelNotFoundError, match=re.escape(messages[-1])):
        load_pretrained(inspect_model_dir(where))


def test_a_head_tied_to_the_embeddings_is_not_missing(tmp_path):
    """``tie_word_embeddings``: lm_head is embed_tokens, whether or not the file holds it."""
    where = _headless(tmp_path, "llama-tied", tie=True, arch="LlamaForCausalLM")
    model, _ = load_pretrained(inspect_model_dir(where))
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


def test_a_missing_path_under_a_local_folder_gets_no_hub_hint(tmp_path, monkeypatch, capsys):
    """``runs/marft-1`` with ``runs/`` here is a mistyped local path, not a Hub id."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert eval_cli.main(["runs/marft-1", "--env", ENV, *SMALL]) == 2
    err = capsys.readouterr().err
    assert "'runs/marft-1' does not exist" in err and "Hub" not in err and "hf download" not in err
    assert eval_cli.main(["my-org/my-sft", "--env", ENV, *SMALL]) == 2
    assert "if this is a Hub id, download it first" in capsys.readouterr().err
