"""Every fenced ``bash`` and ``python`` block of README.md and docs/*.md runs (docs/docs_tests.md).

Pages are found by glob, so a new page is covered without editing this file. A block preceded by
``<!-- docs-test: skip KIND (reason) -->`` (KIND: gpu, network, slow) is listed, not run; one
preceded by ``<!-- docs-test: needs NAME ... -->`` runs with what it needs (:data:`NEEDS`, or a
file of the page: a block preceded by ``<!-- docs-test: file NAME.py -->`` is that file, written
into the directory of each block of its page that needs ``NAME.py``, and is not run alone).
Blocks run in a fresh temporary directory with this checkout first on ``PYTHONPATH``; bash blocks
see ``python``, ``marft-envs`` and ``marft-leaderboard`` as this interpreter and this checkout,
documented servers run in the background until the block ends, and the long commands get small
settings appended (:data:`SMALL`, :data:`BENCH_SMALL`, :data:`PYTEST_SMALL`), so documented
commands run unedited.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from docs_services import answers, free_port, running, wait_until_answers
from markdown_it import MarkdownIt

from tests.services import docker_daemon, require_sandboxes

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SKIP_KINDS = ("gpu", "network", "slow")
#: what a block may need: the test provides it (docs/docs_tests.md)
NEEDS = {
    "checkout": "runs in the checkout's root, not a temporary directory (repository paths)",
    "copy": "runs in a copy of the checkout, first on PYTHONPATH (a block that writes into it)",
    "docker": "a Docker daemon and the sandbox image (scripts/services.sh)",
    "env-server": "`marft-envs serve math-3agent` running at the block's 127.0.0.1:8000",
    "bundle": "a result bundle of math-3agent at runs/marft-1/eval-math-3agent-v1/",
}
SKIP_MARKER = re.compile(r"<!--\s*docs-test:\s*skip\s+(\w+)\s*(.*?)\s*-->")
FILE_MARKER = re.compile(r"<!--\s*docs-test:\s*file\s+(\S+?\.py)\s*-->")
NEEDS_MARKER = re.compile(r"<!--\s*docs-test:\s*needs\s+(.*?)\s*-->")
MARKDOWN = MarkdownIt("commonmark")
#: how a command or a Python snippet starts (for indented blocks, which never run)
COMMAND = re.compile(
    r"(python3?|pip|bash|make|marft-envs|marft-leaderboard|ray|docker)\s|(from \S+ )?import \w"
)
#: the documented servers' address; each block gets a free loopback port in its place
DOCUMENTED_HOST = "127.0.0.1:8000"
HELPER = Path(__file__).with_name("docs_services.py")
#: seconds a block may run: under pytest-timeout's 300 s (pyproject.toml), so a block that runs
#: too long fails with its own output instead of pytest's bare timeout
BLOCK_TIMEOUT_S = 280
BUNDLE_DIR = Path("runs/marft-1/eval-math-3agent-v1")
#: appended to every `python -m baselines.{marft,marft_shared,ippo,eval}` of a bash block
SMALL = (
    "model.max_new_tokens=8 env.num_envs=2 train.episodes_per_iteration=2 "
    "env.eval_episodes=2 train.log=[jsonl]"
)
#: appended to a documented benchmark (`python benchmarks/NAME.py`): its own size flags, small
BENCH_SMALL = {
    "benchmarks/bench_sandbox.py": "--runs 4",
    "benchmarks/bench_leaderboard_load.py": "--concurrent 8 --sequential 2 --episodes 1",
}
#: appended to a documented `python -m pytest ...`: the same CI run runs those tests, so here the
#: command is checked to select them (paths, options, collection), not run a second time
PYTEST_SMALL = "--collect-only"
#: names a Python snippet may use as placeholders for the reader's own code
PYTHON_PRELUDE = 'def my_llm(prompt):\n    return "\\\\boxed{0}"\n\n'
_BENCH_CASES = "".join(f'        "{k} "*) "$PY" "$@" {v} ;;\n' for k, v in BENCH_SMALL.items())
BASH_PRELUDE = f"""set -euo pipefail
PY={sys.executable!s}
python() {{
    case "${{1:-}} ${{2:-}}" in
        "-m baselines.marft"|"-m baselines.marft_shared"|"-m baselines.ippo"|"-m baselines.eval")
            "$PY" "$@" {SMALL} ;;
        "-m pytest") "$PY" "$@" {PYTEST_SMALL} ;;
{_BENCH_CASES}        *) "$PY" "$@" ;;
    esac
}}
# A documented server runs in the background until the block ends: the block's first server on
# $DOCS_PORT (which replaced {DOCUMENTED_HOST}'s port), any other on a free port.
DOCS_SERVERS=()
trap 'for p in "${{DOCS_SERVERS[@]}}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
docs_serve() {{
    local port log
    if [ ${{#DOCS_SERVERS[@]}} -eq 0 ]; then port=$DOCS_PORT; else port=$("$PY" {HELPER} port); fi
    log="$DOCS_TMP/server-${{#DOCS_SERVERS[@]}}.log"
    "$@" --port "$port" >"$log" 2>&1 &
    DOCS_SERVERS+=($!)
    "$PY" {HELPER} wait "http://127.0.0.1:$port/" $! "$log"
}}
marft-envs() {{
    if [ "${{1:-}}" = serve ]; then docs_serve "$PY" -m marft_envs.cli "$@"
    else "$PY" -m marft_envs.cli "$@"; fi
}}
marft-leaderboard() {{
    if [ "${{1:-}}" = serve ]; then docs_serve "$PY" -m leaderboard.cli "$@"
    else "$PY" -m leaderboard.cli "$@"; fi
}}
"""


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    lang: str
    code: str
    skip: tuple[str, str] | None  # (kind, reason)
    needs: tuple[str, ...] = ()
    file: str | None = None  # the block is this file of the page (``docs-test: file NAME.py``)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def snippets(page: Path) -> list[Snippet]:
    """The bash and python fences of ``page`` (CommonMark, so fences inside list items count),
    with the markers that precede each: a marker applies to the next fence only, and any block
    between them (a paragraph, a heading, a table) drops it."""
    page_id = str(page.relative_to(REPO) if page.is_relative_to(REPO) else page)
    found: list[Snippet] = []
    skip: tuple[str, str] | None = None
    needs: tuple[str, ...] = ()
    file: str | None = None
    for token in MARKDOWN.parse(page.read_text(encoding="utf-8")):
        html = token.type == "html_block"
        skip_m = SKIP_MARKER.search(token.content) if html else None
        needs_m = NEEDS_MARKER.search(token.content) if html else None
        file_m = FILE_MARKER.search(token.content) if html else None
        if skip_m or needs_m or file_m:
            skip = (skip_m.group(1), skip_m.group(2)) if skip_m else skip
            needs = tuple(re.split(r"[\s,]+", needs_m.group(1))) if needs_m else needs
            file = file_m.group(1) if file_m else file
            continue
        if token.type == "fence" and token.map:
            lang = token.info.split()[0] if token.info.strip() else ""
            if lang in ("bash", "python"):
                line = token.map[0] + 1
                found.append(Snippet(page_id, line, lang, token.content, skip, needs, file))
        if token.nesting != -1:  # closing a list item or a section keeps the markers
            skip, needs, file = None, (), None
    return found


def indented_commands(page: Path) -> list[str]:
    """``page:line`` of each indented code block that starts like a command or Python code:
    indented blocks never run, so those belong in a tagged fence."""
    return [
        f"{page.name}:{token.map[0] + 1}"
        for token in MARKDOWN.parse(page.read_text(encoding="utf-8"))
        if token.type == "code_block" and token.map and COMMAND.match(token.content.lstrip())
    ]


ALL = [s for page in PAGES for s in snippets(page)]


def page_files(snippet: Snippet) -> dict[str, Snippet]:
    """The files (``docs-test: file NAME.py`` blocks) of ``snippet``'s page, by name."""
    return {s.file: s for s in ALL if s.page == snippet.page and s.file}


def test_markers_name_a_known_kind_and_a_reason():
    bad = [s.id for s in ALL if s.skip and (s.skip[0] not in SKIP_KINDS or not s.skip[1])]
    assert not bad, f"skip markers need a kind in {SKIP_KINDS} and a reason: {bad}"
    unknown = [(s.id, n) for s in ALL for n in s.needs if n not in {*NEEDS, *page_files(s)}]
    assert not unknown, f"needs name one of {sorted(NEEDS)} or a file of the page: {unknown}"
    unused = [s.id for s in ALL if s.file and not any(s.file in o.needs for o in ALL)]
    assert not unused, f"file blocks that no block of their page needs (so never run): {unused}"


def test_commands_are_in_fences_not_indented_blocks():
    found = [where for page in PAGES for where in indented_commands(page)]
    assert not found, f"commands in indented blocks never run: put them in a tagged fence: {found}"


def test_a_marker_applies_to_the_next_fence_only(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- docs-test: skip gpu (big model) -->\n\n```bash\ntrain\n```\n"
        "<!-- docs-test: skip network (pip) -->\nSome prose.\n```python\nx = 1\n```\n"
        "```json\n{}\n```\n```python\ny = 2\n```\n"
        "<!-- docs-test: needs docker, checkout -->\n```bash\nls\n```\n```bash\npwd\n```\n"
        "- an item:\n\n  <!-- docs-test: skip gpu (two GPUs) -->\n  ```python\n  z = 3\n  ```\n"
        "\nText.\n\n    python -m indented\n"
    )
    found = snippets(page)
    assert [(s.lang, s.line, s.skip, s.needs) for s in found] == [
        ("bash", 3, ("gpu", "(big model)"), ()),
        ("python", 8, None, ()),  # prose between the marker and the fence: the marker is dropped
        ("python", 14, None, ()),  # json fences are not collected
        ("bash", 18, None, ("docker", "checkout")),
        ("bash", 21, None, ()),
        ("python", 27, ("gpu", "(two GPUs)"), ()),  # a fence inside a list item
    ]
    assert found[2].code == "y = 2\n"
    assert found[5].code == "z = 3\n"
    assert indented_commands(page) == ["page.md:33"]


def test_list_the_skipped_snippets(capsys):
    skipped = [(s, s.skip) for s in ALL if s.skip]
    kinds = Counter(kind for _, (kind, _) in skipped)
    needs = Counter(n for s in ALL if not s.skip for n in s.needs)
    with capsys.disabled():
        print(
            f"\ndocs snippets: {len(ALL)} found, {len(ALL) - len(skipped)} run, "
            f"{len(skipped)} skipped ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}); "
            f"run with: {', '.join(f'{k} {n}' for k, n in sorted(needs.items()))}"
        )
        for s, (kind, reason) in skipped:
            print(f"  skipped {s.id} [{kind}] {reason}")
    assert ALL


@pytest.fixture(scope="session")
def docker():
    """The Docker daemon and sandbox image, for blocks that need docker."""
    with docker_daemon() as reason:
        yield reason


@pytest.fixture(scope="session")
def env_server(tmp_path_factory):
    """The documented `marft-envs serve math-3agent --max-sessions 64`, on a free port."""
    port, tmp = free_port(), tmp_path_factory.mktemp("env-server")
    log = tmp / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "marft_envs.cli", "serve", "math-3agent"),
                *("--port", str(port), "--max-sessions", "64"),
            ],
            cwd=tmp,
            env=block_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until_answers(f"http://127.0.0.1:{port}/health", proc.pid, log)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def block_env(root: Path = REPO, **extra: str) -> dict[str, str]:
    """The environment of a block: ``root`` (this checkout) first on PYTHONPATH, the benchmark
    data, this interpreter as scripts/services.sh's PYTHON (a worktree has no .venv of its own),
    and one torch/OpenMP thread unless OMP_NUM_THREADS is set: the blocks' tiny models are too
    small to gain from threads, and on a loaded machine the spinning threads made a smoke run
    1.5-2x slower (docs/docs_tests.md)."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        "MARFT_DATA_DIR": os.environ.get("MARFT_DATA_DIR", str(REPO.parent / "shared" / "data")),
        **extra,
    }


def copy_checkout(dest: Path) -> Path:
    """Copy this checkout's files (tracked, and untracked ones git does not ignore) to ``dest``."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():  # a file deleted but not yet staged is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


def write_bundle_at(root: Path) -> None:
    """A scripted math-3agent result bundle at ``root / BUNDLE_DIR`` (what a run's eval writes)."""
    from leaderboard.schema import write_bundle
    from tests.leaderboard.lb_helpers import play_bundle

    write_bundle(play_bundle("math-3agent", n_tasks=2), root / BUNDLE_DIR)


def run_to_the_end(
    cmd: list[str], cwd: Path, env: dict[str, str], timeout_s: float = BLOCK_TIMEOUT_S
) -> tuple[int, str, str]:
    """Run ``cmd`` in its own process group; whatever it left running is stopped afterwards,
    also when it fails or times out (a background server, a Ray cluster)."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\n[docs test: killed after {timeout_s:g} s]"
    finally:
        stop_group(proc.pid)
    return proc.returncode, out, err


def stop_group(pgid: int, grace_s: float = 10.0) -> None:
    """SIGTERM every process left in group ``pgid``, then SIGKILL what outlives ``grace_s``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


SERVER = """import sys, http.server
print("serving", flush=True)
if "--fail" in sys.argv:
    sys.exit("boom: cannot start")
port = int(sys.argv[sys.argv.index("--port") + 1])
http.server.HTTPServer(("127.0.0.1", port), http.server.BaseHTTPRequestHandler).serve_forever()
"""


def run_block(tmp_path: Path, code: str, port: int) -> tuple[int, str, str]:
    script = tmp_path / "block.sh"
    script.write_text(BASH_PRELUDE + code)
    env = block_env(DOCS_PORT=str(port), DOCS_TMP=str(tmp_path))
    return run_to_the_end(["bash", str(script)], tmp_path, env)


def test_a_documented_server_is_stopped_when_its_block_fails(tmp_path):
    (tmp_path / "server.py").write_text(SERVER)
    port = free_port()
    # under set -e, server.pid is written only once docs_serve saw the server answer
    code = 'docs_serve "$PY" server.py\necho "$!" > server.pid\nfalse\n'
    returncode, _, err = run_block(tmp_path, code, port)
    assert returncode == 1, err
    assert not running(int((tmp_path / "server.pid").read_text()))
    assert not answers(f"http://127.0.0.1:{port}/")


def test_a_block_past_its_time_limit_fails_with_its_output_and_leaves_nothing(tmp_path):
    script = tmp_path / "slow.sh"
    script.write_text('echo started\nsleep 120 &\necho "$!" > child.pid\nsleep 120\n')
    returncode, out, err = run_to_the_end(["bash", str(script)], tmp_path, block_env(), 3)
    assert returncode != 0
    assert "started" in out and "killed after 3 s" in err
    assert not running(int((tmp_path / "child.pid").read_text()))


def test_a_server_that_exits_fails_its_block_with_its_log(tmp_path):
    (tmp_path / "server.py").write_text(SERVER)
    returncode, out, err = run_block(tmp_path, 'docs_serve "$PY" server.py --fail\necho after\n', 1)
    assert returncode == 1
    assert "after" not in out
    assert "exited before" in err and "boom: cannot start" in err


@pytest.mark.parametrize(
    "snippet", [s for s in ALL if not s.skip], ids=lambda s: f"{s.id}-{s.lang}"
)
def test_snippet_runs(snippet: Snippet, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if snippet.file:  # a file of the page: the blocks that need it run it
        compile(snippet.code, snippet.file, "exec")
        return
    if "docker" in snippet.needs:
        reason = request.getfixturevalue("docker")
        if reason is not None:
            message = f"{snippet.id} needs docker, which is not usable here: {reason}"
            if require_sandboxes():
                pytest.fail(f"{message} (MARFT_REQUIRE_SANDBOXES is set)", pytrace=False)
            pytest.skip(message)
    port = request.getfixturevalue("env_server") if "env-server" in snippet.needs else free_port()
    root = copy_checkout(tmp_path / "checkout") if "copy" in snippet.needs else REPO
    cwd = root if {"checkout", "copy"} & set(snippet.needs) else tmp_path
    if "bundle" in snippet.needs:
        write_bundle_at(cwd)
    for name, block in page_files(snippet).items():
        if name in snippet.needs:
            assert cwd != REPO, f"{snippet.id}: a page's file is not written into the checkout"
            (cwd / name).write_text(block.code, encoding="utf-8")
    code = snippet.code.replace(DOCUMENTED_HOST, f"127.0.0.1:{port}")
    env = block_env(
        root,
        DOCS_PORT=str(port),
        DOCS_TMP=str(tmp_path),
        MARFT_LEADERBOARD_URL=f"http://127.0.0.1:{port}",
    )
    if snippet.lang == "python":
        script = tmp_path / "snippet.py"
        script.write_text(PYTHON_PRELUDE + code)
        cmd = [sys.executable, str(script)]
    else:
        script = tmp_path / "snippet.sh"
        script.write_text(BASH_PRELUDE + code)
        cmd = ["bash", str(script)]
    returncode, out, err = run_to_the_end(cmd, cwd, env)
    assert returncode == 0, (
        f"{snippet.id} failed (exit {returncode}):\n{snippet.code}\n"
        f"--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}"
    )
