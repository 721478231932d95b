"""The task record: one problem, whatever benchmark it came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

TaskKind = Literal["math", "code"]


class FrozenMetadata(dict):
    """A read-only dict: a task's metadata is part of its dataset's content hash, so changing it
    after loading would make that hash lie. Pickles (Ray workers) and JSON-serialises as a dict."""

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "Task.metadata is read-only (it is part of the dataset hash); "
            "build a new Task with dataclasses.replace(task, metadata={...})"
        )

    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]

    def __reduce__(self):
        return (FrozenMetadata, (dict(self),))

    def __copy__(self) -> FrozenMetadata:
        return self

    def __deepcopy__(self, memo: dict) -> FrozenMetadata:
        import copy

        return FrozenMetadata(copy.deepcopy(dict(self), memo))


@dataclass(frozen=True)
class IOTest:
    """One stdin/stdout test case (CodeForces/APPS style)."""

    stdin: str
    expected_stdout: str


@dataclass(frozen=True)
class Task:
    """A single problem.

    Math tasks carry a bare reference ``answer``. Code tasks carry an ``entry_point``
    (function name, or None for stdin/stdout programs) and tests: ``tests`` are the
    hidden tests used for the reward, ``public_tests`` the ones that may be shown to
    agents as feedback. Python tests are source strings (``assert f(1) == 2`` lines,
    or a HumanEval-style ``def check(candidate): ...``); ``io_tests`` are
    stdin/stdout pairs.
    """

    id: str
    kind: TaskKind
    prompt: str
    answer: str | None = None
    entry_point: str | None = None
    tests: tuple[str, ...] = ()
    public_tests: tuple[str, ...] = ()
    io_tests: tuple[IOTest, ...] = ()
    setup_code: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.metadata, FrozenMetadata):
            object.__setattr__(self, "metadata", FrozenMetadata(self.metadata))
        if self.kind not in ("math", "code"):
            raise ValueError(f"Task {self.id!r}: kind must be 'math' or 'code', got {self.kind!r}")
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Task id must be a non-empty string, got {self.id!r}")
        if self.kind == "math" and self.answer is None:
            raise ValueError(f"Math task {self.id!r} has no reference answer")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (used by content hashes and result bundles)."""
        d = asdict(self)
        d["metadata"] = dict(self.metadata)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Task:
        d = dict(d)
        d["tests"] = tuple(d.get("tests", ()))
        d["public_tests"] = tuple(d.get("public_tests", ()))
        d["io_tests"] = tuple(
            IOTest(**t) if isinstance(t, Mapping) else t for t in d.get("io_tests", ())
        )
        return cls(**d)
