"""MetricsLogger sinks, resume truncation, plots and progress bars."""

from __future__ import annotations

import io
import json
import math

import pytest
import torch
from rich.console import Console

from baselines.core.logging import (
    MetricsLogger,
    plot_learning_curves,
    plot_bands,
    plot_side_by_side,
    read_jsonl,
)


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=200, force_terminal=False, color_system=None), buf


def _tb_scalars(run_dir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_log_writes_jsonl_console_and_tensorboard(tmp_path):
    con, buf = _console()
    with MetricsLogger(tmp_path, console_obj=con) as log:
        log.log(1, {"agent/reasoner_0/policy_loss": 0.5, "agent/actor_1/policy_loss": torch.tensor(
            0.25), "critic/value_loss": 2, "eval/score": float("nan")})
        log.log(2, {"agent/reasoner_0/policy_loss": 0.125})
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["agent/actor_1/policy_loss"] == 0.25 and rows[0]["critic/value_loss"] == 2.0
    assert rows[0]["eval/score"] is None  # strict JSON: NaN becomes null
    assert all(isinstance(r["time"], float) for r in rows)
    json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])  # valid JSON
    out = buf.getvalue()
    assert "step 1 | agent reasoner_0/policy_loss=0.5 actor_1/policy_loss=0.25" in out
    assert "critic value_loss=2" in out and "eval score=nan" in out
    assert _tb_scalars(tmp_path, "agent/reasoner_0/policy_loss") == [(1, 0.5), (2, 0.125)]


def test_sinks_can_be_switched_off(tmp_path):
    con, buf = _console()
    log = MetricsLogger(tmp_path, console=False, jsonl=False, tensorboard=False, console_obj=con)
    log.log(1, {"x/y": 1.0})
    log.close()
    assert buf.getvalue() == ""
    assert not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "tensorboard").exists()


def test_non_numeric_metric_is_rejected_by_name(tmp_path):
    log = MetricsLogger(tmp_path, console=False, tensorboard=False)
    with pytest.raises(TypeError, match=r"metric 'eval/name' must be a number, got str"):
        log.log(1, {"eval/name": "hello"})
    log.close()


def test_resume_drops_the_steps_after_the_checkpoint(tmp_path):
    log = MetricsLogger(tmp_path, console=False)
    for s in range(1, 6):
        log.log(s, {"rollout/team_reward": s / 10})
    log.close()
    # crashed after step 5, last checkpoint after step 3: steps 4 and 5 are redone
    log = MetricsLogger(tmp_path, console=False, resume_step=3)
    for s in (4, 5):
        log.log(s, {"rollout/team_reward": s})
    log.close()
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [(r["step"], r["rollout/team_reward"]) for r in rows] == [
        (1, 0.1), (2, 0.2), (3, 0.3), (4, 4.0), (5, 5.0)]
    assert _tb_scalars(tmp_path, "rollout/team_reward") == [
        (1, pytest.approx(0.1)), (2, pytest.approx(0.2)), (3, pytest.approx(0.3)), (4, 4.0),
        (5, 5.0)]


def test_a_truncated_last_line_is_skipped_but_corruption_elsewhere_is_an_error(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"step": 1, "a/b": 1}\n{"step": 2, "a/')
    assert read_jsonl(p) == [{"step": 1, "a/b": 1}]
    p.write_text('{"step": 1, "a/')  # a new logger may append after it: resume repairs it
    log = MetricsLogger(tmp_path, console=False, tensorboard=False, resume_step=0)
    log.log(1, {"a/b": 2.0})
    log.close()
    assert [r["a/b"] for r in read_jsonl(p)] == [2.0]
    p.write_text('garbage\n{"step": 1}\n')
    with pytest.raises(ValueError, match="line 1 is not JSON"):
        read_jsonl(p)


def _write_run(path, scale):
    log = MetricsLogger(path, console=False, tensorboard=False)
    for s in range(1, 5):
        log.log(s, {"agent/reasoner_0/policy_loss": scale * s, "agent/actor_1/policy_loss": -s,
                    "critic/value_loss": 1 / s, "rollout/team_reward": scale * s / 4})
    log.close()
    return path / "metrics.jsonl"


def _png_size(path):
    import matplotlib.image

    return matplotlib.image.imread(path).shape


def test_plot_learning_curves_one_panel_per_group_one_line_per_agent(tmp_path):
    jsonl = _write_run(tmp_path / "run", 1.0)
    out = plot_learning_curves(jsonl, tmp_path / "curves.png")
    assert out.is_file()
    h, w, _ = _png_size(out)
    # 3 panels (agent/*/policy_loss, critic/value_loss, rollout/team_reward) in one row
    assert w > h
    one = plot_learning_curves(jsonl, tmp_path / "one.png", keys=["agent/*"])
    assert _png_size(one)[1] < w  # a single panel is narrower
    with pytest.raises(ValueError, match="no metrics to plot"):
        plot_learning_curves(jsonl, tmp_path / "none.png", keys=["nothing/*"])


def test_plot_side_by_side(tmp_path):
    runs = {"MARFT": _write_run(tmp_path / "a", 1.0), "IPPO": _write_run(tmp_path / "b", 0.5)}
    out = plot_side_by_side(runs, ["rollout/team_reward", "critic/value_loss"],
                            tmp_path / "cmp.png")
    assert out.is_file()
    assert plot_side_by_side(runs, "rollout/team_reward", tmp_path / "one.png").is_file()
    with pytest.raises(ValueError, match="logged 'eval/score'"):
        plot_side_by_side(runs, "eval/score", tmp_path / "x.png")


def test_plot_bands_draws_every_panel_and_refuses_ragged_lines(tmp_path):
    line = ([16, 32, 48], [0.2, 0.5, 0.9], [0.1, 0.4, 0.8], [0.3, 0.6, 1.0])
    panels = {"credit-chain-3agent": {"marft": line, "ippo": line}, "credit-chain-1agent": {"solo": line}}
    out = plot_bands(panels, tmp_path / "bands.png")
    assert out.is_file() and out.stat().st_size > 0
    with pytest.raises(ValueError, match="'ippo' of panel 'credit-chain-3agent'.*\\[3, 3, 2, 3\\]"):
        plot_bands({"credit-chain-3agent": {"ippo": (line[0], line[1], line[2][:2], line[3])}},
                   tmp_path / "bad.png")
    with pytest.raises(ValueError, match="at least one panel"):
        plot_bands({}, tmp_path / "none.png")


def test_format_line_numbers():
    from rich.text import Text

    line = Text.from_markup(
        MetricsLogger.format_line(3, {"a/b": 1e-6, "a/c": 123456.0, "d": math.inf})).plain
    assert line == "step 3 | a b=1.000e-06 c=1.235e+05 | d=inf"
