"""The README demo's code path (addition env, MARFT config, before/after eval, plot) on the tiny model."""

import json

import marft_envs
from baselines import demo


def play(env, answer):
    """One episode: the solver writes the sum, the answerer replies ``answer(a, b)``; team rewards."""
    env.reset(seed=0)
    a, b = map(int, env.observe(env.agent_selection)["problem"].split(" + "))
    env.step(f"{a} + {b} = {a + b}")
    assert env.agent_selection == "answerer_1"
    env.step(answer(a, b))
    return {agent: info["verdict"]["score"] for agent, info in env.infos.items()}


def test_addition_env_grades_the_answerer():
    env = marft_envs.make(demo.register_addition(), seed=0)
    assert env.possible_agents == ["solver_0", "answerer_1"]
    assert play(env, lambda a, b: str(a + b)) == {"solver_0": 1.0, "answerer_1": 1.0}
    assert play(env, lambda a, b: f"{a} + {b} = {a + b}") == {"solver_0": 1.0, "answerer_1": 1.0}
    assert play(env, lambda a, b: "I'm glad to help") == {"solver_0": 0.0, "answerer_1": 0.0}
    assert play(env, lambda a, b: str(a + b + 1)) == {"solver_0": 0.0, "answerer_1": 0.0}
    assert {t.answer for t in demo.addition_dataset().tasks} == {str(s) for s in range(2, 19)}


def test_demo_runs_one_iteration_with_the_tiny_model(tmp_path, capsys):
    out = tmp_path / "demo"
    args = ["--model", "tiny-random", "--out", str(out), "train.iterations=1", "env.num_envs=2",
            "train.episodes_per_iteration=2", "env.eval_episodes=2"]
    assert demo.main(args) == 0
    printed = capsys.readouterr().out
    assert "env addition-2agent" in printed and "before training: eval score" in printed
    assert "iteration 1/1: train score" in printed and "after training:  eval score" in printed
    assert (out / "learning_curves.png").is_file()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "eval/score" in r] == [0, 1]
