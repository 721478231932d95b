"""The trainer on the paths real runs take: infrastructure errors, NaN, ragged and truncated
episodes, a run killed mid-iteration, and bad input (unknown env, missing model, typos)."""

import pytest
import torch

import marft_envs
from baselines import marft
from baselines.core.algos import NonFiniteError
from baselines.core.checkpoint import latest_checkpoint
from baselines.core.config import ConfigError, load_config
from baselines.core.models import ModelNotFoundError
from baselines.core.rollout import InfraErrorRollout
from baselines.trainer import Trainer, eval_metrics
from baselines.relay import RELAY_WORKFLOW, register_relay, relay_model
from marft_envs import Verdict

BASE = [
    "model.max_new_tokens=2",
    "env.num_envs=4",
    "train.episodes_per_iteration=8",
    "env.eval_episodes=0",
    "algo.minibatch_size=4",
    "algo.grad_accum=2",
    "algo.lr=1e-3",
    "algo.critic_lr=1e-3",
    "train.checkpoint_every=0",
    "train.log=[]",
]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(relay_model(tmp_path_factory.mktemp("relay_model"), keys="AB"))


def trainer(model, out, env_id, preset="marft", extra=()):
    cfg = load_config(preset, overrides=[f"env.id={env_id}", f"model.name={model}", *BASE, *extra])
    return Trainer(cfg, out)


def weights(tr):
    return {
        n: {k: v.clone() for k, v in tr.model.adapter_state(n).items()} for n in tr.model.adapters
    }


def same(a, b):
    return all(torch.equal(a[n][k], b[n][k]) for n in a for k in a[n])


# ---------------------------------------------------------------- infrastructure errors


@pytest.mark.parametrize("preset", ["marft", "ippo"])
def test_infra_errors_none_some_all(model, tmp_path, infra_env, preset):
    none = trainer(model, tmp_path / "none", infra_env(["A", "B"], "infra-none-2agent"), preset)
    m = none.step()
    assert m["train/infra_errors"] == 0 and m["train/episodes"] == 8

    some = trainer(
        model,
        tmp_path / "some",
        infra_env(["A", ""], "infra-half-2agent"),
        preset,
        ["algo.ent_coef=0.01"],
    )
    before = weights(some)
    m = some.step()  # used to raise KeyError in compute_advantages
    assert m["train/infra_errors"] > 0 and m["train/infra_errors"] + m["train/episodes"] == 8
    assert m["train/infra_error_rate"] == m["train/infra_errors"] / 8
    assert not same(before, weights(some))  # the gradable episodes still trained the team

    every = trainer(model, tmp_path / "all", infra_env(["", ""], "infra-every-2agent"), preset)
    before = weights(every)
    with pytest.raises(InfraErrorRollout, match="all 8 episodes ended in an infrastructure error"):
        every.step()
    assert same(before, weights(every)) and every.iteration == 0  # no empty update


def test_evaluation_counts_infra_errors_and_scores_only_gradable_episodes(
    model, tmp_path, infra_env
):
    tr = trainer(
        model, tmp_path, infra_env(["A", ""], "infra-half-2agent"), extra=["env.eval_episodes=2"]
    )
    eps = tr.play_eval()
    assert [e.infra_error for e in sorted(eps, key=lambda e: e.task_id)] == [False, True]
    m = tr.evaluate()
    graded = next(e for e in eps if not e.infra_error)
    assert m["eval/infra_errors"] == 1 and m["eval/episodes"] == 2
    assert m["eval/score"] == graded.score  # the infra-error episode is not a wrong answer
    all_infra = eval_metrics([e for e in eps if e.infra_error], tr.agents)
    assert (
        all_infra["eval/infra_errors"] == 1 and all_infra["eval/score"] != all_infra["eval/score"]
    )  # NaN


def test_eval_cli_refuses_when_nothing_could_be_graded(model, tmp_path, infra_env, capsys):
    from baselines import eval as eval_cli

    env_id = infra_env(["", ""], "infra-every-2agent")
    code = eval_cli.main(
        [
            "--model",
            model,
            "--env",
            env_id,
            "--out",
            str(tmp_path / "b.json"),
            "env.eval_episodes=2",
            "model.max_new_tokens=1",
            "env.num_envs=2",
        ]
    )
    assert code == 1 and not (tmp_path / "b.json").exists()
    assert "all 2 evaluation episodes" in capsys.readouterr().err


# ---------------------------------------------------------------- NaN, kill, resume


def test_nan_stops_the_run_and_the_last_checkpoint_is_intact(model, tmp_path):
    env_id = register_relay("relay-AB-2agent", keys="AB")
    tr = trainer(model, tmp_path, env_id, extra=["train.iterations=3"])
    tr.step()
    tr.save()
    saved = weights(tr)
    with torch.no_grad():
        tr.critics.heads["critic"].linear.bias.fill_(float("nan"))
    with pytest.raises(NonFiniteError, match="is not finite"):
        tr.train()
    assert latest_checkpoint(tmp_path).name == "step_00000001"
    fresh = trainer(model, tmp_path, env_id, extra=["train.iterations=3"])
    assert fresh.load(tmp_path) == 1 and same(saved, weights(fresh))
    assert torch.isfinite(fresh.critics.heads["critic"].linear.bias).all()


class Killed(BaseException):
    """Stands for the process being killed (not an Exception: nothing may catch it)."""


class DyingGenerator:
    """The real generator, killed at its ``die_at``-th call (mid-rollout of some iteration)."""

    def __init__(self, inner, die_at):
        self.inner, self.die_at, self.calls = inner, die_at, 0

    def generate(self, adapter, conversations, sampling):
        self.calls += 1
        if self.calls == self.die_at:
            raise Killed
        return self.inner.generate(adapter, conversations, sampling)


class CallsPerStep:
    """A metrics logger that records how many generate calls were made by each step."""

    def __init__(self, counter):
        self.counter, self.calls = counter, {}

    def log(self, step, metrics):
        self.calls[step] = self.counter.calls

    def close(self):
        pass


def test_a_run_killed_mid_iteration_resumes_bit_for_bit(model, tmp_path):
    # horizon 2 with verdict feedback: ragged episodes, so the replayed rollout is non-trivial;
    # dropout: the restored RNG state must replay it too
    env_id = register_relay("relay-AB-2agent", keys="AB")
    extra = [
        "train.iterations=3",
        "train.checkpoint_every=1",
        "model.lora_dropout=0.1",
        "env.overrides={horizon: 2, feedback: verdict}",
        "algo.ent_coef=0.01",
        "train.episodes_per_iteration=6",
    ]
    full = trainer(model, tmp_path / "full", env_id, extra=extra)
    counter = full.generator = DyingGenerator(full.generator, die_at=0)
    full.logger = CallsPerStep(counter)
    full.train()
    calls = full.logger.calls  # generate calls made by the end of each iteration
    killed = trainer(model, tmp_path / "killed", env_id, extra=extra)
    killed.generator = DyingGenerator(killed.generator, die_at=(calls[1] + calls[2]) // 2 + 1)
    with pytest.raises(Killed):  # in the middle of iteration 2's rollout
        killed.train()
    assert killed.iteration == 1 and latest_checkpoint(tmp_path / "killed").name == "step_00000001"
    del killed
    resumed = trainer(model, tmp_path / "killed", env_id, extra=extra)
    assert resumed.load(tmp_path / "killed") == 1
    resumed.train()
    assert same(weights(full), weights(resumed))
    assert torch.equal(
        full.critics.heads["critic"].linear.weight, resumed.critics.heads["critic"].linear.weight
    )

    def learning(history):
        return [{k: v for k, v in h.items() if not k.startswith("time/")} for h in history]

    assert learning(full.history) == learning(resumed.history) and len(resumed.history) == 3


# ---------------------------------------------------------------- ragged and truncated episodes


@pytest.mark.parametrize(
    "preset,level", [("marft", "action"), ("marft", "token"), ("ippo", "action")]
)
def test_ragged_episodes_horizon_3_with_verdict_feedback(model, tmp_path, preset, level):
    env_id = register_relay("relay-AB-2agent", keys="AB")
    tr = trainer(
        model,
        tmp_path,
        env_id,
        preset,
        [
            "env.overrides={horizon: 3, feedback: verdict}",
            f"algo.level={level}",
            "train.episodes_per_iteration=12",
        ],
    )
    m = tr.step()
    assert 1.0 < m["train/rounds_per_episode"] < 3.0  # some solved in round 1, some later or never
    assert m["train/truncated_episodes"] == 0.0
    assert all(f"critic/{c}/value_loss" in m for c in tr.critic_names)


@pytest.mark.parametrize("preset", ["marft", "ippo"])
def test_truncated_episodes_bootstrap_from_the_critic(model, tmp_path, preset):
    # max_turns=3 cuts every unsolved episode mid-round 2: truncated, so it bootstraps
    env_id = register_relay("relay-AB-2agent", keys="AB")
    tr = trainer(
        model,
        tmp_path,
        env_id,
        preset,
        ["env.overrides={horizon: 3, feedback: verdict, max_turns: 3}"],
    )
    with torch.no_grad():  # a critic that values every state at 0.25
        for head in tr.critics.heads.values():
            head.linear.bias.fill_(0.25)
    m = tr.step()
    assert 0.0 < m["train/truncated_episodes"] < 1.0
    assert m["train/rounds_per_episode"] <= 2.0


# ---------------------------------------------------------------- bad input


def test_trainer_validates_its_config(model, tmp_path):
    cfg = load_config("marft", overrides=["env.id=arith-2agent", f"model.name={model}", *BASE])
    cfg.algo.gamma = 2.0  # set after load_config, as a script building a Config would
    with pytest.raises(ConfigError, match=r"algo.gamma must be in \[0, 1\]"):
        Trainer(cfg, tmp_path)


def test_unknown_env_missing_model_and_typos_are_clear_errors(model, tmp_path):
    cfg = load_config("marft", overrides=["env.id=no-such-env", f"model.name={model}", *BASE])
    with pytest.raises(ConfigError, match="no-such-env"):
        Trainer(cfg, tmp_path)
    cfg = load_config(
        "marft", overrides=["env.id=arith-2agent", "model.name=/no/such/model", *BASE]
    )
    with pytest.raises(ModelNotFoundError, match="'/no/such/model' not found"):
        Trainer(cfg, tmp_path)
    with pytest.raises(ConfigError, match="unknown config key 'algo.lrr'; did you mean algo.lr,"):
        load_config("marft", overrides=["algo.lrr=1e-4"])
    with pytest.raises(ConfigError, match="env.num_envs"):
        load_config("marft", overrides=["env.num_envs=many"])
    # a mistyped environment override is a usage error too (the CLI prints one line, exit 2)
    cfg = load_config("marft", overrides=["env.id=arith-2agent", f"model.name={model}", *BASE,
                                          "env.overrides.horizn=3"])
    with pytest.raises(ConfigError, match=r"env.overrides: .*unknown override\(s\) \['horizn'\]"):
        Trainer(cfg, tmp_path)
    assert marft.main(["--env", "arith-2agent", "--model", model, "--out", str(tmp_path),
                       "env.overrides.horizn=3"]) == 2


class BuggyVerifier:
    """A verifier with a bug: it raises instead of returning a verdict."""

    name = "buggy"

    def grade(self, response, task) -> Verdict:
        raise ValueError("internal bug: shapes (3,) and (4,) do not match")

    def feedback(self, response, task, verdict, mode) -> str:
        return ""


def test_cli_keeps_the_traceback_of_an_error_during_training(model, tmp_path, capsys):
    from baselines.relay import relay_dataset

    env_id = "buggy-relay-2agent"
    if env_id not in marft_envs.registry:
        marft_envs.register(
            env_id,
            "marft_envs.flexmg:FlexMGEnv",
            kwargs={
                "dataset": relay_dataset("AB"),
                "workflow": RELAY_WORKFLOW,
                "verifier": BuggyVerifier(),
            },
        )
    args = [
        "--env",
        env_id,
        "--model",
        model,
        "--out",
        str(tmp_path),
        "--no-progress",
        *BASE,
        "train.iterations=1",
    ]
    with pytest.raises(ValueError, match="internal bug"):  # not "error: ..." and exit status 2
        marft.main(args)
    # a usage error still gets one line and exit status 2
    fresh = str(tmp_path / "usage")  # the first run's --out exists now, and is refused as such
    assert marft.main(["--env", env_id, "--model", "/no/such/model", "--out", fresh]) == 2
    assert "error: model '/no/such/model' not found" in capsys.readouterr().err
