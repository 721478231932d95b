"""The bundle schema: validation, versioning, building from played episodes, reading and writing."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

import marft_envs
from leaderboard.schema import SCHEMA_VERSION, Bundle, read_bundle, write_bundle


def test_from_episodes_describes_the_environment(honest_bundle: Bundle) -> None:
    env = marft_envs.make("arith-2agent")
    ds = env.unwrapped.dataset
    b = honest_bundle
    assert b.schema_version == SCHEMA_VERSION
    assert b.env_id == "arith-2agent-v1" and b.env_spec["id"] == "arith-2agent-v1"
    assert b.env_spec["kwargs"]["dataset"] == "arith"
    assert (b.dataset.name, b.dataset.split, b.dataset.hash, b.dataset.size) == (ds.name, ds.split, ds.hash, 5)
    assert b.team_size == 2 and b.seeds == [0, 1] and len(b.episodes) == 10
    assert b.package_version == marft_envs.__version__
    ep = b.episodes[0]
    assert ep.task_id == ds.ids[0] and ep.seed == 0
    assert [t.agent for t in ep.turns] == env.possible_agents
    assert ep.final_output == ep.turns[-1].action
    assert ep.claimed_score == 1.0 and b.episodes[1].claimed_score == 0.0


@pytest.mark.parametrize("as_file", [False, True])
def test_write_and_read_round_trip(honest_bundle: Bundle, tmp_path, as_file: bool) -> None:
    target = tmp_path / ("b.json" if as_file else "bundle-dir")
    written = write_bundle(honest_bundle, target)
    assert written == (target if as_file else target / "bundle.json")
    assert read_bundle(target) == honest_bundle


def test_read_bundle_names_the_missing_path(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="bundle.json"):
        read_bundle(tmp_path / "nowhere")


def _mutated(bundle: Bundle, **changes) -> dict:
    d = bundle.model_dump(mode="json")
    d.update(changes)
    return d


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"schema_version": 99}, "schema_version 99 is not supported"),
        ({"method": "magic"}, "marft"),
        ({"seeds": [0, 0]}, "seeds must be distinct"),
        ({"episodes": []}, "at least 1"),
        ({"claimed_score": 1.5}, "less than or equal to 1"),
        ({"surprise": 1}, "Extra inputs are not permitted"),
        ({"env_spec": {"id": "arith-3agent"}}, "does not match env_id"),
    ],
)
def test_invalid_bundles_fail_with_a_reason(honest_bundle: Bundle, changes: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Bundle.model_validate(_mutated(honest_bundle, **changes))


def test_bundle_json_is_plain_json(honest_bundle: Bundle) -> None:
    d = json.loads(honest_bundle.model_dump_json())
    assert set(d) >= {
        "schema_version", "env_id", "env_spec", "dataset", "package_version", "method", "model",
        "config", "seeds", "team_size", "claimed_score", "episodes",
    }
    assert set(d["episodes"][0]) == {"task_id", "seed", "turns", "final_output", "claimed_score"}


def test_evaluation_plan_lists_what_a_bundle_must_cover(honest_bundle: Bundle) -> None:
    plan = marft_envs.evaluation_plan("arith-2agent", seeds=(0, 1), size=5)
    assert plan == [(e.seed, e.task_id) for e in honest_bundle.episodes]
    assert len(marft_envs.evaluation_plan("arith-2agent")) == len(marft_envs.make("arith-2agent").unwrapped.dataset)


def test_from_episodes_names_a_missing_spec() -> None:
    env = marft_envs.make("arith-2agent")
    env.unwrapped.spec = None  # as a FlexMGEnv built directly rather than by make()
    with pytest.raises(ValueError, match="env has no spec: build it with marft_envs.make"):
        Bundle.from_episodes(env, [], method="marft", model="m")
