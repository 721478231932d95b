#!/usr/bin/env bash
# Services the test suite needs: a Docker daemon and the sandbox image.
#
#   scripts/services.sh start   start dockerd (--bridge=none --iptables=false) if no daemon answers,
#                               wait until it answers, build the sandbox image if it is missing
#   scripts/services.sh stop    stop the dockerd that `start` started for the same caller (the same
#                               parent process, e.g. one test run); never a daemon it did not start
#   scripts/services.sh stop --force   stop the dockerd this script started, whoever asked for it
#   scripts/services.sh status  say whether a daemon answers and the image exists
#
# Environment: MARFT_DOCKERD_LOG (default /tmp/marft-dockerd.log), MARFT_DOCKERD_PIDFILE
# (default /tmp/marft-dockerd.pid: "<dockerd pid> <caller pid>", written only for a daemon
# started here), PYTHON (default: the checkout's .venv/bin/python if there is one, else python3).
set -euo pipefail

cd "$(dirname "$0")/.."
LOG="${MARFT_DOCKERD_LOG:-/tmp/marft-dockerd.log}"
PIDFILE="${MARFT_DOCKERD_PIDFILE:-/tmp/marft-dockerd.pid}"
# the project's interpreter, so the script works outside an activated virtualenv
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

daemon_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
daemon_pid() { awk '{print $1}' "$PIDFILE"; }
owner_pid() { awk '{print $2}' "$PIDFILE"; }

start() {
    if daemon_answers; then
        echo "services: docker daemon already answers"
    else
        command -v dockerd >/dev/null 2>&1 || { echo "services: dockerd not found; run scripts/install_system_deps.sh" >&2; exit 1; }
        SUDO=""
        if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
        echo "services: starting dockerd (log: $LOG)"
        # No bridge and no iptables: sandbox containers use network "none" and the
        # host may not allow iptables at all.
        $SUDO sh -c "nohup dockerd --bridge=none --iptables=false --ip6tables=false >'$LOG' 2>&1 & echo \$! $PPID >'$PIDFILE'"
        for _ in $(seq 1 60); do
            daemon_answers && break
            if ! kill -0 "$(daemon_pid)" 2>/dev/null; then
                echo "services: dockerd exited; last log lines:" >&2; tail -n 20 "$LOG" >&2; rm -f "$PIDFILE"; exit 1
            fi
            sleep 0.5
        done
        daemon_answers || { echo "services: dockerd did not answer within 30 s; see $LOG" >&2; exit 1; }
        echo "services: dockerd answers (pid $(daemon_pid))"
    fi
    "$PYTHON" -m marft_envs.code.sandbox.image build
}

stop() {
    if [ ! -f "$PIDFILE" ]; then
        echo "services: no dockerd started by this script"
        return 0
    fi
    if [ "${1:-}" != "--force" ] && [ "$(owner_pid)" != "$PPID" ]; then
        echo "services: dockerd $(daemon_pid) was started for another caller; leaving it running (stop --force stops it)"
        return 0
    fi
    pid="$(daemon_pid)"
    if kill -0 "$pid" 2>/dev/null && grep -q dockerd "/proc/$pid/comm" 2>/dev/null; then
        echo "services: stopping dockerd (pid $pid)"
        kill "$pid"
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$PIDFILE"
}

status() {
    if daemon_answers; then echo "docker: answers"; else echo "docker: not answering"; fi
    if [ -f "$PIDFILE" ]; then echo "dockerd started by this script: pid $(daemon_pid) (for caller $(owner_pid))"; fi
    "$PYTHON" -m marft_envs.code.sandbox.image status || true
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
