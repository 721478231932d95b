"""The one registry type of the project, and its rule for a name registered twice.

Datasets (here), environment ids, workflows, verifiers and sandbox backends (``marft_envs``) are
each a :class:`Registry`. It lives in ``tasks``, the bottom layer, because every one of them can
import it from here.

The rule (docs/architecture.md, "Registries"): a name is bound once. Registering a name again
with an equal value does nothing (importing or running a registering module twice is safe);
with a different value it raises :class:`AlreadyRegisteredError`, naming the name and saying how
to replace it (``overwrite=True``), so that two plugins that pick one name never silently
replace each other's entry.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, MutableMapping
from typing import TypeVar

__all__ = ["AlreadyRegisteredError", "Registry"]

T = TypeVar("T")


class AlreadyRegisteredError(ValueError):
    """A name is registered to a different value (pass ``overwrite=True`` to replace it)."""


class Registry(MutableMapping[str, T]):
    """Names to values, each name bound once (see the module docstring).

    A mapping like the dict Gymnasium's ``registry`` is: ``name in r``, ``r[name]``, ``r.get``,
    iteration and ``del r[name]`` (which unregisters) work as on a dict; ``r[name] = value`` is
    :meth:`register` without ``overwrite``. ``kind`` names the entries in messages
    (``"dataset"``, ``"environment id"``).
    """

    def __init__(self, kind: str, entries: Mapping[str, T] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._lock = threading.Lock()  # loaders may register from worker threads
        for name, value in (entries or {}).items():
            self.register(name, value)

    def register(self, name: str, value: T, *, overwrite: bool = False) -> T:
        """Bind ``name`` to ``value`` and return the value now registered under ``name``: the
        existing one when it equals ``value``, ``value`` otherwise. A name bound to a different
        value raises :class:`AlreadyRegisteredError` unless ``overwrite`` is true."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        with self._lock:
            if name in self._entries and not overwrite:
                existing = self._entries[name]
                if existing is value or existing == value:
                    return existing
                raise AlreadyRegisteredError(
                    f"{self.kind[:1].upper()}{self.kind[1:]} {name!r} is already registered to a "
                    "different value; pass overwrite=True to replace it, or choose another name"
                )
            self._entries[name] = value
            return value

    def __setitem__(self, name: str, value: T) -> None:
        self.register(name, value)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __delitem__(self, name: str) -> None:
        with self._lock:
            if name not in self._entries:
                raise KeyError(
                    f"no {self.kind} {name!r} is registered; registered: {sorted(self._entries)}"
                )
            del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))  # a copy: another thread may register meanwhile

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._entries)})"
