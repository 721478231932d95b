"""Evaluation bundles are accepted by the leaderboard: exactly the planned (seed, task) episodes."""

import json
import subprocess
import sys

import marft_envs
from baselines import marft
from leaderboard.regrade import regrade
from leaderboard.schema import read_bundle

EVAL = 5  # more evaluation tasks than environments: environments play several, then go idle


def test_smoke_run_eval_bundle_passes_the_leaderboard_regrade(tmp_path):
    run = tmp_path / "run"
    assert marft.main(["--env", "arith-2agent", "--model", "tiny-random", "--out", str(run), "--no-progress",
                       "train.iterations=1", "model.max_new_tokens=8", "env.num_envs=2",
                       "train.episodes_per_iteration=2", f"env.eval_episodes={EVAL}", "train.log=[]"]) == 0
    target = tmp_path / "bundle.json"
    done = subprocess.run([sys.executable, "-m", "baselines.eval", str(run), "--out", str(target)],
                          check=False, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]

    bundle = read_bundle(target)
    assert bundle.grader_version == marft_envs.grader_version("arith-2agent")
    assert f"grader={bundle.grader_version}" in done.stdout
    first = marft_envs.make("arith-2agent").unwrapped.dataset.ids[:EVAL]
    assert bundle.dataset.size == EVAL and len(bundle.seeds) == 1
    assert sorted(e.task_id for e in bundle.episodes) == sorted(first)
    grade = regrade(bundle)  # raises BundleRejected if coverage or transcripts are wrong
    assert grade.n_tasks == EVAL and grade.grader_version == bundle.grader_version
    assert abs(grade.score - bundle.claimed_score) < 1e-9

    # the leaderboard's own command line agrees
    check = subprocess.run([sys.executable, "-m", "leaderboard.cli", "check", str(target)],
                           check=False, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"verified score {grade.score:.3f}" in check.stdout
    assert json.loads(target.read_text())["claimed_score"] == bundle.claimed_score
