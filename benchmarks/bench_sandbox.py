"""Sandbox throughput: executions per second of a tiny program, per backend, against anchors.

    python benchmarks/bench_sandbox.py [--runs 60] [--threads 2]

Each backend runs ``print(int(input()) * 2)`` ``--runs`` times, first from one thread,
then from ``--threads`` threads. Two anchors are measured in the same run:

* ``host-python``: a bare ``subprocess.run([python, "-c", ...])`` on the host (no isolation,
  no limits) -- the floor any process-per-run sandbox pays;
* ``docker-run-cold``: a fresh ``docker run --rm`` of the sandbox image per execution -- what
  the docker backend's warm pool exists to avoid.

Targets on 2 cores: bwrap >= 40/s and docker (warm pool) >= 15/s, with ``--threads 2``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marft_envs.code.sandbox import ExecStatus, get_sandbox
from marft_envs.code.sandbox.image import IMAGE
from marft_envs.code.sandbox.select import probe

PROGRAM = "print(int(input()) * 2)"


def rate(fn, runs: int, threads: int) -> float:
    """Executions per second of ``fn(i)`` over ``runs`` calls on ``threads`` threads."""
    start = time.perf_counter()
    if threads == 1:
        for i in range(runs):
            fn(i)
    else:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(fn, range(runs)))
    return runs / (time.perf_counter() - start)


def sandbox_fn(sb):
    def one(i: int) -> None:
        r = sb.run(PROGRAM, stdin=f"{i}\n")
        if r.status is not ExecStatus.OK or r.stdout != f"{2 * i}\n":
            raise RuntimeError(f"{sb.name}: unexpected result {r}")

    return one


def host_python(i: int) -> None:
    out = subprocess.run(
        [sys.executable, "-S", "-c", PROGRAM],
        input=f"{i}\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == f"{2 * i}\n"


def docker_run_cold(python: str):
    def one(i: int) -> None:
        out = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "-i",
                "--network",
                "none",
                "--read-only",
                "--user",
                "65534:65534",
                IMAGE,
                python,
                "-c",
                PROGRAM,
            ],
            input=f"{i}\n",
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.stdout == f"{2 * i}\n", out.stderr

    return one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    rows: dict[str, tuple[float, float]] = {}
    rows["host-python (anchor)"] = (
        rate(host_python, args.runs, 1),
        rate(host_python, args.runs, args.threads),
    )
    for name in ("bwrap", "docker", "subprocess"):
        reason = probe(name)
        if reason:
            print(f"{name}: not usable here ({reason})")
            continue
        with get_sandbox(name, **({"pool_size": args.threads} if name == "docker" else {})) as sb:
            fn = sandbox_fn(sb)
            fn(0)  # warm up (docker starts its pool)
            rows[name] = (rate(fn, args.runs, 1), rate(fn, args.runs, args.threads))
            if name == "docker":
                python = sb._python
        if name == "docker":
            cold = docker_run_cold(python)
            n = max(8, args.runs // 6)
            rows["docker-run-cold (anchor)"] = (rate(cold, n, 1), rate(cold, n, args.threads))
    print(f"\nexecutions/s of {PROGRAM!r}, {args.runs} runs, 1 thread and {args.threads} threads")
    print(f"{'backend':<26}{'1 thread':>10}{f'{args.threads} threads':>12}")
    for name, (one, many) in rows.items():
        print(f"{name:<26}{one:>10.1f}{many:>12.1f}")
    host = rows["host-python (anchor)"][1]
    if "bwrap" in rows:
        print(
            f"bwrap / host-python ({args.threads} threads): {rows['bwrap'][1] / host:.2f}  (target: >= 40/s absolute)"
        )
    if "docker" in rows:
        cold = rows["docker-run-cold (anchor)"][1]
        print(
            f"docker pool / docker-run-cold ({args.threads} threads): {rows['docker'][1] / cold:.1f}x  (target: >= 15/s absolute)"
        )


if __name__ == "__main__":
    main()
