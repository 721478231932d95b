import pytest

import marft_envs
from marft_envs import Role, Workflow
from marft_envs.workflow import chain_matrix, independent_matrix


def test_default_is_the_chain():
    wf = marft_envs.get_workflow("math-trio")
    assert wf.matrix == ((0, 0, 0), (1, 0, 0), (1, 1, 0))
    assert wf.sees(2) == [0, 1] and wf.sees(0) == []


def test_matrix_must_be_strictly_lower_triangular():
    roles = (Role("a", "x"), Role("b", "y"))
    with pytest.raises(ValueError, match="lower triangular"):
        Workflow("bad", roles, dependency=((0, 1), (0, 0)))
    with pytest.raises(ValueError, match="2x2"):
        Workflow("bad", roles, dependency=((0,),))


def test_role_names_must_be_identifiers():
    with pytest.raises(ValueError, match="identifier"):
        Role("not ok", "x")


def test_roles_false_gives_every_agent_the_generic_prompt():
    env = marft_envs.make("arith-3agent", roles=False)
    env.reset(seed=0)
    prompts = {r.instructions for r in env.workflow.roles}
    assert len(prompts) == 1
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    assert env.workflow.matrix == chain_matrix(3)


def test_custom_workflow_independent_agents():
    wf = Workflow("indep-pair", (Role("solver", "Solve it."), Role("checker", "Also solve it.")),
                  dependency=independent_matrix(2))
    env = marft_envs.make("arith-2agent", workflow=wf)
    env.reset(seed=0)
    env.step("first agent's private work")
    obs = env.observe("checker_1")
    assert obs["predecessors"] == ()
    assert "private work" not in obs["prompt"]


def test_registered_custom_workflow_by_name():
    wf = marft_envs.register_workflow(
        Workflow("math-solo-critic", (Role("solver", "Solve."), Role("critic", "Critique.")), answerer=0),
        overwrite=True)
    env = marft_envs.make("arith-2agent", workflow="math-solo-critic")
    assert env.workflow is wf and env.possible_agents == ["solver_0", "critic_1"]
