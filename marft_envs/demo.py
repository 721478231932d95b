"""Play one episode of ``math-3agent`` (``arith-3agent`` when no data folder is found) with the
scripted oracle policy and print the transcript and verdict: ``python -m marft_envs.demo``."""

from __future__ import annotations

import sys

import tasks

from .cli import main


def demo_env_id() -> str:
    """``math-3agent`` if the MATH files can be found locally, else the data-free
    ``arith-3agent``."""
    try:
        tasks.load("math", split="test")
        return "math-3agent"
    except tasks.DataNotFoundError:
        return "arith-3agent"


if __name__ == "__main__":
    sys.exit(main(["play", demo_env_id(), "--policy", "oracle", "--seed", "0"]))
