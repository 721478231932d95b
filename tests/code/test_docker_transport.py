"""The docker backend's two job transports: the control socket (default on a local daemon) and
the attach stream (kept for daemons that cannot bind-mount this machine's directories).

Both must give the same results; the socket must not be reachable from the program, and
nothing of it may stay on the host once the supervisor has connected.
"""

from __future__ import annotations

import os

import pytest

from marft_envs.code import check
from marft_envs.code.sandbox import ExecStatus, get_sandbox
from tasks import IOTest, Task
from tests.code.conftest import TEST_LIMITS, _unusable


@pytest.fixture(scope="module")
def attached(docker_service):
    """A docker sandbox on the attach-stream transport (one container)."""
    if docker_service is not None:
        _unusable("docker", docker_service)
    sb = get_sandbox("docker", transport="attach", pool_size=1, **TEST_LIMITS)
    yield sb
    sb.close()


def test_a_local_daemon_gets_the_socket_transport(sandbox_factory):
    sb = sandbox_factory("docker")
    assert sb.run("print(1)").stdout == "1\n"
    assert sb.transport == "socket"
    # the control directory and its socket are removed once the supervisor has connected
    dirs = [c.control_dir for c in sb._all.values()]
    assert dirs and all(d and not os.path.exists(d) for d in dirs), dirs


def test_the_program_cannot_reach_the_control_socket(sandbox_factory):
    sb = sandbox_factory("docker")
    probe = (
        "import os, socket\n"
        "try:\n    print(os.listdir('/marft-control'))\n"
        "except OSError as e:\n    print(type(e).__name__)\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n    s.connect('/marft-control/control')\n    print('connected')\n"
        "except OSError as e:\n    print(type(e).__name__)\n"
    )
    r = sb.run(probe)
    assert r.status is ExecStatus.OK, r
    assert "connected" not in r.stdout and "[" not in r.stdout, r.stdout


def test_the_attach_transport_still_works(attached):
    r = attached.run(
        "import sys\nprint(input()[::-1])\nprint('e', file=sys.stderr)\n"
        "open('o.txt', 'w').write('x')",
        stdin="abc\n",
    )
    assert (r.status, r.stdout, r.stderr, dict(r.extra_files)) == (
        ExecStatus.OK,
        "cba\n",
        "e\n",
        {"o.txt": b"x"},
    ), r
    assert attached.run("raise SystemExit(3)").exit_code == 3
    assert attached.run("while True: pass", timeout=1).status is ExecStatus.TIMEOUT
    assert attached.run("print('x' * 10**7)").status is ExecStatus.OUTPUT_LIMIT
    assert attached.run("print(2)").stdout == "2\n"  # a fresh container after the flood
    assert attached.warm_stats["fallbacks"] == 0


def test_both_transports_grade_alike(attached, sandbox_factory):
    task = Task(
        id="io",
        kind="code",
        prompt="p",
        io_tests=(IOTest("1 2\n", "3\n"), IOTest("5 6\n", "11\n")),
    )
    for sb in (attached, sandbox_factory("docker")):
        good = check("print(sum(map(int, input().split())))", task, sandbox=sb, extract=False)
        assert good.score == 1.0, good
        assert check("print(1 / 0)", task, sandbox=sb, extract=False).outcome == "runtime_error"
