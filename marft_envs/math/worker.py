"""A small persistent pool of killable worker processes with a hard time limit.

Why processes: sympy can run for ever (``2^{2^{2^{2^{2^{100}}}}}``, huge
factorials) and a Python thread cannot be stopped, while signal-based timeouts
only work in the main thread. Each worker is a ``forkserver``-context process
(``spawn`` where forkserver does not exist) talking over a pipe; a job that runs past its deadline
gets its worker killed
(SIGKILL) and reaped (``join``), and a fresh worker is started in its place, so
``run`` returns within ``timeout`` plus a few milliseconds from any thread and
never leaves a zombie behind. Each worker caps its own address space so a
runaway computation raises ``MemoryError`` instead of swapping the host.

Spawned and forkserver children normally re-import the parent's ``__main__`` (re-running an
unguarded training script, or failing for ``python - <<EOF``). Workers need
nothing from ``__main__``, so it is hidden for the few milliseconds of
``Process.start()``.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# forkserver: the server process imports sympy once and every worker (including the
# replacement for a killed one) is forked from it, ready in milliseconds. Where it
# does not exist, spawn (each worker imports sympy itself).
START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
_PRELOAD = ["marft_envs.math.equivalence", "marft_envs.math.symbolic", "math_verify"]
STARTUP_TIMEOUT = 120.0  # a cold worker (spawn + import sympy) on a loaded host
MEMORY_LIMIT_BYTES = 4 << 30
DEFAULT_POOL_SIZE = max(1, min(4, os.cpu_count() or 1))


class WorkerTimeout(Exception):
    """The job did not finish before its deadline (its worker was killed)."""


class WorkerError(Exception):
    """The job raised, or the worker died: not the answer's fault."""


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass  # not available on this platform: the time limit still holds


def _serve(conn) -> None:
    """Worker main loop: run ``(fn, args)`` jobs until the pipe closes or ``None`` arrives."""
    _limit_memory()
    import sympy  # noqa: F401  (imported before "ready": not on any job's clock)

    from . import equivalence  # noqa: F401
    from .mv_stage import warm

    warm()

    try:
        conn.send(("ready", None))
    except (OSError, ValueError):
        return
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if job is None:
            return
        fn, args = job
        try:
            reply = ("ok", fn(*args))
        except MemoryError:
            reply = ("error", "MemoryError: over the worker's memory limit")
        except Exception as e:  # noqa: BLE001 - the job's failure is reported, the worker lives on
            reply = ("error", f"{type(e).__name__}: {e}"[:500])
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


_MAIN_LOCK = threading.Lock()


def _package_root() -> str:
    """The directory this package was imported from (a source checkout, or site-packages)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@contextmanager
def _main_hidden() -> Iterator[None]:
    """Show spawn an empty ``__main__`` so the child does not re-run the caller's script.

    Also puts this package's own directory first on the child's ``PYTHONPATH`` while a
    process starts: Python 3.11's fork server ignores the parent's ``sys.path``, so a caller
    that imported this package from a checkout (``sys.path.insert``) would otherwise get
    workers running another installed copy.
    """
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = types.ModuleType("__main__")
        old_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), old_path]))
        try:
            yield
        finally:
            if old_path is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old_path
            if main is not None:
                sys.modules["__main__"] = main


class _Worker:
    def __init__(self, ctx) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="marft-math-worker")
        with _main_hidden():
            self.proc.start()
        child.close()
        self.ready = False

    def wait_ready(self) -> bool:
        """Wait (bounded) until the worker has imported sympy; False if it never will."""
        if not self.ready:
            try:
                self.ready = self.conn.poll(STARTUP_TIMEOUT) and self.conn.recv()[0] == "ready"
            except (EOFError, OSError):
                return False
        return self.ready

    def kill(self) -> None:
        try:
            self.proc.kill()
        except (OSError, ValueError, AttributeError):
            pass
        self.proc.join(timeout=10)  # reap: no zombie
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
            self.proc.join(timeout=1)
        except (OSError, ValueError):
            pass
        if self.proc.is_alive():
            self.kill()
        else:
            self.conn.close()


class WorkerPool:
    """Up to ``size`` worker processes shared by every thread of this process."""

    def __init__(self, size: int = DEFAULT_POOL_SIZE, method: str = START_METHOD) -> None:
        if size < 1:
            raise ValueError(f"pool size must be >= 1, got {size}")
        self.size = size
        self.pid = os.getpid()
        self._ctx = mp.get_context(method)
        if method == "forkserver":
            # Global to multiprocessing; it only matters if the server is not running yet.
            self._ctx.set_forkserver_preload(_PRELOAD)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._live = 0
        self._closed = False

    @property
    def live(self) -> int:
        """Number of worker processes currently alive or starting."""
        return self._live

    def grow(self, size: int) -> None:
        """Allow at least ``size`` workers."""
        with self._lock:
            self.size = max(self.size, size)

    def _start_one(self) -> _Worker | None:
        with self._lock:
            if self._closed or self._live >= self.size:
                return None
            self._live += 1
        try:
            return _Worker(self._ctx)
        except BaseException:
            with self._lock:
                self._live -= 1
            raise

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._live -= 1

    def _acquire(self, deadline: float) -> _Worker | None:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        worker = self._start_one()
        if worker is not None:
            return worker
        try:
            return self._idle.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    def run(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        """Run ``fn(*args)`` in a worker; raise ``WorkerTimeout`` after ``timeout`` seconds.

        The time limit counts from when a started worker holds the job; waiting for a
        free worker is bounded by ``timeout`` too, and a cold worker's start-up by
        ``STARTUP_TIMEOUT``. ``fn`` must be a module-level function (pickled by reference).
        """
        wait_deadline = time.monotonic() + timeout
        for _attempt in range(2):  # one retry if an idle worker turns out to be dead
            worker = self._acquire(wait_deadline)
            if worker is None:
                raise WorkerTimeout(f"no free worker within {timeout:g}s")
            if not worker.wait_ready():
                self._discard(worker)
                continue
            # The clock starts when a warm worker has the job: a cold start is not the
            # answer's fault (and is bounded by STARTUP_TIMEOUT).
            deadline = time.monotonic() + timeout
            done = False
            try:
                worker.conn.send((fn, args))
                if not worker.conn.poll(max(0.0, deadline - time.monotonic())):
                    raise WorkerTimeout(f"symbolic check ran past {timeout:g}s")
                status, value = worker.conn.recv()
                done = True
            except (EOFError, OSError, BrokenPipeError):
                self._discard(worker)
                if time.monotonic() >= deadline:
                    raise WorkerTimeout(f"symbolic check ran past {timeout:g}s") from None
                continue
            finally:
                if not done and worker.proc.is_alive():
                    self._discard(worker)
                    self._replace()
            self._idle.put(worker)
            if status == "error":
                raise WorkerError(value)
            return value
        raise WorkerError("worker process died twice in a row")

    def _replace(self) -> None:
        """Start a fresh worker for the one just killed, so the next call finds it warm."""
        try:
            worker = self._start_one()
        except Exception:  # noqa: BLE001
            return
        if worker is not None:
            self._idle.put(worker)

    def warmup(self, timeout: float = 60.0) -> None:
        """Start every worker and wait until each has imported sympy."""
        workers = []
        while True:
            w = self._start_one()
            if w is None:
                break
            workers.append(w)
        for w in workers:
            self._idle.put(w)
        for _ in range(self.live):
            self.run(_ping, timeout=timeout)

    def close(self) -> None:
        """Stop idle workers (busy ones are daemons and die with the process)."""
        with self._lock:
            self._closed = True
        while True:
            try:
                w = self._idle.get_nowait()
            except queue.Empty:
                break
            w.stop()
            with self._lock:
                self._live -= 1


def _ping() -> bool:
    return True


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool(size: int | None = None) -> WorkerPool:
    """The process-wide pool (a new one after ``fork``), grown to ``size`` if given."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():
            _POOL = WorkerPool(size or DEFAULT_POOL_SIZE)
        elif size:
            _POOL.grow(size)
        return _POOL


@atexit.register
def _shutdown() -> None:
    if _POOL is not None and _POOL.pid == os.getpid():
        _POOL.close()
