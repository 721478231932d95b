"""benchmarks/bench_peers.py end to end with the tiny random model: one timed iteration of ours,
in its own process as the benchmark runs it, the table and the record. The peers run only
where they are installed (CoMLRL: `make peers`, not part of `make test`; TRL: the [trl] extra);
our row never depends on them."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import bench_peers  # noqa: E402
from benchmarks.peer_adapters import comlrl_available  # noqa: E402

SMALL = ["--model", "tiny-random", "--iterations", "1", "--warmup", "0", "--eval-problems", "4",
         "--problems", "1", "--seat-problems", "1", "--samples", "2", "--threads", "1"]


def test_ours_runs_through_the_benchmark(tmp_path, capsys):
    systems = ["ours"] + (["comlrl-lora"] if comlrl_available() else [])
    assert bench_peers.main([*SMALL, "--systems", *systems, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert bench_peers.LABELS["ours"] in printed and "s/iter" in printed
    record = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[-1])
    ours = record["summaries"]["ours"]
    assert ours["s_iter"] > 0 and ours["gen_s"] > 0 and ours["tok_s"] > 0
    assert ours["peak_mib"] > 0 and ours["trainable"] > 0
    assert len(ours["before"]) == len(ours["after"]) == 4  # the same 4 test problems
    assert set(ours["before"]) == set(ours["after"])
    if "comlrl-lora" in systems:
        peer = record["summaries"]["comlrl-lora"]
        # the same evaluator: the same problems, and the same untrained model's greedy replies
        assert set(peer["before"]) == set(ours["before"]) and peer["before"] == ours["before"]
        assert peer["tokens"] > 0 and "ours / comlrl-lora: s/iter" in printed


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="trl is not installed")
def test_trl_seat_beside_ours_seat(tmp_path, capsys):
    args = [*SMALL, "--systems", "ours-seat", "trl-grpo", "--out", str(tmp_path)]
    assert bench_peers.main(args) == 0
    printed = capsys.readouterr().out
    record = json.loads((tmp_path / "results.jsonl").read_text().splitlines()[-1])
    ours, trl = record["summaries"]["ours-seat"], record["summaries"]["trl-grpo"]
    assert set(ours["before"]) == set(trl["before"]) and len(ours["before"]) == 4
    assert trl["tokens"] > 0 and trl["trainable"] == ours["trainable"]  # same LoRA on one model
    assert "ours-seat / trl-grpo: s/iter" in printed


def test_comlrl_reward_dispatch_and_pad_token():
    """Adaptations 2 and 4 hold against CoMLRL's own code (only where it is installed)."""
    if not comlrl_available():
        pytest.skip("comlrl is not installed (make peers)")
    from comlrl.utils.reward_utils import call_reward_function

    from benchmarks.peer_adapters import handoff_reward

    reward = handoff_reward({})
    env_seed = 3
    import marft_envs

    env = marft_envs.make("arith0-2agent", split="train")
    env.reset(seed=env_seed)
    answer = env.unwrapped.task.answer
    got = call_reward_function(reward, ["p"], [[f"{answer}"], [f"{answer}"]], num_agents=2,
                               batch_items=[{"seed": env_seed}])
    assert got == [1.0]
