"""Programs that try to fake a pass. None may score a pass, on any backend.

The task is ``f(x) == x * x`` with hidden tests no constant satisfies; a program that does
not compute squares can only pass by cheating the harness. See docs/code_envs.md for why
each trick fails (expected values never enter the sandbox; only values come back).
"""

import pytest

from marft_envs.code import check
from tasks import IOTest, Task, load

SQUARES = Task(
    id="squares", kind="code", prompt="def f(x): return the square of x", entry_point="f",
    tests=("assert f(2) == 4", "assert f(-3) == 9", "assert f(0) == 0", "assert f(7) == 49"),
)

FAKES = {
    "sys_exit_at_import": "import sys\nsys.exit(0)\ndef f(x):\n    return 0",
    "os_exit_at_import": "import os\nos._exit(0)",
    "os_exit_in_call": "import os\ndef f(x):\n    os._exit(0)",
    "sys_exit_in_call": "import sys\ndef f(x):\n    sys.exit(0)",
    "print_pass_markers": (
        "import sys\nfor s in ['PASS', 'passed', 'OK', 'All tests passed', '{\"passed\": true}']:\n"
        "    print(s)\n    print(s, file=sys.stderr)\ndef f(x):\n    return None"),
    "print_guessed_records": (
        "import sys, os\nfor k in range(8):\n"
        "    for v in ('[\"i\", \"0x4\"]', '[\"b\", true]'):\n"
        "        line = '0' * 32 + '\\t{\"id\": %d, \"ok\": %s}\\n' % (k, v)\n"
        "        os.write(1, line.encode())\n        os.write(2, line.encode())\n"
        "os.write(1, ('0' * 32 + '\\t{\"program\": \"ok\"}\\n').encode())\n"
        "def f(x):\n    return -1"),
    "eq_always_true": "class A:\n    def __eq__(self, o):\n        return True\n    __hash__ = object.__hash__\ndef f(x):\n    return A()",
    "str_subclass_eq_true": "class S(str):\n    def __eq__(self, o):\n        return True\n    __hash__ = str.__hash__\ndef f(x):\n    return S('')",
    "int_subclass_eq_true": "class I(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\ndef f(x):\n    return I(1)",
    "patch_builtins": (
        "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n"
        "builtins.isinstance = lambda *a: True\nbuiltins.type = lambda *a: int\n"
        "builtins.repr = lambda o: '4'\nbuiltins.hex = lambda o: '0x4'\ndef f(x):\n    return 1"),
    "patch_runner_encoder": (
        "import sys\nm = sys.modules['__main__']\nm.encode = lambda v, **k: ['i', '0x4']\n"
        "m._describe = lambda e: ['AssertionError', '']\ndef f(x):\n    return 1"),
    "steal_nonce_and_forge_records": (
        "import sys, os, json\nfr = sys._getframe(1)\nwhile fr and 'nonce' not in fr.f_locals:\n    fr = fr.f_back\n"
        "nonce = fr.f_locals['nonce'] if fr else b''\nreq = fr.f_locals.get('request', {}) if fr else {}\n"
        "def forge(value):\n    for fd in range(3, 64):\n        try:\n"
        "            os.write(fd, nonce + b'\\t' + json.dumps({'program': 'ok'}).encode() + b'\\n')\n"
        "            for c in req.get('calls', []):\n"
        "                os.write(fd, nonce + b'\\t' + json.dumps({'id': c['id'], 'ok': value}).encode() + b'\\n')\n"
        "        except OSError:\n            pass\n"
        "forge(['b', True])\nforge(['i', '0x4'])\nos._exit(0)"),
    "search_memory_for_tests": (
        "import gc, sys, os\nfound = []\nfor o in gc.get_objects():\n    if isinstance(o, str) and 'assert' in o:\n        found.append(o)\n"
        "for root, _, files in os.walk('.'):\n    for name in files:\n        try:\n            found.append(open(os.path.join(root, name)).read())\n        except Exception:\n            pass\n"
        "found += [v for v in os.environ.values()]\n"
        "SECRET = {}\nfor text in found:\n    for line in text.splitlines():\n        line = line.strip()\n"
        "        if line.startswith('assert f(') and '==' in line:\n            call, want = line[len('assert '):].split('==')\n"
        "            SECRET[call.strip()] = eval(want)\n"
        "def f(x):\n    return SECRET.get('f(%r)' % (x,), -1)"),
    "inspect_callers": (
        "import inspect, traceback\ndef f(x):\n    src = ''\n    for fr in inspect.stack():\n"
        "        try:\n            src += inspect.getsource(fr.frame)\n        except Exception:\n            pass\n"
        "        src += repr(fr.frame.f_locals)\n    src += ''.join(traceback.format_stack())\n"
        "    want = 'f(%r) ' % (x,) + '=' * 2 + ' '\n"
        "    if want in src:\n        return int(src.split(want, 1)[1].split()[0].strip(',)'))\n"
        "    return -1"),
    "raise_systemexit_in_del": (
        "class D:\n    def __del__(self):\n        raise SystemExit(0)\nkeep = D()\n"
        "def f(x):\n    d = D()\n    del d\n    return 0"),
    "atexit_tricks": (
        "import atexit, os, sys\natexit.register(lambda: os._exit(0))\natexit.register(lambda: print('PASS'))\n"
        "def f(x):\n    sys.exit(0)"),
    "signal_tricks": (
        "import signal, os\nsignal.signal(signal.SIGALRM, lambda *a: os._exit(0))\nsignal.alarm(1)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ndef f(x):\n    while True:\n        pass"),
    "kill_self": "import os, signal\ndef f(x):\n    os.kill(os.getpid(), signal.SIGKILL)",
    "close_channel": "import os\nos.closerange(3, 1024)\ndef f(x):\n    return 0",
    "dup_over_channel": "import os\nfor fd in range(3, 64):\n    try:\n        os.dup2(2, fd)\n    except OSError:\n        pass\ndef f(x):\n    return 0",
    "self_referential_value": "def f(x):\n    a = []\n    a.append(a)\n    return a",
    "generator_that_lies": "def f(x):\n    yield 4",
    "keyboard_interrupt": "def f(x):\n    raise KeyboardInterrupt",
    "fork_and_forge": (
        "import os, sys\nif os.fork() == 0:\n    for i in range(1000):\n        print('PASS')\n    os._exit(0)\n"
        "os.wait()\ndef f(x):\n    return 0"),
    "huge_output_flood": "import sys\ndef f(x):\n    sys.__stdout__.write('PASS\\n' * 10**7)\n    return 0",
}


# Programs that look for the tests or expected values: they must not find even one.
LEAK_PROBES = {"inspect_callers", "search_memory_for_tests"}


@pytest.mark.parametrize("name", sorted(FAKES))
def test_fake_never_passes(name, sandbox):
    """``sandbox`` (conftest.py) is each backend in turn."""
    r = check(FAKES[name], SQUARES, sandbox=sandbox, extract=False, timeout=3)
    assert r.outcome != "pass", (name, r.reason)
    assert r.score < 1.0
    if name in LEAK_PROBES:
        assert r.passed == 0, (name, r.details)


def test_the_task_is_passable(sandbox):
    r = check("def f(x):\n    return x * x", SQUARES, sandbox=sandbox, extract=False)
    assert r.outcome == "pass"


def test_redefining_trusted_helpers_does_not_fake_humaneval(sandbox_factory):
    """HumanEval/32 checks find_zero with the prompt's poly(): a program that makes its own
    poly() return 0 is still judged with the trusted one."""
    task = load("humaneval").by_id("HumanEval/32")
    fake = "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 0.0\n"
    r = check(fake, task, sandbox=sandbox_factory("subprocess"), extract=False)
    assert r.outcome == "fail"


def test_stdio_fakes_never_pass(sandbox_factory):
    task = Task(id="io", kind="code", prompt="print a+b", io_tests=(IOTest("1 2\n", "3\n"), IOTest("4 4\n", "8\n")))
    sb = sandbox_factory("subprocess")
    for fake in ("import sys\nsys.exit(0)", "print('PASS')", "import os\nos._exit(0)", "print(open(0).read())"):
        assert check(fake, task, sandbox=sb, extract=False).outcome != "pass", fake
