"""Grader versions through the real server, CLI and page (headless Chromium): which grader
graded each row, stale rows listed apart, ``marft-leaderboard regrade`` bringing them back."""

from __future__ import annotations

import csv
import io
import json

import httpx
import pytest
from lb_helpers import HTTP_TIMEOUT, cli, launch_chromium, play_bundle, save_screenshot
from playwright.sync_api import sync_playwright
from sqlalchemy import update

from leaderboard.models import Submission
from leaderboard.schema import write_bundle
from marft_envs.math import version as math_version

MATH = math_version.GRADER_VERSION


@pytest.fixture(scope="module")
def ids(server, token, tmp_path_factory) -> dict[str, int]:
    """Three submissions through the CLI: a (0.8) and b (0.4) on arith-2agent, c (1.0) on
    arith-3agent."""
    out = tmp_path_factory.mktemp("bundles")
    plays = {
        "a": ("arith-2agent", lambda i: i < 4),
        "b": ("arith-2agent", lambda i: i < 2),
        "c": ("arith-3agent", lambda i: True),
    }
    paths = [
        str(write_bundle(play_bundle(env, model=f"model-{k}", correct=ok), out / f"{k}.json"))
        for k, (env, ok) in plays.items()
    ]
    proc = cli("submit", *paths, "--server", server.url, "--token", token, "--json")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["grader_version"] for r in results] == [MATH] * 3
    return {k: r["id"] for k, r in zip(plays, results)}


def _page_rows(page, table: str, column: str) -> list[str]:
    return page.locator(f"{table} tbody tr td.{column}").all_inner_texts()


def test_every_row_names_its_grader(server, ids) -> None:
    rows = httpx.get(f"{server.url}/api/leaderboard", timeout=HTTP_TIMEOUT).json()
    assert [(r["model"], r["rank"], r["grader_version"], r["stale"]) for r in rows] == [
        ("model-c", 1, MATH, False),
        ("model-a", 2, MATH, False),
        ("model-b", 3, MATH, False),
    ]
    detail = httpx.get(f"{server.url}/api/submissions/{ids['a']}", timeout=HTTP_TIMEOUT).json()
    assert detail["grader_version"] == detail["current_grader_version"] == MATH
    assert detail["bundle_grader_version"] == MATH and detail["previous_score"] is None
    exported = list(
        csv.DictReader(io.StringIO(cli("export", "csv", "--server", server.url).stdout))
    )
    assert [(r["rank"], r["grader_version"], r["stale"]) for r in exported] == [
        (str(i), MATH, "False") for i in (1, 2, 3)
    ]
    assert MATH in cli("show", "--db", server.db_url).stdout


def test_stale_rows_are_listed_apart_until_regrade(server, ids, db, tmp_path) -> None:
    with db.sessions.begin() as s:
        # b as an older grader scored it; c can no longer be re-graded (its dataset changed)
        s.execute(
            update(Submission)
            .where(Submission.id == ids["b"])
            .values(grader_version="math-0", verified_score=0.1)
        )
        s.execute(
            update(Submission)
            .where(Submission.id == ids["c"])
            .values(grader_version="math-0", dataset_hash="f" * 64)
        )

    rows = httpx.get(f"{server.url}/api/leaderboard", timeout=HTTP_TIMEOUT).json()
    assert [(r["model"], r["rank"], r["stale"], r["grader_version"]) for r in rows] == [
        ("model-a", 1, False, MATH),
        ("model-c", None, True, "math-0"),
        ("model-b", None, True, "math-0"),
    ]
    assert {r["current_grader_version"] for r in rows} == {MATH}
    exported = list(csv.DictReader(io.StringIO(cli("export", "csv", "--db", server.db_url).stdout)))
    assert [(r["rank"], r["stale"]) for r in exported] == [
        ("1", "False"),
        ("", "True"),
        ("", "True"),
    ]

    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.goto(server.url + "/")
        assert _page_rows(page, "#table-arith-v1", "model") == ["model-a"]
        assert _page_rows(page, "#table-arith-v1", "grader") == [MATH]
        assert _page_rows(page, "#stale-arith-v1", "model") == ["model-c", "model-b"]
        assert _page_rows(page, "#stale-arith-v1", "grader") == ["math-0", "math-0"]
        assert _page_rows(page, "#stale-arith-v1", "current-grader") == [MATH, MATH]
        assert _page_rows(page, "#stale-arith-v1", "score")[1].startswith("0.100 [")
        assert _page_rows(page, "#stale-arith-v1", "new-score") == ["pending re-grade"] * 2
        save_screenshot(page, tmp_path, "leaderboard-stale.png")
        page.goto(f"{server.url}/submissions/{ids['b']}")
        assert "stale" in page.inner_text("#grader") and MATH in page.inner_text("#grader")

        first = cli("regrade", "--db", server.db_url, check=False)
        assert first.returncode == 1, first.stdout + first.stderr
        assert (
            f"submission {ids['b']} (arith-2agent-v1): re-graded math-0 -> {MATH}: 0.100 -> 0.400"
            in first.stdout
        )
        assert f"submission {ids['c']} (arith-3agent-v1): NOT re-graded (rejected)" in first.stderr
        assert "does not match the registered dataset" in first.stderr
        assert (
            first.stdout.splitlines()[-1] == "1 re-graded, 1 failed, 0 skipped, 1 already current"
        )

        page.goto(server.url + "/")
        assert _page_rows(page, "#table-arith-v1", "model") == ["model-a", "model-b"]
        assert _page_rows(page, "#table-arith-v1", "grader") == [MATH, MATH]
        assert _page_rows(page, "#table-arith-v1", "previous") == ["—", "0.100 (math-0)"]
        assert _page_rows(page, "#stale-arith-v1", "model") == ["model-c"]
        page.goto(f"{server.url}/submissions/{ids['b']}")
        assert "(current)" in page.inner_text("#grader")
        assert page.inner_text("#previous") == "0.100 by math-0"
        browser.close()

    b = httpx.get(f"{server.url}/api/submissions/{ids['b']}", timeout=HTTP_TIMEOUT).json()
    assert (b["verified_score"], b["grader_version"], b["stale"]) == (0.4, MATH, False)
    assert (b["previous_score"], b["previous_grader_version"]) == (0.1, "math-0")
    counts = db.row_counts()
    second = cli("regrade", "--db", server.db_url, check=False)
    assert second.returncode == 1  # c still cannot be re-graded, and says so again
    assert second.stdout.splitlines()[-1] == "0 re-graded, 1 failed, 0 skipped, 2 already current"
    assert httpx.get(f"{server.url}/api/submissions/{ids['b']}", timeout=HTTP_TIMEOUT).json() == b
    assert db.row_counts() == counts
