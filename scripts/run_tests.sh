#!/usr/bin/env bash
# Run the lint and type checks (scripts/check.sh, fail fast), start the services the tests need,
# run pytest, and stop what was started, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${MARFT_SKIP_CHECKS:-0}" != 1 ]; then
  bash scripts/check.sh
fi
if [ -f scripts/services.sh ]; then
  bash scripts/services.sh start
  trap 'bash scripts/services.sh stop' EXIT
fi
python -m pytest -q "$@"
