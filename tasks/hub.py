"""Reading upstream datasets from the Hugging Face Hub (optional ``datasets`` package).

Used only as a fallback when local files are missing. The ``datasets`` import is
lazy, so ``tasks`` works without it.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

NO_HUB_ENV = "MARFT_NO_HUB"


class HubUnavailable(RuntimeError):
    """The Hub could not be used; the message says why."""


@dataclass(frozen=True)
class HubSource:
    """One split of one Hub dataset (``repo``, optional ``config``)."""

    repo: str
    split: str
    config: str | None = None
    #: extra ``datasets.load_dataset`` keywords (LiveCodeBench's ``version_tag``)
    options: tuple[tuple[str, Any], ...] = ()

    def describe(self) -> str:
        config = f", config {self.config}" if self.config else ""
        return f"{self.repo} (split {self.split}{config})"

    @property
    def uri(self) -> str:
        config = f"/{self.config}" if self.config else ""
        return f"hf://{self.repo}{config}:{self.split}"


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def hub_unavailable_reason(timeout: float = 3.0) -> str | None:
    """Why the Hub cannot be used now, or None if it looks usable.

    Checks ``$MARFT_NO_HUB``, that ``datasets`` is importable, and (unless the
    Hugging Face offline flags ask for the local Hub cache) that the Hub host
    accepts a TCP connection within ``timeout`` seconds, so an offline machine fails
    fast instead of waiting on the ``datasets`` retries.
    """
    if _truthy(NO_HUB_ENV):
        return f"${NO_HUB_ENV} is set"
    if importlib.util.find_spec("datasets") is None:  # cheap: importing it takes seconds
        return "the 'datasets' package is not installed (pip install 'marft-envs[hub]')"
    if _truthy("HF_HUB_OFFLINE") or _truthy("HF_DATASETS_OFFLINE"):
        return None  # datasets will read its local cache
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    host = url.hostname or "huggingface.co"
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        return f"the Hub ({host}:{port}) is unreachable: {e}"
    return None


def load_hub_records(source: HubSource) -> list[dict[str, Any]]:
    """All rows of ``source`` as plain dicts. Raises `HubUnavailable` with the reason."""
    reason = hub_unavailable_reason()
    if reason is not None:
        raise HubUnavailable(reason)
    import datasets

    try:
        ds = datasets.load_dataset(
            source.repo, source.config, split=source.split, **dict(source.options)
        )
    except Exception as e:  # any failure of the optional path becomes one typed error
        raise HubUnavailable(f"loading {source.describe()} failed: {type(e).__name__}: {e}") from e
    return [dict(row) for row in ds]
