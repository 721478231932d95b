"""Every extra of the package metadata resolves against PyPI as it stood at ``RESOLVE_AT``.

The verdicts depend only on this repository: every resolution sees just the releases uploaded
before ``RESOLVE_AT`` (uv's ``--exclude-newer``), with the uv that ``constraints/cpu.txt`` pins, so
a release published tomorrow cannot turn a passing clone red. ``make check-releases`` runs the
same tests against the live registry (``MARFT_RESOLVE_AT=now``); when it passes, move
``RESOLVE_AT`` forward in a commit of its own.

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
import warnings
from functools import cache
from pathlib import Path

import pytest
import tomllib

uv = pytest.importorskip("uv", reason="the resolver test needs uv (the dev extra installs it)")

pytestmark = pytest.mark.network

ROOT = Path(__file__).parents[2]
PLATFORM = "x86_64-manylinux_2_28"
PYTHONS = ("3.11", "3.12")  # this repository's CI, and the GPU machine's
# The registry snapshot the verdicts are taken on; "now" (make check-releases) is the live one.
RESOLVE_AT = os.environ.get("MARFT_RESOLVE_AT", "2026-12-04T00:00:00Z")


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
def try_resolve(
    requirements: tuple[str, ...], python: str, deps: bool = True
) -> tuple[dict[str, str] | None, str]:
    """``({name: version}, "")`` that uv resolves ``requirements`` to on PyPI, or ``(None, why)``.

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
    ]
    cmd += [] if RESOLVE_AT == "now" else ["--exclude-newer", RESOLVE_AT]
    cmd += [] if deps else ["--no-deps"]
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
        return None, run.stderr.strip()
    pins = [line.split("==") for line in run.stdout.splitlines() if "==" in line]
    return {name.strip().lower(): version.strip() for name, version in pins}, ""


def resolve(requirements: tuple[str, ...], python: str, deps: bool = True) -> dict[str, str]:
    """``try_resolve``'s pins; fails the test with uv's reason when there are none."""
    pins, why = try_resolve(requirements, python, deps)
    if pins is None:
        pytest.fail(
            f"these requirements do not resolve on PyPI (as of {RESOLVE_AT}) for Python {python}"
            f" ({PLATFORM}):\n  " + "\n  ".join(requirements) + f"\nuv says:\n{why}"
        )
    return pins


def newest_installable(package: str, python: str, tries: int = 5) -> tuple[str, list[str]]:
    """The newest release of ``package`` that resolves with its own dependencies (nothing of
    ours involved), and one line for each newer release that does not.

    A release can be broken by itself (vLLM 0.34.0 requires a flashinfer-python that was never
    published): no metadata of ours can make it installable, so it is reported, not blamed on us.
    """
    skipped: list[str] = []
    spec = package
    for _ in range(tries):
        newest = resolve((spec,), python, deps=False)[package]
        pins, why = try_resolve((f"{package}=={newest}",), python)
        if pins is not None:
            return newest, skipped
        reason = next((ln.strip() for ln in why.splitlines() if "because" in ln.lower()), why)
        skipped.append(f"{package} {newest} does not resolve on its own (Python {python}): {reason}")
        spec = f"{package}<{newest}"
    pytest.fail(f"none of the {tries} newest {package} releases resolves on its own:\n" +
                "\n".join(skipped))


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
        if try_resolve(reqs, python)[0] is None:
            continue
        pytest.fail(f"extras {pair} resolve together now ({why}: no longer so); drop the entry")


def extras_beside_vllm() -> tuple[str, ...]:
    """The core and every extra that does not conflict with ``vllm``."""
    return union_of_extras(tuple(side for pair in CONFLICTS if "vllm" in pair
                                 for side in pair if side != "vllm"))


@pytest.mark.parametrize("python", PYTHONS)
def test_the_newest_installable_vllm_installs_beside_the_baselines(python):
    """The newest vLLM release that installs at all (with its own dependencies) is what the
    extras get together (every extra that does not conflict with vllm): no requirement of ours (a
    torch pin, a transformers bound) pushes the resolver back to an older vLLM. Newer releases
    that cannot resolve even alone are reported as warnings, not failures."""
    newest, broken = newest_installable("vllm", python)
    for line in broken:
        warnings.warn(line, stacklevel=1)
    union = extras_beside_vllm()
    # pinned, so a conflict of ours fails with uv naming it (unpinned, uv would quietly pick an
    # older vLLM, or one of the broken newer ones would be tried first)
    got = resolve(union + (f"vllm=={newest}",), python)
    assert got["vllm"] == newest


def test_a_pin_that_holds_back_vllm_fails_naming_the_conflict():
    """The check above can fail: the old ``torch==2.13.0`` pin put back beside the extras makes
    the pinned resolution fail, and uv's reason names the packages that clash."""
    python = PYTHONS[0]
    newest, _ = newest_installable("vllm", python)
    with pytest.raises(pytest.fail.Exception) as failed:
        resolve(extras_beside_vllm() + ("torch==2.13.0", f"vllm=={newest}"), python)
    why = str(failed.value).split("uv says:", 1)[1]
    assert "torch==2.13.0" in why and f"vllm=={newest}" in why, why


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
