"""Shared fixtures for the tasks tests: the benchmark data folder and a clean cache."""

from __future__ import annotations

from pathlib import Path

import pytest

import tasks

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture
def data_dir() -> Path:
    """The shared benchmark data (see ../shared/data/README.md)."""
    assert DATA.is_dir(), f"benchmark data missing at {DATA}"
    return DATA


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch):
    """No test sees another's cache, a user's MARFT_DATA_DIR, or the real Hub."""
    monkeypatch.delenv("MARFT_DATA_DIR", raising=False)
    monkeypatch.setenv("MARFT_NO_HUB", "1")
    tasks.clear_cache()
    yield
    tasks.clear_cache()
