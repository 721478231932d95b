"""The README's install table names every extra and exactly what each one pulls in (issue 18).

The table is what a new user reads to choose extras, so it is compared with ``pyproject.toml``
row by row: the core dependencies, each extra's packages, and the extras an extra includes
(``marft-envs[baselines]`` in ``trl``, the list in ``all``).
"""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).parents[2]
HEADER = "| extra | adds | for |"
OWN = re.compile(r"^marft[-_]envs\[([^\]]+)\]$")


def requirement_names(reqs: list[str]) -> set[str]:
    """The package names of ``reqs``; the package's own ``marft-envs[a,b]`` gives a and b."""
    names: set[str] = set()
    for req in reqs:
        own = OWN.match(req.replace(" ", ""))
        names |= set(own.group(1).split(",")) if own else {canonicalize_name(Requirement(req).name)}
    return names


def readme_table(text: str) -> dict[str, set[str]]:
    """The install table's rows: the extra (``(core)`` for the dependencies) -> the names listed."""
    lines = text.splitlines()
    start = lines.index(HEADER) + 2  # the header and its separator
    rows: dict[str, set[str]] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        extra, adds = (cell.strip().strip("`") for cell in line.strip("|").split("|")[:2])
        rows[extra] = {canonicalize_name(t.strip().strip("`")) for t in re.split(r"[,+]", adds)}
    return rows


def test_the_readme_install_table_matches_the_package_metadata():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    expected = {"(core)": requirement_names(project["dependencies"])}
    for extra, reqs in project["optional-dependencies"].items():
        expected[extra] = requirement_names(reqs)
    assert readme_table((ROOT / "README.md").read_text(encoding="utf-8")) == expected
