"""Load benchmark: 200 concurrent submissions of small bundles to one leaderboard server on SQLite.

    python benchmarks/bench_leaderboard_load.py [--concurrent 200] [--sequential 20] [--episodes 5]

Starts ``marft-leaderboard serve`` (uvicorn, one process) on a temporary SQLite database,
sends ``--sequential`` submissions one after another (the anchor), then ``--concurrent``
submissions at once (httpx async client), and prints submissions/second for both and their
ratio. It then checks that none was lost or duplicated: every request got 201 with a distinct
id, and the database holds exactly one submission row per bundle and ``--episodes`` episode
rows per submission. Exits non-zero if a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "leaderboard")]

import httpx
from lb_helpers import play_bundle, start_server
from sqlalchemy import select

from leaderboard.db import open_db
from leaderboard.models import Submission


def payloads(n: int, prefix: str, episodes: int) -> list[bytes]:
    """``n`` distinct small arith-2agent bundles (same episodes, distinct model names)."""
    base = play_bundle("arith-2agent", n_tasks=episodes, correct=lambda i: i % 2 == 0)
    return [base.model_copy(update={"model": f"{prefix}-{i:04d}"}).model_dump_json().encode() for i in range(n)]


def submit_sequential(url: str, token: str, bodies: list[bytes]) -> tuple[float, list[httpx.Response]]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx.Client(base_url=url, timeout=600) as c:
        t0 = time.perf_counter()
        responses = [c.post("/api/submissions", content=b, headers=headers) for b in bodies]
        return time.perf_counter() - t0, responses


async def _concurrent(url: str, token: str, bodies: list[bytes]) -> tuple[float, list[httpx.Response]]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as c:
        t0 = time.perf_counter()
        responses = await asyncio.gather(*(c.post("/api/submissions", content=b, headers=headers) for b in bodies))
        return time.perf_counter() - t0, list(responses)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrent", type=int, default=200)
    ap.add_argument("--sequential", type=int, default=20)
    ap.add_argument("--episodes", type=int, default=5)
    args = ap.parse_args()

    seq_bodies = payloads(args.sequential, "sequential", args.episodes)
    conc_bodies = payloads(args.concurrent, "concurrent", args.episodes)
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp))
        try:
            db = open_db(server.db_url)
            token = db.create_token("bench")
            t_seq, seq = submit_sequential(server.url, token, seq_bodies)
            t_conc, conc = asyncio.run(_concurrent(server.url, token, conc_bodies))

            statuses = Counter(r.status_code for r in seq + conc)
            ids = [r.json()["id"] for r in seq + conc if r.status_code == 201]
            counts = db.row_counts()
            with db.sessions() as s:
                models = Counter(s.scalars(select(Submission.model)))
        finally:
            server.stop()

    n = args.sequential + args.concurrent
    rate_seq, rate_conc = args.sequential / t_seq, args.concurrent / t_conc
    print(f"server: 1 uvicorn process, SQLite; bundles: arith-2agent, {args.episodes} episodes each")
    print(f"anchor   sequential: {args.sequential:4d} submissions in {t_seq:7.2f} s = {rate_seq:7.2f} submissions/s")
    print(f"load     concurrent: {args.concurrent:4d} submissions in {t_conc:7.2f} s = {rate_conc:7.2f} submissions/s")
    print(f"ratio concurrent/sequential throughput: {rate_conc / rate_seq:.2f}x")
    print(f"HTTP statuses: {dict(statuses)}")
    print(f"rows: submissions={counts['submissions']} episodes={counts['episodes']} "
          f"(expected {n} and {n * args.episodes})")

    expected_models = {f"sequential-{i:04d}" for i in range(args.sequential)} | {
        f"concurrent-{i:04d}" for i in range(args.concurrent)
    }
    problems = []
    if statuses != Counter({201: n}):
        problems.append(f"not every submission was accepted: {dict(statuses)}")
    if len(set(ids)) != len(ids):
        problems.append("duplicate submission ids were returned")
    if counts["submissions"] != n or counts["episodes"] != n * args.episodes:
        problems.append("row counts differ from what was submitted")
    if set(models) != expected_models or any(c != 1 for c in models.values()):
        lost = sorted(expected_models - set(models))
        dup = sorted(m for m, c in models.items() if c > 1)
        problems.append(f"lost {len(lost)} {lost[:3]}, duplicated {len(dup)} {dup[:3]}")
    print("none lost, none duplicated" if not problems else "FAILED: " + "; ".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
