"""The Sandbox interface, on every backend: I/O, files, statuses, limits, selection, infra errors."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from marft_envs.code.sandbox import (
    ExecResult,
    ExecStatus,
    SandboxLimits,
    available_backends,
    get_sandbox,
)
from marft_envs.code.sandbox import bwrap as bwrap_module
from marft_envs.code.sandbox.docker_backend import DockerSandbox
from marft_envs.code.sandbox.select import AUTO_ORDER
from tests.code.conftest import TEST_LIMITS


def test_stdin_to_stdout(sandbox):
    r = sandbox.run("import sys\nprint(sys.stdin.read().upper(), end='')", stdin="héllo\nworld\n")
    assert isinstance(r, ExecResult)
    assert (r.status, r.exit_code, r.stdout, r.stderr) == (ExecStatus.OK, 0, "HÉLLO\nWORLD\n", "")
    assert r.backend == sandbox.name and r.elapsed > 0


def test_files_argv_and_cwd(sandbox):
    prog = (
        "import os, sys\n"
        "print(sorted(os.listdir('.')), sys.argv[1:])\n"
        "print(open('data/in.txt').read(), open('blob.bin', 'rb').read())\n"
        "import helper; print(helper.X)\n"
    )
    files = {"data/in.txt": "text", "blob.bin": b"\x00\x01", "helper.py": "X = 42\n"}
    r = sandbox.run(prog, files=files, argv=["a b", "--c"])
    assert r.status is ExecStatus.OK, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "['blob.bin', 'data', 'helper.py', 'main.py'] ['a b', '--c']"
    assert lines[1:] == ["text b'\\x00\\x01'", "42"]


def test_extra_files_are_new_or_changed_files_only(sandbox):
    prog = "open('out.json', 'w').write('{}')\nopen('same.txt', 'w').write('keep')\nopen('chg.txt', 'w').write('new')\n"
    r = sandbox.run(prog, files={"same.txt": "keep", "chg.txt": "old"})
    assert r.status is ExecStatus.OK
    assert dict(r.extra_files) == {"out.json": b"{}", "chg.txt": b"new"}


def test_extra_files_are_bounded(sandbox):
    prog = "for i in range(20):\n    open(f'f{i:02}.bin', 'wb').write(b'x' * 20_000)\n"
    r = sandbox.run(prog)
    assert r.status is ExecStatus.OK
    assert 0 < sum(map(len, r.extra_files.values())) <= TEST_LIMITS["extra_files_bytes"]


def test_runs_do_not_share_state(sandbox):
    first = sandbox.run(
        "import os, tempfile\nopen('left.txt', 'w').write('x')\nopen(os.path.join(tempfile.gettempdir(), 'left2'), 'w').write('y')"
    )
    assert first.status is ExecStatus.OK, first.stderr
    second = sandbox.run(
        "import os, tempfile\nprint(os.path.exists('left.txt'), os.path.exists(os.path.join(tempfile.gettempdir(), 'left2')))"
    )
    assert second.stdout == "False False\n"


@pytest.mark.parametrize(
    "program, status, code",
    [
        ("raise SystemExit(3)", ExecStatus.ERROR, 3),
        ("raise ValueError('boom')", ExecStatus.ERROR, 1),
        ("def f(:\n", ExecStatus.ERROR, 1),
        ("import sys; sys.exit(0)", ExecStatus.OK, 0),
        ("x = bytearray(1 << 40)", ExecStatus.MEMORY, 1),
    ],
    ids=["exit3", "exception", "syntax", "exit0", "memory"],
)
def test_exit_statuses(sandbox, program, status, code):
    r = sandbox.run(program)
    assert (r.status, r.exit_code) == (status, code), r.stderr
    if code == 1 and status is ExecStatus.ERROR:
        assert "Error" in r.stderr


def test_timeout_argument(sandbox):
    r = sandbox.run("import time\nprint('started', flush=True)\ntime.sleep(60)", timeout=1.0)
    assert (r.status, r.exit_code) == (ExecStatus.TIMEOUT, None)
    assert r.stdout == "started\n"
    assert 1.0 <= r.elapsed < 10
    assert sandbox.run("print('next')").stdout == "next\n"  # usable after a kill


def test_output_limit_boundary(sandbox):
    n = TEST_LIMITS["output_bytes"]
    exact = sandbox.run(f"import sys\nsys.stdout.write('a' * {n})")
    assert exact.status is ExecStatus.OK and len(exact.stdout) == n
    over = sandbox.run(f"import sys\nsys.stdout.write('a' * {n + 1})")
    assert over.status is ExecStatus.OUTPUT_LIMIT and len(over.stdout) <= n
    err = sandbox.run(f"import sys\nsys.stderr.write('e' * {n + 1})")
    assert err.status is ExecStatus.OUTPUT_LIMIT


def test_large_stdin(sandbox):
    data = "x" * 3_000_000
    r = sandbox.run("import sys\nprint(len(sys.stdin.read()))", stdin=data)
    assert r.stdout == "3000000\n"


def test_environment_is_minimal(sandbox, monkeypatch):
    monkeypatch.setenv("MARFT_TEST_PARENT_VAR", "leak")
    r = sandbox.run("import os\nprint(sorted(os.environ))")
    assert "MARFT_TEST_PARENT_VAR" not in r.stdout
    assert eval(r.stdout) == [
        "HOME",
        "LANG",
        "LC_ALL",
        "PATH",
        "PWD",
        "PYTHONDONTWRITEBYTECODE",
        "TMPDIR",
    ]


def test_parallel_runs_do_not_mix(sandbox):
    def one(i: int) -> tuple[int, str]:
        r = sandbox.run(
            f"import sys\nprint({i}, sys.stdin.read())\nopen('mine', 'w').write('{i}')",
            stdin=str(i * 7),
        )
        return i, r.stdout + repr(dict(r.extra_files))

    with ThreadPoolExecutor(4) as ex:
        for i, text in ex.map(one, range(12)):
            assert text == f"{i} {i * 7}\n" + repr({"mine": str(i).encode()})


def test_isolating_backends_drop_privileges(isolating_sandbox):
    r = isolating_sandbox.run(
        "import os\nstatus = open('/proc/self/status').read()\n"
        "print(os.getuid(), os.getgid(), os.getgroups(), [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')])"
    )
    assert r.stdout == "65534 65534 [] ['0000000000000000']\n", r.stderr


def test_isolating_backends_hide_site_packages(isolating_sandbox):
    r = isolating_sandbox.run("import docker")
    assert r.status is ExecStatus.ERROR and "ModuleNotFoundError" in r.stderr


def test_memory_limit_is_configurable(sandbox_factory):
    for name in ("bwrap", "docker"):
        sb = sandbox_factory(name)
        small = get_sandbox(
            name,
            **{**TEST_LIMITS, "memory_mb": 96},
            **({"pool_size": 1} if name == "docker" else {}),
        )
        try:
            prog = "x = bytearray(150 * 2**20)\nprint('ok')"
            assert sb.run(prog).status is ExecStatus.OK
            assert small.run(prog).status is ExecStatus.MEMORY
        finally:
            small.close()


# ------------------------------------------------------------------- selection & infra errors
def test_get_sandbox_names_and_limits():
    with pytest.raises(ValueError, match="valid names"):
        get_sandbox("chroot")
    with pytest.raises(TypeError, match="valid limits"):
        get_sandbox("subprocess", memory=5)
    with get_sandbox("subprocess", timeout=3, memory_mb=128) as sb:
        assert sb.name == "subprocess" and sb.limits.timeout == 3 and sb.limits.memory_mb == 128
        assert sb.isolating is False


def test_limits_validation():
    with pytest.raises(ValueError, match="memory_mb"):
        SandboxLimits(memory_mb=0)
    with pytest.raises(TypeError, match="timeout"):
        SandboxLimits(timeout="5")
    assert SandboxLimits().cpu_seconds >= SandboxLimits().timeout


def test_run_argument_errors_raise():
    sb = get_sandbox("subprocess")
    with pytest.raises(ValueError, match="relative path"):
        sb.run("pass", files={"../x": "1"})
    with pytest.raises(ValueError, match="reserved"):
        sb.run("pass", files={"main.py": "1"})
    with pytest.raises(ValueError, match="timeout"):
        sb.run("pass", timeout=0)
    with pytest.raises(TypeError, match="program"):
        sb.run(b"pass")


def test_auto_selection_prefers_docker_then_bwrap(sandbox_factory):
    usable = available_backends()
    assert usable[-1] == "subprocess" and "subprocess" not in AUTO_ORDER
    sb = get_sandbox()
    try:
        assert sb.name == next(n for n in AUTO_ORDER if n in usable)
    finally:
        sb.close()


def test_auto_selection_never_falls_back_to_subprocess(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(bwrap_module, "_probe_ok", False)
    assert available_backends() == ["subprocess"]
    with pytest.raises(RuntimeError, match="get_sandbox\\('subprocess'\\)"):
        get_sandbox()


def test_missing_daemon_is_an_infra_error(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with get_sandbox("docker") as sb:
        r = sb.run("print(1)")
    assert r.status is ExecStatus.INFRA_ERROR and "scripts/services.sh start" in r.stderr


def test_missing_image_is_an_infra_error(docker_service):
    if docker_service is not None:
        pytest.skip(f"docker not usable: {docker_service}")
    with DockerSandbox(image="marft-sandbox:does-not-exist", pool_size=1) as sb:
        r = sb.run("print(1)")
    assert r.status is ExecStatus.INFRA_ERROR and "image" in r.stderr


def test_missing_bwrap_is_an_infra_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    r = get_sandbox("bwrap").run("print(1)")
    assert r.status is ExecStatus.INFRA_ERROR and "bubblewrap is not installed" in r.stderr


def test_docker_pool_reuses_clean_containers():
    with get_sandbox("docker", **TEST_LIMITS) as sb:
        if sb.run("pass").status is ExecStatus.INFRA_ERROR:
            pytest.skip("docker not usable")
        seen: set[str] = set()
        lock = threading.Lock()

        def one(_):
            r = sb.run("import socket\nprint(socket.gethostname())")
            with lock:
                seen.add(r.stdout)

        with ThreadPoolExecutor(sb.pool_size) as ex:
            list(ex.map(one, range(4 * sb.pool_size)))
        assert 1 <= len(seen) <= sb.pool_size  # clean runs never cost a new container


def test_docker_recovers_when_a_container_dies_mid_run(docker_service):
    if docker_service is not None:
        pytest.skip(f"docker not usable: {docker_service}")
    import docker

    with get_sandbox("docker", pool_size=1, **TEST_LIMITS) as sb:
        cid = sb.run("import socket\nprint(socket.gethostname())").stdout.strip()
        client = docker.from_env()
        killer = threading.Timer(1.0, lambda: client.containers.get(cid).kill())
        killer.start()
        try:
            r = sb.run("import time\ntime.sleep(30)", timeout=20)
        finally:
            killer.join()
            client.close()
        assert r.status is ExecStatus.INFRA_ERROR and "did not report" in r.stderr
        after = sb.run("import socket\nprint(socket.gethostname())")
        assert after.status is ExecStatus.OK and after.stdout.strip() != cid


def test_missing_backend_fails_only_when_sandboxes_are_required(monkeypatch):
    from tests.code.conftest import _unusable

    monkeypatch.setenv("MARFT_REQUIRE_SANDBOXES", "1")
    with pytest.raises(pytest.fail.Exception, match="MARFT_REQUIRE_SANDBOXES"):
        _unusable("bwrap", "not installed")
    monkeypatch.delenv("MARFT_REQUIRE_SANDBOXES")
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        _unusable("bwrap", "not installed")


@pytest.mark.parametrize("warm", [True, False])
def test_cpu_time_backstop_follows_the_run_timeout(sandbox, warm):
    """RLIMIT_CPU is sized for the run's own time limit, not only the sandbox's default: a
    call-based check runs all its tests in one execution whose limit is the per-test limit
    times the number of tests, and must not be killed by a CPU backstop sized for one test."""
    if sandbox.name == "subprocess" and not warm:
        pytest.skip("subprocess has no warm path")
    from marft_envs.code.sandbox import get_sandbox
    from tests.code.conftest import TEST_LIMITS

    kwargs = {} if sandbox.name == "subprocess" else {"warm": warm}
    with get_sandbox(sandbox.name, **{**TEST_LIMITS, "timeout": 2.0}, **kwargs) as sb:
        prog = "import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU)[0])\n"
        r = sb.run(prog, timeout=40)
        assert r.status.value == "ok", r
        assert int(r.stdout) >= 40, r.stdout
        assert int(sb.run(prog).stdout) >= 2  # the default run keeps its own backstop
