"""Host-side stand-ins for the program's names and values, and the state of one check.

A :class:`RemoteName` is bound, in the test code's namespace, to every name the host does not
resolve itself; calling it asks the :class:`Session` for the call's value, which is either a
reply gathered from an earlier sandbox round or the :data:`PENDING` placeholder (the call is
then requested for the next round). Nothing here runs a sandbox or the program.
"""

from __future__ import annotations

import builtins
import copy
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ..outcome import Outcome
from ..runner import WireError, encode

__all__ = [
    "PENDING",
    "Abort",
    "RemoteError",
    "RemoteFailure",
    "RemoteName",
    "RemoteObject",
    "Reply",
    "Session",
]

#: A placeholder may be tested for truth this many times per replay (bounds ``while`` loops).
_MAX_PENDING_BOOLS = 10_000


class Abort(Exception):
    """Stops a replay that cannot make progress (raised on the host only)."""


class _Pending:
    """The value of a call whose result is not known yet: absorbs every operation."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<pending>"

    def __bool__(self) -> bool:
        session = Session.current()
        if session is not None:
            session.bump_bool()
        return True

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __index__(self) -> int:
        return 0

    __int__ = __index__

    def __float__(self) -> float:
        return 0.0

    def __complex__(self) -> complex:
        return 0j

    def __hash__(self) -> int:
        return 0

    def __contains__(self, item: Any) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def __getitem__(self, key: Any) -> Any:
        return self

    def __format__(self, spec: str) -> str:
        return "<pending>"


#: The comparison and arithmetic operators both proxies take (each adds its own below).
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_ARITHMETIC = ("add", "radd", "sub", "rsub", "mul", "rmul")
_DIVISION = ("truediv", "rtruediv", "floordiv", "rfloordiv", "mod", "rmod")


def _absorb(self: Any, *args: Any) -> Any:
    return PENDING


for _op in (
    *_COMPARISONS,
    *_ARITHMETIC,
    *_DIVISION,
    "pow",
    "rpow",
    "and",
    "rand",
    "or",
    "ror",
    "xor",
    "rxor",
    "lshift",
    "rlshift",
    "rshift",
    "rrshift",
    "matmul",
    "rmatmul",
    "neg",
    "pos",
    "abs",
    "invert",
    "round",
    "trunc",
    "floor",
    "ceil",
):
    setattr(_Pending, f"__{_op}__", _absorb)

#: The placeholder value of an unresolved call.
PENDING = _Pending()


def _forward(op: str) -> Callable[..., Any]:
    def method(self: RemoteName, *args: Any) -> Any:
        value = self._value()
        return getattr(value, f"__{op}__")(*args) if value is not PENDING else PENDING

    method.__name__ = f"__{op}__"
    return method


class RemoteName:
    """A name that lives in the sandbox (the program's function, a setup-code object).

    Calling it sends the call to the sandbox; using it as a value fetches its value. Passed as
    an argument to another remote call, it is sent by reference (the sandbox resolves it).
    """

    __slots__ = ("_name", "_session")

    def __init__(self, name: str, session: Session):
        self._name = name
        self._session = session

    def __repr__(self) -> str:
        return f"<remote {self._name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._session.call(self._name, args, kwargs)

    def _value(self) -> Any:
        return self._session.get(self._name)

    def __bool__(self) -> bool:
        return bool(self._value())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._value())

    def __len__(self) -> int:
        return len(self._value())

    def __hash__(self) -> int:
        return hash(self._name)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._value(), name)

    def __getitem__(self, key: Any) -> Any:
        return self._value()[key]


for _op in (
    *_COMPARISONS,
    *_ARITHMETIC,
    *_DIVISION,
    "neg",
    "pos",
    "abs",
    "contains",
    "index",
    "float",
    "int",
):
    setattr(RemoteName, f"__{_op}__", _forward(_op))


class RemoteObject:
    """A value the program returned that the wire format cannot carry (an instance of one of
    its classes). It can be passed to further calls (the sandbox then makes it again with the
    same call); comparing or inspecting it on the host raises TypeError."""

    __slots__ = ("_request", "_type")

    def __init__(self, request: dict[str, Any], type_name: str):
        self._request = request
        self._type = type_name

    def __repr__(self) -> str:
        return f"<remote {self._type} object>"

    def _refuse(self, *args: Any) -> Any:
        raise TypeError(
            f"the program returned a value of type {self._type}; tests can only compare "
            "builtin data (int, float, str, list, tuple, dict, set, ...)"
        )

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = __iter__ = _refuse
    __getattr__ = __getitem__ = __contains__ = __add__ = __radd__ = __sub__ = __mul__ = _refuse
    __hash__ = None  # type: ignore[assignment]


class RemoteFailure(Exception):
    """A call into the sandbox produced no value (timeout, crash, memory, unsendable value)."""

    def __init__(self, outcome: Outcome, message: str):
        super().__init__(message)
        self.outcome = outcome


class RemoteError(Exception):
    """An exception raised by the program that has no builtin counterpart on the host."""


def _host_exception(name: str, message: str) -> Exception:
    """Re-create the program's exception on the host (builtin ``Exception`` types only)."""
    if name == "MemoryError":
        return RemoteFailure("memory", f"MemoryError: {message}")
    cls = getattr(builtins, name, None)
    if (
        isinstance(cls, type)
        and issubclass(cls, Exception)
        and not issubclass(cls, (Abort, StopIteration))
    ):
        try:
            return cls(message)
        except TypeError:  # needs more arguments (UnicodeDecodeError, ExceptionGroup)
            pass
    return RemoteError(f"{name}: {message}")


@dataclass
class Reply:
    """What the sandbox said about one call: a value, an exception, an object it cannot
    send (``object``), or no value at all (``fail``, with the outcome to report)."""

    kind: Literal["ok", "raise", "object", "fail"]
    value: Any = None
    after: list[tuple[int, Any]] = field(default_factory=list)
    outcome: Outcome = "runtime_error"
    message: str = ""


class Session:
    """Host-side state of one check: the replies gathered so far and this replay's requests."""

    _local = threading.local()

    def __init__(self) -> None:
        self.replies: dict[str, Reply] = {}
        self.requests: dict[str, dict[str, Any]] = {}
        self.any_pending = False  # within the current replay: if set, the replay is not final
        self.bools = 0
        self.program_failure: RemoteFailure | None = None

    @staticmethod
    def current() -> Session | None:
        return getattr(Session._local, "session", None)

    @staticmethod
    def set_current(session: Session | None) -> None:
        Session._local.session = session

    def bump_bool(self) -> None:
        self.bools += 1
        if self.bools > _MAX_PENDING_BOOLS:
            raise Abort("a loop depends on results not known yet")

    def _pending(self) -> Any:
        self.any_pending = True
        return PENDING

    def _reply(self, key: str, request: dict[str, Any], args: tuple[Any, ...]) -> Any:
        if self.program_failure is not None:
            raise self.program_failure
        reply = self.replies.get(key)
        if reply is None:
            self.requests.setdefault(key, request)
            return self._pending()
        if reply.kind == "raise":
            raise _host_exception(*reply.value)
        if reply.kind == "object":
            return RemoteObject(request, reply.value)
        if reply.kind == "fail":
            raise RemoteFailure(reply.outcome, reply.message)
        for i, after in reply.after:  # mirror the program's in-place mutation of arguments
            target: Any = args[i] if i < len(args) else None
            after = copy.deepcopy(after)
            if type(target) is list and type(after) is list:
                target[:] = after
            elif type(target) in (dict, set) and type(after) is type(target):
                target.clear()
                target.update(after)
        return copy.deepcopy(reply.value)

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        refs = _Refs()
        try:
            enc_args = [encode(a, ref=refs) for a in args]
            enc_kwargs = [[k, encode(v, ref=refs)] for k, v in kwargs.items()]
        except WireError as e:
            if refs.saw_pending:
                return self._pending()
            raise TypeError(
                f"the harness cannot send this argument of {name}() to the sandbox: {e}"
            ) from None
        if refs.saw_pending:
            return self._pending()
        request = {"fn": name, "args": enc_args, "kwargs": enc_kwargs}
        return self._reply(json.dumps(request, sort_keys=True), request, args)

    def get(self, name: str) -> Any:
        request = {"get": name}
        return self._reply(json.dumps(request), request, ())


class _Refs:
    """The ``ref`` hook of `encode` for call arguments: remote names go by name, remote objects
    as the call that made them; a placeholder makes the call wait for a later round."""

    def __init__(self) -> None:
        self.saw_pending = False

    def __call__(self, v: Any) -> list[Any] | None:
        t = type(v)
        if t is _Pending:
            self.saw_pending = True
            raise WireError("pending value")
        if t is RemoteName:
            return ["r", v._name]
        if t is RemoteObject:
            return ["x", v._request]
        return None
