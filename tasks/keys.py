"""``keys``: one task per key letter, for the data-free credit-assignment games.

The task's prompt and answer are the bare key (``"A"``); a credit game hides it from every role
but the first, so only a team that passes it on can answer. Both splits hold the same tasks:
the games test credit assignment inside a team, not generalisation to unseen problems.
"""

from __future__ import annotations

from pathlib import Path

from tasks.dataset import Loaded, register_dataset
from tasks.record import Task

DEFAULT_KEYS = "AB"


def load_keys(split: str, data_dir: Path | None, *, keys: str = DEFAULT_KEYS) -> Loaded:
    """One task per distinct character of ``keys`` (ids ``key-<letter>``)."""
    if not isinstance(keys, str) or not keys or len(set(keys)) != len(keys) or not keys.isalpha():
        raise ValueError(f"keys: keys must be distinct letters such as 'AB', got {keys!r}")
    tasks = [Task(id=f"key-{k}", kind="math", prompt=k, answer=k) for k in keys]
    return Loaded(tasks, f"generated:keys?keys={keys}")


register_dataset(
    "keys",
    load_keys,
    splits=("train", "test"),
    kind="math",
    needs_data=False,
    description="One task per key letter, for the credit games (keys=, default 'AB')",
)
