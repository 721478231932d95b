"""The trusted test harness: tests run on the host, the program's functions in the sandbox.

The program under test never sees a test, an expected value, or a comparison. Instead:

* The task's test code (trusted task data: ``assert`` lines, or a HumanEval ``def check``) is
  executed **on the host**. Every name it uses that the host cannot resolve trustedly
  (the entry point, ``candidate``, any other name the program or the task's setup code
  defines) is bound to a :class:`RemoteName` proxy.
* Calling a proxy does not run anything on the host: the call (function name and arguments,
  encoded by the strict wire format of :mod:`marft_envs.code.runner`) is sent to the sandbox,
  where the runner executes the program and then each requested call, and returns the
  resulting *values* (only exact builtin data types), never a verdict.
* Calls are gathered in rounds. In the first round each proxy call returns a :data:`PENDING`
  placeholder that lets the test code keep running, so that every call whose arguments do
  not depend on the program's results is collected; then one sandbox run executes all of them.
  The tests are then replayed on the host with the real values; calls that only became known
  (arguments computed from earlier results) are fetched in a further round. A test is judged
  only in a replay in which it touched no placeholder.
* Each top-level statement of the tests that contains an ``assert`` is one test (in a
  HumanEval ``check`` function: each top-level statement of its body). Asserts that use no
  name outside the host's trusted namespace (``assert True``) are not counted.

Helper functions the tests call (HumanEval's ``poly``, ``encode_cyclic``) come from the task's
trusted ``metadata["code_prefix"]`` (the HumanEval prompt), executed on the host: a program
that redefines them cannot change what the tests compute.

See docs/code_envs.md for the threat model and its residual risks.
"""

from __future__ import annotations

import ast
import builtins
import copy
import importlib
import json
import secrets
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from . import runner
from .runner import WireError, decode, encode
from .sandbox.warm_host import preload_program

__all__ = [
    "MAX_ROUNDS",
    "HarnessResult",
    "TestOutcome",
    "UnitResult",
    "run_python_tests",
    "runner_source",
]

#: Upper bound on sandbox runs per check (rounds of call collection).
MAX_ROUNDS = 4
#: A placeholder may be tested for truth this many times per replay (bounds ``while`` loops).
_MAX_PENDING_BOOLS = 10_000

TestOutcome = Literal["pass", "fail", "timeout", "memory", "runtime_error", "infra_error"]

_RUNNER_SOURCE: str | None = None


def runner_source() -> str:
    """The source of the in-sandbox runner (sent as the program of every sandbox run)."""
    global _RUNNER_SOURCE
    if _RUNNER_SOURCE is None:
        _RUNNER_SOURCE = Path(runner.__file__).read_text(encoding="utf-8")
    return _RUNNER_SOURCE


# Warm sandboxes compile the runner once instead of in every run (it is trusted and fixed).
preload_program(runner_source())


# ----------------------------------------------------------------------------- placeholders


class _Abort(Exception):
    """Stops a replay that cannot make progress (raised on the host only)."""


class _Pending:
    """The value of a call whose result is not known yet: absorbs every operation."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<pending>"

    def __bool__(self) -> bool:
        session = _Session.current()
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


def _absorb(self: Any, *args: Any) -> Any:
    return PENDING


for _op in [
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "add",
    "radd",
    "sub",
    "rsub",
    "mul",
    "rmul",
    "truediv",
    "rtruediv",
    "floordiv",
    "rfloordiv",
    "mod",
    "rmod",
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
]:
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

    def __init__(self, name: str, session: _Session):
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


for _op in [
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "add",
    "radd",
    "sub",
    "rsub",
    "mul",
    "rmul",
    "truediv",
    "rtruediv",
    "floordiv",
    "rfloordiv",
    "mod",
    "rmod",
    "neg",
    "pos",
    "abs",
    "contains",
    "index",
    "float",
    "int",
]:
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


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class UnitResult:
    """The result of one test: its index, source, outcome and a short message."""

    index: int
    source: str
    outcome: TestOutcome
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "source": self.source,
            "outcome": self.outcome,
            "message": self.message,
        }


@dataclass
class HarnessResult:
    """Per-test results of one check plus what the sandbox runs reported."""

    units: list[UnitResult]
    rounds: int = 0
    program_error: str = ""
    exec_status: str = ""
    infra_error: str = ""
    elapsed: float = 0.0
    backend: str = ""
    calls: int = 0


# Outcomes of a call that did not produce a value, keyed by the sandbox status or exception.
_STATUS_OUTCOME: dict[str, TestOutcome] = {
    "timeout": "timeout",
    "memory": "memory",
    "output_limit": "runtime_error",
    "error": "runtime_error",
    "ok": "runtime_error",
    "infra_error": "infra_error",
}


class RemoteFailure(Exception):
    """A call into the sandbox produced no value (timeout, crash, memory, unsendable value)."""

    def __init__(self, outcome: TestOutcome, message: str):
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
        and not issubclass(cls, (_Abort, StopIteration))
    ):
        try:
            return cls(message)
        except TypeError:  # a constructor that wants more than a message (UnicodeDecodeError)
            pass
    return RemoteError(f"{name}: {message}")


@dataclass
class _Reply:
    kind: str  # "ok" | "raise" | "fail"
    value: Any = None
    after: list[tuple[int, Any]] = field(default_factory=list)
    outcome: TestOutcome = "runtime_error"
    message: str = ""


class _Session:
    """Host-side state of one check: the replies gathered so far and this replay's requests."""

    _local = threading.local()

    def __init__(self) -> None:
        self.replies: dict[str, _Reply] = {}
        self.requests: dict[str, dict[str, Any]] = {}
        self.any_pending = False  # within the current replay: if set, the replay is not final
        self.bools = 0
        self.program_failure: RemoteFailure | None = None

    @staticmethod
    def current() -> _Session | None:
        return getattr(_Session._local, "session", None)

    @staticmethod
    def set_current(session: _Session | None) -> None:
        _Session._local.session = session

    def bump_bool(self) -> None:
        self.bools += 1
        if self.bools > _MAX_PENDING_BOOLS:
            raise _Abort("a loop depends on results not known yet")

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
            target = args[i] if i < len(args) else None
            after = copy.deepcopy(after)
            if type(target) is list and type(after) is list:
                target[:] = after
            elif isinstance(target, (dict, set)) and type(after) is type(target):
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


# ----------------------------------------------------------------------------- test programs


@dataclass
class _Unit:
    index: int
    source: str
    counted: bool


class _UnitGuard:
    """``with guard(k):`` around one test: records its outcome and lets the next test run."""

    def __init__(self, session: _Session, outcomes: dict[int, tuple[TestOutcome, str]]):
        self.session = session
        self.outcomes = outcomes
        self.k = -1

    def __call__(self, k: int) -> _UnitGuard:
        self.k = k
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None:
            self.outcomes[self.k] = ("pass", "")
        elif isinstance(exc, _Abort):
            self.outcomes[self.k] = ("runtime_error", str(exc))
        elif isinstance(exc, RemoteFailure):
            self.outcomes[self.k] = (exc.outcome, str(exc))
        elif isinstance(exc, AssertionError):
            self.outcomes[self.k] = ("fail", _message(exc, "assertion failed"))
        elif isinstance(exc, Exception):
            self.outcomes[self.k] = ("runtime_error", _message(exc))
        else:
            return False
        return True


def _message(exc: BaseException, default: str = "") -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}"[:300] if text else (default or type(exc).__name__)


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _loaded_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _wrap_units(
    body: list[ast.stmt], source: str, units: list[_Unit], trusted: set[str]
) -> list[ast.stmt]:
    """Wrap every top-level statement that contains an assert in ``with __unit__(k):``."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(
            stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ) or not _has_assert(stmt):
            out.append(stmt)
            continue
        k = len(units)
        text = ast.get_source_segment(source, stmt) or ast.unparse(stmt)
        units.append(_Unit(k, text, counted=bool(_loaded_names(stmt) - trusted)))
        call = ast.Call(ast.Name("__marft_unit__", ast.Load()), [ast.Constant(k)], [])
        out.append(ast.With([ast.withitem(call)], [stmt]))
    return out


class _SoftAsserts(ast.NodeTransformer):
    """``assert t, m`` -> ``if not __marft_ok__(t): raise AssertionError(m)``.

    While a replay holds placeholders its verdicts are discarded anyway, so a failing assert
    must not stop it: the rest of the tests still runs and reveals the calls they need.
    """

    def visit_Assert(self, node: ast.Assert) -> ast.stmt:
        test = ast.Call(ast.Name("__marft_ok__", ast.Load()), [node.test], [])
        exc = ast.Call(ast.Name("AssertionError", ast.Load()), [node.msg] if node.msg else [], [])
        return ast.copy_location(
            ast.If(ast.UnaryOp(ast.Not(), test), [ast.Raise(exc, None)], []), node
        )


@dataclass
class _TestProgram:
    """The tests of one task, compiled for host replay."""

    modules: list[Any]  # code objects, in order
    units: list[_Unit]
    check_names: list[
        tuple[str, str]
    ]  # (check function name, candidate name) to call after the modules
    names: set[str]


def _compile_tests(
    tests: tuple[str, ...], trusted: set[str], entry_point: str | None
) -> _TestProgram:
    units: list[_Unit] = []
    modules, checks, names = [], [], set()
    for i, src in enumerate(tests):
        with warnings.catch_warnings():  # upstream tests have invalid escapes ('\d' in strings)
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = ast.parse(src, filename=f"<test {i}>")
        check_defs = [
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "check" and n.args.args
        ]
        for node in check_defs:
            # HumanEval style: each top-level statement of check's body is a test; the
            # parameter (``candidate``) is a remote name, not a trusted one.
            param = node.args.args[0].arg
            node.body = _wrap_units(node.body, src, units, trusted - {param})
            checks.append(("check", entry_point or param))
        if not check_defs and _has_assert(tree):
            # An assert-list test string is one test, however many statements it has.
            whole = ast.If(ast.Constant(True), tree.body, [])
            ast.copy_location(whole, tree.body[0])
            whole.end_lineno, whole.end_col_offset = (
                tree.body[-1].end_lineno,
                tree.body[-1].end_col_offset,
            )
            tree.body = _wrap_units([whole], src, units, trusted)
            units[-1].source = src.strip()
        names |= _loaded_names(tree)
        tree = _SoftAsserts().visit(tree)
        ast.fix_missing_locations(tree)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            modules.append(compile(tree, f"<test {i}>", "exec"))
    return _TestProgram(modules, units, checks, names)


@lru_cache(maxsize=256)
def _compile_prefix(code_prefix: str) -> Any:
    return compile(code_prefix, "<task prefix>", "exec")


def _trusted_namespace(code_prefix: str, entry_point: str | None) -> dict[str, Any]:
    """Names the host resolves itself: the task's trusted prefix (minus the entry point)."""
    ns: dict[str, Any] = {"__name__": "marft_tests", "__builtins__": builtins}
    if code_prefix:
        exec(_compile_prefix(code_prefix), ns)
    if entry_point:
        ns.pop(entry_point, None)
    return ns


# Standard-library modules never imported on the host for a test name (import side effects).
_NO_IMPORT = frozenset(
    {"this", "antigravity", "idlelib", "turtle", "turtledemo", "tkinter", "pydoc"}
)


def _seeded_random() -> Any:
    """A private ``random`` module seeded with 0: tests that draw from the global generator
    must draw the same inputs in every replay (and must not touch the host's global state)."""
    import random
    import types

    rng = random.Random(0)
    mod = types.ModuleType("random")
    for name in dir(random):
        if not name.startswith("_"):
            attr = getattr(rng, name, None)
            setattr(
                mod,
                name,
                attr if callable(attr) and not isinstance(attr, type) else getattr(random, name),
            )
    return mod


def _test_builtins(private: dict[str, Any]) -> dict[str, Any]:
    """Builtins for the test code whose ``import`` returns the replay's private modules."""
    real_import = builtins.__import__

    def _import(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if level == 0 and name in private:
            return private[name]
        return real_import(name, globals, locals, fromlist, level)

    return dict(vars(builtins), __import__=_import)


def _namespace(
    program: _TestProgram,
    prefix_ns: dict[str, Any],
    entry_point: str | None,
    session: _Session,
    guard: _UnitGuard,
) -> dict[str, Any]:
    ns = dict(prefix_ns)
    private = {"random": _seeded_random()}
    ns["__builtins__"] = _test_builtins(private)
    ns["__marft_unit__"] = guard
    ns["__marft_ok__"] = lambda value: session.any_pending or bool(value)
    for name in sorted(program.names):
        if name in ns:
            continue
        if hasattr(builtins, name):
            continue
        if name in sys.stdlib_module_names and name not in _NO_IMPORT:
            try:
                ns[name] = private.get(name) or importlib.import_module(name)
                continue
            except ImportError:
                pass
        ns[name] = RemoteName(name, session)
    if entry_point:
        ns[entry_point] = RemoteName(entry_point, session)
    return ns


def _replay(
    program: _TestProgram, prefix_ns: dict[str, Any], entry_point: str | None, session: _Session
) -> dict[int, tuple[TestOutcome, str]]:
    """Run the tests on the host once with the replies known so far."""
    outcomes: dict[int, tuple[TestOutcome, str]] = {}
    guard = _UnitGuard(session, outcomes)
    session.requests = {}
    session.bools = 0
    session.any_pending = False
    ns = _namespace(program, prefix_ns, entry_point, session, guard)
    _Session.set_current(session)
    failure: tuple[TestOutcome, str] | None = None
    try:
        for code in program.modules:
            exec(code, ns)
        for check, candidate in program.check_names:
            fn = ns.get(check)
            if callable(fn):
                target = ns.get(candidate)
                fn(target if target is not None else RemoteName(candidate, session))
    except RemoteFailure as e:
        failure = (e.outcome, str(e))
    # The official test code is untrusted and may raise anything: a non-test statement failed,
    # so later tests are not reached.
    except (Exception, _Abort) as e:  # noqa: BLE001
        failure = ("runtime_error", _message(e))
    finally:
        _Session.set_current(None)
    if failure is not None:
        outcome, message = failure
        for u in program.units:
            outcomes.setdefault(u.index, (outcome, f"not reached: {message}"))
    return outcomes


# ----------------------------------------------------------------------------- sandbox rounds


def _parse_records(stdout: str, nonce: str) -> tuple[list[dict[str, Any]], bool]:
    """The runner's records (lines starting with the nonce); and whether the end record came."""
    records, ended = [], False
    prefix = nonce + "\t"
    for line in stdout.split("\n"):
        if not line.startswith(prefix):
            continue
        try:
            rec = json.loads(line[len(prefix) :])
        except (ValueError, RecursionError):
            continue
        if isinstance(rec, dict):
            records.append(rec)
            ended = ended or "end" in rec
    return records, ended


def _run_round(
    sandbox: Any,
    program: str,
    setup: str,
    requests: dict[str, dict[str, Any]],
    session: _Session,
    timeout: float,
    result: HarnessResult,
) -> None:
    """One sandbox run: execute ``requests`` and store a reply for every one of them."""
    keys = list(requests)
    calls = [dict(requests[k], id=i) for i, k in enumerate(keys)]
    nonce = secrets.token_hex(16)
    # A Python literal of str/int/bool/list/dict (see runner.py): the runner needs no json.
    payload = repr({"program": program, "setup": setup, "calls": calls})
    res = sandbox.run(runner_source(), stdin=nonce + "\n" + payload, timeout=timeout)
    result.elapsed += res.elapsed
    result.backend = getattr(res, "backend", "") or getattr(sandbox, "name", "")
    result.exec_status = res.status.value if hasattr(res.status, "value") else str(res.status)
    result.calls += len(calls)
    if result.exec_status == "infra_error":
        result.infra_error = (res.stderr or "sandbox infrastructure error")[-500:]
        session.program_failure = RemoteFailure("infra_error", result.infra_error)
        return
    records, _ = _parse_records(res.stdout, nonce)
    by_id: dict[int, dict[str, Any]] = {}
    program_ok = False
    for rec in records:
        if "program_error" in rec:
            name, msg = [*rec["program_error"], "", ""][:2]
            outcome: TestOutcome = "memory" if name == "MemoryError" else "runtime_error"
            result.program_error = f"{name}: {msg}"
            session.program_failure = RemoteFailure(
                outcome, f"the program failed to load: {name}: {msg}"
            )
            return
        if rec.get("program") == "ok":
            program_ok = True
        elif isinstance(rec.get("id"), int) and rec["id"] not in by_id:
            by_id[rec["id"]] = rec
    status_outcome = _STATUS_OUTCOME.get(result.exec_status, "runtime_error")
    if not program_ok:
        why = {
            "timeout": "the program timed out while loading",
            "memory": "the program ran out of memory while loading",
        }
        message = why.get(
            result.exec_status,
            f"the program ended before the tests could run ({result.exec_status})",
        )
        session.program_failure = RemoteFailure(status_outcome, message)
        return
    for i, key in enumerate(keys):
        session.replies[key] = _reply_from_record(by_id.get(i), result.exec_status, status_outcome)


def _reply_from_record(
    rec: dict[str, Any] | None, status: str, status_outcome: TestOutcome
) -> _Reply:
    if rec is None:
        return _Reply(
            "fail",
            outcome=status_outcome,
            message=f"no result: the run ended ({status}) before this call returned",
        )
    try:
        if "ok" in rec:
            after = [(int(i), decode(v)) for i, v in rec.get("after", [])]
            return _Reply("ok", decode(rec["ok"]), after=after)
        if "raise" in rec:
            name, msg = rec["raise"]
            if not (isinstance(name, str) and isinstance(msg, str)):
                raise WireError("bad exception record")
            return _Reply("raise", (name, msg))
        if "bad" in rec:
            if rec["bad"] == "MemoryError":
                return _Reply(
                    "fail", outcome="memory", message="MemoryError while returning the value"
                )
            return _Reply("object", str(rec["bad"])[:60])
    except (WireError, TypeError, ValueError):
        pass
    return _Reply("fail", message="malformed result record")


def _trusted_names(prefix_ns: dict[str, Any], entry_point: str | None) -> set[str]:
    return (set(prefix_ns) | set(dir(builtins)) | set(sys.stdlib_module_names)) - {entry_point}


@lru_cache(maxsize=1024)
def _compiled(tests: tuple[str, ...], code_prefix: str, entry_point: str | None) -> _TestProgram:
    """The tests compiled for replay, cached: environments grade the same tasks again and again.
    The result is shared and must not be mutated."""
    trusted = _trusted_names(_trusted_namespace(code_prefix, entry_point), entry_point)
    return _compile_tests(tests, trusted, entry_point)


def counted_tests(tests: tuple[str, ...], task: Any) -> list[str]:
    """The source of every test `run_python_tests` would count for ``task`` (no sandbox needed)."""
    prefix = str(task.metadata.get("code_prefix") or "")
    return [u.source for u in _compiled(tuple(tests), prefix, task.entry_point).units if u.counted]


def run_python_tests(
    program: str,
    tests: tuple[str, ...],
    *,
    sandbox: Any,
    entry_point: str | None = None,
    setup_code: str = "",
    code_prefix: str = "",
    timeout: float = 10.0,
    max_rounds: int = MAX_ROUNDS,
) -> HarnessResult:
    """Run Python ``tests`` against ``program`` (see the module docstring).

    ``setup_code`` runs in the sandbox after the program (MBPP's ``test_setup_code``);
    ``code_prefix`` is trusted code whose definitions the tests may use on the host.
    Raises ValueError only when the tests themselves do not compile (a broken task).
    """
    try:
        compiled = _compiled(tuple(tests), code_prefix, entry_point)
    except SyntaxError as e:
        raise ValueError(f"the task's tests do not compile: {e}") from e
    prefix_ns = _trusted_namespace(code_prefix, entry_point)
    session = _Session()
    result = HarnessResult(units=[])
    outcomes: dict[int, tuple[TestOutcome, str]] = {}
    for _ in range(max_rounds + 1):
        outcomes = _replay(compiled, prefix_ns, entry_point, session)
        if not session.any_pending:
            break  # every call had its value: this replay is final
        new = {k: v for k, v in session.requests.items() if k not in session.replies}
        if session.program_failure is not None or not new or result.rounds >= max_rounds:
            break
        _run_round(sandbox, program, setup_code, new, session, timeout, result)
        result.rounds += 1
    if result.rounds == 0 and session.program_failure is None:
        # No test called the program: still run it once, so a crashing program is no pass.
        _run_round(sandbox, program, setup_code, {}, session, timeout, result)
        result.rounds += 1
        if session.program_failure is not None:
            outcomes = _replay(compiled, prefix_ns, entry_point, session)
    incomplete = session.any_pending  # some value never arrived: no test of this replay may pass
    units: list[UnitResult] = []
    for u in compiled.units:
        if not u.counted:
            continue
        outcome, message = outcomes.get(u.index, ("runtime_error", "not reached"))
        if incomplete and outcome == "pass":
            outcome, message = (
                "runtime_error",
                f"the tests could not be completed within {max_rounds} sandbox rounds",
            )
        units.append(UnitResult(len(units), u.source, outcome, message))
    result.units = units
    return result
