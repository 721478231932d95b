"""Versioned ids, environment fingerprints, and the committed table that makes a behaviour
change without a version bump fail (tests/env_fingerprints.py)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

import marft_envs
from marft_envs import Role, Workflow
from marft_envs.fingerprint import FINGERPRINT_RECIPE, PARTS, combine_parts, env_fingerprint
from marft_envs.registry import OutdatedEnvWarning, parse_env_id, versions
from tests.env_fingerprints import (
    bump_message,
    builtin_ids,
    changed_parts,
    fingerprint_entry,
    load_table,
)

BUILTIN = builtin_ids()


# ------------------------------------------------------------------------ the committed table


def test_every_builtin_id_is_versioned() -> None:
    unversioned = [i for i in BUILTIN if parse_env_id(i)[1] is None]
    assert not unversioned, f"register these as Name-v1: {unversioned}"


def family_version_problems(ids: list[str]) -> list[str]:
    """Where the ids of a family do not share their version history: every id of a family must
    have the family's newest version, with its versions running without gaps up to it (a team
    size added later starts at the family's version then). The leaderboard ranks a family at
    one version number together (``arith-v2``: ``arith-2agent-v2`` with ``arith-3agent-v2``), so
    a version number must name one generation of the whole family: a bump bumps all its ids."""
    by_family: dict[str, dict[str, list[int]]] = {}
    for env_id in ids:
        spec = marft_envs.spec(env_id)
        if spec.version is not None:
            by_family.setdefault(spec.family, {}).setdefault(spec.name, []).append(spec.version)
    problems = []
    for family, names in sorted(by_family.items()):
        newest = max(max(v) for v in names.values())
        for name, found in sorted(names.items()):
            if sorted(found) != list(range(min(found), newest + 1)):
                problems.append(
                    f"{family}: {name} has versions {sorted(found)}, but the family is at "
                    f"v{newest}; bump every id of {family!r} together (or name the changed ids "
                    "another family)"
                )
    return problems


def test_the_ids_of_a_family_share_their_versions() -> None:
    assert family_version_problems(BUILTIN) == []


def test_a_version_bump_of_one_id_of_a_family_is_caught() -> None:
    """``arith-2agent-v2`` alone would rank with ``arith-3agent-v2`` once that exists, a
    different generation, and its v1 rows with the other ids' v1: refused."""
    spec = marft_envs.spec("arith-2agent")
    marft_envs.register("arith-2agent-v2", spec.entry_point, kwargs=dict(spec.kwargs))
    try:
        problems = family_version_problems(sorted(marft_envs.registry))
    finally:
        del marft_envs.registry["arith-2agent-v2"]
    assert problems == [
        f"arith: arith-{n}agent has versions [1], but the family is at v2; bump every id of "
        "'arith' together (or name the changed ids another family)"
        for n in (3, 4)
    ]
    assert family_version_problems(["arith-2agent-v1", "arith-3agent-v1"]) == []


def test_every_registered_id_keeps_its_recorded_fingerprint() -> None:
    table = load_table()
    problems = []
    for env_id in BUILTIN:
        if env_id not in table:
            problems.append(
                f"{env_id}: not in tests/data/env_fingerprints.json; record it with "
                "`.venv/bin/python -m tests.env_fingerprints --write`"
            )
            continue
        recorded = table[env_id]
        if recorded.get("recipe") != FINGERPRINT_RECIPE:
            problems.append(
                f"{env_id}: recorded under fingerprint recipe {recorded.get('recipe')} but the "
                f"recipe is {FINGERPRINT_RECIPE}: re-record with "
                "`.venv/bin/python -m tests.env_fingerprints --write`"
            )
            continue
        now = fingerprint_entry(env_id, grader_version=recorded["grader_version"])
        parts = changed_parts(recorded, now)
        if parts:
            problems.append(bump_message(env_id, parts))
    gone = sorted(set(table) - set(BUILTIN))
    if gone:
        problems.append(
            f"recorded ids no longer registered: {gone}; an older version stays registered and "
            "playable when a newer one is added"
        )
    assert not problems, "\n".join(problems)


def test_the_table_names_the_current_grader_versions() -> None:
    # A grader bump is not an environment bump (the leaderboard re-grades), but the table says
    # which grader each fingerprint was taken under, so it is re-recorded in the same commit.
    # Every id (the games' graders too), also those whose data is not here (fingerprint_entry
    # stands a dataset in for them).
    table = load_table()
    stale = {
        i: (table[i]["grader_version"], fingerprint_entry(i)["grader_version"])
        for i in BUILTIN
        if i in table
    }
    stale = {i: v for i, v in stale.items() if v[0] != v[1]}
    assert not stale, (
        f"grader versions moved {stale}: run `.venv/bin/python -m tests.env_fingerprints --write`"
    )


@pytest.fixture
def changed_trio():
    """math-trio with one word of a role prompt changed in place (restored afterwards)."""
    trio = marft_envs.get_workflow("math-trio")
    roles = list(trio.roles)
    roles[1] = dataclasses.replace(roles[1], instructions=roles[1].instructions.replace(
        "carefully", "quickly"))
    marft_envs.register_workflow(dataclasses.replace(trio, roles=tuple(roles)), overwrite=True)
    yield
    marft_envs.register_workflow(trio, overwrite=True)


def test_a_changed_role_prompt_without_a_bump_fails_naming_the_id(changed_trio) -> None:
    # what the table test sees when one word of a registered role prompt changes in place
    table = load_table()
    now = fingerprint_entry("arith-3agent-v1", grader_version=table["arith-3agent-v1"]["grader_version"])
    parts = changed_parts(table["arith-3agent-v1"], now)
    assert parts == ["workflow"]
    message = bump_message("arith-3agent-v1", parts)
    assert "arith-3agent-v1" in message and "bump the version" in message
    assert "arith-3agent-v2" in message
    # ids on other workflows are untouched
    duo = table["arith-2agent-v1"]
    assert not changed_parts(duo, fingerprint_entry("arith-2agent-v1", duo["grader_version"]))


# ---------------------------------------------------------------------------- fingerprints


def test_spec_and_env_agree_and_overrides_give_another_fingerprint() -> None:
    spec = marft_envs.spec("arith-3agent")
    env = marft_envs.make("arith-3agent")
    fp = env.unwrapped.fingerprint
    assert spec.fingerprint == fp and spec.fingerprint is spec.fingerprint  # cached per spec
    assert fp.digest == combine_parts(fp.parts) and set(fp.parts) == set(PARTS)
    assert len(fp.digest) == 64 and fp.digest == str(fp)
    cases = {
        "rules": {"horizon": 2},
        "workflow": {"roles": False},
        "dataset": {"split": "train"},
        "verifier": {"verifier_kwargs": {"last_number_fallback": False}},
    }
    for part, overrides in cases.items():
        other = marft_envs.make("arith-3agent", **overrides).unwrapped.fingerprint
        assert other.digest != fp.digest, overrides
        assert part in other.differing_parts(fp), (part, other.differing_parts(fp))
    # settings that change nothing an agent sees or a verdict keep it
    same = marft_envs.make("arith-3agent", seed=123, render_mode="ansi").unwrapped.fingerprint
    assert same == fp


def test_a_custom_workflow_is_fingerprinted_not_the_registered_one() -> None:
    wf = Workflow("fp-pair", (Role("solver", "Solve it."), Role("checker", "Check it.")))
    env = marft_envs.make("arith-2agent", workflow=wf)
    assert env.unwrapped.fingerprint.digest != marft_envs.spec("arith-2agent").fingerprint.digest
    assert env.spec.id == "arith-2agent-v1"  # the id it came from; the fingerprint tells it apart


def test_a_verifier_is_identified_by_its_name_and_settings_not_its_class() -> None:
    from marft_envs.verifiers import MathVerifier

    class Moved(MathVerifier):  # the same grader under another class and module (a refactor)
        pass

    registered = marft_envs.make("arith-2agent").unwrapped.fingerprint
    assert marft_envs.make("arith-2agent", verifier=Moved()).unwrapped.fingerprint == registered
    other = marft_envs.make("arith-2agent", verifier=MathVerifier(last_number_fallback=False))
    assert other.unwrapped.fingerprint.differing_parts(registered) == ["verifier"]

    class Opaque:  # declares no settings: its class identifies it
        name = "math"
        version = Moved.version

        def grade(self, response, task):
            return Moved().grade(response, task)

        def feedback(self, response, task, verdict, mode):
            return ""

    opaque = marft_envs.make("arith-2agent", verifier=Opaque()).unwrapped.fingerprint
    assert opaque.differing_parts(registered) == ["verifier"]


def test_the_grader_version_is_a_part_of_its_own() -> None:
    env = marft_envs.make("arith-2agent").unwrapped
    fp = env.fingerprint
    older = env_fingerprint(env, grader_version="math-0")
    assert older.digest != fp.digest and older.differing_parts(fp) == ["grader"]
    assert older.grader_version == "math-0"


def test_the_dataset_hash_is_computed_once_per_dataset(monkeypatch) -> None:
    import tasks
    import tasks.dataset

    calls = []
    real = tasks.dataset.content_hash
    monkeypatch.setattr(tasks.dataset, "content_hash", lambda ts: calls.append(1) or real(ts))
    ds = tasks.load("arith", split="test", cache=False)  # a fresh Dataset: nothing cached yet
    env = marft_envs.make("arith-2agent", dataset=ds).unwrapped
    first = env.fingerprint
    again = marft_envs.make("arith-2agent", dataset=ds).unwrapped.fingerprint
    assert first == again and len(calls) == 1  # hashed once, then read from the Dataset


# ----------------------------------------------------------------------------- versions


@pytest.fixture
def two_versions():
    """``fpv-2agent-v1`` and a ``-v2`` whose second role prompt differs by one word."""
    base = {"dataset": "arith", "workflow": "math-dual"}
    marft_envs.register("fpv-2agent-v1", "marft_envs.flexmg:FlexMGEnv", kwargs=base)
    dual = marft_envs.get_workflow("math-dual")
    actor = dataclasses.replace(dual.roles[1], instructions=dual.roles[1].instructions + " Be brief.")
    v2 = dataclasses.replace(dual, roles=(dual.roles[0], actor), name="fpv-dual-2")
    marft_envs.register("fpv-2agent-v2", "marft_envs.flexmg:FlexMGEnv",
                        kwargs={**base, "workflow": v2})
    yield
    del marft_envs.registry["fpv-2agent-v1"]
    del marft_envs.registry["fpv-2agent-v2"]


def test_unversioned_make_gives_the_newest_version_silently(two_versions) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = marft_envs.make("fpv-2agent")
    assert env.spec.id == "fpv-2agent-v2" and env.spec.version == 2
    assert env.spec.name == "fpv-2agent" and env.spec.family == "fpv" and env.spec.team_size == 2
    assert versions("fpv-2agent") == [1, 2]
    env.reset(seed=0)
    env.step("a")
    env.step("\\boxed{1}")
    assert env.episode().env_id == "fpv-2agent-v2"


def test_an_older_version_stays_playable_and_warns(two_versions) -> None:
    with pytest.warns(OutdatedEnvWarning, match="fpv-2agent-v2 is the newest"):
        old = marft_envs.make("fpv-2agent-v1")
    assert old.spec.id == "fpv-2agent-v1"
    new = marft_envs.make("fpv-2agent-v2")
    assert old.unwrapped.fingerprint.differing_parts(new.unwrapped.fingerprint) == ["workflow"]
    old.reset(seed=3)
    for _agent in old.agent_iter():
        _, _, term, trunc, _ = old.last()
        old.step(None if term or trunc else "\\boxed{0}")
    assert old.episode().env_id == "fpv-2agent-v1"


def test_an_unknown_version_names_the_versions_that_exist(two_versions) -> None:
    with pytest.raises(KeyError) as e:
        marft_envs.make("fpv-2agent-v9")
    message = str(e.value)
    assert "v9" in message and "fpv-2agent-v1" in message and "fpv-2agent-v2" in message
    with pytest.raises(KeyError, match="math-3agent-v1"):
        marft_envs.make("math-3agent-v9")


def test_a_name_is_registered_with_versions_or_without(two_versions) -> None:
    with pytest.raises(ValueError, match="versions .* exist"):
        marft_envs.register("fpv-2agent", "marft_envs.flexmg:FlexMGEnv")
    marft_envs.register("fpplain-2agent", "marft_envs.flexmg:FlexMGEnv")
    try:
        with pytest.raises(ValueError, match="unversioned id 'fpplain-2agent' is registered"):
            marft_envs.register("fpplain-2agent-v1", "marft_envs.flexmg:FlexMGEnv")
    finally:
        del marft_envs.registry["fpplain-2agent"]


def test_a_version_with_leading_zeros_is_refused() -> None:
    # 'foo-v01' would be version 1, which make('foo') then looks up as 'foo-v1'
    spec = marft_envs.spec("arith-2agent-v1")
    with pytest.raises(ValueError, match="without leading zeros, lbzero-2agent-v1"):
        marft_envs.register("lbzero-2agent-v01", spec.entry_point, kwargs=dict(spec.kwargs))
    assert not versions("lbzero-2agent")


def test_pprint_registry_shows_versions(two_versions) -> None:
    text = marft_envs.pprint_registry(print_output=False)
    assert "fpv-2agent-v1" in text and "fpv-2agent-v2" in text
    line = next(ln for ln in text.splitlines() if "fpv-2agent-v2" in ln)
    assert "v2 newest" in line
    assert "newest" not in next(ln for ln in text.splitlines() if "fpv-2agent-v1" in ln)
