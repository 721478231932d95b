"""Exceptions raised by dataset loading."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class UnknownDatasetError(KeyError):
    """``tasks.load`` was asked for a dataset name that is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class DataNotFoundError(FileNotFoundError):
    """The files of a dataset are not on disk and the Hugging Face Hub was not usable.

    The message says exactly how to provide the data: the expected file paths, the
    ``data_dir=`` / ``MARFT_DATA_DIR`` options, and the Hub id.
    """

    def __init__(
        self,
        dataset: str,
        split: str,
        *,
        expected: Sequence[str],
        data_dir: Path | None,
        hub_id: str | None,
        hub_reason: str | None,
    ) -> None:
        self.dataset = dataset
        self.split = split
        self.expected = tuple(expected)
        self.data_dir = data_dir
        self.hub_id = hub_id
        self.hub_reason = hub_reason
        if data_dir is None:
            where = (
                "no data folder (data_dir= not given, $MARFT_DATA_DIR not set, "
                "<repo root>/../shared/data does not exist)"
            )
        else:
            where = f"data folder {data_dir}"
        lines = [
            f"Dataset {dataset!r} split {split!r}: data not found; looked in {where}.",
            "Expected file(s), relative to the data folder:",
            *(f"    {p}" for p in self.expected),
            "Provide the data in one of these ways:",
            (
                f"  1. tasks.load({dataset!r}, split={split!r}, data_dir='/path/to/data') "
                "with the file(s) above under /path/to/data;"
            ),
            "  2. export MARFT_DATA_DIR=/path/to/data;",
            "  3. put the files under <repo root>/../shared/data;",
        ]
        if hub_id is not None:
            lines.append(
                f"  4. pip install 'marft-envs[hub]' and allow network access: the loader then "
                f"reads the Hugging Face Hub dataset {hub_id}."
            )
            lines.append(f"Hub fallback not used: {hub_reason}.")
        super().__init__("\n".join(lines))
        self._kwargs = {
            "expected": self.expected,
            "data_dir": data_dir,
            "hub_id": hub_id,
            "hub_reason": hub_reason,
        }

    def __reduce__(self):  # picklable across worker processes despite keyword-only args
        return _rebuild_data_not_found, (self.dataset, self.split, self._kwargs)


class MalformedRecordError(ValueError):
    """A record in a dataset file lacks a field or has a bad value."""

    def __init__(self, where: str, record: str, problem: str) -> None:
        self.where = where
        self.record = record
        self.problem = problem
        super().__init__(f"{where}: record {record}: {problem}")

    def __reduce__(self):
        return type(self), (self.where, self.record, self.problem)


def _rebuild_data_not_found(dataset: str, split: str, kwargs: dict) -> DataNotFoundError:
    return DataNotFoundError(dataset, split, **kwargs)
