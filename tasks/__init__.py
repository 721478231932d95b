"""Task records, datasets, loaders and procedural generators for marft-envs.

    import tasks
    ds = tasks.load("math500")                      # Dataset: .tasks, .hash, .by_id(...)
    ds = tasks.load("arith", split="train", size=1000, seed=0, level=3)
    tasks.list_datasets()

Imports only the standard library (pyarrow and ``datasets`` lazily, when needed).
"""

from tasks.dataset import (
    DATA_DIR_ENV,
    Dataset,
    DatasetInfo,
    Loaded,
    clear_cache,
    content_hash,
    dataset_info,
    list_datasets,
    load,
    register_dataset,
    resolve_data_dir,
)
from tasks.errors import DataNotFoundError, MalformedRecordError, UnknownDatasetError
from tasks.record import IOTest, Task, TaskKind

# Built-in datasets register themselves on import.
from tasks import math_loaders as _math_loaders  # noqa: E402,F401
from tasks import generators as _generators  # noqa: E402,F401
from tasks.generators import arith_task  # noqa: E402

__all__ = [
    "DATA_DIR_ENV",
    "DataNotFoundError",
    "Dataset",
    "DatasetInfo",
    "IOTest",
    "Loaded",
    "MalformedRecordError",
    "Task",
    "TaskKind",
    "UnknownDatasetError",
    "arith_task",
    "clear_cache",
    "content_hash",
    "dataset_info",
    "list_datasets",
    "load",
    "register_dataset",
    "resolve_data_dir",
]
