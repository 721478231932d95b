"""The trusted supervisor: PID 1 of every pooled docker container, running one program per job.

The docker backend starts each container with this file's source as
``python -S -c <source> <warm parent source> <warm config> [<control socket path>]``, as root
in a container whose only capabilities are SETUID, SETGID and KILL. With a control socket path
(the default transport) it connects to the host's unix socket there, bind-mounted from the
host, and jobs arrive on it: an 8-byte big-endian header length with three file descriptors
(the program's stdin as a memfd, the write ends of the host's stdout and stderr pipes), a JSON
header (files, sizes, limits), then the files' bytes. Without one (the attach transport) jobs
arrive on stdin (length, header, files, then the program's stdin) and the program's output goes
to the container's stdout/stderr. For each job the supervisor

1. forks the program: new session, rlimits, the job's stdin/stdout/stderr on 0/1/2, uid/gid
   65534 (which clears every capability), writes the job's files into /work, then
   ``exec python -B main.py *argv``;
2. waits up to the time limit, then SIGKILLs the program's session;
3. SIGKILLs every other process left in the container (daemons the program
   forked), waits until they are gone;
4. collects the files the program wrote and wipes /work, /tmp and /dev/shm
   (again as uid 65534 in a helper);
5. sends its report: a length-prefixed JSON message on the control socket, or (attach) a
   trailer ``<nonce><base64 JSON><nonce>`` on stdout, then ``<nonce>`` on stderr.

With ``"warm": true`` in the header, step 1 instead hands the job to a warm parent
(``warm.py``, whose source is this file's first argument): a uid-65534 interpreter, started
once and replaced whenever it fails, that forks a fresh child per job and reports its exit
status and whether its timeout fired. The supervisor still writes the files, kills what is
left and wipes; it never trusts a warm parent that does not answer in time: it kills it and
reports ``warm_failed``, and the host runs the job again cold.

The program runs as another uid, so it cannot signal, ptrace or fake the
supervisor, nor reach the control socket (its directory is root-only, and the host removes
it and stops listening once this supervisor has connected); on the attach stream the nonce
(read from stdin, never on a command line) keeps it from forging a trailer.
The file must stay self-contained: standard library only, no package imports.
"""

import array
import base64
import json
import os
import resource
import select
import signal
import socket
import stat
import struct
import sys
import time

UID = 65534
WORK = "/work"
WIPE = ("/work", "/tmp", "/dev/shm", "/dev/mqueue")
#: System V IPC objects outlive their creator; any left means the container is not clean.
SYSVIPC = ("/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg")
MAX_EXTRA_FILES = 100


def read_exact(n):
    chunks = []
    while n > 0:
        chunk = os.read(0, min(n, 1 << 20))
        if not chunk:
            raise EOFError("job stream ended early")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def as_sandbox_user(fn, *args):
    """Run ``fn(*args)`` in a child with uid 65534; return what it wrote to a pipe (bytes)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(UID)
            os.setuid(UID)
            data = fn(*args)
            while data:
                data = data[os.write(w, data) :]
        except BaseException:  # noqa: BLE001 -- never let cleanup or reporting raise
            code = 1
        os._exit(code)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks), os.waitstatus_to_exitcode(status) == 0


def as_sandbox_euid(fn, *args):
    """``as_sandbox_user`` without the fork: ``fn(*args)`` with effective uid/gid 65534 (which
    clears the effective capabilities), then back to root. Only while no program runs: real
    and saved uid stay 0, so nothing of uid 65534 could signal or trace us meanwhile anyway."""
    os.setegid(UID)
    os.seteuid(UID)
    try:
        return fn(*args), True
    except BaseException:  # noqa: BLE001 -- a failed write or wipe is reported, not raised
        return b"", False
    finally:
        os.seteuid(0)
        os.setegid(0)


def write_files(names_sizes, blob):
    offset = 0
    for name, size in names_sizes:
        path = os.path.join(WORK, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        data = blob[offset : offset + size]
        while data:
            data = data[os.write(fd, data) :]
        os.close(fd)
        offset += size
    return b""


def read_regular(path, limit):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, limit) if limit > 0 else b""
    finally:
        os.close(fd)


def collect_and_wipe(inputs, budget):
    """JSON {relative path: base64} of new/changed files in /work, then empty the writable dirs."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(WORK):
        dirnames.sort()
        for fname in sorted(filenames):
            if len(found) >= MAX_EXTRA_FILES or budget <= 0:
                break
            path = os.path.join(dirpath, fname)
            rel = os.path.relpath(path, WORK)
            if rel == "main.py":  # never returned: not read
                continue
            data = read_regular(path, budget)
            if data is None or inputs.get(rel) == data:
                continue
            found[rel] = base64.b64encode(data).decode()
            budget -= len(data)
    clean = all(wipe(top) for top in WIPE) and no_sysv_ipc()
    return json.dumps({"files": found, "clean": clean}).encode()


def no_sysv_ipc():
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


def wipe(top):
    ok = True
    try:
        names = os.listdir(top)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for name in names:
        ok = remove(os.path.join(top, name)) and ok
    return ok


def remove(path):
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            os.chmod(path, 0o700)
            ok = wipe(path)
            os.rmdir(path)
            return ok
        os.unlink(path)
        return True
    except (OSError, RecursionError):
        return False


def reap():
    """Collect every exited child (orphans are re-parented to us, PID 1)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def kill_leftovers(timeout=2.0, spare=()):
    """SIGKILL every process in the container but us (PID 1) and ``spare``; True once they are
    all gone."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not spare:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                return True
        else:
            others = [
                int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, *spare)
            ]
            if not others:
                return True
            for pid in others:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        reap()
        time.sleep(0.001)
    return False


class WarmParent:
    """The warm parent process (uid 65534) and the supervisor's end of its control socket."""

    def __init__(self, python, env):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                os.chdir(WORK)
                os.setgroups([])
                os.setgid(UID)
                os.setuid(UID)
                os.set_inheritable(theirs.fileno(), True)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):  # children get their own 0/1/2 with each job
                    os.dup2(null, fd)
                argv = [python, "-B", "-c", sys.argv[1], str(theirs.fileno()), *sys.argv[2:3]]
                os.execve(python, argv, env)
            except BaseException:  # noqa: BLE001 -- the child must never return into the supervisor
                pass
            os._exit(127)
        theirs.close()
        self.pid, self.sock = pid, ours
        ready, _, _ = select.select([ours], [], [], 30)
        if not ready or b"ready" not in ours.recv(4096):
            self.kill()
            raise OSError("the warm parent did not start")

    def run(self, header, fds):
        """The warm parent's report of one job (``fds``: the program's stdin, stdout, stderr),
        or None if it did not answer in time."""
        request = {
            "argv": header["argv"],
            "timeout": header["timeout"],
            "rlimits": header["rlimits"],
        }
        try:
            self.sock.sendmsg(
                [json.dumps(request).encode()],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))],
            )
            ready, _, _ = select.select([self.sock], [], [], header["timeout"] + 2.0)
            data = self.sock.recv(65536) if ready else b""
            report = json.loads(data) if data else None
        except (OSError, ValueError):
            return None
        ok = (
            isinstance(report, dict)
            and isinstance(report.get("exit"), int)
            and isinstance(report.get("timed_out"), bool)
        )
        return report if ok else None

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.sock.close()


_warm: list[WarmParent | None] = [None]  # the current WarmParent


def run_job_warm(header, blob, fds, report):
    """Steps 1-2 through the warm parent; fills ``report``; returns the processes to spare."""
    _, ok = as_sandbox_euid(write_files, header["files"], blob)
    if not ok:
        raise OSError("cannot write the job's files")
    warm = _warm[0]
    if warm is None:
        warm = _warm[0] = WarmParent(header["python"], header["env"])
    answer = warm.run(header, fds)
    if answer is None:  # killed, stopped or broken by the program: never trust this run
        warm.kill()
        _warm[0] = None
        report["warm_failed"] = True
        return ()
    report.update(
        started=True,
        timed_out=answer["timed_out"],
        exit=answer["exit"],
        elapsed=answer.get("elapsed"),
        warm_clean=bool(answer.get("clean")),
    )
    return (warm.pid,)


def start_program(cfg, blob, stdin_fd, out_fd=1, err_fd=2):
    """Fork the program (which first writes the job's files, as uid 65534); return (pid, error or
    None)."""
    err_r, err_w = os.pipe()  # close-on-exec: EOF means the exec succeeded
    pid = os.fork()
    if pid == 0:
        try:
            os.close(err_r)
            os.setsid()
            for res, value in cfg["rlimits"]:
                resource.setrlimit(res, (value, value))
            os.dup2(stdin_fd, 0)
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            os.chdir(WORK)
            os.setgroups([])
            os.setgid(UID)
            os.setuid(UID)
            write_files(cfg["files"], blob)
            exe = cfg["python"]
            os.execve(exe, [exe, "-B", "main.py", *cfg["argv"]], cfg["env"])
        except BaseException as exc:  # noqa: BLE001 -- never let cleanup or reporting raise
            os.write(err_w, repr(exc).encode()[:1000])
        os._exit(127)
    os.close(err_w)
    message = os.read(err_r, 1000)
    os.close(err_r)
    return pid, (message.decode(errors="replace") or None)


def run_job_cold(header, blob, fds, report):
    """Steps 1-2 with a fresh interpreter (fork and exec); fills ``report``."""
    start = time.monotonic()
    pid, error = start_program(header, blob, *fds)
    if error:
        os.waitpid(pid, 0)
        raise OSError(f"cannot start the program: {error}")
    report["started"] = True
    pidfd = os.pidfd_open(pid)
    ready, _, _ = select.select([pidfd], [], [], header["timeout"])
    os.close(pidfd)
    if not ready:
        report["timed_out"] = True
        os.killpg(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    report["elapsed"] = time.monotonic() - start
    report["exit"] = os.waitstatus_to_exitcode(status)


def run_job(header, blob, fds):
    """Run one job whose program gets ``fds`` (stdin, stdout, stderr); return the report dict."""
    inputs, offset = {}, 0
    for name, size in header["files"]:
        inputs[name] = blob[offset : offset + size]
        offset += size
    report: dict = {
        "started": False,
        "timed_out": False,
        "exit": None,
        "clean": False,
        "files": {},
        "error": None,
    }
    try:
        if header.get("warm"):
            spare = run_job_warm(header, blob, fds, report)
        else:
            spare = ()
            run_job_cold(header, blob, fds, report)
        gone = kill_leftovers(spare=spare)
        wipe_as = as_sandbox_euid if header.get("warm") else as_sandbox_user
        out, ok = wipe_as(collect_and_wipe, inputs, header["extra_files_bytes"])
        collected = json.loads(out) if ok else {"files": {}, "clean": False}
        report["files"] = collected["files"]
        report["clean"] = gone and collected["clean"] and report.pop("warm_clean", True)
    except Exception as exc:  # noqa: BLE001 -- never let cleanup or reporting raise
        report["error"] = f"{type(exc).__name__}: {exc}"
    return report


def memfd(data):
    """A memfd holding ``data``, positioned at its start (a program's stdin)."""
    fd = os.memfd_create("stdin")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def serve_attached():
    """Serve jobs from stdin until it closes; the program's output goes to the container's
    stdout/stderr, followed by the nonce-framed report (see the module docstring)."""
    while True:
        try:
            header = json.loads(read_exact(struct.unpack(">Q", read_exact(8))[0]))
        except EOFError:
            return
        blob = read_exact(header["files_size"])
        stdin_fd = memfd(read_exact(header["stdin_size"]))
        try:
            report = run_job(header, blob, (stdin_fd, 1, 2))
        finally:
            os.close(stdin_fd)
        reap()
        trailer = (
            header["nonce"].encode()
            + base64.b64encode(json.dumps(report).encode())
            + header["nonce"].encode()
        )
        while trailer:
            trailer = trailer[os.write(1, trailer) :]
        # stderr's end mark: docker relays the two pipes separately, so the host waits for both
        mark = header["nonce"].encode()
        while mark:
            mark = mark[os.write(2, mark) :]


def recv_exact(sock, n):
    chunks = []
    while n > 0:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("job stream ended early")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def serve_socket(path):
    """Serve jobs from the host's control socket at ``path`` until it closes.

    Each job is an 8-byte length and a JSON header carrying three file descriptors (SCM_RIGHTS:
    the program's stdin as a memfd, the write ends of the host's stdout and stderr pipes), then
    the files' bytes; the answer is an 8-byte length and the JSON report. The program writes
    straight into the host's pipes: no byte passes through dockerd or this process.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec: never inherited
    sock.connect(path)
    fds_size = socket.CMSG_LEN(3 * array.array("i").itemsize)
    while True:
        try:
            data, ancdata, _, _ = sock.recvmsg(8, fds_size)
        except OSError:
            return
        fds = array.array("i")
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        for fd in fds:
            os.set_inheritable(fd, False)  # a cold program gets its dup2 copies on 0/1/2 only
        try:
            if not data:
                return
            head = data + (recv_exact(sock, 8 - len(data)) if len(data) < 8 else b"")
            header = json.loads(recv_exact(sock, struct.unpack(">Q", head)[0]))
            blob = recv_exact(sock, header["files_size"])
            if len(fds) != 3:
                report = {"started": False, "error": "expected 3 file descriptors"}
            else:
                report = run_job(header, blob, tuple(fds))
        except EOFError:
            return
        finally:
            for fd in fds:
                os.close(fd)  # the host sees EOF on its pipes once the program is gone too
        reap()
        answer = json.dumps(report).encode()
        sock.sendall(struct.pack(">Q", len(answer)) + answer)


def main():
    """Serve jobs until the host goes away (the control socket, or else stdin, closes)."""
    os.setgroups([])  # no supplementary groups while the effective uid is the sandbox's
    control = sys.argv[3] if len(sys.argv) > 3 else ""
    if control:
        serve_socket(control)
    else:
        serve_attached()


if __name__ == "__main__":
    main()
    sys.exit(0)
