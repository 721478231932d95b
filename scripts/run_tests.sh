#!/usr/bin/env bash
# Start the services the tests need, run pytest, and stop what was started, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f scripts/services.sh ]; then
  bash scripts/services.sh start
  trap 'bash scripts/services.sh stop' EXIT
fi
python -m pytest -q "$@"
