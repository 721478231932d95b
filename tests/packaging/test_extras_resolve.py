"""Every extra of the package metadata resolves against the current releases on PyPI.

The resolver is uv's (``uv pip compile``: metadata only, no wheel is downloaded; about ten
seconds where pip's ``install --dry-run --report`` took two and a half minutes for the same
answer). It reads only ``pyproject.toml``, ignores this machine's pip and uv configuration (its
local wheel folders and caps), and targets Linux x86-64 (the platform of the vLLM wheels) for
each Python the GPU path is used with. A conflict fails with uv's explanation, which names the
packages and versions that clash.
"""

from __future__ import annotations

import os
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
import tomllib

uv = pytest.importorskip("uv", reason="the resolver test needs uv (the dev extra installs it)")

pytestmark = pytest.mark.network

ROOT = Path(__file__).parents[2]
PLATFORM = "x86_64-manylinux_2_28"
PYTHONS = ("3.11", "3.12")  # this repository's CI, and the GPU machine's


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def extra_requirements(name: str, extras: dict[str, list[str]]) -> list[str]:
    """The requirements of extra ``name``, with the package's references to itself
    (``marft-envs[a,b]``) expanded."""
    own = re.compile(r"^marft[-_]envs\[([^\]]+)\]$")
    out = []
    for req in extras[name]:
        match = own.match(req.replace(" ", ""))
        if match:
            for sub in match.group(1).split(","):
                out += extra_requirements(sub, extras)
        else:
            out.append(req)
    return out


def extras_within(name: str, extras: dict[str, list[str]]) -> set[str]:
    """``name`` and the extras it names through ``marft-envs[...]``, recursively."""
    own = re.compile(r"^marft[-_]envs\[([^\]]+)\]$")
    out = {name}
    for req in extras[name]:
        match = own.match(req.replace(" ", ""))
        if match:
            for sub in match.group(1).split(","):
                out |= extras_within(sub, extras)
    return out


@cache
def resolve(requirements: tuple[str, ...], python: str, deps: bool = True) -> dict[str, str]:
    """``{name: version}`` that uv resolves ``requirements`` to on PyPI; fails with uv's reason.

    ``deps=False`` resolves the named packages only: their newest releases for ``python``.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    cmd = [
        uv.find_uv_bin(),
        "pip",
        "compile",
        "-",
        "--no-config",
        "--no-header",
        "--no-annotate",
        "--quiet",
        "--index-url",
        "https://pypi.org/simple",
        "--python-version",
        python,
        "--python-platform",
        PLATFORM,
    ] + ([] if deps else ["--no-deps"])
    run = subprocess.run(
        cmd,
        input="\n".join(requirements),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if run.returncode != 0:
        pytest.fail(
            f"these requirements do not resolve on PyPI for Python {python} ({PLATFORM}):\n  "
            + "\n  ".join(requirements)
            + f"\nuv says:\n{run.stderr.strip()}"
        )
    pins = [line.split("==") for line in run.stdout.splitlines() if "==" in line]
    return {name.strip().lower(): version.strip() for name, version in pins}


# Extras that cannot be installed together with the current releases, and why. Each side
# resolves with every other extra (tested); test_known_conflicts_are_still_conflicts fails
# when one goes away, so the entry is removed rather than kept by habit.
CONFLICTS = {
    ("serve", "vllm"): "openenv 0.10.0 needs fastmcp<4 (mcp<2); vLLM 0.33.0 needs mcp>=2.2,<3",
}


def union_of_extras(without: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Core dependencies plus every extra but ``without``: what a user who installs all of them
    asks for."""
    p = project()
    extras = p["optional-dependencies"]
    reqs = list(p["dependencies"])
    for name in extras:
        if set(without) & extras_within(name, extras):
            continue  # e.g. "all", which holds "serve"
        reqs += [r for r in extra_requirements(name, extras) if r not in reqs]
    return tuple(reqs)


# every extra together, leaving out one side of each conflict: one set per side
WITHOUT = [(side,) for pair in CONFLICTS for side in pair]


@pytest.mark.parametrize("without", WITHOUT, ids=lambda w: "without-" + "-".join(w))
@pytest.mark.parametrize("python", PYTHONS)
def test_all_extras_resolve_together(python, without):
    """One resolution of the core and every extra (so each extra alone resolves too), but for
    the known conflicts: each side of one resolves with all the rest."""
    pins = resolve(union_of_extras(without), python)
    assert {"torch", "transformers", "peft"} <= set(pins)
    assert ("vllm" in pins) == ("vllm" not in without)


@pytest.mark.parametrize("python", PYTHONS)
def test_known_conflicts_are_still_conflicts(python):
    extras = project()["optional-dependencies"]
    for pair, why in CONFLICTS.items():
        reqs = tuple(r for name in pair for r in extra_requirements(name, extras))
        try:
            resolve(reqs, python)
        except pytest.fail.Exception:
            continue
        pytest.fail(f"extras {pair} resolve together now ({why}: no longer so); drop the entry")


@pytest.mark.parametrize("python", PYTHONS)
def test_the_current_vllm_installs_beside_the_baselines(python):
    """The newest vLLM release is what the extras get together (every extra that does not
    conflict with vllm): no requirement of ours (a torch pin, a transformers bound) pushes the
    resolver back to an older vLLM."""
    newest = resolve(("vllm",), python, deps=False)["vllm"]
    union = union_of_extras(tuple(side for pair in CONFLICTS if "vllm" in pair
                                  for side in pair if side != "vllm"))
    if resolve(union, python)["vllm"] != newest:
        # resolving again with the current release pinned fails with the conflict named
        resolve(union + (f"vllm=={newest}",), python)
        pytest.fail(f"the extras resolve to vllm {resolve(union, python)['vllm']}, not {newest}")


def test_the_baselines_take_the_newest_torch():
    """No torch pin in the metadata: ``[baselines]`` alone gets the newest torch release."""
    extras = project()["optional-dependencies"]
    newest = resolve(("torch",), PYTHONS[0], deps=False)["torch"]
    got = resolve(tuple(extra_requirements("baselines", extras)), PYTHONS[0])["torch"]
    assert got == newest, f"[baselines] resolves to torch {got}, not the current release {newest}"


def test_the_cpu_torch_pin_is_a_constraint_of_this_repository_not_of_the_package():
    extras = project()["optional-dependencies"]
    torch_reqs = [r for r in extra_requirements("baselines", extras) if r.startswith("torch")]
    assert torch_reqs and not any("==" in r or "<" in r for r in torch_reqs), torch_reqs
    constraints = (ROOT / "constraints" / "cpu.txt").read_text().split()
    assert "torch==2.13.0" in constraints
    assert "-c $(CONSTRAINTS)" in (ROOT / "Makefile").read_text()
