"""Atomic checkpoints, pruning, load_state_dict convention, RNG capture, exact resume."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from torch import nn

from baselines.core.checkpoint import (
    CheckpointError,
    capture_rng_state,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)


def _draws() -> tuple:
    return (random.random(), float(np.random.rand()), float(torch.rand(())),
            float(torch.randn(())), np.random.normal())


def test_rng_state_round_trip_through_a_checkpoint(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.normal()  # leaves a cached gaussian in numpy's legacy state
    save_checkpoint(tmp_path, step=1, state={"rng": capture_rng_state()})
    expected = [_draws() for _ in range(3)]
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    restore_rng_state(load_checkpoint(tmp_path)["rng"])
    assert [_draws() for _ in range(3)] == expected


def test_modules_optimisers_schedulers_and_plain_data_round_trip(tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    model(torch.randn(4, 3)).sum().backward()
    opt.step(), sched.step()
    path = save_checkpoint(tmp_path, step=7, state={
        "policy": model, "opt": opt, "sched": sched,
        "data_pos": 123, "config": {"algo": {"lr": 1e-5}, "ids": ["a", "b"]}, "nothing": None,
    })
    assert path == tmp_path / "checkpoints" / "step_00000007"
    meta = json.loads((path / "meta.json").read_text())
    assert meta["step"] == 7 and meta["state"] == sorted(["policy", "opt", "sched", "data_pos",
                                                          "config", "nothing"])

    model2 = nn.Linear(3, 2)
    opt2 = torch.optim.AdamW(model2.parameters(), lr=0.1)
    sched2 = torch.optim.lr_scheduler.LambdaLR(opt2, lambda s: 1.0 / (1 + s))
    ck = load_checkpoint(tmp_path, into={"policy": model2, "opt": opt2, "sched": sched2})
    assert ck["step"] == 7 and ck["path"] == path
    assert ck["data_pos"] == 123 and ck["config"]["ids"] == ["a", "b"] and ck["nothing"] is None
    for a, b in zip(model.parameters(), model2.parameters()):
        assert torch.equal(a, b)
    assert torch.equal(opt.state_dict()["state"][0]["exp_avg"],
                       opt2.state_dict()["state"][0]["exp_avg"])
    assert sched2.last_epoch == sched.last_epoch == 1
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]


def test_writers_are_part_of_the_atomic_checkpoint(tmp_path):
    def write_adapter(folder):
        (folder / "adapter_config.json").write_text('{"r": 8}')

    path = save_checkpoint(tmp_path, step=3, state={"x": 1},
                           writers={"adapters": write_adapter})
    assert (path / "adapters" / "adapter_config.json").read_text() == '{"r": 8}'
    assert load_checkpoint(path)["path"] == path


def test_a_crash_mid_save_leaves_the_previous_checkpoint_and_no_partial_one(tmp_path):
    save_checkpoint(tmp_path, step=1, state={"x": torch.ones(2)})

    def crash(folder):
        (folder / "half.bin").write_bytes(b"\0" * 10)
        raise KeyboardInterrupt("killed while writing")

    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, step=2, state={"x": torch.zeros(2)}, writers={"a": crash})
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000001"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_00000001"]
    assert torch.equal(load_checkpoint(tmp_path)["x"], torch.ones(2))


def test_a_leftover_temporary_folder_is_ignored_and_cleaned(tmp_path):
    save_checkpoint(tmp_path, step=1, state={"x": 1})
    stale = tmp_path / "checkpoints" / ".tmp-step_00000002-999"
    stale.mkdir()
    (stale / "meta.json").write_text('{"step": 2}')  # as if killed before the rename
    assert latest_checkpoint(tmp_path).name == "step_00000001"
    save_checkpoint(tmp_path, step=3, state={"x": 3})
    assert not stale.exists()


def test_keep_last_prunes_oldest_and_latest_is_by_step_number(tmp_path):
    for step in (5, 10, 100, 20):
        save_checkpoint(tmp_path, step=step, state={"s": step}, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_00000020", "step_00000100"]
    assert load_checkpoint(tmp_path)["s"] == 100


def test_resaving_a_step_replaces_it(tmp_path):
    save_checkpoint(tmp_path, step=4, state={"v": "old"})
    save_checkpoint(tmp_path, step=4, state={"v": "new"})
    assert load_checkpoint(tmp_path)["v"] == "new"
    assert len(list((tmp_path / "checkpoints").iterdir())) == 1


def test_errors_are_clear(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint in"):
        load_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="reserved"):
        save_checkpoint(tmp_path, step=1, state={"step": 1})
    with pytest.raises(ValueError, match="step must be >= 0"):
        save_checkpoint(tmp_path, step=-1, state={})
    path = save_checkpoint(tmp_path, step=1, state={"a": 1})
    with pytest.raises(CheckpointError, match=r"has no entry 'policy'; it has \['a'\]"):
        load_checkpoint(path, into={"policy": nn.Linear(1, 1)})
    (path / "state.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        load_checkpoint(path)


def test_loading_refuses_pickled_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = save_checkpoint(tmp_path, step=1, state={"ok": 1})
    torch.save({"bad": Evil()}, path / "state.pt")
    with pytest.raises(CheckpointError, match="cannot read checkpoint"):
        load_checkpoint(path)


def _train(model, opt, steps):
    for _ in range(steps):
        x = torch.randn(8, 4)
        loss = model(x).pow(2).mean() + 0.01 * random.random() + 0.01 * float(np.random.rand())
        opt.zero_grad()
        loss.backward()
        opt.step()


def _fresh():
    model = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.3), nn.Linear(16, 1))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def _seed_all(seed):
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)


def test_interrupted_and_resumed_training_is_bit_identical(tmp_path):
    _seed_all(0)
    model, opt = _fresh()
    _train(model, opt, 6)
    reference = [p.detach().clone() for p in model.parameters()]

    _seed_all(0)
    model, opt = _fresh()
    _train(model, opt, 3)
    save_checkpoint(tmp_path, step=3, state={"model": model, "opt": opt,
                                              "rng": capture_rng_state()})
    del model, opt
    _seed_all(12345)  # a new process would start from anything
    model, opt = _fresh()
    ck = load_checkpoint(tmp_path, into={"model": model, "opt": opt})
    restore_rng_state(ck["rng"])
    _train(model, opt, 6 - ck["step"])
    for a, b in zip(reference, model.parameters()):
        assert torch.equal(a, b)
