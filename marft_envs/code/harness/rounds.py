"""Sandbox rounds: one run of the in-sandbox runner executes a batch of requested calls.

The runner (:mod:`marft_envs.code.runner`) is the program of every run; the candidate
program, the task's setup code and the calls travel on its standard input behind a fresh
nonce, and every record it prints back is turned into a :class:`~.proxies.Reply` for the
session. A run that fails as a whole (the program does not load, the sandbox breaks) sets
the session's ``program_failure`` instead.
"""

from __future__ import annotations

import json
import marshal
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import runner
from ..outcome import Outcome, UnitResult
from ..runner import WireError, decode
from ..sandbox.base import SandboxLike
from ..sandbox.warm_host import preload_program
from .proxies import RemoteFailure, Reply, Session

__all__ = ["HarnessResult", "run_round", "runner_source"]


_RUNNER_SOURCE: str | None = None


def runner_source() -> str:
    """The source of the in-sandbox runner (sent as the program of every sandbox run)."""
    global _RUNNER_SOURCE
    if _RUNNER_SOURCE is None:
        _RUNNER_SOURCE = Path(runner.__file__).read_text(encoding="utf-8")
    return _RUNNER_SOURCE


# Warm sandboxes compile the runner once instead of in every run (it is trusted and fixed).
preload_program(runner_source())


@dataclass
class HarnessResult:
    """Per-test results of one check plus what the sandbox runs reported."""

    units: list[UnitResult]
    rounds: int = 0
    program_error: str = ""
    exec_status: str = ""
    infra_error: str = ""
    elapsed: float = 0.0
    backend: str = ""
    calls: int = 0


# Outcomes of a call that did not produce a value, keyed by the sandbox status or exception.
_STATUS_OUTCOME: dict[str, Outcome] = {
    "timeout": "timeout",
    "memory": "memory",
    "output_limit": "runtime_error",
    "error": "runtime_error",
    "ok": "runtime_error",
    "infra_error": "infra_error",
}


def _parse_records(stdout: str, nonce: str) -> tuple[list[dict[str, Any]], bool]:
    """The runner's records (lines starting with the nonce); and whether the end record came."""
    records, ended = [], False
    prefix = nonce + "\t"
    for line in stdout.split("\n"):
        if not line.startswith(prefix):
            continue
        try:
            rec = json.loads(line[len(prefix) :])
        except (ValueError, RecursionError):
            continue
        if isinstance(rec, dict):
            records.append(rec)
            ended = ended or "end" in rec
    return records, ended


def run_round(
    sandbox: SandboxLike,
    program: str,
    setup: str,
    requests: dict[str, dict[str, Any]],
    session: Session,
    timeout: float,
    result: HarnessResult,
) -> None:
    """One sandbox run: execute ``requests`` and store a reply for every one of them."""
    keys = list(requests)
    calls = [dict(requests[k], id=i) for i, k in enumerate(keys)]
    nonce = secrets.token_hex(16)
    # marshal of str/int/bool/list/dict (see runner.py): no parser runs in the sandbox.
    payload = marshal.dumps({"program": program, "setup": setup, "calls": calls}, 4)
    res = sandbox.run(runner_source(), stdin=nonce.encode() + b"\n" + payload, timeout=timeout)
    result.elapsed += res.elapsed
    result.backend = getattr(res, "backend", "") or getattr(sandbox, "name", "")
    result.exec_status = res.status.value if hasattr(res.status, "value") else str(res.status)
    result.calls += len(calls)
    if result.exec_status == "infra_error":
        result.infra_error = (res.stderr or "sandbox infrastructure error")[-500:]
        session.program_failure = RemoteFailure("infra_error", result.infra_error)
        return
    records, _ = _parse_records(res.stdout, nonce)
    by_id: dict[int, dict[str, Any]] = {}
    program_ok = False
    for rec in records:
        if "program_error" in rec:
            name, msg = [*rec["program_error"], "", ""][:2]
            outcome: Outcome = "memory" if name == "MemoryError" else "runtime_error"
            result.program_error = f"{name}: {msg}"
            session.program_failure = RemoteFailure(
                outcome, f"the program failed to load: {name}: {msg}"
            )
            return
        if rec.get("program") == "ok":
            program_ok = True
        elif isinstance(rec.get("id"), int) and rec["id"] not in by_id:
            by_id[rec["id"]] = rec
    status_outcome: Outcome = _STATUS_OUTCOME.get(result.exec_status, "runtime_error")
    if not program_ok:
        why = {
            "timeout": "the program timed out while loading",
            "memory": "the program ran out of memory while loading",
        }
        message = why.get(
            result.exec_status,
            f"the program ended before the tests could run ({result.exec_status})",
        )
        session.program_failure = RemoteFailure(status_outcome, message)
        return
    for i, key in enumerate(keys):
        session.replies[key] = _reply_from_record(by_id.get(i), result.exec_status, status_outcome)


def _reply_from_record(rec: dict[str, Any] | None, status: str, status_outcome: Outcome) -> Reply:
    if rec is None:
        return Reply(
            "fail",
            outcome=status_outcome,
            message=f"no result: the run ended ({status}) before this call returned",
        )
    try:
        if "ok" in rec:
            after = [(int(i), decode(v)) for i, v in rec.get("after", [])]
            return Reply("ok", decode(rec["ok"]), after=after)
        if "raise" in rec:
            name, msg = rec["raise"]
            if not (isinstance(name, str) and isinstance(msg, str)):
                raise WireError("bad exception record")
            return Reply("raise", (name, msg))
        if "bad" in rec:
            if rec["bad"] == "MemoryError":
                return Reply(
                    "fail", outcome="memory", message="MemoryError while returning the value"
                )
            return Reply("object", str(rec["bad"])[:60])
    except (WireError, TypeError, ValueError):
        pass
    return Reply("fail", message="malformed result record")
