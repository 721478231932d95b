"""A short MARFT training of the tiny model gives the same numbers on Ray env workers as in-process."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("baselines.trainer", reason="the trainer has not landed yet")

from baselines.core.config import Config
from baselines.trainer import Trainer
from marft_envs import Verdict

CFG = {
    "model": {"name": "tiny-random", "max_new_tokens": 6, "max_prompt_tokens": 160},
    "env": {"id": "arith-2agent", "num_envs": 2, "eval_episodes": 0},
    "train": {"iterations": 2, "episodes_per_iteration": 2, "seed": 7, "device": "cpu", "log": []},
    "algo": {"method": "marft", "minibatch_size": 4, "lr": 1e-3, "critic_lr": 1e-3},
}


def digit_share_verifier():
    """A verifier whose reward varies for a random model's output (the share of digits), so the
    advantages, losses and weight updates compared below are not all zero.

    A class local to a function: cloudpickle ships it by value to the Ray workers.
    """

    class DigitShare:
        name = "digit-share"

        def grade(self, response, task):
            text = str(response)
            score = sum(c.isdigit() for c in text) / max(1, len(text))
            return Verdict(correct=score > 0.5, answer=None, reason="share of digits", score=score)

        def feedback(self, response, task, verdict, mode):
            return ""

    return DigitShare()


def train(tmp_path, workers: str):
    cfg = Config.from_dict({**CFG, "train": {**CFG["train"], "workers": workers,
                                              "env_workers": 2 if workers == "ray" else 1}})
    cfg.env.overrides["verifier"] = digit_share_verifier()
    trainer = Trainer(cfg, tmp_path / workers)
    assert type(trainer.venv).__name__ == {"ray": "RayWorkerGroup", "inprocess": "InProcessWorkerGroup"}[workers]
    assert trainer.venv.num_workers == cfg.train.env_workers
    metrics = [trainer.step() for _ in range(cfg.train.iterations)]
    trainer.close()
    numbers = [{k: v for k, v in m.items() if not k.startswith("time/")} for m in metrics]
    return numbers, {n: trainer.model.adapter_state(n) for n in trainer.model.adapters}


def test_training_numbers_equal_in_process_and_on_ray(tmp_path, ray_cluster):
    local, local_weights = train(tmp_path, "inprocess")
    remote, remote_weights = train(tmp_path, "ray")
    assert local == remote
    assert any(m["train/score"] > 0 for m in local)  # a real learning signal was compared
    for name, state in local_weights.items():
        assert all(torch.equal(state[k], remote_weights[name][k]) for k in state), name
