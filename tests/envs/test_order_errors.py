"""Misuse (a method before reset(), step() after the end) gets one line naming what to call, from
every view: the AEC environment, the vector environment, SingleSeat and the Parallel view. (The
served environment and its client: tests/serve/test_serve.py.)"""

import dataclasses

import pytest

import marft_envs
from marft_envs import EnvOrderError, make_vec
from marft_envs.errors import require_episode
from marft_envs.workflow import get_workflow, independent_matrix
from marft_envs.wrappers import SingleSeat, parallel_env

BEFORE = "{}() called before reset(): call reset(seed=...) first"
ENDED = "the episode has ended: call reset() before {}()"


def _raises(fn, message):
    with pytest.raises(EnvOrderError) as e:
        fn()
    assert str(e.value) == message
    assert isinstance(e.value, RuntimeError)  # callers catching RuntimeError still catch it


def _finish(env):
    env.reset(seed=0)
    for _ in env.possible_agents:
        env.step("\\boxed{-1}")


def test_aec_methods_before_reset_say_to_call_reset():
    env = marft_envs.make("arith-2agent")
    _raises(lambda: env.step("x"), BEFORE.format("step"))
    _raises(lambda: env.observe("reasoner_0"), BEFORE.format("observe"))
    _raises(lambda: env.last(), BEFORE.format("last"))
    _raises(lambda: env.messages("reasoner_0"), BEFORE.format("messages"))
    _raises(lambda: env.state(), BEFORE.format("state"))
    _raises(lambda: env.snapshot(), BEFORE.format("snapshot"))
    _raises(lambda: env.episode(), BEFORE.format("episode"))  # not an empty record
    _raises(lambda: marft_envs.make("arith-2agent", render_mode="ansi").render(),
            BEFORE.format("render"))


def test_aec_step_after_the_end_says_to_call_reset():
    env = marft_envs.make("arith-2agent")
    _finish(env)
    # a finished agent may still be stepped with None (PettingZoo), but not given an action
    _raises(lambda: env.step("again"), ENDED.format("step") + " (a finished agent takes only "
            "step(None), which removes it, as agent_iter() does)")
    while env.agents:
        env.step(None)
    _raises(lambda: env.step("again"), ENDED.format("step"))
    _raises(lambda: env.step(None), ENDED.format("step"))
    _raises(lambda: env.last(), ENDED.format("last"))
    env.reset(seed=0)  # and reset() is all it takes
    env.step("x")
    assert env.agent_selection == "actor_1"


def test_vector_env_before_reset_and_after_its_plan():
    venv = make_vec("arith-2agent", num_envs=2)
    _raises(venv.next_batch, BEFORE.format("next_batch"))
    _raises(venv.waiting, BEFORE.format("waiting"))
    _raises(lambda: venv.snapshot(0), BEFORE.format("snapshot"))
    venv.reset(plan=[(0, venv.envs[0].dataset.ids[0])])
    venv.run(lambda agent, obs: ["\\boxed{0}"] * len(obs))
    _raises(venv.next_batch, "every episode of the plan given to reset() has finished: call "
            "reset() (with a new plan or none) before next_batch()")


def test_vector_env_step_before_reset():
    venv = make_vec("arith-2agent", num_envs=2)
    batch = marft_envs.Batch("reasoner_0", [0], [{}], [[]], [""])
    _raises(lambda: venv.step(batch, ["x"]), BEFORE.format("step"))


def test_single_seat_before_reset_and_after_the_end():
    env = SingleSeat("arith-2agent", seat=1, others="echo")
    _raises(lambda: env.step("x"), BEFORE.format("step"))
    env.reset(seed=0)
    *_, terminated, truncated, _ = env.step("\\boxed{-1}")
    assert terminated or truncated
    _raises(lambda: env.step("again"), ENDED.format("step"))


def test_parallel_view_before_reset_and_after_the_end():
    independent = dataclasses.replace(
        get_workflow("math-dual"), name="math-dual-independent", dependency=independent_matrix(2)
    )
    env = parallel_env("arith-2agent", workflow=independent)
    actions = dict.fromkeys(env.possible_agents, "\\boxed{-1}")
    # PettingZoo's own converter returns empty dicts here; the view names the misuse instead
    _raises(lambda: env.step(actions), BEFORE.format("step"))
    env.reset(seed=0)
    _, _, terminations, _, _ = env.step(actions)
    assert all(terminations.values())
    _raises(lambda: env.step(actions), ENDED.format("step"))


def test_order_messages_are_recognised_and_others_are_not():
    """How the client tells the server's order error from its other errors."""
    for has_reset, ended in ((False, False), (True, True)):
        with pytest.raises(EnvOrderError) as e:
            require_episode("step", has_reset=has_reset, ended=ended, hint=" (hint)")
        assert EnvOrderError.is_order_message(str(e.value))
    require_episode("step", has_reset=True)  # a running episode: nothing raised
    for other in ("it is 'reasoner_0''s turn", "step() called before reset(): call it twice",
                  "x y() called before reset(): call reset(seed=...) first", ""):
        assert not EnvOrderError.is_order_message(other)
