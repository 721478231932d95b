"""The README demo's code path (arith0-2agent, MARFT recipe, before/after bundles re-graded by the
leaderboard, plot) on the tiny model, and the project's verifier on the answers the demo's team gives."""

import json

import pytest

import marft_envs
from baselines import demo
from leaderboard.schema import read_bundle


def play(env, solver: str, answer):
    """One episode: the solver writes ``solver``, the answerer replies ``answer(a, b)``."""
    env.reset(seed=0)
    problem = env.observe(env.agent_selection)["problem"]
    a, b = map(int, problem.removeprefix("Compute ").removesuffix(".").split(" + "))
    env.step(solver.format(a=a, b=b, s=a + b))
    assert env.agent_selection == "answerer_1"
    env.step(answer(a, b))
    return {agent: info["verdict"]["score"] for agent, info in env.infos.items()}


# What SmolLM2-135M writes in 12 tokens (the demo's old last-integer grader existed for these):
# the math verifier grades them all, so the demo needs no grader of its own.
@pytest.mark.parametrize(
    ("reply", "score"),
    [
        (lambda a, b: str(a + b), 1.0),
        (lambda a, b: f"{a} + {b} = {a + b}", 1.0),
        (lambda a, b: f"{a} + {b} = {a + b}. The sum", 1.0),
        (lambda a, b: f"The answer is {a + b}", 1.0),
        (lambda a, b: f"{a + b}.", 1.0),
        (lambda a, b: "I'm glad to help", 0.0),
        (lambda a, b: str(a + b + 1), 0.0),
        (lambda a, b: f"{a} + {b} = {a + b + 1}", 0.0),
    ],
)
def test_the_math_verifier_grades_the_demo_answers(reply, score):
    env = marft_envs.make(demo.DEMO_ENV, seed=0)
    assert env.possible_agents == ["solver_0", "answerer_1"]
    assert play(env, "{a} + {b} = {s}", reply) == {"solver_0": score, "answerer_1": score}


def test_demo_runs_the_whole_loop_with_the_tiny_model(tmp_path, capsys):
    out = tmp_path / "demo"
    args = [
        "--model",
        "tiny-random",
        "--out",
        str(out),
        "train.iterations=1",
        "env.num_envs=2",
        "train.episodes_per_iteration=2",
        "env.eval_episodes=3",
    ]
    assert demo.main(args) == 0
    printed = capsys.readouterr().out
    assert "env arith0-2agent" in printed and "before training: eval score" in printed
    assert "iteration 1/1: train score" in printed and "after 1 iteration: eval score" in printed
    # each iteration's line is printed as it ends, before the evaluation that follows training
    assert printed.index("iteration 1/1: train score") < printed.index("after 1 iteration:")
    assert "verified by the leaderboard's grader" in printed
    assert (out / "learning_curves.png").is_file()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval/score" in r] == [0, 1]
    for label in ("before", "after"):
        bundle = read_bundle(out / f"bundle-{label}.json")
        assert bundle.env_id == "arith0-2agent-v2" and len(bundle.episodes) == 3
        assert f"{label} " in printed and str(out / f"bundle-{label}.json") in printed
        # evaluation is on the test split
        assert all(e.task_id.startswith("arith/test/s0/L0/") for e in bundle.episodes)


@pytest.mark.parametrize("env_id", ["arith0-2agent", "arith0-3agent"])
def test_training_and_evaluation_splits_share_no_problem(env_id):
    from baselines.core.config import load_config
    from baselines.trainer import env_overrides

    cfg = load_config("marft", overrides=[*demo.RECIPE, f"env.id={env_id}"])
    problems = {}
    for for_eval in (False, True):
        name, overrides = env_overrides(cfg, for_eval=for_eval)
        env = marft_envs.make(name, **overrides)
        problems[for_eval] = {t.prompt for t in env.unwrapped.dataset}
        assert {t.metadata["split"] for t in env.unwrapped.dataset} == (
            {"test"} if for_eval else {"train"}
        )
        env.close()
    assert len(problems[True]) >= 200 and len(problems[False]) >= 200
    assert not problems[True] & problems[False]
