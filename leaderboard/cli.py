"""``marft-leaderboard``: serve, submit, check, show, regrade, token create/revoke/list, export.

Token commands and ``regrade`` work on the database directly (they are for whoever runs the
server); ``submit`` talks to a server; ``show`` and ``export`` read a server (``--server``) or a
database (``--db``).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

DB_ENV = "MARFT_LEADERBOARD_DB"
DEFAULT_DB = "sqlite:///leaderboard.db"

EXPORT_COLUMNS = (
    "rank",
    "env_id",
    "env_version",
    "method",
    "model",
    "team_size",
    "verified_score",
    "ci_low",
    "ci_high",
    "grader_version",
    "stale",
    "unversioned",
    "overrides",
    "group",
    "claimed_score",
    "n_tasks",
    "n_episodes",
    "created_at",
    "id",
)


def _default_db() -> str:
    return os.environ.get(DB_ENV, DEFAULT_DB)


def _rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Leaderboard rows from ``--db`` if given, else from the server."""
    if args.db:
        from leaderboard.db import open_db
        from leaderboard.ranking import leaderboard_rows

        db = open_db(args.db)
        return leaderboard_rows(db.submissions(env=args.env, method=args.method))
    from leaderboard.client import LeaderboardClient

    with LeaderboardClient(args.server) as c:
        return c.leaderboard(env=args.env, method=args.method)


def _flat(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # rank counts within ``group`` (a family, a version, the settings: ``overrides``, empty for
    # the registered ones); it is empty for stale rows (graded by an older grader version) and
    # unversioned rows (stored before environment versions): neither is ranked
    return [{k: r[k] for k in EXPORT_COLUMNS} for r in rows]


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """Leaderboard rows as CSV (one header line, then one line per submission)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=EXPORT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(_flat(rows))
    return buf.getvalue()


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """Leaderboard rows as a GitHub-flavoured Markdown table."""

    def cell(v: Any) -> str:
        return _fmt(v).replace("|", "\\|")

    lines = ["| " + " | ".join(EXPORT_COLUMNS) + " |", "|" + "---|" * len(EXPORT_COLUMNS)]
    lines += ["| " + " | ".join(cell(r[k]) for k in EXPORT_COLUMNS) + " |" for r in _flat(rows)]
    return "\n".join(lines) + "\n"


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from leaderboard.server import create_app

    overrides = {"sandbox": args.sandbox} if args.sandbox else None
    app = create_app(
        args.db or _default_db(),
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        env_overrides=overrides,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from leaderboard.db import TokenError, open_db

    db = open_db(args.db or _default_db())
    try:
        if args.action == "create":
            print(db.create_token(args.name))
            print(f"token {args.name!r} created; it is shown only once", file=sys.stderr)
        elif args.action == "revoke":
            db.revoke_token(args.name)
            print(f"token {args.name!r} revoked", file=sys.stderr)
        else:
            for t in db.list_tokens():
                state = f"revoked {t['revoked_at']:%Y-%m-%d}" if t["revoked_at"] else "active"
                print(f"{t['name']}\t{state}")
    except TokenError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    from leaderboard.client import LeaderboardClient, SubmissionError

    status = 0
    with LeaderboardClient(args.server, token=args.token) as c:
        for path in args.paths:
            try:
                result = c.submit(path)
            except SubmissionError as e:
                print(f"{path}: rejected ({e.status}): {e.detail}", file=sys.stderr)
                status = 2
                continue
            except OSError as e:
                print(f"{path}: error: {e}", file=sys.stderr)
                status = status or 1
                continue
            if args.json:
                print(json.dumps({"path": path, **result}))
                continue
            claimed = (
                ""
                if result["claimed_score"] is None
                else f", claimed {result['claimed_score']:.3f}"
            )
            print(
                f"{path}: accepted as submission {result['id']}: verified score "
                f"{result['verified_score']:.3f} (95% CI "
                f"{result['ci_low']:.3f}-{result['ci_high']:.3f}"
                f"{claimed}) on {result['n_episodes']} episodes, grader "
                f"{result['grader_version']}; {c.server}{result['url']}"
            )
    return status


def cmd_check(args: argparse.Namespace) -> int:
    """Re-grade bundles locally, exactly as the server would, without storing anything."""
    from pydantic import ValidationError

    from leaderboard.regrade import BundleRejected, GradingUnavailable, regrade
    from leaderboard.schema import read_bundle

    overrides = {"sandbox": args.sandbox} if args.sandbox else None
    status = 0
    for path in args.paths:
        try:
            bundle = read_bundle(path)
            grade = regrade(bundle, overrides)
        except (OSError, ValidationError, BundleRejected, GradingUnavailable) as e:
            print(f"{path}: would be rejected: {e}", file=sys.stderr)
            status = 2
            continue
        claimed = "" if bundle.claimed_score is None else f", claimed {bundle.claimed_score:.3f}"
        print(
            f"{path}: ok: verified score {grade.score:.3f} (95% CI "
            f"{grade.ci_low:.3f}-{grade.ci_high:.3f}"
            f"{claimed}) on {len(grade.episodes)} episodes of {bundle.env_id}, "
            f"grader {grade.grader_version}"
        )
    return status


def cmd_show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    rows = _rows(args)
    table = Table(title=f"leaderboard{': ' + args.env if args.env else ''}")
    columns = (
        "#",
        "env",
        "version",
        "settings",
        "method",
        "model",
        "team",
        "verified (95% CI)",
        "grader",
        "claimed",
        "episodes",
        "date",
    )
    for col in columns:
        table.add_column(col)
    for r in rows:
        grader = r["grader_version"]
        if r["stale"]:
            grader += f" (stale; current {r['current_grader_version'] or 'unknown'})"
        score = f"{r['verified_score']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        table.add_row(
            "-" if r["rank"] is None else str(r["rank"]),
            r["env_id"],
            "unversioned" if r["env_version"] is None else f"v{r['env_version']}",
            r["overrides"] or "registered",
            r["method"],
            r["model"],
            str(r["team_size"]),
            score,
            grader,
            _fmt(r["claimed_score"]) or "-",
            str(r["n_episodes"]),
            (r["created_at"] or "")[:10],
        )
    Console(width=160).print(table)
    return 0


def cmd_regrade(args: argparse.Namespace) -> int:
    """Re-grade stored submissions graded by another grader version than the current one."""
    from leaderboard.db import open_db
    from leaderboard.regrade_stored import regrade_stale

    db = open_db(args.db or _default_db())
    overrides = {"sandbox": args.sandbox} if args.sandbox else None
    total = len(db.submissions(env=args.env))
    counts = {"regraded": 0, "infra_error": 0, "rejected": 0, "skipped": 0}
    for o in regrade_stale(db, overrides, env=args.env):
        counts[o.status] += 1
        head = f"submission {o.submission_id} ({o.env_id})"
        if o.status == "regraded":
            print(
                f"{head}: re-graded {o.old_version} -> {o.new_version}: "
                f"{o.old_score:.3f} -> {o.new_score:.3f}"
            )
        elif o.status == "skipped":
            print(f"{head}: skipped: {o.reason}")
        else:
            print(
                f"{head}: NOT re-graded ({o.status.replace('_', ' ')}), stored grade "
                f"{o.old_score:.3f} by {o.old_version} kept: {o.reason}",
                file=sys.stderr,
            )
    failed = counts["infra_error"] + counts["rejected"]
    print(
        f"{counts['regraded']} re-graded, {failed} failed, {counts['skipped']} skipped, "
        f"{total - sum(counts.values())} already current"
    )
    return 1 if failed else 0


def cmd_export(args: argparse.Namespace) -> int:
    text = (to_csv if args.format == "csv" else to_markdown)(_rows(args))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


def _add_source(p: argparse.ArgumentParser) -> None:
    from leaderboard.client import default_server

    p.add_argument("--env", help="only this environment id (e.g. math-3agent)")
    p.add_argument("--method", help="only this method")
    p.add_argument("--server", default=default_server(), help="server URL (default %(default)s)")
    p.add_argument("--db", help="read this database URL directly instead of a server")


def build_parser() -> argparse.ArgumentParser:
    from leaderboard.client import TOKEN_ENV, default_server

    parser = argparse.ArgumentParser(prog="marft-leaderboard", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the leaderboard server")
    p.add_argument("--db", help=f"SQLAlchemy URL (default ${DB_ENV} or {DEFAULT_DB})")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--max-body-mb", type=float, default=20.0, help="request size limit (default 20 MB)"
    )
    p.add_argument(
        "--sandbox", help="code sandbox backend used for re-grading (docker, bwrap, subprocess)"
    )
    p.add_argument("--log-level", default="info")
    p.set_defaults(fn=cmd_serve)

    p = sub.add_parser(
        "token", help="create, revoke or list submission tokens (admin, on the database)"
    )
    p.add_argument("action", choices=("create", "revoke", "list"))
    p.add_argument("--name", help="token name (who it is for)")
    p.add_argument("--db", help=f"SQLAlchemy URL (default ${DB_ENV} or {DEFAULT_DB})")
    p.set_defaults(fn=cmd_token)

    p = sub.add_parser("submit", help="submit result bundles (directories or .json files)")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--server", default=default_server(), help="server URL (default %(default)s)")
    p.add_argument("--token", help=f"submission token (default ${TOKEN_ENV})")
    p.add_argument("--json", action="store_true", help="print the server's answer as JSON")
    p.set_defaults(fn=cmd_submit)

    p = sub.add_parser(
        "check", help="re-grade bundles locally as the server would (stores nothing)"
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument(
        "--sandbox", help="code sandbox backend (docker, bwrap, subprocess; default: automatic)"
    )
    p.set_defaults(fn=cmd_check)

    p = sub.add_parser(
        "regrade",
        help="re-grade stored submissions graded by an older grader version (admin, on the db)",
    )
    p.add_argument("--db", help=f"SQLAlchemy URL (default ${DB_ENV} or {DEFAULT_DB})")
    p.add_argument("--env", help="only this environment id")
    p.add_argument(
        "--sandbox", help="code sandbox backend (docker, bwrap, subprocess; default auto)"
    )
    p.set_defaults(fn=cmd_regrade)

    p = sub.add_parser("show", help="print the leaderboard as a terminal table")
    _add_source(p)
    p.set_defaults(fn=cmd_show)

    p = sub.add_parser("export", help="export the leaderboard as CSV or Markdown")
    p.add_argument("format", choices=("csv", "markdown"))
    p.add_argument("-o", "--output", help="file to write (default stdout)")
    _add_source(p)
    p.set_defaults(fn=cmd_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "token" and args.action != "list" and not args.name:
        build_parser().error(f"token {args.action} needs --name")
    from leaderboard.client import ServerUnreachable

    try:
        return args.fn(args)
    except ServerUnreachable as e:  # one line, not the HTTP stack's traceback
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
