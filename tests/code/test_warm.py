"""The warm path of docker and bwrap: one warm parent per sandbox instance forks a child per run.

What is new compared with a fresh interpreter per run, and must not leak: a child must not see
a previous child's files, memory, modules or monkey-patches; it cannot read or trace its warm
parent; and a child that kills, stops or signals its warm parent gets no false verdict (the
run is redone cold) and the parent is replaced. ``sandbox_factory`` (conftest.py) gives the
session's sandboxes, whose warm path is on by default.
"""

from __future__ import annotations

import re
import secrets

import pytest

from marft_envs.code import check
from marft_envs.code.sandbox import ExecStatus, get_sandbox
from tasks import IOTest, Task
from tests.code.conftest import TEST_LIMITS


@pytest.fixture(params=["docker", "bwrap"])
def warm(request, sandbox_factory):
    sb = sandbox_factory(request.param)
    assert sb.warm, "the warm path is on by default"
    return sb


def _stats(sb) -> dict:
    return dict(sb.warm_stats)


def _two_runs(sb, first: str, second: str, **kwargs):
    """Run ``first`` then ``second`` on the same sandbox; both served warm."""
    before = _stats(sb)
    r1 = sb.run(first, **kwargs)
    r2 = sb.run(second)
    after = _stats(sb)
    assert after["warm_runs"] - before["warm_runs"] == 2, (before, after, r1, r2)
    assert after["fallbacks"] == before["fallbacks"]
    return r1, r2


def test_runs_are_served_warm(warm):
    before = _stats(warm)
    for _ in range(3):
        r = warm.run("import sys\nprint(sys.argv, __name__, input())", stdin="x\n", argv=["a"])
        assert r.status is ExecStatus.OK and r.stdout == "['main.py', 'a'] __main__ x\n", r
    assert _stats(warm)["warm_runs"] - before["warm_runs"] == 3


def test_a_child_does_not_see_previous_files(warm):
    first = (
        "import os\nopen('left.txt', 'w').write('x')\nos.makedirs('d/e')\n"
        "open('/tmp/t.txt', 'w').write('x')\nopen('/dev/shm/s', 'w').write('x')\n"
    )
    second = (
        "import os\nprint(sorted(os.listdir('.')), os.listdir('/tmp'), "
        "[n for n in os.listdir('/dev/shm')])\n"
    )
    r1, r2 = _two_runs(warm, first, second)
    assert r1.status is ExecStatus.OK, r1
    assert r2.stdout == "['main.py'] [] []\n", r2


def test_a_child_does_not_see_previous_memory(warm):
    """The first run holds a secret in its program, its stdin and its heap; the second scans
    all of its own memory for the marker and finds only its own (no hex suffix)."""
    secret = secrets.token_hex(12)
    first = f"S = 'MARFTSECRET' + {secret!r}\nkeep = [S * 3 for _ in range(100)]\nprint(input())"
    second = (
        "import re\nfound = set()\nmaps = open('/proc/self/maps').read().splitlines()\n"
        "mem = open('/proc/self/mem', 'rb', 0)\n"
        "for line in maps:\n"
        "    addr, perms = line.split()[:2]\n"
        "    if not perms.startswith('r'):\n        continue\n"
        "    lo, hi = (int(x, 16) for x in addr.split('-'))\n"
        "    try:\n        mem.seek(lo)\n        data = mem.read(hi - lo)\n"
        "    except (OSError, OverflowError, ValueError):\n        continue\n"
        "    found.update(m.decode() for m in re.findall(rb'MARFTSECRET([0-9a-f]{24})', data))\n"
        "print(sorted(found))\n"
    )
    r1, r2 = _two_runs(warm, first, second, stdin=f"MARFTSECRET{secret}\n")
    assert r1.stdout.strip() == f"MARFTSECRET{secret}"
    assert r2.status is ExecStatus.OK, r2
    assert secret not in r2.stdout and r2.stdout == "[]\n", r2.stdout


def test_a_child_does_not_see_previous_modules_or_patches(warm):
    first = (
        "import builtins, math, json, sys, os, types\n"
        "math.pi = 3\njson.dumps = lambda *a, **k: 'patched'\nbuiltins.len = lambda x: -1\n"
        "sys.modules['evil'] = types.ModuleType('evil')\nsys.path.insert(0, '/tmp')\n"
        "os.environ['LEAK'] = '1'\nsys.setrecursionlimit(50)\n"
        "open('mymod.py', 'w').write('X = 1')\nimport mymod\n"
    )
    second = (
        "import builtins, math, json, sys, os\n"
        "try:\n    import mymod\n    m = 'mymod visible'\nexcept ImportError:\n    m = 'no mymod'\n"
        "print(math.pi, json.dumps([1]), len([1, 2]), 'evil' in sys.modules, '/tmp' in sys.path, "
        "os.environ.get('LEAK'), sys.getrecursionlimit(), m)\n"
    )
    r1, r2 = _two_runs(warm, first, second)
    assert r1.status is ExecStatus.OK, r1
    assert r2.stdout == "3.141592653589793 [1] 2 False False None 1000 no mymod\n", r2


def test_a_child_cannot_reach_its_warm_parent(warm):
    """/proc/<parent>/mem, fd, environ and ptrace are denied (the parent is not dumpable)."""
    probe = (
        "import ctypes, os\nppid = os.getppid()\nout = []\n"
        "for what in ('mem', 'environ', 'fd', 'maps'):\n"
        "    try:\n        p = f'/proc/{ppid}/{what}'\n"
        "        (os.listdir(p) if what == 'fd' else open(p, 'rb').read(1))\n"
        "        out.append(what + ':open')\n"
        "    except OSError as e:\n        out.append(what + ':denied')\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "out.append('ptrace:' + ('ok' if libc.ptrace(16, ppid, 0, 0) == 0 else 'denied'))\n"
        "print(' '.join(out))\n"
    )
    r = warm.run(probe)
    assert r.status is ExecStatus.OK, r
    assert r.stdout.split() == [
        "mem:denied",
        "environ:denied",
        "fd:denied",
        "maps:denied",
        "ptrace:denied",
    ], r.stdout


def test_catchable_signals_do_not_harm_the_warm_parent(warm):
    before = _stats(warm)
    prog = (
        "import os, signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1,"
        " signal.SIGPIPE, signal.SIGALRM):\n"
        "    try:\n        os.kill(os.getppid(), s)\n    except OSError:\n        pass\nprint('sent')"
    )
    assert warm.run(prog).stdout == "sent\n"
    assert warm.run("print('still warm')").stdout == "still warm\n"
    after = _stats(warm)
    assert (
        after["fallbacks"] == before["fallbacks"] and after["warm_runs"] - before["warm_runs"] == 2
    )


SQUARES = Task(
    id="sq",
    kind="code",
    prompt="f(x) = x*x",
    entry_point="f",
    tests=("assert f(2) == 4", "assert f(-3) == 9", "assert f(7) == 49"),
)
ECHO2 = Task(
    id="io", kind="code", prompt="print 2n", io_tests=(IOTest("3\n", "6\n"), IOTest("5\n", "10\n"))
)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_killing_or_stopping_the_parent_gives_no_false_verdict(warm, how):
    """The run is redone cold: its verdict is the cold path's, and the parent is replaced."""
    attack = f"import os, signal\ntry:\n    os.kill(os.getppid(), signal.{how})\nexcept OSError:\n    pass\n"
    before = _stats(warm)
    wrong = check(
        attack + "def f(x):\n    return 0\n", SQUARES, sandbox=warm, extract=False, timeout=1
    )
    assert wrong.outcome != "pass" and wrong.passed == 0, wrong.reason
    right = check(
        attack + "print(int(input()) * 2)\n", ECHO2, sandbox=warm, extract=False, timeout=1
    )
    with get_sandbox(warm.name, warm=False, **TEST_LIMITS) as cold:
        reference = check(
            attack + "print(int(input()) * 2)\n", ECHO2, sandbox=cold, extract=False, timeout=1
        )
    assert (right.outcome, right.passed) == (reference.outcome, reference.passed)
    after = _stats(warm)
    assert after["fallbacks"] > before["fallbacks"]
    # the replacement parent serves the next run warm
    assert warm.run("print('fresh')").stdout == "fresh\n"
    assert _stats(warm)["warm_runs"] > after["warm_runs"]


def test_cold_path_still_works(sandbox_factory):
    for name in ("docker", "bwrap"):
        sandbox_factory(name)  # skips (or fails under MARFT_REQUIRE_SANDBOXES) when unusable
        with get_sandbox(name, warm=False, **TEST_LIMITS) as cold:
            r = cold.run("print(input()[::-1])", stdin="abc")
            assert r.status is ExecStatus.OK and r.stdout == "cba\n", r
            assert cold.warm_stats.get("warm_runs", 0) == 0


def test_tracebacks_look_like_a_fresh_interpreter(warm):
    r = warm.run("def g():\n    raise ValueError('boom')\ng()\n")
    assert r.status is ExecStatus.ERROR and r.exit_code == 1
    frames = re.findall(r'File "([^"]+)"', r.stderr)
    assert frames == ["/work/main.py", "/work/main.py"], r.stderr


def test_instances_outlive_the_thread_that_started_them(sandbox_factory):
    """bwrap --die-with-parent kills a sandbox when the thread that started it ends: warm
    instances are started from the pool's own thread, so a caller's short-lived thread
    (a ThreadPoolExecutor's) can start one and end."""
    import threading

    sandbox_factory("bwrap")
    with get_sandbox("bwrap", **TEST_LIMITS) as sb:
        t = threading.Thread(target=lambda: sb.run("print(1)"))
        t.start()
        t.join()
        assert sb.run("print(2)").stdout == "2\n"
        stats = sb.warm_stats
        assert stats["warm_runs"] == 2 and stats["fallbacks"] == 0 and stats["started"] == 1, stats


def test_the_runner_is_precompiled_but_other_programs_are_not(warm):
    """A program that only resembles the runner is compiled as itself."""
    from marft_envs.code.harness import runner_source

    almost = runner_source().replace(
        "def main():", "def main():\n    print('mine', flush=True)\n    return", 1
    )
    r = warm.run(almost)
    assert r.stdout == "mine\n", r


def test_a_child_does_not_see_previous_keys(warm):
    """A key added to the uid's user keyring by one run is gone for the next (add_key(2) and
    keyctl(2) by syscall number; docker's seccomp profile refuses them outright)."""
    import platform

    nums = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine())
    if nums is None:
        pytest.skip("syscall numbers known for x86_64 and aarch64 only")
    add_key, keyctl = nums
    first = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"k = libc.syscall({add_key}, b'user', b'marft', b'secret', 6, -4)\n"
        "print('added' if k > 0 else 'refused')\n"
    )
    second = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"k = libc.syscall({keyctl}, 10, -4, b'user', b'marft', 0)\n"  # KEYCTL_SEARCH
        "print('found' if k > 0 else 'none')\n"
    )
    r1, r2 = _two_runs(warm, first, second)
    assert r1.stdout in ("added\n", "refused\n"), r1
    assert r2.stdout == "none\n", (r1, r2)


def test_a_child_does_not_see_previous_persistent_keys(warm):
    """The uid's persistent keyring (keyctl KEYCTL_GET_PERSISTENT) lives as long as the user
    namespace, i.e. the warm bwrap instance: a key one run puts there is gone for the next."""
    import platform

    nums = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine())
    if nums is None:
        pytest.skip("syscall numbers known for x86_64 and aarch64 only")
    add_key, keyctl = nums
    head = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
        f"ring = libc.syscall({keyctl}, 22, ctypes.c_long(-1), ctypes.c_long(-1))\n"  # GET_PERSISTENT
    )
    first = head + (
        f"k = libc.syscall({add_key}, b'user', b'marft', b'secret', 6, ctypes.c_long(ring)) if ring > 0 else -1\n"
        "print('added' if k > 0 else 'refused')\n"
    )
    second = head + (
        f"k = libc.syscall({keyctl}, 10, ctypes.c_long(ring), b'user', b'marft', 0) if ring > 0 else -1\n"
        "print('found' if k > 0 else 'none')\n"
    )
    r1, r2 = _two_runs(warm, first, second)
    assert r1.stdout in ("added\n", "refused\n"), r1
    assert r2.stdout == "none\n", (r1, r2)


def test_stopping_the_parent_past_the_limit_is_a_timeout(warm):
    """A child that SIGSTOPs its warm parent, runs past its limit and has a grandchild SIGCONT
    the parent before the host's grace period ends must not finish as ``ok``."""
    prog = (
        "import os, signal, time\nppid = os.getppid()\nos.kill(ppid, signal.SIGSTOP)\n"
        "if os.fork() == 0:\n    time.sleep(2.2)\n    os.kill(ppid, signal.SIGCONT)\n    os._exit(0)\n"
        "time.sleep(1.8)\nprint('42')\n"
    )
    r = warm.run(prog, timeout=1)
    assert r.status is ExecStatus.TIMEOUT, r
    assert warm.run("print('after')").stdout == "after\n"
