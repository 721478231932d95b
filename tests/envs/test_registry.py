import json

import pytest

import marft_envs
from marft_envs import EnvSpec, FlexMGEnv


FAMILIES = ["math", "math500", "gsm8k", "aime", "arith"]


def test_every_math_id_is_registered():
    for family in FAMILIES:
        for n in (2, 3, 4):
            assert f"{family}-{n}agent-v1" in marft_envs.registry


def test_arith0_ids_are_level_0_sums_graded_by_the_math_verifier():
    teams = {2: ["solver_0", "answerer_1"], 3: ["solver_0", "checker_1", "answerer_2"]}
    for n, agents in teams.items():
        spec = marft_envs.spec(f"arith0-{n}agent")
        assert spec.kwargs["verifier"] == "math" and spec.kwargs["dataset_kwargs"] == {"level": 0}
        env = marft_envs.make(spec.id)
        assert env.possible_agents == agents
        assert {t.metadata["family"] for t in env.unwrapped.dataset} == {"sum"}
        assert env.unwrapped.dataset.split == "test"


def test_make_returns_aec_env_with_role_named_agents():
    env = marft_envs.make("arith-3agent")
    assert isinstance(env, FlexMGEnv)
    assert env.possible_agents == ["reasoner_0", "actor_1", "verifier_2"]
    assert marft_envs.make("arith-4agent").possible_agents == ["decomposer_0", "planner_1", "executor_2", "verifier_3"]
    assert marft_envs.make("arith-2agent").possible_agents == ["reasoner_0", "actor_1"]


def test_spec_json_round_trip_and_instance_spec_carries_overrides():
    s = marft_envs.spec("math-3agent")
    again = EnvSpec.from_json(s.to_json())
    assert again == s
    assert json.loads(s.to_json())["kwargs"]["workflow"] == "math-trio"
    env = marft_envs.make("arith-2agent", horizon=3)
    assert env.spec.kwargs["horizon"] == 3 and env.horizon == 3
    assert marft_envs.spec("arith-2agent").kwargs["horizon"] == 1  # the registered default is untouched


def test_unknown_id_names_close_matches():
    with pytest.raises(KeyError) as e:
        marft_envs.make("math-5agent")
    assert "math-3agent" in str(e.value)


def test_bad_override_names_valid_choices():
    with pytest.raises(TypeError) as e:
        marft_envs.make("arith-2agent", horizn=2)
    assert "horizn" in str(e.value) and "horizon" in str(e.value)


@pytest.mark.parametrize("kwargs, word", [
    ({"feedback": "loud"}, "feedback"),
    ({"reward_to": "me"}, "reward_to"),
    ({"horizon": 0}, "horizon"),
    ({"workflow": "nope"}, "workflow"),
    ({"dataset": "nope"}, "nope"),
])
def test_bad_override_values_are_explained(kwargs, word):
    with pytest.raises((ValueError, KeyError)) as e:
        marft_envs.make("arith-2agent", **kwargs)
    assert word in str(e.value)


def test_register_and_duplicate():
    marft_envs.register("arith-test-2agent", "marft_envs.flexmg:FlexMGEnv",
                        kwargs={"dataset": "arith", "workflow": "math-dual"}, overwrite=True)
    assert marft_envs.spec("arith-test-2agent").team_size == 2
    with pytest.raises(ValueError):
        marft_envs.register("arith-test-2agent", "marft_envs.flexmg:FlexMGEnv")
    del marft_envs.registry["arith-test-2agent"]


def test_pprint_registry_lists_every_id():
    text = marft_envs.pprint_registry(print_output=False)
    for family in FAMILIES:
        assert f"{family}-3agent" in text


def _play(env, seed=0):
    """Play one episode with a non-answer; the number of turns and whether it was truncated."""
    env.reset(seed=seed)
    turns = 0
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
        else:
            env.step("I cannot tell.")  # never correct, so no episode stops early
            turns += 1
    return turns, env.episode().truncated


@pytest.fixture
def limited_id():
    """A three-round two-agent id whose spec stops episodes after three turns."""
    env_id = "arith-limited-2agent"
    marft_envs.register(env_id, "marft_envs.flexmg:FlexMGEnv", overwrite=True,
                        kwargs={"dataset": "arith", "workflow": "math-dual", "horizon": 3},
                        max_episode_turns=3)
    yield env_id
    del marft_envs.registry[env_id]


def test_max_episode_turns_truncates_like_gymnasium_max_episode_steps(limited_id):
    assert _play(marft_envs.make(limited_id)) == (3, True)
    env = marft_envs.make(limited_id)
    assert env.spec.max_episode_turns == 3 and "max_turns" not in env.spec.kwargs
    # an explicit max_turns wins over the spec's limit, as max_episode_steps does in Gymnasium
    assert _play(marft_envs.make(limited_id, max_turns=None)) == (6, False)
    assert _play(marft_envs.make(limited_id, max_turns=5)) == (5, True)


def test_max_episode_turns_is_checked_when_registered():
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="max_episode_turns must be an integer >= 1"):
            marft_envs.register("arith-bad-2agent", "marft_envs.flexmg:FlexMGEnv",
                                max_episode_turns=bad)
    assert "arith-bad-2agent" not in marft_envs.registry


def test_max_episode_turns_needs_an_entry_point_that_can_apply_it():
    def build(dataset="arith"):
        return marft_envs.make("arith-2agent")

    marft_envs.register("arith-nolimit-2agent", build, max_episode_turns=2, overwrite=True)
    try:
        with pytest.raises(TypeError, match="takes no max_turns argument"):
            marft_envs.make("arith-nolimit-2agent")
    finally:
        del marft_envs.registry["arith-nolimit-2agent"]


def test_load_entry_point_is_what_make_calls():
    from marft_envs.registry import load_entry_point

    assert load_entry_point("marft_envs.flexmg:FlexMGEnv") is FlexMGEnv
    assert load_entry_point(FlexMGEnv) is FlexMGEnv
    with pytest.raises(ValueError, match="not of the form 'module:attr'"):
        load_entry_point("marft_envs.flexmg.FlexMGEnv")
