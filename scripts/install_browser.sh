#!/usr/bin/env bash
# Install the system Chromium and chromedriver the leaderboard browser tests drive (idempotent).
# The tests use Playwright's Python API with executable_path=/usr/bin/chromium; we never run
# `playwright install` (no browser downloads from outside Debian's archive).
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver
echo "installed: $(/usr/bin/chromium --version)"
