"""End to end: a real server process, submissions through the CLI, the page in headless Chromium."""

from __future__ import annotations

import csv
import io
import json

import httpx
import pytest
from lb_helpers import HTTP_TIMEOUT, cli, launch_chromium, play_bundle, save_screenshot
from playwright.sync_api import sync_playwright

from leaderboard.schema import write_bundle

XSS_MODEL = "<script>window.__pwned = 1</script>evil-model"

SUBMISSIONS = [
    # (env, method, model, correct(i), claimed)  with 5 tasks, 1 seed
    ("arith-2agent", "marft", "qwen-1.5b-marft", lambda i: i < 4, 0.9),  # true 0.8
    ("arith-2agent", "ippo", "qwen-1.5b-ippo", lambda i: i < 2, None),  # true 0.4
    ("arith-3agent", "marft", "qwen-1.5b-marft", lambda i: True, 1.0),  # true 1.0
    ("arith-3agent", "marft-shared", XSS_MODEL, lambda i: i < 3, None),  # true 0.6
]


@pytest.fixture(scope="module")
def submitted(server, token, tmp_path_factory):
    """Submit every bundle of SUBMISSIONS through ``python -m leaderboard.cli submit``."""
    out = tmp_path_factory.mktemp("bundles")
    paths = []
    for k, (env_id, method, model, correct, claimed) in enumerate(SUBMISSIONS):
        bundle = play_bundle(
            env_id, method=method, model=model, correct=correct, claimed_score=claimed
        )
        # Alternate the two on-disk forms: a bundle directory and a bare .json file.
        written = write_bundle(bundle, out / f"run{k}" if k % 2 else out / f"run{k}.json")
        paths.append(str(written.parent if k % 2 else written))
    proc = cli("submit", *paths, "--server", server.url, "--token", token, "--json")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["path"] for r in results] == paths
    return results


def test_cli_submissions_are_scored_by_the_server(submitted) -> None:
    assert [r["verified_score"] for r in submitted] == pytest.approx([0.8, 0.4, 1.0, 0.6])
    assert [r["claimed_score"] for r in submitted] == [0.9, None, 1.0, None]
    assert len({r["id"] for r in submitted}) == 4


def test_api_leaderboard_and_submission_details(server, submitted) -> None:
    rows = httpx.get(
        f"{server.url}/api/leaderboard", params={"env": "arith-2agent"}, timeout=HTTP_TIMEOUT
    ).json()
    assert [(r["method"], r["verified_score"]) for r in rows] == [("marft", 0.8), ("ippo", 0.4)]
    assert rows[0]["env_family"] == "arith" and rows[0]["n_tasks"] == 5
    detail = httpx.get(
        f"{server.url}/api/submissions/{submitted[0]['id']}", timeout=HTTP_TIMEOUT
    ).json()
    assert detail["config"] == {"policy": "scripted", "lr": 1e-5}
    assert [e["correct"] for e in detail["episodes"]] == [True, True, True, True, False]
    assert [t["agent"] for t in detail["episodes"][0]["turns"]] == ["reasoner_0", "actor_1"]
    for missing in ("/api/submissions/999999", "/submissions/999999", "/plots/no-such-family.png"):
        assert httpx.get(server.url + missing, timeout=HTTP_TIMEOUT).status_code == 404
    plot = httpx.get(f"{server.url}/plots/arith.png", timeout=HTTP_TIMEOUT)
    assert plot.headers["content-type"] == "image/png" and plot.content.startswith(b"\x89PNG")


def test_cli_show_and_export(server, submitted, tmp_path) -> None:
    shown = cli("show", "--env", "arith-3agent", "--server", server.url).stdout
    assert "qwen-1.5b-marft" in shown and "1.000" in shown and "ippo" not in shown

    rows = list(csv.DictReader(io.StringIO(cli("export", "csv", "--server", server.url).stdout)))
    assert [(r["env_id"], r["method"], float(r["verified_score"])) for r in rows] == [
        ("arith-3agent-v1", "marft", 1.0),
        ("arith-2agent-v1", "marft", 0.8),
        ("arith-3agent-v1", "marft-shared", 0.6),
        ("arith-2agent-v1", "ippo", 0.4),
    ]
    md = tmp_path / "lb.md"
    cli("export", "markdown", "--db", server.db_url, "--env", "arith-2agent", "-o", str(md))
    lines = md.read_text().splitlines()
    assert lines[0].startswith("| rank | env_id | env_version | method") and len(lines) == 4
    assert "| 1 | arith-2agent-v1 | 1 | marft | qwen-1.5b-marft | 2 | 0.800 |" in lines[2]


def test_page_in_headless_chromium(server, submitted, tmp_path) -> None:
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1200, "height": 1000})
        page.goto(server.url + "/")
        assert page.locator("section.family h2").all_inner_texts() == ["arith"]
        rows = page.locator("#table-arith-v1 tbody tr")
        assert rows.count() == 4
        assert rows.locator("td.method").all_inner_texts() == [
            "marft",
            "marft",
            "marft-shared",
            "ippo",
        ]
        assert rows.locator("td.score").first.inner_text().startswith("1.000 [")
        assert rows.locator("td.claimed").all_inner_texts() == ["1.000", "0.900", "—", "—"]
        # A model name with markup is shown as text, never executed.
        assert XSS_MODEL in rows.locator("td.model").all_inner_texts()
        assert page.evaluate("window.__pwned") is None
        # The plot of score by team size is served and rendered.
        assert page.locator("img.plot").evaluate("img => img.complete && img.naturalWidth") > 0

        assert save_screenshot(page, tmp_path, "leaderboard.png").stat().st_size > 10_000

        # Sorting (server side, by clicking a column header) and filtering (the form).
        header = "#table-arith-v1 th[data-sort=team_size] a"
        page.click(header)
        page.click(header)  # second click: ascending
        assert rows.locator("td.team-size").all_inner_texts() == ["2", "2", "3", "3"]
        page.select_option("select[name=method]", "ippo")
        page.click("form#filters button")
        assert rows.locator("td.model").all_inner_texts() == ["qwen-1.5b-ippo"]

        # The per-submission page shows the transcripts.
        page.click("text=qwen-1.5b-ippo")
        assert "verified score" in page.inner_text("table.meta")
        assert page.locator("details.episode").count() == 5
        first = page.locator("details.episode").first
        assert "reasoner_0" in first.inner_text() and "The answer is" in first.inner_text()
        browser.close()


def test_cli_submit_reports_the_reason_of_a_rejection(server, token, db, tmp_path) -> None:
    b = play_bundle(model="cli-forged")
    forged = b.model_copy(update={"dataset": b.dataset.model_copy(update={"hash": "f" * 64})})
    before = db.row_counts()
    proc = cli(
        "submit",
        str(write_bundle(forged, tmp_path / "forged.json")),
        "--server",
        server.url,
        "--token",
        token,
        check=False,
    )
    assert proc.returncode == 2
    assert (
        "forged.json: rejected (422)" in proc.stderr
        and "does not match the registered dataset" in proc.stderr
    )
    assert db.row_counts() == before


def test_cli_check_regrades_locally(tmp_path) -> None:
    b = play_bundle(correct=lambda i: i < 2, model="local-check")
    good = write_bundle(b, tmp_path / "good")
    bad = write_bundle(b.model_copy(update={"episodes": b.episodes[:3]}), tmp_path / "bad.json")
    proc = cli("check", str(good.parent), str(bad), check=False)
    assert proc.returncode == 2
    assert f"{good.parent}: ok: verified score 0.400" in proc.stdout
    assert f"{bad}: would be rejected: 2 episode(s) missing" in proc.stderr
