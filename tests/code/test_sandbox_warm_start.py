"""What a warm child starts with, now that the warm parent blocks signals instead of ignoring
them, hands children pristine std streams made once, and does not load ``threading``: the
child must still look like a fresh interpreter, and nothing a run sends its parent may reach
the next run."""

from __future__ import annotations

import pytest

from marft_envs.code.sandbox import ExecStatus


@pytest.fixture(params=["docker", "bwrap"])
def warm(request, sandbox_factory):
    sb = sandbox_factory(request.param)
    assert sb.warm
    return sb


FRESH = """
import signal, sys
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN,
      signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
      signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
      signal.pthread_sigmask(signal.SIG_BLOCK, []) == set(),
      sys.stdout is sys.__stdout__, sys.stdout.encoding, 'threading' in sys.modules)
"""


def test_dispositions_mask_and_streams_are_a_fresh_interpreters(warm):
    r = warm.run(FRESH)
    assert r.status is ExecStatus.OK, r
    assert r.stdout.split() == ["True"] * 6 + ["utf-8", "False"], r.stdout


def test_signals_sent_to_the_parent_do_not_reach_the_next_run(warm):
    send = (
        "import os\n"
        "for s in (1, 2, 10, 12, 15, 34, 40, 40):\n    os.kill(os.getppid(), s)\n"
    )
    look = (
        "import os\n"
        "lines = open(f'/proc/{os.getppid()}/status').read().splitlines()\n"
        "print([l.split()[1] for l in lines if l.startswith(('SigPnd', 'ShdPnd'))])\n"
    )
    assert warm.run(send).status is ExecStatus.OK
    r = warm.run(look)
    assert r.status is ExecStatus.OK, r
    assert r.stdout.strip() == "['0000000000000000', '0000000000000000']", r.stdout
    assert warm.run("print(1)").stdout == "1\n"  # the parent survived them


def test_a_program_is_dumpable_and_its_threads_are_joined(warm):
    prog = (
        "import ctypes, threading, time\n"
        "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))\n"  # PR_GET_DUMPABLE
        "threading.Thread(target=lambda: (time.sleep(0.2), print('joined'))).start()\n"
    )
    r = warm.run(prog)
    assert r.status is ExecStatus.OK and r.stdout == "1\njoined\n", r
