"""Every fenced ``bash`` and ``python`` block of README.md and docs/*.md runs (docs/docs_tests.md).

Pages are found by glob, so a new page is covered without editing this file. A block preceded by
``<!-- docs-test: skip KIND (reason) -->`` (KIND: gpu, network, service, slow) is listed, not run.
Blocks run in a fresh temporary directory with this checkout first on ``PYTHONPATH``; bash blocks
see ``python``, ``marft-envs`` and ``marft-leaderboard`` as this interpreter and this checkout, and
every ``python -m baselines.<method|eval>`` command gets :data:`SMALL` appended (later
``key=value`` wins), so documented commands run unedited at tiny settings.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SKIP_KINDS = ("gpu", "network", "service", "slow")
MARKER = re.compile(r"<!--\s*docs-test:\s*skip\s+(\w+)\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")
#: appended to every `python -m baselines.{marft,marft_shared,ippo,eval}` of a bash block
SMALL = (
    "model.max_new_tokens=8 env.num_envs=2 train.episodes_per_iteration=2 "
    "env.eval_episodes=2 train.log=[jsonl]"
)
#: (page, sha256 prefix of the block) -> why it cannot run yet. Keyed by the block's content: once
#: the block changes, it is tested again. docs/math_verifier.md is being rewritten on the
#: math-verifier branch, and this block's `verify_many([(response, reference), ...])` is a sketch.
PENDING: dict[tuple[str, str], str] = {}
#: names a Python snippet may use as placeholders for the reader's own code
PYTHON_PRELUDE = 'def my_llm(prompt):\n    return "\\\\boxed{0}"\n\n'
BASH_PRELUDE = f"""set -euo pipefail
PY={sys.executable!s}
python() {{
    case "${{1:-}} ${{2:-}}" in
        "-m baselines.marft"|"-m baselines.marft_shared"|"-m baselines.ippo"|"-m baselines.eval")
            "$PY" "$@" {SMALL} ;;
        *) "$PY" "$@" ;;
    esac
}}
marft-envs() {{ "$PY" -m marft_envs.cli "$@"; }}
marft-leaderboard() {{ "$PY" -m leaderboard.cli "$@"; }}
"""


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    lang: str
    code: str
    skip: tuple[str, str] | None  # (kind, reason)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def snippets(page: Path) -> list[Snippet]:
    """The bash and python fences of ``page``, with the skip marker that precedes each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i, marker = [], 0, None
    while i < len(lines):
        m = MARKER.search(lines[i])
        if m:
            marker = (m.group(1), m.group(2))
        fence = FENCE.match(lines[i])
        if fence:
            start, body = i, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            if fence.group(1) in ("bash", "python"):
                found.append(
                    Snippet(
                        str(page.relative_to(REPO) if page.is_relative_to(REPO) else page),
                        start + 1,
                        fence.group(1),
                        "\n".join(body) + "\n",
                        marker,
                    )
                )
            marker = None
        elif lines[i].strip() and not m:
            marker = None  # a marker applies to the next fence only, across blank lines
        i += 1
    return found


ALL = [s for page in PAGES for s in snippets(page)]


def test_markers_name_a_known_kind_and_a_reason():
    bad = [s.id for s in ALL if s.skip and (s.skip[0] not in SKIP_KINDS or not s.skip[1])]
    assert not bad, f"skip markers need a kind in {SKIP_KINDS} and a reason: {bad}"


def test_a_marker_applies_to_the_next_fence_only(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- docs-test: skip gpu (big model) -->\n\n```bash\ntrain\n```\n"
        "<!-- docs-test: skip network (pip) -->\nSome prose.\n```python\nx = 1\n```\n"
        "```json\n{}\n```\n```python\ny = 2\n```\n"
    )
    found = snippets(page)
    assert [(s.lang, s.line, s.skip) for s in found] == [
        ("bash", 3, ("gpu", "(big model)")),
        ("python", 8, None),  # prose between the marker and the fence: the marker is dropped
        ("python", 14, None),  # json fences are not collected
    ]
    assert found[2].code == "y = 2\n"


def test_list_the_skipped_snippets(capsys):
    skipped = [s for s in ALL if s.skip]
    with capsys.disabled():
        print(
            f"\ndocs snippets: {len(ALL)} found, {len(ALL) - len(skipped)} run, "
            f"{len(skipped)} skipped"
        )
        for s in skipped:
            print(f"  skipped {s.id} [{s.skip[0]}] {s.skip[1]}")
    assert ALL


@pytest.mark.parametrize(
    "snippet", [s for s in ALL if not s.skip], ids=lambda s: f"{s.id}-{s.lang}"
)
def test_snippet_runs(snippet: Snippet, tmp_path: Path) -> None:
    pending = PENDING.get((snippet.page, hashlib.sha256(snippet.code.encode()).hexdigest()[:16]))
    if pending:
        pytest.xfail(pending)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "MARFT_DATA_DIR": os.environ.get("MARFT_DATA_DIR", str(REPO.parent / "shared" / "data")),
    }
    if snippet.lang == "python":
        script = tmp_path / "snippet.py"
        script.write_text(PYTHON_PRELUDE + snippet.code)
        cmd = [sys.executable, str(script)]
    else:
        script = tmp_path / "snippet.sh"
        script.write_text(BASH_PRELUDE + snippet.code)
        cmd = ["bash", str(script)]
    done = subprocess.run(
        cmd,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, (
        f"{snippet.id} failed (exit {done.returncode}):\n{snippet.code}\n"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )
