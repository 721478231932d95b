#!/usr/bin/env bash
# Install the system packages the code sandboxes need: docker.io (dockerd + CLI) and bubblewrap.
# Idempotent: does nothing when both are present. Needs root (or sudo) for apt-get.
set -euo pipefail

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v prlimit >/dev/null 2>&1 || missing+=(util-linux)
# bwrap runs programs as uid 65534 when started as root, so it needs an interpreter that
# user can execute; a pyenv Python under /root is not one.
[ -x /usr/bin/python3 ] || [ -x /usr/local/bin/python3 ] || missing+=(python3)

if [ ${#missing[@]} -eq 0 ]; then
    echo "install_system_deps: docker.io, bubblewrap, prlimit and a system python3 already present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install_system_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
