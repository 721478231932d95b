"""Task records, datasets, loaders and procedural generators for marft-envs.

    import tasks
    ds = tasks.load("math500")                      # Dataset: .tasks, .hash, .by_id(...)
    ds = tasks.load("arith", split="train", size=1000, seed=0, level=3)
    tasks.list_datasets()

Imports only the standard library (pyarrow and ``datasets`` lazily, when needed).
"""

# The built-in datasets register themselves when their modules are imported: generators and
# math_loaders (math), keys (the credit games), code_loaders (humaneval, mbpp, code), competitive
# (livecodebench, apps, codecontests).
from tasks import code_loaders, competitive, generators, keys, math_loaders  # noqa: F401
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
from tasks.generators import arith_task
from tasks.record import IOTest, Task, TaskKind
from tasks.registry import AlreadyRegisteredError, Registry

__all__ = [
    "DATA_DIR_ENV",
    "AlreadyRegisteredError",
    "DataNotFoundError",
    "Dataset",
    "DatasetInfo",
    "IOTest",
    "Loaded",
    "MalformedRecordError",
    "Registry",
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
