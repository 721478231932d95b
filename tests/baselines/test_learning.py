"""The learning bar: MARFT lifts a credit game's team from chance to >= 0.9 on CPU, on 3 seeds.

``credit-chain-2agent`` (marft_envs.credit): only the sender sees the key and only the receiver
is graded, so the team can only win if credit flows through the predecessor channel (the
sender's message). The tiny model's vocabulary is the two key letters plus four special
tokens; a receiver that ignores the sender can at best guess the key (1/2), and the untrained
team is below that.

Three seeds (model initialisation and training), not one picked seed: a referential game can
lock into a protocol that confuses the keys, and the test must show MARFT escapes it.
"""

import pytest

from baselines.core.config import load_config
from baselines.relay import RELAY_CONFIG, relay_model
from baselines.trainer import Trainer

ENV_ID = "credit-chain-2agent"
MAX_ITERATIONS = 60


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_marft_learns_the_credit_chain(tmp_path, seed):
    model = relay_model(tmp_path / "model", keys="AB", seed=seed)
    overrides = [f"env.id={ENV_ID}", f"model.name={model}", f"train.seed={seed}", *RELAY_CONFIG]
    trainer = Trainer(load_config("marft", overrides=overrides), tmp_path / "run")
    scores = []
    for _ in range(MAX_ITERATIONS):
        scores.append(trainer.step()["train/score"])
        if len(scores) >= 3 and min(scores[-3:]) >= 0.9:
            break
    # The first rollout (32 sampled episodes) is played before any update: the untrained team.
    assert scores[0] <= 0.5, f"the untrained team already relays the key: {scores}"
    after = trainer.evaluate(greedy=True, prefix="after")["after/score"]
    assert after >= 0.9, f"MARFT reached {after} (train scores {scores})"
    assert min(scores[-3:]) >= 0.9, f"train scores {scores}"
