#!/usr/bin/env bash
# Host-mode local AWS stack for leasehold: ONE moto server on 127.0.0.1 that
# serves both DynamoDB and SQS, installed into the git-ignored .stack/.
#
#   scripts/stack.sh install   venv + pinned moto (localstack/requirements.txt); no-op when current
#   scripts/stack.sh up        install, start moto if it is not already healthy, create resources
#   scripts/stack.sh down      stop the moto this checkout started
#   scripts/stack.sh status    say what is installed and running (exit 3 when not running)
#   scripts/stack.sh env       print the export lines that point the AWS SDKs at the stack
#
# Environment: LEASEHOLD_STACK_PORT (default 4566), LEASEHOLD_STACK_WAIT
# (seconds to wait for readiness, default 60).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK_DIR="$ROOT/.stack"
VENV="$STACK_DIR/venv"
REQUIREMENTS="$ROOT/localstack/requirements.txt"
RESOURCE_SCRIPT="$ROOT/localstack/init/ready.d/10-create-resources.py"
PIDFILE="$STACK_DIR/moto.pid"
LOG="$STACK_DIR/moto.log"

HOST=127.0.0.1
PORT="${LEASEHOLD_STACK_PORT:-4566}"
WAIT_SECONDS="${LEASEHOLD_STACK_WAIT:-60}"
ENDPOINT="http://$HOST:$PORT"

say() { printf 'stack: %s\n' "$*"; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

[[ "$PORT" =~ ^[0-9]+$ ]] || die "LEASEHOLD_STACK_PORT must be a port number, got '$PORT'"
[[ "$WAIT_SECONDS" =~ ^[0-9]+$ ]] || die "LEASEHOLD_STACK_WAIT must be a number of seconds"

cmd_install() {
	venv_install "$VENV" "$REQUIREMENTS" bin/moto_server "moto"
}

# find_ours succeeds when the moto this checkout started is still alive, and
# sets OURS_PID and OURS_PORT from the pid file ("PID PORT").
OURS_PID='' OURS_PORT=''
find_ours() {
	OURS_PID='' OURS_PORT=''
	[[ -f "$PIDFILE" ]] || return 1
	local pid port
	read -r pid port <"$PIDFILE" || true
	[[ "$pid" =~ ^[0-9]+$ && "$port" =~ ^[0-9]+$ ]] || return 1
	# Guard against a recycled pid: the process must be our venv's moto_server.
	[[ -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$VENV/bin/moto_server" || return 1
	OURS_PID=$pid OURS_PORT=$port
}

# True when something answers HTTP on the endpoint like moto does.
responds() {
	"$VENV/bin/python" - "$ENDPOINT/moto-api/" <<-'EOF' 2>/dev/null
		import sys, urllib.request
		with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
		    sys.exit(0 if r.status == 200 else 1)
	EOF
}

# True when anything at all accepts TCP connections on the port.
port_taken() {
	(exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null
}

stop_pid() {
	local pid=$1 i
	kill "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.2
	done
	say "moto (pid $pid) ignored SIGTERM for 10s; sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
}

cmd_up() {
	cmd_install
	if find_ours; then
		if [[ "$OURS_PORT" != "$PORT" ]]; then
			port_taken && die "port $PORT on $HOST is in use by another process; moto (pid $OURS_PID) keeps serving port $OURS_PORT"
			say "moto (pid $OURS_PID) serves port $OURS_PORT, not $PORT; restarting it"
			stop_pid "$OURS_PID"
		elif responds; then
			say "up at $ENDPOINT (pid $OURS_PID)"
			return
		else
			say "moto (pid $OURS_PID) is not answering; restarting it"
			stop_pid "$OURS_PID"
		fi
	fi
	rm -f "$PIDFILE"

	if port_taken; then
		die "port $PORT on $HOST is in use by a process this checkout did not start; stop it or set LEASEHOLD_STACK_PORT"
	fi

	say "starting moto on $ENDPOINT (log: .stack/moto.log)"
	printf '\n==== %s start on %s\n' "$(date -u +%FT%TZ)" "$ENDPOINT" >>"$LOG"
	# Started through a tiny exec wrapper that closes inherited descriptors
	# above stderr (make's jobserver pipe, a CI runner's pipes), so the
	# long-lived server holds nothing of its caller open.
	nohup "$VENV/bin/python" -c \
		'import os, sys; os.closerange(3, os.sysconf("SC_OPEN_MAX")); os.execv(sys.argv[1], sys.argv[1:])' \
		"$VENV/bin/moto_server" -H "$HOST" -p "$PORT" >>"$LOG" 2>&1 </dev/null &
	local pid=$! deadline=$((SECONDS + WAIT_SECONDS))
	printf '%s %s\n' "$pid" "$PORT" >"$PIDFILE"

	until responds; do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$PIDFILE"
			tail -n 20 "$LOG" >&2 || true
			die "moto exited during start-up (log above, full log in .stack/moto.log)"
		fi
		if ((SECONDS >= deadline)); then
			stop_pid "$pid"
			rm -f "$PIDFILE"
			tail -n 20 "$LOG" >&2 || true
			die "moto not ready on $ENDPOINT after ${WAIT_SECONDS}s"
		fi
		sleep 0.2
	done
	say "moto ready (pid $pid)"

	(
		eval "$(cmd_env)"
		"$VENV/bin/python" "$RESOURCE_SCRIPT"
	) | sed 's/^/stack: /'
}

cmd_down() {
	if find_ours; then
		stop_pid "$OURS_PID"
		say "stopped moto (pid $OURS_PID, port $OURS_PORT)"
	else
		say "not running"
	fi
	rm -f "$PIDFILE"
}

cmd_status() {
	if [[ -f "$VENV/.leasehold-installed" ]]; then say "installed: $VENV"; else say "not installed (run: make stack-install)"; fi
	if find_ours; then
		if [[ "$OURS_PORT" != "$PORT" ]]; then
			port_taken && die "port $PORT on $HOST is in use by another process; moto (pid $OURS_PID) keeps serving port $OURS_PORT"
			say "running on port $OURS_PORT (pid $OURS_PID), not on $PORT (LEASEHOLD_STACK_PORT)"
		elif responds; then
			say "running: $ENDPOINT (pid $OURS_PID, log .stack/moto.log)"
			return 0
		else
			say "moto (pid $OURS_PID) is alive but not answering on $ENDPOINT"
		fi
	elif port_taken; then
		say "not running; port $PORT is held by another process"
	else
		say "not running (run: make stack-up)"
	fi
	return 3
}

cmd_env() {
	cat <<-EOF
		export AWS_ENDPOINT_URL_DYNAMODB=$ENDPOINT
		export AWS_ENDPOINT_URL_SQS=$ENDPOINT
		export AWS_REGION=us-east-1
		export AWS_ACCESS_KEY_ID=test
		export AWS_SECRET_ACCESS_KEY=test
	EOF
}

case "${1:-}" in
install) cmd_install ;;
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
*)
	sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac
