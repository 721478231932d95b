"""The code environments: registered ids, episodes, rewards, feedback, infos, infra errors."""

import pytest

import marft_envs
from marft_envs.code import CodeVerifier
from marft_envs.code.sandbox.base import infra_error
from tasks import load
from tasks.code_tasks import REFERENCE_SOLUTIONS

IDS = [f"{fam}-{n}agent" for fam in ("humaneval", "mbpp", "code") for n in (2, 3, 4)]


def play(env, actions_for):
    """Play one episode; ``actions_for(agent, obs)`` gives each action. Returns the total
    rewards; ``env.final_infos`` keeps each agent's last info."""
    totals = {a: 0.0 for a in env.possible_agents}
    env.final_infos = {}
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        totals[agent] += reward
        env.final_infos[agent] = info
        env.step(None if term or trunc else actions_for(agent, obs))
    return totals


@pytest.mark.parametrize("env_id", IDS)
def test_registered_ids_build_with_expected_team(env_id):
    env = marft_envs.make(env_id, sandbox="subprocess")
    teams = {2: ["planner_0", "coder_1"], 3: ["planner_0", "coder_1", "reviewer_2"],
             4: ["analyst_0", "planner_1", "coder_2", "reviewer_3"]}
    assert env.possible_agents == teams[int(env_id.split("-")[1][0])]
    assert marft_envs.spec(env_id).entry_point == "marft_envs.code.env:make_code_env"
    env.reset(seed=0)
    obs = env.observe(env.agent_selection)
    assert obs["problem"] == env.unwrapped.task.prompt
    env.close()


def _solve(env):
    task = env.unwrapped.task
    program = REFERENCE_SOLUTIONS[task.id]
    return lambda agent, obs: f"Here is the program:\n```python\n{program}```" if agent == env.possible_agents[-1] else "plan: think"


@pytest.mark.parametrize("task_id", ["code/add", "code/sum_two"])
def test_correct_team_gets_reward_one_and_backend_in_infos(task_id):
    env = marft_envs.make("code-3agent", sandbox="subprocess")
    env.reset(seed=0, options={"task_id": task_id})
    totals = play(env, _solve(env))
    assert all(v == 1.0 for v in totals.values())
    verdict = env.final_infos[env.possible_agents[0]]["verdict"]
    assert verdict["correct"] and verdict["details"]["backend"] == "subprocess"
    assert "source" not in verdict["details"]["details"][0]  # hidden tests never travel in infos
    env.close()


def test_wrong_program_partial_reward_and_all_or_nothing():
    wrong = "```python\ndef add(a, b):\n    return a + b if a < 10 else 0\n```"
    for reward, expected in (("fraction", 0.75), ("all", 0.0)):
        env = marft_envs.make("code-2agent", sandbox="subprocess", reward=reward)
        env.reset(seed=0, options={"task_id": "code/add"})
        totals = play(env, lambda agent, obs: wrong)
        assert totals[env.possible_agents[0]] == pytest.approx(expected)
        env.close()


def test_tests_feedback_shows_public_tests_only():
    env = marft_envs.make("code-2agent", sandbox="subprocess", horizon=2, feedback="tests")
    env.reset(seed=0, options={"task_id": "code/gcd"})
    task = env.unwrapped.task
    seen = []

    def act(agent, obs):
        seen.append(obs["feedback"])
        return "```python\ndef gcd(a, b):\n    return 6\n```"

    play(env, act)
    feedback = [f for f in seen if f]
    assert feedback, "the second round must show feedback"
    text = feedback[-1]
    assert "public tests" in text
    for public in task.public_tests:
        assert public in text
    for hidden in set(task.tests) - set(task.public_tests):
        assert hidden not in text
    env.close()


def test_verdict_feedback_and_roles_false():
    env = marft_envs.make("code-2agent", sandbox="subprocess", horizon=2, feedback="verdict", roles=False)
    env.reset(seed=0, options={"task_id": "code/gcd"})
    seen = []
    play(env, lambda agent, obs: seen.append(obs["feedback"]) or "no code at all")
    assert any("incorrect" in f for f in seen)
    env.close()


def test_stdio_feedback_shows_the_public_example(sandbox_factory):
    v = CodeVerifier(sandbox=sandbox_factory("subprocess"))
    task = load("code").by_id("code/sum_two")
    verdict = v.grade("print(0)", task)
    text = v.feedback("print(0)", task, verdict, "tests")
    assert "1 2" in text and "FAIL" in text
    assert "1000000000000" not in text  # a hidden test's input


class DeadSandbox:
    """Behaves like a sandbox whose Docker daemon died."""

    name = "docker"

    def run(self, program, **kwargs):
        return infra_error("Cannot connect to the Docker daemon", self.name)

    def close(self):
        pass


def test_infra_error_is_flagged_not_scored_and_never_crashes():
    env = marft_envs.make("code-2agent", sandbox=DeadSandbox())
    env.reset(seed=0, options={"task_id": "code/add"})
    play(env, _solve(env))
    info = env.final_infos[env.possible_agents[0]]
    assert info["verdict"]["infra_error"] and info["verdict"]["score"] == 0.0
    assert info["verdict"]["details"]["outcome"] == "infra_error"
    env.close()


def test_verifier_never_raises_on_garbage(sandbox_factory):
    v = CodeVerifier(sandbox=sandbox_factory("subprocess"))
    task = load("code").by_id("code/add")
    for junk in (None, 12, "\ud800", "```python\n" + "(" * 5000 + "\n```", "\x00" * 100):
        verdict = v.grade(junk, task)
        assert not verdict.correct and verdict.details["backend"] == "subprocess"


def test_unknown_backend_name_fails_at_make():
    # a typo must not surface later as an infrastructure error in every verdict
    with pytest.raises(ValueError, match="'dockr'.*docker"):
        CodeVerifier(sandbox="dockr")
    with pytest.raises(ValueError, match="unknown sandbox backend 'dockr'"):
        marft_envs.make("humaneval-2agent", sandbox="dockr")


def test_auto_backend_is_reported(docker_service):
    v = CodeVerifier()
    verdict = v.grade(f"```python\n{REFERENCE_SOLUTIONS['code/add']}```", load("code").by_id("code/add"))
    assert verdict.correct and verdict.details["backend"] in ("docker", "bwrap")
    v.close()


def test_workflows_last_agent_is_graded():
    for n, name in ((2, "code-dual"), (3, "code-trio"), (4, "code-quartet")):
        wf = marft_envs.get_workflow(name)
        assert wf.n_agents == n and wf.answerer_index == n - 1 and wf.task_kind == "code"


def test_environments_share_one_sandbox_per_backend():
    a = marft_envs.make("code-2agent", sandbox="subprocess")
    b = marft_envs.make("mbpp-3agent", sandbox="subprocess")
    assert a.unwrapped.verifier.sandbox() is b.unwrapped.verifier.sandbox()
    a.close()
    b.close()
    assert a.unwrapped.verifier.sandbox().run("print(1)").stdout == "1\n"  # closing an env keeps it
