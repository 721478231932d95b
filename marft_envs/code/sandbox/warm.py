"""The warm parent: a Python interpreter inside a sandbox that forks a fresh child per execution.

Started once per sandbox instance (a long-lived bwrap sandbox, or a docker container, where the
trusted supervisor starts it), as ``python -B -c <this source> <control fd> <config JSON>``
with the sandbox uid (65534), it pre-imports common standard-library modules, loads the trusted
programs of the config (the harness's runner, sent as ``main.py`` of every Python-test run: its
module body runs here once; a child whose ``main.py`` is byte-for-byte one of them only calls
its ``main()`` and then ``os._exit(0)``, as the program's ``__main__`` block does), makes
itself non-dumpable (so a child can neither ptrace it nor read its memory or file descriptors
through /proc), ignores every catchable signal, becomes a child subreaper and says ``ready`` on
the control socket. Then, for each request, a JSON header (argv, timeout, rlimits) with three
file descriptors (the program's stdin, stdout, stderr; SCM_RIGHTS on a SOCK_SEQPACKET socket):

1. forks a child: new session (its own process group), the request's rlimits, the three fds as
   0/1/2 and nothing else open, cwd ``/work``, the interpreter's start-up signal dispositions,
   fresh ``sys.std*`` objects, a fresh ``__main__``; it then runs ``/work/main.py`` as
   ``python -B main.py *argv`` would (exit code, uncaught exception, ``SystemExit``, thread
   join and ``atexit`` at the end);
2. waits up to the timeout, then SIGKILLs the child's process group;
3. SIGKILLs every other process it may signal (daemons the child left; they were re-parented to
   it), reaps them, wipes the extra dirs it was given (``/dev/shm``, ``/dev/mqueue``) and checks
   that no System V IPC object is left;
4. answers ``{"exit", "timed_out", "clean"}``.

The warm parent never reads a job's data (program, files, stdin, output): those travel through
files the host or supervisor wrote and the passed fds, which only the child touches, so no child
can find a previous child's data in the memory it inherits. A child can still kill or stop the
warm parent (same uid): the other side then gets no answer, discards this sandbox instance and
runs the job again on the cold path (docs/sandbox.md). Standard library only; self-contained.
"""

import array
import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import stat
import sys
import time

PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36
WORK = "/work"
SYSVIPC = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
#: Imported once here so that children do not pay for them (each child gets its own copy).
#: Kept short: every pre-imported module also makes each fork and exit a little dearer.
#: Not ``threading``: its at-fork hook runs Python code in every child (~0.25 ms of page
#: copies per fork, half of a child's start); a program that uses threads imports it itself.
PRELOAD = (
    "io",
    "re",
    "math",
    "typing",
    "collections",
    "collections.abc",
    "itertools",
    "functools",
    "heapq",
    "bisect",
    "string",
    "operator",
    "copy",
    "atexit",
    "types",
    "_json",
)
MAX_FDS = 3


def _startup_streams():
    """``sys.stdin``, ``sys.stdout``, ``sys.stderr`` as a fresh interpreter would make them on
    fds 0/1/2 (same encoding, errors, line buffering), made once here and never used here: each
    child takes its pristine copies instead of building three (~0.2 ms of page faults)."""
    import io

    made: list[io.TextIOWrapper] = []
    for fd, s in enumerate((sys.stdin, sys.stdout, sys.stderr)):
        if fd == 0:
            raw = io.FileIO(0, "rb", closefd=False)
            made.append(io.TextIOWrapper(io.BufferedReader(raw), s.encoding, s.errors))
        else:
            raw = io.FileIO(fd, "wb", closefd=False)
            made.append(
                io.TextIOWrapper(
                    io.BufferedWriter(raw),
                    s.encoding,
                    s.errors,
                    line_buffering=bool(s.line_buffering),
                )
            )
    return made


LIBC = ctypes.CDLL(None, use_errno=True)
#: Every signal that can be blocked: the warm parent blocks them all (see _harden).
_BLOCKED = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}


def _harden():
    libc = LIBC
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # Blocked, not ignored: the dispositions stay those of a fresh interpreter, so a child
    # only unblocks (one call) instead of restoring ~60 handlers (~0.2 ms per fork). Signals
    # sent to this parent stay pending, harmless, and are drained after every run.
    signal.pthread_sigmask(signal.SIG_BLOCK, _BLOCKED)


def _drain_signals():
    """Discard the signals pending on this parent (a child may have sent some): a pending set
    visible in /proc/<pid>/status must not carry anything from one run to the next."""
    while True:
        pending = signal.sigpending()
        if not pending:
            return
        signal.sigtimedwait(pending, 0)


def _use_streams(streams):
    sys.stdin, sys.stdout, sys.stderr = streams
    # the program may read the originals too; typeshed marks them Final, CPython lets them be set
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]


def _exit_code(exc):
    """The exit status CPython gives an uncaught ``SystemExit``."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 -- exiting as CPython does; nothing to report to
        pass
    return 1


def _finish():
    """The end of a CPython run: join non-daemon threads, run atexit, flush the streams."""
    import atexit

    threading = sys.modules.get("threading")  # as Py_FinalizeEx: only if the program loaded it
    if threading is not None:
        try:
            threading._shutdown()  # what Py_FinalizeEx does first
        except BaseException:  # noqa: BLE001 -- exiting as CPython does; nothing to report to
            pass
    atexit._run_exitfuncs()
    code = None
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 -- untrusted code's exception, handled as CPython would
            code = 120  # CPython's status when flushing stdout fails at exit
    return code


def _run_program(argv, streams, compiled):
    """Run /work/main.py in this (child) process as ``python -B main.py *argv`` would."""
    import builtins
    import types

    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # the dispositions are the interpreter's
    _use_streams(streams)
    path = os.path.join(WORK, "main.py")
    sys.argv = ["main.py", *argv]
    sys.path[0] = WORK
    sys.dont_write_bytecode = True
    main = types.ModuleType("__main__")
    main.__file__ = path
    # the attributes CPython's runpy gives __main__ (typeshed's ModuleType lacks these two)
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    main.__cached__ = None  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    status = 0
    try:
        with open(path, "rb") as fh:
            source = fh.read()
        entry = compiled.get(source)
        if not callable(entry):
            # Dumpable again, as a fresh interpreter is (its own /proc/self/mem works); this
            # child's memory holds nothing but the pristine parent's and its own job's. A
            # trusted program's child stays non-dumpable (stricter; saves a ctypes call,
            # ~0.2 ms of page faults in a fresh fork).
            LIBC.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        if callable(entry):  # a trusted program run already in the parent: its main() only
            entry()
            os._exit(0)  # what the trusted program's own ``__main__`` block does after main()
        exec(entry or compile(source, path, "exec"), main.__dict__)  # this process's job
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException as exc:  # the program's uncaught exception: traceback, status 1  # noqa: BLE001 -- untrusted code's exception, handled as CPython would
        tb = exc.__traceback__
        exc.__traceback__ = tb.tb_next if tb is not None else None  # hide this frame
        sys.excepthook(type(exc), exc, exc.__traceback__)
        if isinstance(exc, KeyboardInterrupt):  # CPython dies by SIGINT then
            _finish()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        status = 1
    try:
        flushed = _finish()
    except SystemExit as exc:
        flushed = _exit_code(exc)
    except BaseException:  # noqa: BLE001 -- untrusted code's exception, handled as CPython would
        flushed = 1
    os._exit(status if flushed is None else flushed)


def _spawn(request, fds, control, streams, compiled):
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: nothing of the parent's is reachable once the program starts
        control.close()
        os.setsid()
        for res, value in request["rlimits"]:
            resource.setrlimit(res, (value, value))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)
        os.chdir(WORK)
        _run_program(request["argv"], streams, compiled)
    except BaseException:  # noqa: BLE001 -- exiting as CPython does; nothing to report to
        pass
    os._exit(127)


def _reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _kill_leftovers(limit=2.0):
    """SIGKILL every process this uid may signal but us; True once they are all gone."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return True
        _reap()
        time.sleep(0.0005)
    return False


def _wipe(top):
    ok = True
    try:
        names = os.listdir(top)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for name in names:
        path = os.path.join(top, name)
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                ok = _wipe(path) and ok
                os.rmdir(path)
            else:
                os.unlink(path)
        except OSError:
            ok = False
    return ok


# keyctl(2): the user keyrings of the sandbox uid outlive a child (docker's seccomp profile
# blocks the call; bwrap has none). Cleared after each run.
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
_KEYCTL_CLEAR, _USER_KEYRINGS = 7, (-4, -5)  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
# The uid's persistent keyring lives as long as the user namespace (the whole warm instance):
# it is cleared too, after linking it into this process's thread keyring (which a forked child
# does not inherit) so that we possess it: the keyring grants its uid no write permission.
_KEYCTL_GET_PERSISTENT, _THREAD_KEYRING = 22, -1


def _clear_keyrings():
    if _SYS_KEYCTL is not None:
        LIBC.syscall.restype = ctypes.c_long
        persistent = LIBC.syscall(
            _SYS_KEYCTL, _KEYCTL_GET_PERSISTENT, ctypes.c_long(-1), ctypes.c_long(_THREAD_KEYRING)
        )
        if persistent > 0:
            LIBC.syscall(_SYS_KEYCTL, _KEYCTL_CLEAR, ctypes.c_long(persistent))
        for ring in _USER_KEYRINGS:
            LIBC.syscall(_SYS_KEYCTL, _KEYCTL_CLEAR, ctypes.c_long(ring))


def _no_sysv_ipc():
    for path in SYSVIPC:
        try:  # raw reads: a header line, then one line per object
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            data = b""
            while chunk := os.read(fd, 65536):
                data += chunk
                if data.count(b"\n") > 1:
                    return False
        except OSError:
            pass
        finally:
            os.close(fd)
    return True


def _serve_one(request, fds, control, streams, wipe_dirs, compiled, sysv=True):
    start = time.monotonic()
    pid = _spawn(request, fds, control, streams, compiled)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([pidfd], [], [], float(request["timeout"]))
    os.close(pidfd)
    # Also past the limit when the select returned late: a child can SIGSTOP this parent, run
    # on, and have a helper SIGCONT it after its own exit; the monotonic clock kept counting.
    timed_out = not ready or time.monotonic() - start > float(request["timeout"])
    if timed_out:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status, usage = os.wait4(pid, 0)
    elapsed = time.monotonic() - start
    gone = _kill_leftovers()
    _drain_signals()
    _clear_keyrings()
    # a list, not a generator: every dir is wiped even after one fails
    clean = gone and all([_wipe(d) for d in wipe_dirs]) and (not sysv or _no_sysv_ipc())  # noqa: C419
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "clean": clean,
        "elapsed": elapsed,
        "cpu": usage.ru_utime + usage.ru_stime,
    }


def main():
    control = socket.socket(fileno=int(sys.argv[1]))
    config = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    wipe_dirs = list(config.get("wipe", []))
    # False where the supervisor checks System V IPC itself after every run (docker)
    sysv = bool(config.get("sysv", True))
    path = os.path.join(WORK, "main.py")
    compiled: dict = {}  # source -> the trusted main() or the compiled code
    for text in config.get("trusted", []):
        source = text.encode("utf-8", "surrogatepass")
        code = compile(source, path, "exec")
        # A trusted program's module body (imports, definitions) runs here once, not in every
        # child: in a fresh fork it costs page copies (~0.5 ms for the runner). Its main()
        # then runs in each child, followed by os._exit(0), as its __main__ block does.
        module = {"__name__": "__marft_trusted__", "__file__": path, "__builtins__": __builtins__}
        exec(code, module)  # trusted code the host gave us, never a job's
        entry = module.get("main")
        compiled[source] = entry if callable(entry) else code
    streams = _startup_streams()
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    _harden()
    # Everything so far is shared with every child: keep the garbage collector from touching
    # it, or each child's first collection would copy the whole heap (copy-on-write).
    gc.freeze()
    control.send(b'{"ready": true}')
    fds_size = socket.CMSG_LEN(MAX_FDS * array.array("i").itemsize)
    while True:
        try:
            data, ancdata, _, _ = control.recvmsg(65536, fds_size)
        except OSError:
            return
        if not data:
            return
        fds = array.array("i")
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        request = json.loads(data)
        if len(fds) != MAX_FDS:
            for fd in fds:
                os.close(fd)
            control.send(b'{"error": "expected 3 file descriptors"}')
            continue
        report = _serve_one(request, list(fds), control, streams, wipe_dirs, compiled, sysv)
        control.send(json.dumps(report).encode())


if __name__ == "__main__":
    main()
    os._exit(0)
