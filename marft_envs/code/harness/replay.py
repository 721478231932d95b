"""One replay: the compiled tests executed on the host with the replies known so far.

Every name the tests use that the host does not resolve trustedly (the trusted prefix,
builtins, standard-library modules) is bound to a :class:`~.proxies.RemoteName`. Each test's
outcome is recorded by a guard around it; a statement outside any test that fails stops the
replay, and every test not reached then gets that statement's outcome.
"""

from __future__ import annotations

import builtins
import importlib
import sys
from types import TracebackType
from typing import Any, ClassVar

from ..outcome import Outcome
from .compilation import TestProgram
from .proxies import Abort, RemoteFailure, RemoteName, Session

__all__ = ["replay"]


class _UnitGuard:
    """``with guard(k):`` around one test: records its outcome and lets the next test run."""

    def __init__(self, session: Session, outcomes: dict[int, tuple[Outcome, str]]):
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
        elif isinstance(exc, Abort):
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


class _PrivateModules:
    """The replay's private modules, each made on first use (most tests never import
    ``random``; building its seeded copy cost ~0.1 ms per replay)."""

    _MAKERS: ClassVar[dict[str, Any]] = {"random": _seeded_random}

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._MAKERS

    def get(self, name: str) -> Any:
        if name not in self._MAKERS:
            return None
        if name not in self._made:
            self._made[name] = self._MAKERS[name]()
        return self._made[name]


def _test_builtins(private: _PrivateModules) -> dict[str, Any]:
    """Builtins for the test code whose ``import`` returns the replay's private modules."""
    real_import = builtins.__import__

    def _import(
        name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        if level == 0 and name in private:
            return private.get(name)
        return real_import(name, globals, locals, fromlist, level)

    return dict(vars(builtins), __import__=_import)


def _namespace(
    program: TestProgram,
    prefix_ns: dict[str, Any],
    entry_point: str | None,
    session: Session,
    guard: _UnitGuard,
) -> dict[str, Any]:
    ns = dict(prefix_ns)
    private = _PrivateModules()
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


def replay(
    program: TestProgram, prefix_ns: dict[str, Any], entry_point: str | None, session: Session
) -> dict[int, tuple[Outcome, str]]:
    """Run the tests on the host once with the replies known so far."""
    outcomes: dict[int, tuple[Outcome, str]] = {}
    guard = _UnitGuard(session, outcomes)
    session.requests = {}
    session.bools = 0
    session.any_pending = False
    ns = _namespace(program, prefix_ns, entry_point, session, guard)
    Session.set_current(session)
    failure: tuple[Outcome, str] | None = None
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
    # A non-test statement failed (whatever it raised): later tests are not reached.
    except (Exception, Abort) as e:  # noqa: BLE001
        failure = ("runtime_error", _message(e))
    finally:
        Session.set_current(None)
    if failure is not None:
        outcome, message = failure
        for u in program.units:
            outcomes.setdefault(u.index, (outcome, f"not reached: {message}"))
    return outcomes
