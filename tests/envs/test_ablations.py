"""The ablation overrides every team id takes: ``make(id, order=..., dependency=...,
anonymous_roles=...)``."""

import pytest

import marft_envs
import tasks
from marft_envs.workflow import chain_matrix, get_workflow, independent_matrix


def _team_ids():
    """Every registered id whose dataset loads here (the Hub-only ones are skipped)."""
    out = []
    for env_id in sorted(marft_envs.registry):
        kwargs = marft_envs.spec(env_id).kwargs
        try:
            tasks.load(kwargs.get("dataset", "arith"), split=kwargs.get("split"), **kwargs.get("dataset_kwargs", {}))
        except tasks.DataNotFoundError:
            continue
        out.append(env_id)
    return out


TEAM_IDS = _team_ids()


def test_some_ids_of_every_kind_are_covered():
    for env_id in ("arith0-3agent", "credit-silent-3agent", "climbing-2agent", "repair-2agent", "code-2agent"):
        assert marft_envs.spec(env_id).id in TEAM_IDS  # the newest version of each


@pytest.mark.parametrize("env_id", TEAM_IDS)
def test_every_id_takes_every_ablation(env_id):
    base = marft_envs.make(env_id)
    wf, n = base.workflow, len(base.possible_agents)
    marft_envs.check_overrides(env_id, {"order": "reversed", "dependency": "parallel", "anonymous_roles": True})

    rev = marft_envs.make(env_id, order="reversed").workflow
    assert rev.roles == wf.roles[::-1]
    assert rev.matrix == wf.matrix and rev.answerer_index == wf.answerer_index  # by position

    perm = list(range(n))[1:] + [0]
    assert marft_envs.make(env_id, order=perm).workflow.roles == tuple(wf.roles[k] for k in perm)

    par = marft_envs.make(env_id, dependency="parallel")
    assert par.workflow.matrix == independent_matrix(n) and par.metadata["is_parallelizable"]
    assert marft_envs.make(env_id, dependency="chain").workflow.matrix == chain_matrix(n)

    anon = marft_envs.make(env_id, anonymous_roles=True)
    assert anon.possible_agents == [f"agent_{i}" for i in range(n)]
    assert [r.instructions for r in anon.workflow.roles] == [r.instructions for r in wf.roles]
    assert [r.sees_problem for r in anon.workflow.roles] == [r.sees_problem for r in wf.roles]
    for env in (base, par, anon):
        env.close()


def test_a_reversed_chain_is_still_a_chain_over_the_new_order():
    env = marft_envs.make("arith0-3agent", order="reversed")
    assert env.possible_agents == ["answerer_0", "checker_1", "solver_2"]
    env.reset(seed=0)
    seen = {}
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        seen[agent] = [p["agent"] for p in obs["predecessors"]]
        env.step("1 + 1 = 2")
    assert seen == {"answerer_0": [], "checker_1": ["answerer_0"], "solver_2": ["answerer_0", "checker_1"]}
    assert env.episode().verdicts[-1]["answerer"] == "solver_2"  # the last position is graded


def test_a_dependency_matrix_override_decides_who_sees_whom():
    matrix = [[0, 0, 0], [1, 0, 0], [1, 0, 0]]  # both later agents see only the first
    env = marft_envs.make("credit-chain-3agent", dependency=matrix)
    env.reset(options={"task_id": "key-B"})
    seen = {}
    for agent in env.agent_iter():
        obs, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        seen[agent] = [p["action"] for p in obs["predecessors"]]
        env.step(obs["problem"] or "x")
    assert seen == {"sender_0": [], "relay_1": ["B"], "receiver_2": ["B"]}
    assert env.episode().score == 0.0  # the receiver saw the key but answered "x"


def test_anonymous_roles_label_teammates_by_position_only():
    env = marft_envs.make("arith0-2agent", anonymous_roles=True)
    env.reset(seed=0)
    env.step("2 + 3 = 5")
    prompt = env.observe("agent_1")["prompt"]
    assert "[agent_0]\n2 + 3 = 5" in prompt and "solver" not in prompt.split("\n\n", 1)[1]
    assert env.observe("agent_1")["role"] == "agent"
    # unlike roles=False, the instructions are the role's own
    assert prompt.startswith(get_workflow("sum-duo-shots").roles[1].instructions)


def test_ablations_compose_in_order_then_dependency_then_names():
    wf = get_workflow("math-trio").ablated(order=[2, 0, 1], dependency="parallel", anonymous_roles=True)
    assert [r.instructions for r in wf.roles] == [get_workflow("math-trio").roles[k].instructions for k in (2, 0, 1)]
    assert wf.is_independent and wf.agent_ids() == ["agent_0", "agent_1", "agent_2"]
    assert get_workflow("math-trio").ablated() == get_workflow("math-trio")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"order": [0, 0, 1]}, "permutation of \\[0, 1, 2\\]"),
        ({"order": [0, 1]}, "permutation"),
        ({"order": "backwards"}, "'reversed' or a permutation"),
        ({"dependency": "star"}, "one of \\('chain', 'parallel'\\)"),
        ({"dependency": [[0, 1, 0], [0, 0, 0], [0, 0, 0]]}, "strictly lower triangular"),
        ({"dependency": [[0, 0], [1, 0]]}, "3x3"),
    ],
)
def test_bad_ablations_name_what_is_valid(overrides, message):
    with pytest.raises(ValueError, match=message):
        marft_envs.make("math-3agent", dataset="arith", **overrides)


def test_the_trainer_config_can_ask_for_the_ablations():
    """``env.overrides.order=reversed`` etc. reach make(): the overrides are valid keys for the
    entry points of both the math/credit envs and the code envs."""
    for env_id in ("arith0-3agent", "code-2agent"):
        marft_envs.check_overrides(env_id, {"order": [1, 0], "dependency": [[0, 0], [1, 0]], "anonymous_roles": True})
