"""Fill a host work directory with a job's files and read back what the program wrote."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from .base import PROGRAM_FILE, Job

#: At most this many files come back in `ExecResult.extra_files`.
MAX_EXTRA_FILES = 100


def populate(workdir: str, job: Job, uid: int | None = None) -> None:
    """Write ``main.py`` and ``job.files`` into ``workdir`` (owned by ``uid`` if given)."""
    entries = {PROGRAM_FILE: job.program, **job.files}
    for name, content in entries.items():
        path = os.path.join(workdir, name)
        parent = os.path.dirname(path)
        if parent != workdir:
            os.makedirs(parent, exist_ok=True)
            if uid is not None:
                _chown_up_to(parent, workdir, uid)
        with open(path, "wb") as fh:
            fh.write(content)
        if uid is not None:
            os.chown(path, uid, uid)


def _chown_up_to(path: str, root: str, uid: int) -> None:
    while path != root and path.startswith(root):
        os.chown(path, uid, uid)
        path = os.path.dirname(path)


def collect(workdir: str, inputs: Mapping[str, bytes], max_bytes: int) -> dict[str, bytes]:
    """Regular files in ``workdir`` that are new or changed compared with ``inputs``.

    Never follows symlinks (a program could point one at a host file), skips
    anything that is not a regular file, and stops at ``max_bytes`` in total or
    `MAX_EXTRA_FILES` files.
    """
    found: dict[str, bytes] = {}
    budget = max_bytes
    for dirpath, dirnames, filenames in os.walk(workdir, followlinks=False):
        dirnames.sort()
        for fname in sorted(filenames):
            if len(found) >= MAX_EXTRA_FILES or budget <= 0:
                return found
            path = os.path.join(dirpath, fname)
            rel = os.path.relpath(path, workdir)
            if rel == PROGRAM_FILE:  # never returned: not read (the runner is ~12 kB)
                continue
            data = read_regular(path, budget)
            if data is None or inputs.get(rel) == data:
                continue
            found[rel] = data
            budget -= len(data)
    return found


def read_regular(path: str, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of ``path`` if it is a regular file (no symlink following), else
    None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
