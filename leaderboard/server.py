"""The leaderboard web server: a JSON API for submissions and an HTML page with tables and plots.

``create_app(db_url)`` migrates the database and returns a FastAPI app; ``marft-leaderboard
serve`` runs it with uvicorn.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from leaderboard.db import Database, DuplicateSubmission, open_db
from leaderboard.graders import grading_status
from leaderboard.models import EpisodeRow, Submission, submission_detail
from leaderboard.plots import score_by_team_size_png
from leaderboard.ranking import leaderboard_rows
from leaderboard.regrade import BundleRejected, Grade, GradingUnavailable, regrade
from leaderboard.schema import METHODS, Bundle

DEFAULT_MAX_BODY_BYTES = 20 * 1024 * 1024
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"


def bundle_sha256(bundle: Bundle) -> str:
    """sha256 of the canonical JSON of a bundle (identifies resubmissions of the same bundle).

    A bundle without ``grader_version`` (schema 1) is hashed without the key, exactly as a server
    before schema 2 hashed it, and one without ``fingerprint`` (schema 1 and 2) without that key,
    so that it is still recognised when it is submitted again.
    """
    data = bundle.model_dump(mode="json")
    for key in ("grader_version", "fingerprint"):  # absent before schema 2 and 3
        if data.get(key) is None:
            data.pop(key, None)
    payload = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def group_slug(group: str) -> str:
    """A ranking group as an HTML id part: ``arith-v1-horizon-2`` for ``arith-v1 horizon=2``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", group)


def to_submission(bundle: Bundle, grade: Grade, token_id: int) -> Submission:
    """The rows to store for an accepted bundle (the submission and all its episodes)."""
    sub = Submission(
        token_id=token_id,
        bundle_sha256=bundle_sha256(bundle),
        schema_version=bundle.schema_version,
        env_id=bundle.env_id,
        env_family=grade.env_family,
        env_version=grade.env_version,
        env_fingerprint=grade.env_fingerprint,
        env_fingerprint_parts=(
            None if bundle.fingerprint is None else dict(bundle.fingerprint.parts)
        ),
        env_overrides=dict(grade.env_overrides),
        env_spec=bundle.env_spec,
        dataset_name=bundle.dataset.name,
        dataset_split=bundle.dataset.split,
        dataset_hash=bundle.dataset.hash,
        package_version=bundle.package_version,
        method=bundle.method,
        model=bundle.model,
        config=bundle.config,
        seeds=list(bundle.seeds),
        team_size=bundle.team_size,
        n_tasks=grade.n_tasks,
        n_episodes=len(bundle.episodes),
        verified_score=grade.score,
        ci_low=grade.ci_low,
        ci_high=grade.ci_high,
        claimed_score=bundle.claimed_score,
        grader_version=grade.grader_version,
        bundle_grader_version=bundle.grader_version,
    )
    sub.episodes = [
        EpisodeRow(
            index=g.index,
            task_id=g.task_id,
            seed=g.seed,
            turns=[t.model_dump() for t in ep.turns],
            final_output=ep.final_output,
            score=g.score,
            correct=g.correct,
            answer=g.answer,
            reason=g.reason,
            claimed_score=ep.claimed_score,
        )
        for g, ep in zip(grade.episodes, bundle.episodes, strict=True)
    ]
    return sub


async def read_limited_body(request: Request, max_bytes: int) -> bytes:
    """The request body, or 413 as soon as it is known to exceed ``max_bytes``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise HTTPException(
            413, f"request body of {declared} bytes exceeds the limit of {max_bytes} bytes"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise HTTPException(413, f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_bundle(body: bytes) -> Bundle:
    """Bundle from a request body: 400 for text that is not JSON, 422 for a JSON that is no
    bundle."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HTTPException(400, f"request body is not valid JSON: {e}") from None
    except RecursionError:
        raise HTTPException(400, "request body is not valid JSON: nested too deeply") from None
    try:
        return Bundle.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in e.errors()[:10]
        )
        raise HTTPException(422, f"invalid bundle: {problems}") from None


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise HTTPException(
            401,
            "missing submission token: send 'Authorization: Bearer <token>' "
            "(an admin issues tokens with 'marft-leaderboard token create')",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return secret.strip()


def create_app(
    db: str | Database,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    env_overrides: Mapping[str, Any] | None = None,
) -> FastAPI:
    """The leaderboard app on a database URL (migrated on start) or an open :class:`Database`.

    ``env_overrides`` are extra ``make()`` arguments used when re-grading (for example
    ``{"sandbox": "bwrap"}`` to pin the code sandbox backend); bundles cannot set them.
    """
    database = open_db(db) if isinstance(db, str) else db
    overrides = dict(env_overrides or {})
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    app = FastAPI(title="marft-envs leaderboard", version="1")
    app.state.db = database

    # ------------------------------------------------------------------ API

    @app.get("/api/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/api/submissions", status_code=201)
    async def submit(request: Request) -> JSONResponse:
        token_id, why = await run_in_threadpool(database.check_token, _bearer(request))
        if token_id is None:
            status = 403 if "revoked" in why else 401
            raise HTTPException(
                status, f"submission refused: {why}", headers={"WWW-Authenticate": "Bearer"}
            )
        bundle = parse_bundle(await read_limited_body(request, max_body_bytes))
        try:
            grade = await run_in_threadpool(regrade, bundle, overrides)
        except BundleRejected as e:
            raise HTTPException(422, f"bundle rejected: {e}") from None
        except GradingUnavailable as e:
            raise HTTPException(503, str(e)) from None
        try:
            sub_id = await run_in_threadpool(
                database.add_submission, to_submission(bundle, grade, token_id)
            )
        except DuplicateSubmission as e:
            raise HTTPException(409, str(e)) from None
        return JSONResponse(
            status_code=201,
            content={
                "id": sub_id,
                "url": f"/submissions/{sub_id}",
                "env_id": bundle.env_id,
                "verified_score": grade.score,
                "ci_low": grade.ci_low,
                "ci_high": grade.ci_high,
                "claimed_score": bundle.claimed_score,
                "grader_version": grade.grader_version,
                "n_episodes": len(grade.episodes),
            },
        )

    @app.get("/api/leaderboard")
    def leaderboard(
        env: str | None = None,
        family: str | None = None,
        method: str | None = None,
        team_size: int | None = None,
        sort: str = "score",
        order: str = "desc",
    ) -> list[dict[str, Any]]:
        subs = database.submissions(env=env, family=family, method=method, team_size=team_size)
        return leaderboard_rows(subs, sort, order)

    def detail(sub_id: int) -> dict[str, Any]:
        sub = database.submission(sub_id)
        if sub is None:
            raise HTTPException(404, f"no submission with id {sub_id}")
        row = submission_detail(sub)
        return {**row, **grading_status(row)}

    @app.get("/api/submissions/{sub_id}")
    def get_submission(sub_id: int) -> dict[str, Any]:
        return detail(sub_id)

    # ----------------------------------------------------------------- HTML

    @app.get("/", response_class=HTMLResponse)
    def index(
        request: Request,
        family: str | None = None,
        method: str | None = None,
        team_size: str | None = None,
        sort: str = "score",
        order: str = "desc",
    ) -> HTMLResponse:
        # HTML forms send "" for "all": treat anything that is not a number as no filter.
        size = int(team_size) if team_size and team_size.isdigit() else None
        all_rows = leaderboard_rows(database.submissions(), sort, order)
        shown = [
            r
            for r in all_rows
            if (not family or r["env_family"] == family)
            and (not method or r["method"] == method)
            and (size is None or r["team_size"] == size)
        ]
        # Per family, per ranking group (one environment version, one set of settings): the
        # ranked rows (current grader), then the stale ones, in separate tables; unversioned rows
        # in a group of their own, never ranked.
        groups: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for r in shown:
            group = groups[r["env_family"]].setdefault(
                r["group"],
                {
                    "version": r["env_version"],
                    "overrides": "" if r["unversioned"] else r["overrides"],
                    "slug": group_slug(r["group"]),
                    "ranked": [],
                    "stale": [],
                    "unversioned": [],
                },
            )
            kind = "unversioned" if r["unversioned"] else "stale" if r["stale"] else "ranked"
            group[kind].append(r)

        def newest_first(item: tuple[str, dict[str, Any]]) -> tuple[bool, int, bool, str]:
            version, overrides = item[1]["version"], item[1]["overrides"]
            # unversioned last; per version the registered settings first, then the overrides
            return version is None, -(version or 0), bool(overrides), overrides

        tables = {
            family: dict(sorted(g.items(), key=newest_first))
            for family, g in sorted(groups.items())
        }
        return templates.TemplateResponse(
            request,
            "index.html",
            {
                "tables": tables,
                "families": sorted({r["env_family"] for r in all_rows}),
                "team_sizes": sorted({r["team_size"] for r in all_rows}),
                "methods": METHODS,
                "filters": {
                    "family": family or "",
                    "method": method or "",
                    "team_size": size or "",
                },
                "sort": sort,
                "order": order,
            },
        )

    @app.get("/submissions/{sub_id}", response_class=HTMLResponse)
    def submission_page(request: Request, sub_id: int) -> HTMLResponse:
        return templates.TemplateResponse(request, "submission.html", {"s": detail(sub_id)})

    @app.get("/plots/{family}.png")
    def plot(family: str, version: int | None = None, overrides: str = "") -> Response:
        # Like the ranking, the plot shows only ranked rows: current grader, one ranking group
        # (the newest version with ranked rows unless ``version`` is given; the registered
        # settings unless ``overrides`` names a group's, as ``horizon=2``).
        rows = [
            r
            for r in leaderboard_rows(database.submissions(family=family))
            if r["rank"] and r["overrides"] == overrides
        ]
        if version is None and rows:
            version = max(r["env_version"] for r in rows)
        rows = [r for r in rows if r["env_version"] == version]
        if not rows:
            at = "" if version is None else f" at version v{version}"
            at += f" with {overrides}" if overrides else ""
            raise HTTPException(
                404,
                f"no ranked submissions (current grader, versioned environment) in environment "
                f"family {family!r}{at}",
            )
        title = f"{family} v{version}" + (f" {overrides}" if overrides else "")
        return Response(score_by_team_size_png(rows, title=title), media_type="image/png")

    return app
