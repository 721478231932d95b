"""The learning bar of the critic-free methods: AT-GRPO lifts the relay team from chance to a
greedy evaluation >= 0.9 on CPU, on three seeds (model initialisation and training).

AT-GRPO's training score is read along the selected (best-of-K) branches, so it starts above
chance; the bar is the greedy evaluation, and the untrained team is checked both greedily and on
the mean reward of all sampled branches (``group/reward_mean``, what a plain sampled team
scores). The relay with keys ``AB`` has two tasks and greedy decoding is deterministic, so a
greedy evaluation of ``env.eval_episodes=2`` (both tasks) scores what 32 episodes would; it is
cheap enough to run after every iteration, and the run stops at the first one >= 0.9.
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
    overrides = [f"env.id={env_id}", f"model.name={model}", f"train.seed={seed}", *RELAY_CONFIG]
    cfg = load_config("at_grpo", overrides=[*overrides, f"env.eval_episodes={len(KEYS)}"])
    trainer = Trainer(cfg, tmp_path / "run")
    before = trainer.evaluate(greedy=True)["eval/score"]
    assert before <= 0.6, f"the untrained team already relays the key greedily: {before}"
    greedy, sampled = [], []
    for _ in range(MAX_ITERATIONS):
        sampled.append(trainer.step()["group/reward_mean"])
        greedy.append(trainer.evaluate(greedy=True)["eval/score"])
        if greedy[-1] >= 0.9:
            break
    assert sampled[0] <= 0.6, f"the untrained team already relays the key: {sampled}"
    assert greedy[-1] >= 0.9, f"AT-GRPO reached {greedy[-1]} (greedy scores {greedy})"
