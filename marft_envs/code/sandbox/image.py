"""Build the docker sandbox image locally from the host's Python (no registry needed).

    python -m marft_envs.code.sandbox.image build [--force]   # idempotent
    python -m marft_envs.code.sandbox.image status

The image is a minimal root file system made with `docker import`: this
process's Python interpreter, its standard library (no site-packages, no test
suites), libpython, and the shared libraries the interpreter and its extension
modules link against (found with ``ldd``), all at their host paths, plus an
/etc/passwd with root and nobody. Nothing else: no shell, no package manager.
Its label ``marft.python`` names the interpreter; ``marft.fingerprint`` lets
`build` skip work when the same interpreter was already imported.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterable, Iterator

IMAGE_REPO = "marft-sandbox"
IMAGE_TAG = f"py{sys.version_info.major}.{sys.version_info.minor}"
IMAGE = f"{IMAGE_REPO}:{IMAGE_TAG}"
#: Bumped when the image layout changes, so `build` rebuilds.
LAYOUT_VERSION = 1

#: Standard-library directories programs do not need (tests, GUI, installers).
_SKIP_DIRS = {
    "site-packages",
    "dist-packages",
    "test",
    "tests",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "__phello__",
    "config-3.11-x86_64-linux-gnu",
}
_SKIP_SUFFIXES = (".opt-1.pyc", ".opt-2.pyc", ".a", ".exe")
_SKIP_PREFIXES = ("_tkinter", "_test", "xxlimited", "_xxtest", "_ctypes_test")
_LDD_PATH = re.compile(r"(/\S+)")


def interpreter() -> str:
    """The real path of the interpreter that goes into the image (this process's base
    interpreter)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _stdlib_files(stdlib: str) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("config-")
        )
        for name in sorted(filenames):
            if not name.endswith(_SKIP_SUFFIXES) and not name.startswith(_SKIP_PREFIXES):
                yield os.path.join(dirpath, name)


def shared_libs(binaries: Iterable[str]) -> set[str]:
    """Every shared library (and the loader) the binaries need, per ldd."""
    libs: set[str] = set()
    for binary in binaries:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            m = _LDD_PATH.search(line.split("=>")[-1])
            if m and os.path.exists(m.group(1)):
                libs.add(m.group(1))
    return libs


def rootfs_files() -> list[str]:
    """Host paths (files and symlinks) that make up the image."""
    exe = interpreter()
    stdlib = sysconfig.get_path("stdlib")
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    files = [exe, *_stdlib_files(stdlib)]
    ldlib = sysconfig.get_config_var("INSTSONAME") or ""
    if ldlib and os.path.exists(os.path.join(libdir, ldlib)):
        files.append(os.path.join(libdir, ldlib))
    binaries = [exe] + [f for f in files if f.endswith(".so")]
    files += sorted(shared_libs(binaries))
    # Paths through merged-/usr symlinks (/lib -> usr/lib) become their real parent
    # dirs (the image gets the same top-level symlinks); symlinked libraries ship
    # as the link plus its target.
    out: set[str] = set()
    for f in files:
        f = os.path.join(os.path.realpath(os.path.dirname(f)), os.path.basename(f))
        out.add(f)
        if os.path.islink(f):
            out.add(os.path.realpath(f))
    return sorted(out)


def _top_level_links() -> dict[str, str]:
    """Host top-level symlinks such as /lib -> usr/lib, reproduced in the image."""
    return {
        d: os.readlink("/" + d)
        for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
        if os.path.islink("/" + d)
    }


def fingerprint(files: list[str]) -> str:
    h = hashlib.sha256(f"{LAYOUT_VERSION}|{sys.version}|{interpreter()}".encode())
    for f in files:
        st = os.lstat(f)
        h.update(f"{f}|{st.st_size}|{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


_ETC = {
    "etc/passwd": (
        "root:x:0:0:root:/root:/nonexistent\nnobody:x:65534:65534:nobody:/work:/nonexistent\n"
    ),
    "etc/group": "root:x:0:\nnogroup:x:65534:\n",
}


def write_rootfs(path: str, files: list[str]) -> None:
    """Write the root file system tarball (parents as 0755 dirs so uid 65534 can reach
    everything)."""
    dirs: set[str] = {"work", "tmp", "etc", "usr/bin", "proc", "dev"} - set(_top_level_links())
    for f in files:
        parent = os.path.dirname(f.lstrip("/"))
        while parent:
            dirs.add(parent)
            parent = os.path.dirname(parent)
    with tarfile.open(path, "w") as tar:
        for d in sorted(dirs):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d in ("tmp", "work") else 0o755
            tar.addfile(info)
        for f in files:
            info = tar.gettarinfo(f, arcname=f.lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = (info.mode & 0o755) | 0o444  # readable by everyone, writable by nobody
            if info.isreg():
                with open(f, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
        for name, target in {**_top_level_links(), "usr/bin/python3": interpreter()}.items():
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, target
            tar.addfile(link)
        for name, text in _ETC.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))


def _client(client=None):
    import docker  # the SDK is a core dependency; imported lazily to keep imports light

    return client or docker.from_env(timeout=120)


def image_info(client=None) -> dict | None:
    """Labels of the sandbox image, or None if it is not there."""
    import docker

    try:
        return _client(client).images.get(IMAGE).labels or {}
    except docker.errors.ImageNotFound:
        return None


def build(force: bool = False, client=None) -> str:
    """Import the sandbox image unless an identical one exists; returns the image tag."""
    client = _client(client)
    files = rootfs_files()
    fp = fingerprint(files)
    labels = image_info(client)
    old_id = client.images.get(IMAGE).id if labels is not None else None
    if labels is not None and labels.get("marft.fingerprint") == fp and not force:
        print(f"image {IMAGE} is up to date (fingerprint {fp})")
        return IMAGE
    with tempfile.TemporaryDirectory(prefix="marft-rootfs-") as tmp:
        tar_path = os.path.join(tmp, "rootfs.tar")
        write_rootfs(tar_path, files)
        size_mb = os.path.getsize(tar_path) / 1e6
        changes = [
            f"LABEL marft.python={interpreter()}",
            f"LABEL marft.fingerprint={fp}",
            f"LABEL marft.python_version={sys.version.split()[0]}",
            "USER 65534:65534",
            "WORKDIR /work",
            'CMD ["/usr/bin/python3"]',
        ]
        client.api.import_image_from_file(
            tar_path, repository=IMAGE_REPO, tag=IMAGE_TAG, changes=changes
        )
    if old_id and old_id != client.images.get(IMAGE).id:
        try:  # the previous build, now untagged; kept if a container still uses it
            client.images.remove(old_id)
        except Exception:  # noqa: BLE001 -- only housekeeping
            pass
    print(f"built image {IMAGE} ({len(files)} files, {size_mb:.1f} MB, fingerprint {fp})")
    return IMAGE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m marft_envs.code.sandbox.image", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="import the sandbox image (skipped when up to date)")
    b.add_argument("--force", action="store_true", help="rebuild even when up to date")
    sub.add_parser("status", help="print the image's labels or say it is missing")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "build":
            build(force=args.force)
        else:
            labels = image_info()
            print(
                f"image {IMAGE}: "
                + ("missing" if labels is None else json.dumps(labels, sort_keys=True))
            )
            return 0 if labels is not None else 1
    except Exception as exc:  # noqa: BLE001 -- CLI: one clear line, not a traceback
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
