"""`Dataset` (a named, hashed, immutable split of tasks), `content_hash`, and the dataset registry.

Loaders register themselves with :func:`register_dataset`; users call :func:`load`.
A loader is any callable ``loader(split, data_dir, **kwargs) -> Loaded``:
``data_dir`` is the resolved local data folder (``None`` when there is none, or when
the dataset was registered with ``needs_data=False``); ``Loaded`` carries the tasks
and a ``source`` string (a local path, ``hf://<hub id>``, or ``generated:<name>``).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple, overload

from tasks.errors import UnknownDatasetError
from tasks.record import Task, TaskKind
from tasks.registry import Registry

DATA_DIR_ENV = "MARFT_DATA_DIR"
REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"


def content_hash(tasks: Sequence[Task]) -> str:
    """sha256 (hex) of the canonical JSON of every task's ``to_dict()``, in order.

    Canonical: sorted keys, no whitespace, UTF-8. Two task sequences have the same
    hash exactly when they hold the same records in the same order.
    """
    payload = json.dumps(
        [t.to_dict() for t in tasks], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class Dataset:
    """An immutable split of tasks with a content hash.

    ``source`` is where the tasks came from: a local path, ``hf://<hub id>``, or
    ``generated:<name>``. The hash covers the tasks only (not name, split or source),
    so the same records read from disk or from the Hub hash the same.
    """

    name: str
    split: str
    kind: TaskKind
    tasks: tuple[Task, ...] = field(repr=False)
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        for t in self.tasks:
            if t.kind != self.kind:
                raise ValueError(
                    f"Dataset {self.name!r}/{self.split!r} is of kind {self.kind!r} "
                    f"but task {t.id!r} is of kind {t.kind!r}"
                )
        _ = self._index  # fail early on duplicate ids

    @cached_property
    def hash(self) -> str:
        """`content_hash` of the tasks, computed once on first use."""
        return content_hash(self.tasks)

    @cached_property
    def _index(self) -> dict[str, int]:
        index: dict[str, int] = {}
        for i, t in enumerate(self.tasks):
            if t.id in index:
                raise ValueError(
                    f"Dataset {self.name!r}/{self.split!r}: duplicate task id {t.id!r} "
                    f"at positions {index[t.id]} and {i}"
                )
            index[t.id] = i
        return index

    @property
    def ids(self) -> tuple[str, ...]:
        """Task ids in dataset order."""
        return tuple(t.id for t in self.tasks)

    def by_id(self, task_id: str) -> Task:
        """The task with this id (O(1)). Unknown ids raise KeyError naming a few valid ids."""
        try:
            return self.tasks[self._index[task_id]]
        except KeyError:
            examples = ", ".join(repr(t.id) for t in self.tasks[:3])
            raise KeyError(
                f"No task {task_id!r} in dataset {self.name!r} split {self.split!r} "
                f"({len(self)} tasks; ids look like {examples}{', ...' if len(self) > 3 else ''})"
            ) from None

    def filter(self, predicate: Callable[[Task], bool]) -> Dataset:
        """A dataset of the tasks for which ``predicate`` is true (same name, split,
        source; its own hash), e.g. ``ds.filter(lambda t: t.metadata["level"] <= 2)``."""
        return Dataset(
            self.name,
            self.split,
            self.kind,
            tuple(t for t in self.tasks if predicate(t)),
            self.source,
        )

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._index

    def __len__(self) -> int:
        return len(self.tasks)

    @overload
    def __getitem__(self, i: int) -> Task: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[Task, ...]: ...
    def __getitem__(self, i: int | slice) -> Task | tuple[Task, ...]:
        return self.tasks[i]

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dataset):
            return NotImplemented
        return (self.name, self.split, self.kind, self.tasks) == (
            other.name,
            other.split,
            other.kind,
            other.tasks,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.split, self.hash))


class Loaded(NamedTuple):
    """What a loader returns: the tasks, and where they came from."""

    tasks: Sequence[Task]
    source: str


Loader = Callable[..., Loaded]


@dataclass(frozen=True)
class DatasetInfo:
    """A registry entry."""

    name: str
    loader: Loader = field(repr=False)
    splits: tuple[str, ...]
    kind: TaskKind
    description: str
    default_split: str
    needs_data: bool


_REGISTRY: Registry[DatasetInfo] = Registry("dataset")
_CACHE: dict[tuple[Any, ...], Dataset] = {}
_LOCK = threading.Lock()


def register_dataset(
    name: str,
    loader: Loader,
    *,
    splits: Sequence[str],
    kind: TaskKind,
    description: str,
    default_split: str | None = None,
    needs_data: bool = True,
    overwrite: bool = False,
) -> DatasetInfo:
    """Register a dataset under ``name``.

    ``loader(split, data_dir, **kwargs) -> Loaded`` is called by :func:`load` with a
    split from ``splits``. ``default_split`` (used when ``load`` gets ``split=None``)
    defaults to ``"test"`` if that is a split, else the first split. Datasets with
    ``needs_data=False`` (generators) get ``data_dir=None``. Registering a taken name
    again is a no-op when everything is equal, else raises
    :class:`~tasks.registry.AlreadyRegisteredError` (a ValueError) unless ``overwrite=True``.
    """
    splits = tuple(splits)
    if not splits:
        raise ValueError(f"Dataset {name!r}: splits must not be empty")
    if kind not in ("math", "code"):
        raise ValueError(f"Dataset {name!r}: kind must be 'math' or 'code', got {kind!r}")
    if default_split is None:
        default_split = "test" if "test" in splits else splits[0]
    if default_split not in splits:
        raise ValueError(f"Dataset {name!r}: default_split {default_split!r} not in {splits}")
    with _LOCK:
        info = DatasetInfo(name, loader, splits, kind, description, default_split, needs_data)
        registered = _REGISTRY.register(name, info, overwrite=overwrite)
        if registered is info:  # new or replaced: what was cached under the name is stale
            for key in [k for k in _CACHE if k[0] == name]:
                del _CACHE[key]
    return registered


def list_datasets() -> list[str]:
    """Names of all registered datasets, sorted."""
    return sorted(_REGISTRY)


def dataset_info(name: str) -> DatasetInfo:
    """The registry entry of ``name``; unknown names raise `UnknownDatasetError`."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownDatasetError(
            f"Unknown dataset {name!r}; registered: {', '.join(list_datasets())}"
        ) from None


def resolve_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The local data folder: the ``data_dir`` argument, else ``$MARFT_DATA_DIR``,
    else ``<repo root>/../shared/data`` if it exists, else ``None``."""
    if data_dir is not None:
        return Path(data_dir).expanduser().resolve()
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser().resolve()
    if SHARED_DATA_DIR.is_dir():
        return SHARED_DATA_DIR.resolve()
    return None


def load(
    name: str,
    split: str | None = None,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    cache: bool = True,
    **kwargs: Any,
) -> Dataset:
    """Load split ``split`` (default: the dataset's default split, ``"test"`` for most).

    ``data_dir`` overrides ``$MARFT_DATA_DIR`` and ``<repo root>/../shared/data``.
    Extra keyword arguments go to the loader (e.g. ``size``, ``seed``, ``level`` for
    ``arith``). Results are cached per (name, split, resolved data folder, kwargs);
    ``cache=False`` reloads, `clear_cache` empties the cache.
    """
    info = dataset_info(name)
    split = info.default_split if split is None else split
    if split not in info.splits:
        raise ValueError(f"Dataset {name!r} has no split {split!r}; valid splits: {info.splits}")
    resolved = resolve_data_dir(data_dir) if info.needs_data else None
    key: tuple[Any, ...] = (name, split, str(resolved), tuple(sorted(kwargs.items())))
    try:
        hash(key)
    except TypeError:  # unhashable loader kwargs: load without caching
        cache = False
    if cache:
        with _LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit
    loaded = info.loader(split, resolved, **kwargs)
    ds = Dataset(
        name=name, split=split, kind=info.kind, tasks=tuple(loaded.tasks), source=loaded.source
    )
    if cache:
        with _LOCK:
            ds = _CACHE.setdefault(key, ds)
    return ds


def clear_cache() -> None:
    """Forget every cached dataset (e.g. after adding files to the data folder)."""
    with _LOCK:
        _CACHE.clear()
