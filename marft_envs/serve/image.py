"""Build the server's Docker image on top of the project's sandbox image (no registry needed).

    python -m marft_envs.serve.image build [--tag marft-envs-serve] [--context build/serve]

Steps: the sandbox image (``marft_envs.code.sandbox.image build``, this interpreter and its
standard library); ``pip install --target`` of this project with the ``serve`` and ``code``
extras into the build context, for this same interpreter; a ``bin/python`` link to it; then
``docker build`` with ``marft_envs/serve/Dockerfile``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..code.sandbox import image as sandbox_image

DOCKERFILE = Path(__file__).with_name("Dockerfile")
PROJECT = Path(__file__).resolve().parents[2]


def prepare_context(context: Path, project: Path = PROJECT) -> Path:
    """Fill ``context`` with ``site/`` (the project and its deps) and ``bin/python``."""
    if not (project / "pyproject.toml").is_file():
        raise FileNotFoundError(f"{project} has no pyproject.toml: run from a source checkout")
    shutil.rmtree(context, ignore_errors=True)
    (context / "bin").mkdir(parents=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            "--target",
            str(context / "site"),
            f"{project}[serve,code]",
        ],
        check=True,
    )
    os.symlink(sandbox_image.interpreter(), context / "bin" / "python")
    copy_system_libraries(context / "site", context / "rootfs")
    shutil.copy(DOCKERFILE, context / "Dockerfile")
    return context


def copy_system_libraries(site: Path, rootfs: Path) -> list[str]:
    """Copy the system libraries that ``site``'s extension modules link against (``ldd``) to
    their host paths under ``rootfs``; the sandbox base has only the interpreter's own."""
    binaries = [str(p) for p in site.rglob("*.so*") if p.is_file()]
    libs = sorted(
        lib for lib in sandbox_image.shared_libs(binaries) if not lib.startswith(str(site))
    )
    for lib in libs:
        target = rootfs / lib.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, target)  # follows links: the file lands under the name ldd resolved
    return libs


def build(tag: str, context: Path) -> str:
    base = sandbox_image.build()
    prepare_context(context)
    subprocess.run(
        ["docker", "build", "--build-arg", f"BASE={base}", "-t", tag, str(context)], check=True
    )
    return tag


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("command", choices=["build"])
    p.add_argument("--tag", default="marft-envs-serve")
    p.add_argument("--context", type=Path, default=Path("build/serve"))
    args = p.parse_args(argv)
    print(build(args.tag, args.context))
    return 0


if __name__ == "__main__":
    sys.exit(main())
