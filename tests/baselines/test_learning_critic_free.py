"""The learning bar of the critic-free methods: AT-GRPO lifts the relay team from chance to a
greedy evaluation >= 0.9 on CPU, on three seeds (model initialisation and training).

AT-GRPO's training score is read along the selected (best-of-K) branches, so it starts above
chance; the bar is the greedy evaluation, and the untrained team is checked on the mean reward
of all sampled branches (``group/reward_mean``), which is what a plain sampled team scores.
"""

import pytest

from baselines.core.config import load_config
from baselines.relay import RELAY_CONFIG, register_relay, relay_model
from baselines.trainer import Trainer

KEYS = "AB"
MAX_ITERATIONS = 40


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_at_grpo_learns_the_relay(tmp_path, seed):
    env_id = register_relay("relay-AB-2agent", keys=KEYS)
    model = relay_model(tmp_path / "model", keys=KEYS, seed=seed)
    cfg = load_config("at_grpo", overrides=[f"env.id={env_id}", f"model.name={model}",
                                            f"train.seed={seed}", *RELAY_CONFIG])
    trainer = Trainer(cfg, tmp_path / "run")
    scores, sampled = [], []
    for _ in range(MAX_ITERATIONS):
        metrics = trainer.step()
        scores.append(metrics["train/score"])
        sampled.append(metrics["group/reward_mean"])
        if len(scores) >= 3 and min(scores[-3:]) >= 0.9:
            break
    assert sampled[0] <= 0.6, f"the untrained team already relays the key: {sampled}"
    after = trainer.evaluate(greedy=True, prefix="after")["after/score"]
    assert after >= 0.9, f"AT-GRPO reached {after} (train scores {scores})"
