#!/usr/bin/env bash
# The lint, format and type checks of the four packages (docs/contributing.md): the first one
# that finds something stops the run with its findings and the command that fixes them.
set -uo pipefail
cd "$(dirname "$0")/.."
# PYTHON, else the checkout's .venv (no activated virtualenv needed, as in services.sh), else python
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python; fi
PACKAGES=(marft_envs baselines tasks leaderboard)
# Not formatted yet (docs/contributing.md): checked for defects only, pyflakes and bugbear.
OTHERS=(tests benchmarks examples scripts)

fail() {
  echo >&2
  echo "check failed: $1" >&2
  echo "(docs/contributing.md#running-the-checks; MARFT_SKIP_CHECKS=1 skips them in run_tests.sh)" >&2
  exit 1
}

echo "== ruff check ${PACKAGES[*]}"
"$PY" -m ruff check "${PACKAGES[@]}" \
  || fail "ruff check found the problems above (\`ruff check --fix ${PACKAGES[*]}\` fixes those marked [*])"
echo "== ruff check --select F,B ${OTHERS[*]}"
"$PY" -m ruff check --select F,B --ignore B905 "${OTHERS[@]}" \
  || fail "ruff check (pyflakes, bugbear) found the problems above"
echo "== ruff format --check ${PACKAGES[*]}"
"$PY" -m ruff format --check "${PACKAGES[@]}" \
  || fail "the files above are not formatted: run \`ruff format ${PACKAGES[*]}\`"
echo "== mypy (incremental cache in .mypy_cache/)"
"$PY" -m mypy || fail "mypy found the type errors above"
