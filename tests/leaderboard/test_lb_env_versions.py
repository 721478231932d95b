"""Environment versions on the leaderboard: every bundle names a versioned id and its
fingerprint; a forged, missing or mismatched fingerprint is refused and changes nothing; rows
are ranked only against rows of the same version; old bundles are listed as unversioned."""

from __future__ import annotations

import dataclasses

import pytest
from fastapi.testclient import TestClient
from lb_helpers import play_bundle
from pydantic import ValidationError

import marft_envs
from leaderboard.db import open_db
from leaderboard.ranking import leaderboard_rows
from leaderboard.regrade import BundleRejected, regrade
from leaderboard.schema import SCHEMA_VERSION, Bundle
from leaderboard.server import create_app
from marft_envs.registry import OutdatedEnvWarning


@pytest.fixture
def app(tmp_path):
    database = open_db(f"sqlite:///{tmp_path / 'lb.db'}")
    secret = database.create_token("lab")
    with TestClient(create_app(database)) as client:
        client.headers["Authorization"] = f"Bearer {secret}"
        yield client, database


def _submit(client, bundle: Bundle | dict):
    body = bundle.model_dump_json() if isinstance(bundle, Bundle) else None
    if body is None:
        import json

        body = json.dumps(bundle)
    return client.post("/api/submissions", content=body)


@pytest.fixture
def versioned_pair():
    """``lbver-2agent-v1`` (arith, math-dual) and, once ``add_v2()`` is called, a ``-v2``
    whose actor prompt has one more sentence: a behaviour change, so a new version."""
    dual = marft_envs.get_workflow("math-dual")
    own = marft_envs.register_workflow(dataclasses.replace(dual, name="lbver-dual"), overwrite=True)
    base = {**marft_envs.spec("arith-2agent").kwargs, "workflow": own.name}
    marft_envs.register("lbver-2agent-v1", "marft_envs.flexmg:FlexMGEnv", kwargs=base)
    actor = dataclasses.replace(dual.roles[1], instructions=dual.roles[1].instructions + " Hurry.")
    changed = marft_envs.register_workflow(
        dataclasses.replace(dual, name="lbver-dual-2", roles=(dual.roles[0], actor)),
        overwrite=True,
    )

    def add_v2() -> None:
        marft_envs.register(
            "lbver-2agent-v2", "marft_envs.flexmg:FlexMGEnv", kwargs={**base, "workflow": changed.name}
        )

    yield add_v2
    for env_id in ("lbver-2agent-v1", "lbver-2agent-v2"):
        if env_id in marft_envs.registry:
            del marft_envs.registry[env_id]


def test_bundles_record_the_versioned_id_and_the_fingerprint(honest_bundle) -> None:
    env = marft_envs.make("arith-2agent")
    fp = env.unwrapped.fingerprint
    assert honest_bundle.schema_version == SCHEMA_VERSION == 3
    assert honest_bundle.env_id == honest_bundle.env_spec["id"] == "arith-2agent-v1"
    assert honest_bundle.fingerprint is not None
    assert honest_bundle.fingerprint.digest == fp.digest
    assert honest_bundle.fingerprint.parts == dict(fp.parts)
    grade = regrade(honest_bundle)
    assert (grade.env_version, grade.env_fingerprint) == (1, fp.digest)


@pytest.mark.parametrize(
    "change, match",
    [
        (lambda d: d.pop("fingerprint"), "fingerprint is missing"),
        (lambda d: d.update(fingerprint=None), "fingerprint is missing"),
        (lambda d: d["fingerprint"].update(digest="0" * 64), "edited or forged"),
        (lambda d: d["fingerprint"]["parts"].update(workflow="1" * 64), "edited or forged"),
        (lambda d: d["fingerprint"]["parts"].pop("rules"), r"lacks \['rules'\]"),
        (lambda d: d["fingerprint"].update(digest="not-hex"), "fingerprint.digest"),
        (lambda d: d.update(grader_version="math-0"), "not taken under grader_version 'math-0'"),
        (lambda d: d.update(env_id="arith-2agent", env_spec={**d["env_spec"], "id": "arith-2agent"}), "has no version"),
    ],
)
def test_a_forged_or_missing_fingerprint_is_refused_and_changes_nothing(
    app, honest_bundle, change, match
) -> None:
    client, database = app
    data = honest_bundle.model_dump(mode="json")
    change(data)
    with pytest.raises(ValidationError, match=match):
        Bundle.model_validate(data)
    before = database.row_counts()
    r = _submit(client, data)
    assert r.status_code == 422 and "invalid bundle" in r.json()["detail"], r.text
    assert database.row_counts() == before


def test_a_bundle_played_on_a_changed_environment_is_refused_naming_both(
    app, versioned_pair
) -> None:
    """Consistent in itself (digest of its parts), but played on a prompt the id does not have:
    the leaderboard re-computes the id's fingerprint and refuses, naming both digests."""
    client, database = app
    bundle = play_bundle("lbver-2agent-v1", n_tasks=3)
    # the id's workflow edited in place, under the same name (a prompt change whose version
    # bump was forgotten): nothing in env_spec differs, but the fingerprint does
    changed = marft_envs.get_workflow("lbver-dual-2")
    marft_envs.register_workflow(dataclasses.replace(changed, name="lbver-dual"), overwrite=True)
    here = marft_envs.make("lbver-2agent-v1").unwrapped.fingerprint.digest
    with pytest.raises(BundleRejected) as err:
        regrade(bundle)
    message = str(err.value)
    assert "fingerprint mismatch for 'lbver-2agent-v1'" in message
    assert bundle.fingerprint.digest[:16] in message and here[:16] in message
    assert "parts that differ: workflow" in message
    before = database.row_counts()
    r = _submit(client, bundle)
    assert r.status_code == 422 and "fingerprint mismatch" in r.json()["detail"]
    assert database.row_counts() == before


def test_a_v1_bundle_submitted_after_v2_exists_is_ranked_under_v1_only(
    app, versioned_pair
) -> None:
    client, database = app
    v1_low = play_bundle("lbver-2agent-v1", correct=lambda i: i < 2, model="v1-low")  # 0.4
    versioned_pair()  # -v2 is registered: make("lbver-2agent") now builds it
    assert marft_envs.make("lbver-2agent").spec.id == "lbver-2agent-v2"
    v2 = play_bundle("lbver-2agent", correct=lambda i: i < 1, model="v2-only")  # 0.2, on -v2
    assert v2.env_id == "lbver-2agent-v2"
    with pytest.warns(OutdatedEnvWarning, match="lbver-2agent-v2 is the newest"):
        v1_high = play_bundle("lbver-2agent-v1", correct=lambda i: i < 4, model="v1-high")  # 0.8
    for b in (v1_low, v2, v1_high):
        r = _submit(client, b)
        assert r.status_code == 201, r.text
    rows = leaderboard_rows(database.submissions(family="lbver"))
    ranked = [(r["model"], r["env_version"], r["group"], r["rank"]) for r in rows]
    assert ranked == [
        ("v1-high", 1, "lbver-v1", 1),
        ("v1-low", 1, "lbver-v1", 2),
        ("v2-only", 2, "lbver-v2", 1),
    ]
    page = client.get("/?family=lbver").text
    assert 'id="table-lbver-v1"' in page and 'id="table-lbver-v2"' in page
    assert '<td class="version"' in page and ">v2</td>" in page
    api = client.get("/api/leaderboard", params={"family": "lbver"}).json()
    assert {r["model"]: r["env_version"] for r in api} == {"v1-high": 1, "v1-low": 1, "v2-only": 2}
    assert client.get("/plots/lbver.png", params={"version": 1}).status_code == 200


def test_an_old_bundle_is_listed_as_unversioned_and_never_ranked(app, honest_bundle) -> None:
    client, database = app
    old = honest_bundle.model_dump(mode="json")
    old["schema_version"] = 2
    del old["fingerprint"]
    old["env_id"] = old["env_spec"]["id"] = "arith-2agent"  # ids had no version then
    assert _submit(client, old).status_code == 201
    assert _submit(client, play_bundle(correct=lambda i: i < 1, model="new")).status_code == 201
    rows = leaderboard_rows(database.submissions(family="arith"))
    by_model = {r["model"]: r for r in rows}
    assert by_model["new"]["rank"] == 1 and by_model["new"]["group"] == "arith-v1"
    legacy = by_model["scripted-oracle"]
    assert legacy["unversioned"] and legacy["rank"] is None and legacy["env_version"] is None
    assert legacy["verified_score"] == pytest.approx(0.6)  # re-graded all the same
    assert rows[-1] is legacy  # after the ranked rows
    page = client.get("/").text
    assert 'id="unversioned-arith"' in page and "Unversioned" in page
    sub = client.get(f"/submissions/{legacy['id']}").text
    assert "unversioned (recorded before environment versions" in sub


def test_a_bundle_with_overrides_is_ranked_apart_from_the_registered_settings(
    app, tmp_path, capsys
) -> None:
    """horizon=2 changes the fingerprint: the row is ranked in its own group, named by its
    overrides, shown as its own table, and the overrides are visible in the API, the submission
    page, ``show`` and ``export``."""
    from leaderboard.cli import main

    client, database = app
    default = play_bundle(correct=lambda i: i < 2, model="registered")  # 0.4
    longer = play_bundle(correct=lambda i: i < 4, model="longer", horizon=2)  # 0.8
    assert longer.fingerprint.digest != default.fingerprint.digest
    ids = {}
    for b in (default, longer):
        r = _submit(client, b)
        assert r.status_code == 201, r.text
        ids[b.model] = r.json()["id"]
    rows = leaderboard_rows(database.submissions(family="arith"))
    ranked = {r["model"]: (r["group"], r["rank"], r["env_overrides"]) for r in rows}
    assert ranked == {
        "registered": ("arith-v1", 1, {}),
        "longer": ("arith-v1 horizon=2", 1, {"horizon": 2}),
    }
    api = {r["model"]: r for r in client.get("/api/leaderboard", params={"family": "arith"}).json()}
    assert api["longer"]["group"] == "arith-v1 horizon=2" and api["longer"]["rank"] == 1
    assert api["longer"]["overrides"] == "horizon=2" and api["registered"]["overrides"] == ""
    detail = client.get(f"/api/submissions/{ids['longer']}").json()
    assert detail["env_overrides"] == {"horizon": 2}
    page = client.get("/?family=arith").text
    assert 'id="table-arith-v1"' in page and 'id="table-arith-v1-horizon-2"' in page
    assert page.index('id="table-arith-v1"') < page.index('id="table-arith-v1-horizon-2"')
    assert "overrides=horizon%3D2" in page  # the group's own plot
    plot = client.get("/plots/arith.png", params={"version": 1, "overrides": "horizon=2"})
    assert plot.status_code == 200
    assert "horizon=2" in client.get(f"/submissions/{ids['longer']}").text

    url = str(database.engine.url)
    assert main(["show", "--db", url]) == 0
    shown = capsys.readouterr().out
    assert "horizon=2" in shown and "registered" in shown
    assert main(["export", "csv", "--db", url]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert "overrides" in header.split(",") and "group" in header.split(",")
    assert any("horizon=2" in line and "arith-v1 horizon=2" in line for line in lines)


def test_grades_keep_the_overrides_that_change_the_environment() -> None:
    from leaderboard.models import Submission, submission_summary

    assert regrade(play_bundle(horizon=2, n_tasks=2)).env_overrides == {"horizon": 2}
    assert regrade(play_bundle(n_tasks=2)).env_overrides == {}
    assert regrade(play_bundle(n_tasks=2, seed=7)).env_overrides == {}  # the default seed: neutral
    # rows stored before migration 0004 (NULL) have no overrides: the registered settings
    old = Submission(env_overrides=None, env_family="arith", env_version=1)
    assert submission_summary(old)["env_overrides"] == {}
