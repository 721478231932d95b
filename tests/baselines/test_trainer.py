"""The shared trainer: the three presets run, agent-by-agent rotation, KL, NaN checks, metrics.

Resuming (a run killed mid-iteration) is in test_failure_paths.py."""

import pytest
import torch

import marft_envs
from baselines.core.algos import NonFiniteError
from baselines.core.config import load_config
from baselines.trainer import Trainer
from baselines.relay import register_relay, relay_model

BASE = ["model.max_new_tokens=2", "env.num_envs=4", "train.episodes_per_iteration=6",
        "env.eval_episodes=4", "algo.minibatch_size=4", "algo.grad_accum=2", "algo.ppo_epochs=2",
        "algo.lr=1e-3", "algo.critic_lr=1e-3", "train.checkpoint_every=2", "train.log=[]"]


@pytest.fixture(scope="module")
def relay(tmp_path_factory):
    env_id = register_relay()
    return env_id, str(relay_model(tmp_path_factory.mktemp("relay_model")))


def make(relay, out, preset="marft", extra=()):
    env_id, model = relay
    cfg = load_config(preset, overrides=[f"env.id={env_id}", f"model.name={model}", *BASE, *extra])
    return Trainer(cfg, out)


def weights(trainer):
    return {n: trainer.model.adapter_state(n) for n in trainer.model.adapters}


class Recorder:
    """What one ``step()`` computed its metrics from; the trainer's own methods still run.

    ``scored``: the rollout and the tensors the learner's ``scoring_metrics`` received (copied before the
    advantages are whitened); ``update``: (adapter, turn keys, log-probs, mask) of every policy
    forward of the PPO update (the ones after scoring)."""

    def __init__(self, trainer):
        self.start()
        learner = trainer.learner
        forward, scoring = learner._forward_policy, learner.scoring_metrics

        def forward_and_record(adapter, samples):
            logp, ent, mask = forward(adapter, samples)
            if self.scored is not None:
                keys = [(s.episode, s.index) for s in samples]
                self.update.append((adapter, keys, logp.detach().cpu().double(), mask.cpu()))
            return logp, ent, mask

        def score_and_record(rollout, samples, old_logp, ref_logp, adv, values, returns):
            def copy(d):
                return {k: v.detach().cpu().double().clone() for k, v in d.items()}

            self.scored = {"rollout": rollout, "samples": samples, "old": copy(old_logp),
                           "ref": copy(ref_logp), "adv": copy(adv), "values": copy(values),
                           "returns": copy(returns)}
            return scoring(rollout, samples, old_logp, ref_logp, adv, values, returns)

        learner._forward_policy = forward_and_record
        learner.scoring_metrics = score_and_record

    def start(self):
        """Forget the last step (call before each step)."""
        self.scored, self.update = None, []


def k3(logp, other):
    """Schulman's k3 estimate of KL(p || q) per token sampled from p: r - log r - 1, r = q/p."""
    log_ratio = other - logp
    return log_ratio.exp() - log_ratio - 1.0


def expected_metrics(tr, rec):
    """The logged metrics, recomputed here from the recorded tensors with this test's formulas."""
    sc, out = rec.scored, {}
    for agent in tr.agents:
        keys = [(s.episode, s.index) for s in sc["samples"] if s.agent == agent]
        old = torch.cat([sc["old"][k] for k in keys])
        out[f"agent/{agent}/kl_ref"] = k3(old, torch.cat([sc["ref"][k] for k in keys])).mean().item()
        adv = torch.cat([sc["adv"][k] for k in keys])
        n = adv.numel()
        mean = adv.sum().item() / n
        out[f"agent/{agent}/adv_mean"] = mean
        out[f"agent/{agent}/adv_std"] = (((adv - mean) ** 2).sum().item() / (n - 1)) ** 0.5
    for c in tr.critic_names:
        keys = [(s.episode, s.index) for s in sc["samples"] if tr.method.critic_name(s.agent) == c]
        v = torch.cat([sc["values"][k] for k in keys])
        r = torch.cat([sc["returns"][k] for k in keys])
        var_r = r.var().item()  # Bessel-corrected, as the trainer documents
        constant = var_r <= 1e-12 * max(1.0, (r * r).mean().item())
        out[f"critic/{c}/explained_variance"] = 0.0 if constant else 1.0 - (r - v).var().item() / var_r
    per_adapter = {}  # adapter -> per-minibatch (kl to the reference, kl to the rollout policy)
    for adapter, keys, logp, mask in rec.update:
        now = torch.cat([row[m] for row, m in zip(logp, mask, strict=True)])
        ref = torch.cat([sc["ref"][k] for k in keys])
        old = torch.cat([sc["old"][k] for k in keys])
        per_adapter.setdefault(adapter, []).append((k3(now, ref).mean().item(), k3(old, now).mean().item()))
    for adapter, kls in per_adapter.items():  # each minibatch's value, averaged over minibatches
        out[f"agent/{adapter}/kl"] = sum(k for k, _ in kls) / len(kls)
        out[f"agent/{adapter}/kl_rollout"] = sum(k for _, k in kls) / len(kls)
    # the score re-graded: every episode's final output through the environment's own verifier
    env = marft_envs.make(tr.env_id)
    verifier, dataset = env.unwrapped.verifier, env.unwrapped.dataset
    eps = sc["rollout"].episodes
    out["train/score"] = sum(verifier.grade(e.final_output, dataset.by_id(e.task_id)).score for e in eps) / len(eps)
    env.close()
    return out


@pytest.mark.parametrize("preset,adapters", [
    ("marft", {"sender_0", "receiver_1", "critic"}),
    ("marft_shared", {"policy", "critic"}),
    ("ippo", {"sender_0", "receiver_1", "critic_sender_0", "critic_receiver_1"}),
])
def test_presets_build_their_adapters_and_train(relay, tmp_path, preset, adapters):
    # the entropy bonus gives every policy a gradient even when no episode was rewarded
    tr = make(relay, tmp_path, preset, ["algo.level=token", "algo.kl_coef=0.1", "algo.ent_coef=0.01"])
    assert set(tr.model.adapters) == adapters
    assert set(tr.optimizers) == {f"policy/{a}" for a in tr.policy_names} | {f"critic/{c}" for c in tr.critic_names}
    with torch.no_grad():  # a non-zero value, so every critic has a value error to learn from
        for head in tr.critics.heads.values():
            head.linear.bias.fill_(0.5)
    before = weights(tr)
    rec = Recorder(tr)
    m = tr.step()
    after = weights(tr)
    for name in adapters:  # every policy adapter and critic moved
        assert any(not torch.equal(before[name][k], after[name][k]) for k in before[name]), name
    # KL (k3) to the reference and to the rollout policy, advantage mean/std, explained variance
    # and the score: what the logged tensors give by this test's own formulas
    expected = expected_metrics(tr, rec)
    assert {k for k in expected if k.endswith("/kl")} == {f"agent/{a}/kl" for a in tr.policy_names}
    for key, value in expected.items():
        assert m[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    # the first rollout's policy is the reference and its values constant (kl_ref and explained
    # variance 0): the second step, after the update moved both, has non-trivial ones too
    rec.start()
    m2 = tr.step()
    for key, value in expected_metrics(tr, rec).items():
        assert m2[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    assert all(m2[f"agent/{agent}/kl_ref"] > 0.0 for agent in tr.agents)
    for a in tr.policy_names:
        assert f"agent/{a}/entropy" in m
        # grad_accum=2: grad_norm comes only with the minibatch that ends an accumulation
        assert m[f"agent/{a}/grad_norm"] > 0.0
        assert 0.0 <= m[f"agent/{a}/clipfrac"] <= 1.0
    for agent in tr.agents:  # what each agent did, whatever adapter plays it
        assert 1.0 <= m[f"agent/{agent}/response_tokens"] <= 2.0  # model.max_new_tokens=2
        assert 0.0 <= m[f"agent/{agent}/truncated_frac"] <= 1.0
    # every agent acts once in each of the 6 one-round episodes: the rollout's sampled tokens
    sampled = sum(m[f"agent/{agent}/response_tokens"] * 6 for agent in tr.agents)
    assert m["train/generated_tokens"] == pytest.approx(sampled)
    assert ("agent/sender_0/value_change" in m) == (preset != "ippo")  # centralized critic only
    for c in tr.critic_names:
        assert f"critic/{c}/value_loss" in m and m[f"critic/{c}/grad_norm"] > 0.0
    assert m["train/infra_errors"] == 0.0 and m["train/episodes"] == 6.0
    assert 0.0 <= m["time/other_fraction"] <= 1.0


def test_agent_by_agent_trains_one_agent_at_a_time(relay, tmp_path):
    tr = make(relay, tmp_path, "marft", ["algo.agent_by_agent=true", "algo.rotate_every=2", "algo.ent_coef=0.01"])
    assert [tr.learner.agents_to_train(i) for i in range(5)] == [["sender_0"]] * 2 + [["receiver_1"]] * 2 + [["sender_0"]]
    before = weights(tr)
    tr.step()
    after = weights(tr)
    changed = {n for n in before if any(not torch.equal(before[n][k], after[n][k]) for k in before[n])}
    assert changed == {"sender_0", "critic"}


def test_nan_loss_stops_with_a_clear_message(relay, tmp_path):
    tr = make(relay, tmp_path)
    with torch.no_grad():
        tr.critics.heads["critic"].linear.bias.fill_(float("nan"))
    with pytest.raises(NonFiniteError, match="not finite"):
        tr.step()


def test_critic_on_its_own_base_copy_trains_and_resumes(relay, tmp_path):
    extra = ["model.critic_shares_base=false", "train.iterations=2"]
    tr = make(relay, tmp_path, "marft", extra)
    assert tr.critic_model is not tr.model
    assert tr.model.adapters == ["sender_0", "receiver_1"] and tr.critic_model.adapters == ["critic"]

    def tensors(m):
        return {p.data_ptr() for p in m.peft.get_base_model().parameters()}

    assert not tensors(tr.model) & tensors(tr.critic_model)  # two bases, no shared storage
    with torch.no_grad():
        tr.critics.heads["critic"].linear.bias.fill_(0.5)
    critic_before = tr.critic_model.adapter_state("critic")
    tr.train()
    critic_after = tr.critic_model.adapter_state("critic")
    assert any(not torch.equal(critic_before[k], critic_after[k]) for k in critic_before)
    step = max((tmp_path / "checkpoints").glob("step_*"))
    assert (step / "peft").is_dir() and (step / "peft_critic").is_dir()  # both reusable peft folders

    resumed = make(relay, tmp_path, "marft", extra)
    assert resumed.load(tmp_path) == 2
    for k, v in critic_after.items():
        assert torch.equal(resumed.critic_model.adapter_state("critic")[k], v)
    for name, state in weights(tr).items():
        for k, v in state.items():
            assert torch.equal(weights(resumed)[name][k], v), (name, k)


def test_reference_pass_runs_on_its_schedule_only(relay, tmp_path):
    """kl_coef = 0: the reference pass (only for the logged kl_ref) runs at steps N, 2N, ...
    (N = kl_ref_every, as eval_every), never with 0; kl_coef > 0 needs it every iteration."""
    tr = make(relay, tmp_path / "a", extra=["algo.kl_ref_every=2"])
    assert [tr.learner.needs_reference(i) for i in range(4)] == [False, True, False, True]
    references = []
    score = tr.model.reference  # the context every reference forward enters

    def counting_reference():
        references.append(tr.iteration)
        return score()

    tr.model.reference = counting_reference
    logged = [any(k.endswith("/kl_ref") for k in tr.step()) for _ in range(4)]
    assert logged == [False, True, False, True] and sorted(set(references)) == [1, 3]
    assert not any(make(relay, tmp_path / "b", extra=["algo.kl_ref_every=0"]).learner.needs_reference(i)
                   for i in range(4))
    with_kl = make(relay, tmp_path / "c", extra=["algo.kl_ref_every=0", "algo.kl_coef=0.1"])
    assert all(with_kl.learner.needs_reference(i) for i in range(4))


def test_skipping_the_reference_pass_leaves_training_unchanged(relay, tmp_path):
    """The pass only logs kl_ref: it draws no random numbers and changes no weight or metric."""
    runs = []
    for every in (0, 1):
        tr = make(relay, tmp_path / str(every),
                  extra=[f"algo.kl_ref_every={every}", "model.lora_dropout=0.1"])
        metrics = [tr.step() for _ in range(2)]
        runs.append((weights(tr), [{k: v for k, v in m.items()
                                    if not k.startswith("time/") and not k.endswith("/kl_ref")}
                                   for m in metrics]))
    (w0, m0), (w1, m1) = runs
    assert m0 == m1
    assert all(torch.equal(w0[n][k], w1[n][k]) for n in w0 for k in w0[n])


class RecordingGenerator:
    """Wraps a generator and records how many conversations each call got."""

    def __init__(self, inner):
        self.inner, self.sizes = inner, []

    def generate(self, adapter, conversations, sampling):
        self.sizes.append(len(conversations))
        return self.inner.generate(adapter, conversations, sampling)


def test_wide_evaluation_plays_the_same_plan_as_narrow(relay, tmp_path):
    """env.eval_num_envs only changes how many episodes step (and generate) together: the same
    (seed, task) plan is played and, greedy, gives the same transcripts."""
    narrow = make(relay, tmp_path / "n", extra=["env.num_envs=1"])
    wide = make(relay, tmp_path / "w", extra=["env.num_envs=1", "env.eval_num_envs=4"])
    assert wide.eval_generator.batch_size == 4 and narrow.eval_generator is narrow.generator
    played = []
    for t in (narrow, wide):
        t.generator = RecordingGenerator(t.generator)  # a generator assigned later is used
        episodes = t.play_eval()
        played.append(sorted((e.task_id, [turn.action for turn in e.turns]) for e in episodes))
    assert played[0] == played[1] and len(played[0]) == len(narrow.eval_set().plan) == 4
    assert set(narrow.generator.sizes) == {1} and set(wide.generator.sizes) == {4}


@pytest.mark.parametrize("override,message", [
    ("env.eval_num_envs=0", "env.eval_num_envs must be >= 1"),
    ("algo.kl_ref_every=-1", "algo.kl_ref_every must be >= 0"),
])
def test_evaluation_width_and_reference_schedule_are_validated(relay, tmp_path, override, message):
    from baselines.core.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        make(relay, tmp_path, extra=[override])
