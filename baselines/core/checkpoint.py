"""Atomic, model-agnostic checkpoints and RNG state capture.

Layout of a run directory::

    <run_dir>/checkpoints/step_00000010/state.pt    # torch.save of the state entries
                                       /meta.json   # step, time, entry names, format
                                       /<writer>/   # one folder per writer callback
    <run_dir>/checkpoints/step_00000020/...

Convention for ``state`` entries passed to :func:`save_checkpoint`:

- an object with ``state_dict()`` (``nn.Module``, optimizer, LR scheduler, ``GradScaler``)
  is saved as its ``state_dict()``; :func:`load_checkpoint` with ``into={name: obj}``
  calls ``obj.load_state_dict(...)`` on it;
- anything else must be plain data (tensors, numbers, strings, None, lists, tuples,
  dicts of those): counters, the data position, :func:`capture_rng_state`, the config
  dict. It loads with ``torch.load(weights_only=True)``: no pickled code runs;
- files that a library writes itself (peft's ``save_pretrained`` for LoRA adapters) go
  through ``writers={name: fn}``: ``fn(folder)`` writes into ``<checkpoint>/<name>/``
  inside the temporary directory, so they are atomic with the rest.

A checkpoint is written to a hidden temporary folder, flushed to disk, and renamed into
place, so a crash at any moment leaves either the previous checkpoints or the new one,
never a half-written one. Only the newest ``keep_last`` are kept.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "CHECKPOINT_DIR",
    "CheckpointError",
    "capture_rng_state",
    "latest_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "restore_rng_state",
    "save_checkpoint",
]

CHECKPOINT_DIR = "checkpoints"
FORMAT = 1
_PREFIX = "step_"
_RESERVED = ("step", "path")


class CheckpointError(RuntimeError):
    """No checkpoint where one was expected, or a checkpoint that cannot be read."""


def _step_dir(root: Path, step: int) -> Path:
    return root / f"{_PREFIX}{step:08d}"


def _fsync_tree(path: Path) -> None:
    """Flush every file and folder under ``path`` to disk (POSIX)."""
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            with open(os.path.join(dirpath, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(Path(dirpath))


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _to_plain(value: Any) -> Any:
    if hasattr(value, "state_dict") and callable(value.state_dict):
        return value.state_dict()
    return value


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first (temporary folders are ignored)."""
    root = Path(run_dir) / CHECKPOINT_DIR
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        if p.is_dir() and p.name.startswith(_PREFIX) and (p / "meta.json").is_file():
            try:
                found.append((int(p.name[len(_PREFIX) :]), p))
            except ValueError:
                continue
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint folder of ``run_dir``, or None."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def save_checkpoint(
    run_dir: str | Path,
    *,
    step: int,
    state: dict[str, Any],
    writers: dict[str, Callable[[Path], None]] | None = None,
    keep_last: int = 3,
) -> Path:
    """Write ``<run_dir>/checkpoints/step_<step>/`` atomically and prune old ones.

    Args:
        run_dir: the run directory.
        step: the training step (iteration) the state is AFTER; orders checkpoints.
        state: named entries (see the module docstring for the convention); the names
            ``step`` and ``path`` are reserved.
        writers: ``{name: fn}``; ``fn(folder)`` writes files into a fresh ``folder``.
        keep_last: newest checkpoints kept (>= 1); older ones are deleted.

    Returns:
        The checkpoint folder.
    """
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1, got {keep_last}")
    clash = [k for k in _RESERVED if k in state]
    overlap = sorted(set(state) & set(writers or {}))
    if clash or overlap:
        raise ValueError(
            f"state names {clash + overlap} are reserved or used twice "
            f"(reserved: {list(_RESERVED)})"
        )
    root = Path(run_dir) / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(f".tmp-{_PREFIX}*"):  # left by a crash mid-save
        shutil.rmtree(stale, ignore_errors=True)
    final = _step_dir(root, step)
    tmp = root / f".tmp-{final.name}-{os.getpid()}"
    tmp.mkdir()
    try:
        plain = {k: _to_plain(v) for k, v in state.items()}
        torch.save(plain, tmp / "state.pt")
        for name, write in (writers or {}).items():
            sub = tmp / name
            sub.mkdir()
            write(sub)
        meta = {
            "format": FORMAT,
            "step": step,
            "time": time.time(),
            "state": sorted(state),
            "writers": sorted(writers or {}),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        _fsync_tree(tmp)
        if final.exists():  # re-saving a step (e.g. after a resume): swap, then drop the old
            old = root / f".tmp-{_PREFIX}old-{final.name}-{os.getpid()}"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for old in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(
    path: str | Path,
    into: dict[str, Any] | None = None,
    map_location: str | torch.device | None = "cpu",
) -> dict[str, Any]:
    """Read a checkpoint folder, or the newest checkpoint of a run directory.

    Args:
        path: a ``step_*`` folder, or a run directory (its latest checkpoint).
        into: ``{name: obj}``; for each, ``obj.load_state_dict(state[name])`` is called.
        map_location: where tensors land (``"cpu"`` by default; move them afterwards).

    Returns:
        The saved entries (state dicts stay as dicts), plus ``"step"`` (int) and
        ``"path"`` (the checkpoint folder, where writer folders live).

    Raises:
        CheckpointError: nothing to load, or an entry of ``into`` missing from the checkpoint.
    """
    p = Path(path)
    if not (p / "meta.json").is_file():
        latest = latest_checkpoint(p)
        if latest is None:
            raise CheckpointError(
                f"no checkpoint in {str(p)!r} (expected {CHECKPOINT_DIR}/"
                f"{_PREFIX}NNNNNNNN/ with meta.json, or such a folder itself)"
            )
        p = latest
    try:
        meta = json.loads((p / "meta.json").read_text())
        state = torch.load(p / "state.pt", map_location=map_location, weights_only=True)
    except Exception as e:  # corrupt or foreign files: say which checkpoint
        raise CheckpointError(f"cannot read checkpoint {str(p)!r}: {e}") from e
    for name, obj in (into or {}).items():
        if name not in state:
            raise CheckpointError(
                f"checkpoint {str(p)!r} has no entry {name!r}; it has {sorted(state)}"
            )
        obj.load_state_dict(state[name])
    state["step"] = int(meta["step"])
    state["path"] = p
    return state


# ---------------------------------------------------------------------------
# random number generators


def capture_rng_state() -> dict[str, Any]:
    """State of python ``random``, numpy's global RNG, torch CPU and every CUDA device.

    Plain data only (tensors, ints, lists), so it loads with ``weights_only=True``.
    """
    version, internal, gauss = random.getstate()
    np_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`capture_rng_state` returned.

    CUDA states are restored when CUDA is available and they were captured; a
    checkpoint from a GPU run resumed on CPU restores the CPU generators only.
    """
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": n["bit_generator"],
            "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    torch.set_rng_state(state["torch"].cpu())
    cuda = state.get("cuda")
    if cuda is not None and torch.cuda.is_available():
        n_dev = min(len(cuda), torch.cuda.device_count())
        for i in range(n_dev):
            torch.cuda.set_rng_state(cuda[i].cpu(), device=i)
