"""Worked examples shown as earlier chat turns (``Workflow.examples``, ``arith0-*-v2``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import marft_envs
from marft_envs import Role, Workflow
from marft_envs.fingerprint import env_fingerprint

ROOT = Path(__file__).resolve().parents[2]


SHOWN = ["system", "user", "assistant", "user", "assistant", "user"]  # two examples, then the turn


def _user_turns(messages: list[dict[str, str]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


def test_v2_is_the_newest_arith0_and_shows_each_agent_its_examples_before_its_turn():
    env = marft_envs.make("arith0-2agent")
    assert env.spec.id == "arith0-2agent-v2"
    env.reset(seed=0)
    solver = env.messages("solver_0")
    assert [m["role"] for m in solver] == SHOWN
    assert solver[0]["content"] == "You add two numbers."
    assert "Compute 2 + 3." in solver[1]["content"] and solver[2]["content"] == "2 + 3 = 5"
    assert solver[4]["content"] == "14 + 9 = 23"
    assert env.unwrapped.task.prompt in solver[-1]["content"]
    env.step("1 + 1 = 2")
    answerer = env.messages("answerer_1")
    # the answerer's example turns show the solver's example reply, as its real turn shows the
    # solver's action (the chain dependency)
    assert "[solver_0]\n2 + 3 = 5" in answerer[1]["content"] and answerer[2]["content"] == "5"
    assert "[solver_0]\n1 + 1 = 2" in answerer[-1]["content"]
    # observe()'s single-string prompt carries the same examples
    prompt = env.observe("answerer_1")["prompt"]
    assert prompt.index("## Example reply\n5") < prompt.index("[solver_0]\n1 + 1 = 2")


def test_the_turn_record_holds_the_messages_the_agent_acted_on():
    env = marft_envs.make("arith0-2agent")
    env.reset(seed=3)
    before = env.messages("solver_0")
    env.step("4 + 4 = 8")
    env.step("8")
    (first, _) = env.unwrapped.episode().turns
    assert first.messages == before


def test_examples_follow_the_dependency_and_the_order_ablations():
    parallel = marft_envs.make("arith0-2agent", dependency="parallel")
    parallel.reset(seed=0)
    parallel.step("x")
    shown = _user_turns(parallel.messages("answerer_1"))
    assert all("Teammates" not in u for u in shown)  # sees no teammate, in examples too
    reversed_ = marft_envs.make("arith0-2agent", order="reversed")
    reversed_.reset(seed=0)
    first = reversed_.messages(reversed_.agent_selection)
    assert reversed_.agent_selection == "answerer_0" and first[2]["content"] == "5"
    reversed_.step("7")
    solver = reversed_.messages("solver_1")
    assert "[answerer_0]\n5" in solver[1]["content"] and solver[2]["content"] == "2 + 3 = 5"


def test_a_role_without_a_reply_per_example_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"role 'b' gives 0 example replies for 1 worked"):
        Workflow(
            "w",
            (Role("a", "A", example_replies=("1",)), Role("b", "B")),
            examples=("Compute 1 + 0.",),
        )


def test_the_generic_prompt_ablation_drops_the_examples():
    wf = marft_envs.get_workflow("sum-duo-shots").without_roles()
    assert wf.examples == () and all(r.example_replies == () for r in wf.roles)
    env = marft_envs.make("arith0-2agent", roles=False)
    env.reset(seed=0)
    assert [m["role"] for m in env.messages(env.agent_selection)] == ["system", "user"]


def test_v1_keeps_its_recorded_fingerprint_and_v2_differs_in_the_workflow_part():
    recorded = json.loads((ROOT / "tests" / "data" / "env_fingerprints.json").read_text())
    v1 = env_fingerprint(marft_envs.make("arith0-2agent-v1"))
    v2 = env_fingerprint(marft_envs.make("arith0-2agent-v2"))
    assert recorded["arith0-2agent-v1"]["digest"] == v1.digest
    assert v1.parts["prompts"] == v2.parts["prompts"]
    assert v1.parts["workflow"] != v2.parts["workflow"]


def test_the_trl_seat_prompt_carries_the_seats_examples():
    pytest.importorskip("datasets")
    from marft_envs.trl_bridge import seat_dataset

    rows = seat_dataset("arith0-2agent", "answerer_1", n=2)
    prompt = rows[0]["prompt"]
    assert [m["role"] for m in prompt] == SHOWN
    assert prompt[2]["content"] == "5"
