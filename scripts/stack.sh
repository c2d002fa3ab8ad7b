#!/usr/bin/env bash
# Host-mode local AWS stack for leasehold, installed into the git-ignored
# .stack/ and bound to 127.0.0.1:
#   SQS, S3   LocalStack (localstack-core 4.14.0, Python 3.13+)  port LEASEHOLD_STACK_PORT (4566)
#   DynamoDB  moto 5.2.5 behind a front that applies DynamoDB
#             requests one at a time (localstack/moto_dynamodb.py) port LEASEHOLD_STACK_DDB_PORT (4567)
#
#   scripts/stack.sh install   the venvs, pinned (tools/requirements.txt, localstack/requirements-*.txt); no-op when current
#   scripts/stack.sh up        install, start what is not already healthy, create the resources
#   scripts/stack.sh down      stop what this checkout started (SIGTERM, then SIGKILL after 10s)
#   scripts/stack.sh status    say what is installed and running (exit 3 when not running)
#   scripts/stack.sh env       print export lines: endpoints, region, credentials, table, queue URLs and payload bucket
#
# Environment: LEASEHOLD_STACK_PORT, LEASEHOLD_STACK_DDB_PORT (default: the
# SQS port + 1), LEASEHOLD_STACK_WAIT (seconds to wait for readiness, default
# 120), LEASEHOLD_PYTHON313 (the Python 3.13+ for LocalStack, found when
# unset), LEASEHOLD_STACK_SQS=moto (fallback without LocalStack: moto serves
# SQS too; warns).
set -euo pipefail

ROOT=$(cd -P "$(dirname "${BASH_SOURCE[0]}")" && cd .. && pwd) # the checkout the script lives in, through any symlink
STACK_DIR="$ROOT/.stack"
# One venv for moto and the template tools (scripts/template-tools.sh installs
# the same one), one for LocalStack, and only in the moto-only fallback one
# for the aws CLI, which LocalStack's venv otherwise provides.
PY_VENV="$STACK_DIR/py-venv"
LS_VENV="$STACK_DIR/localstack-venv"
AWSCLI_VENV="$STACK_DIR/awscli-venv"
PY_REQUIREMENTS="$ROOT/tools/requirements.txt"
LS_REQUIREMENTS="$ROOT/localstack/requirements-localstack.txt"
AWSCLI_REQUIREMENTS="$ROOT/localstack/requirements-awscli.txt"
MOTO_FRONT="$ROOT/localstack/moto_dynamodb.py"
RESOURCE_SCRIPT="$ROOT/localstack/init/ready.d/10-create-resources.py"
RESOURCES_ENV="$STACK_DIR/resources.env"
STATE="$STACK_DIR/stack.state"
BIN="$STACK_DIR/bin"

HOST=127.0.0.1
SQS_PORT="${LEASEHOLD_STACK_PORT:-4566}"
WAIT_SECONDS="${LEASEHOLD_STACK_WAIT:-120}"
SQS_MODE="${LEASEHOLD_STACK_SQS:-localstack}"

say() { printf 'stack: %s\n' "$*" >&2; }
die() { printf 'stack: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

[[ "$SQS_PORT" =~ ^[0-9]+$ ]] || die "LEASEHOLD_STACK_PORT must be a port number, got '$SQS_PORT'"
DDB_PORT="${LEASEHOLD_STACK_DDB_PORT:-$((SQS_PORT + 1))}"
[[ "$DDB_PORT" =~ ^[0-9]+$ ]] || die "LEASEHOLD_STACK_DDB_PORT must be a port number, got '$DDB_PORT'"
[[ "$DDB_PORT" != "$SQS_PORT" ]] || die "LEASEHOLD_STACK_DDB_PORT must differ from LEASEHOLD_STACK_PORT"
[[ "$WAIT_SECONDS" =~ ^[0-9]+$ ]] || die "LEASEHOLD_STACK_WAIT must be a number of seconds"
case $SQS_MODE in
localstack | moto) ;;
*) die "LEASEHOLD_STACK_SQS must be localstack or moto, got '$SQS_MODE'" ;;
esac

warn_fallback() {
	[[ "$SQS_MODE" == moto ]] || return 0
	cat >&2 <<-'EOF'
		stack: ************************************************************************
		stack: WARNING: LEASEHOLD_STACK_SQS=moto: SQS is served by moto, NOT LocalStack.
		stack: moto's SQS differs from LocalStack's and AWS's (visibility, long polls,
		stack: redrive timing). Use it only where Python 3.13 cannot be installed.
		stack: ************************************************************************
	EOF
}

# ---- finding Python 3.13+ for LocalStack ----

# is_py313 PY succeeds when PY runs and is Python 3.13 or newer.
is_py313() {
	"$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 13) else 1)' >/dev/null 2>&1
}

# find_py313 prints a Python 3.13+ interpreter: LEASEHOLD_PYTHON313, then
# python3.13/3.14/3.15 on PATH, then pyenv's installed versions (whose shims
# on PATH refuse to run a version that is installed but not selected).
find_py313() {
	local c
	if [[ -n "${LEASEHOLD_PYTHON313:-}" ]]; then
		is_py313 "$LEASEHOLD_PYTHON313" || die "LEASEHOLD_PYTHON313=$LEASEHOLD_PYTHON313 is not a working Python 3.13+"
		printf '%s\n' "$LEASEHOLD_PYTHON313"
		return
	fi
	for c in python3.13 python3.14 python3.15 python3; do
		if command -v "$c" >/dev/null && is_py313 "$c"; then
			command -v "$c"
			return
		fi
	done
	for c in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[3-9]*/bin/python3 /usr/local/bin/python3.1[3-9] /usr/bin/python3.1[3-9]; do
		if [[ -x "$c" ]] && is_py313 "$c"; then
			printf '%s\n' "$c"
			return
		fi
	done
	cat >&2 <<-'EOF'
		stack: error: LocalStack (which serves SQS here) needs Python 3.13 or newer, and none was found
		stack:   (looked for LEASEHOLD_PYTHON313, python3.13/3.14/3.15 on PATH, and pyenv's versions).
		stack: Install one, for example:  pyenv install 3.13   or   apt-get install python3.13 python3.13-venv
		stack: then run this again (or set LEASEHOLD_PYTHON313=/path/to/python3.13).
		stack: Without it, LEASEHOLD_STACK_SQS=moto runs a moto-only stack (not LocalStack; not recommended).
	EOF
	exit 1
}

cmd_install() {
	local aws old
	# Before issue 19 moto and the template tools had a venv each; a
	# checkout that has them can delete them once no server runs from them.
	for old in venv tools-venv; do
		[[ -d "$STACK_DIR/$old" ]] && say "note: .stack/$old ($(du -sh "$STACK_DIR/$old" | cut -f1)) is no longer used (now .stack/py-venv); remove it once no stack started from it runs: rm -rf .stack/$old"
	done
	venv_install "$PY_VENV" "$PY_REQUIREMENTS" bin/moto_server "moto and the template tools" python3 "~590 MB, 1-2 minutes"
	if [[ "$SQS_MODE" == localstack ]]; then
		local py
		py=$(find_py313)
		venv_install "$LS_VENV" "$LS_REQUIREMENTS" bin/python3 "LocalStack and the aws CLI (Python $("$py" -c 'import platform; print(platform.python_version())'))" \
			"$py" "~500 MB, about 1 minute"
		aws="$LS_VENV/bin/aws"
	else
		venv_install "$AWSCLI_VENV" "$AWSCLI_REQUIREMENTS" bin/aws "the aws CLI" python3 "~100 MB, about 20 s"
		aws="$AWSCLI_VENV/bin/aws"
	fi
	# The aws CLI on PATH after `eval "$(scripts/stack.sh env)"`: awscli v1
	# sends SQS calls in us-east-1 to queue.amazonaws.com whatever
	# AWS_ENDPOINT_URL_SQS says, so this wrapper passes the endpoint
	# explicitly for sqs commands. Everything else goes through unchanged.
	mkdir -p "$BIN"
	cat >"$BIN/aws" <<-EOF
		#!/usr/bin/env bash
		# Written by scripts/stack.sh: the pinned awscli of a stack venv, with SQS calls sent to
		# \$AWS_ENDPOINT_URL_SQS (awscli v1 ignores that variable for SQS).
		for a in "\$@"; do
		  case \$a in --endpoint-url*) exec "$aws" "\$@" ;; esac
		done
		for a in "\$@"; do
		  case \$a in
		    -*) ;;
		    sqs) [[ -n "\${AWS_ENDPOINT_URL_SQS:-}" ]] && exec "$aws" --endpoint-url "\$AWS_ENDPOINT_URL_SQS" "\$@"; break ;;
		    *) break ;;
		  esac
		done
		exec "$aws" "\$@"
	EOF
	chmod +x "$BIN/aws"
}

# ---- processes ----

# Each server's pid file holds "PID PORT". alive NAME succeeds when the
# server this checkout started under NAME still runs, and sets PID and PORT.
PID='' PORT=''
alive() {
	local name=$1 pidfile="$STACK_DIR/$1.pid" pattern
	PID='' PORT=''
	[[ -f "$pidfile" ]] || return 1
	read -r PID PORT <"$pidfile" || true
	[[ "$PID" =~ ^[0-9]+$ && "$PORT" =~ ^[0-9]+$ ]] || { PID='' PORT=''; return 1; }
	# Guard against a recycled pid: the process must be ours.
	case $name in
	moto) pattern=$MOTO_FRONT ;;
	localstack) pattern="localstack.runtime.main" ;;
	esac
	[[ -r "/proc/$PID/cmdline" ]] && tr '\0' ' ' <"/proc/$PID/cmdline" | grep -q -- "$pattern" && return 0
	PID='' PORT=''
	return 1
}

# http_ok URL succeeds when URL answers 200 within 2 s.
http_ok() {
	"$PY_VENV/bin/python" - "$1" <<-'EOF' 2>/dev/null
		import sys, urllib.request
		with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
		    sys.exit(0 if r.status == 200 else 1)
	EOF
}

# healthy NAME PORT: LocalStack's health endpoint reports sqs, scheduler and
# s3 available or running; moto answers its management API.
healthy() {
	case $1 in
	moto) http_ok "http://$HOST:$2/moto-api/" ;;
	localstack)
		"$PY_VENV/bin/python" - "http://$HOST:$2/_localstack/health" <<-'EOF' 2>/dev/null
			import json, sys, urllib.request
			with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
			    services = json.load(r).get("services", {})
			# A LocalStack started before scheduler or s3 joined SERVICES
			# reports it "disabled": not healthy, so stack-up restarts it.
			ok = all(services.get(s) in ("available", "running") for s in ("sqs", "scheduler", "s3"))
			sys.exit(0 if ok else 1)
		EOF
		;;
	esac
}

port_taken() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# stop NAME stops a server and its process group: SIGTERM, then SIGKILL after
# 10 s (one LocalStack was seen ignoring SIGTERM for 95 s).
stop() {
	local name=$1 i
	alive "$name" || { rm -f "$STACK_DIR/$name.pid"; return 0; }
	local pid=$PID port=$PORT
	kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "$name (pid $pid) ignored SIGTERM for 10s; sending SIGKILL"
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$STACK_DIR/$name.pid"
	say "stopped $name (pid $pid, port $port)"
}

# start NAME PORT CMD... starts a server in its own session (so stop can
# signal the whole group), with inherited descriptors above stderr closed (make's
# jobserver pipe, a CI runner's pipes), and waits until it is healthy.
start() {
	local name=$1 port=$2 log="$STACK_DIR/$1.log"
	shift 2
	if alive "$name"; then
		if [[ "$PORT" == "$port" ]] && healthy "$name" "$port"; then
			say "$name up at http://$HOST:$port (pid $PID)"
			return
		fi
		say "$name (pid $PID, port $PORT) is not answering on port $port; restarting it"
		stop "$name"
	fi
	rm -f "$STACK_DIR/$name.pid"
	port_taken "$port" && die "port $port on $HOST is in use by a process this checkout did not start; stop it or set LEASEHOLD_STACK_PORT / LEASEHOLD_STACK_DDB_PORT"

	say "starting $name on http://$HOST:$port (log: .stack/$name.log)"
	printf '\n==== %s start on %s\n' "$(date -u +%FT%TZ)" "$HOST:$port" >>"$log"
	nohup "$PY_VENV/bin/python" -c \
		'import os, sys; os.setsid(); os.closerange(3, os.sysconf("SC_OPEN_MAX")); os.execvp(sys.argv[1], sys.argv[1:])' \
		"$@" >>"$log" 2>&1 </dev/null &
	local pid=$! deadline=$((SECONDS + WAIT_SECONDS)) begun=$SECONDS
	printf '%s %s\n' "$pid" "$port" >"$STACK_DIR/$name.pid"
	until healthy "$name" "$port"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$STACK_DIR/$name.pid"
			tail -n 30 "$log" >&2 || true
			die "$name exited during start-up (log above, full log in .stack/$name.log)"
		fi
		if ((SECONDS >= deadline)); then
			stop "$name"
			tail -n 30 "$log" >&2 || true
			die "$name not ready on $HOST:$port after ${WAIT_SECONDS}s (LEASEHOLD_STACK_WAIT)"
		fi
		sleep 0.25
	done
	say "$name ready in $((SECONDS - begun))s (pid $pid)"
}

start_localstack() {
	local fs="$STACK_DIR/localstack-fs"
	mkdir -p "$fs"
	# Host mode: GATEWAY_SERVER=hypercorn because the default server binds
	# 0.0.0.0 whatever GATEWAY_LISTEN says; OVERRIDE_IN_DOCKER=0 and
	# FILESYSTEM_ROOT keep LocalStack's files under .stack/ even on machines
	# that have /.dockerenv; no DNS server, no certificate download, no
	# analytics events. scheduler: EventBridge Scheduler's API, for
	# `leasehold schedule create|list|delete`; LocalStack stores schedules but
	# never fires them, so `leasehold run` fires them itself
	# (docs/workflows-schedules.md). s3: the payload bucket, where values
	# over the inline limits go (docs/limits.md); LocalStack's S3 keeps its
	# objects in memory, so they go when the stack stops.
	start localstack "$SQS_PORT" env \
		SERVICES=sqs,scheduler,s3 \
		GATEWAY_LISTEN="$HOST:$SQS_PORT" \
		LOCALSTACK_HOST="$HOST:$SQS_PORT" \
		GATEWAY_SERVER=hypercorn \
		SQS_ENDPOINT_STRATEGY=path \
		DNS_ADDRESS=0 \
		SKIP_SSL_CERT_DOWNLOAD=1 \
		DISABLE_EVENTS=1 \
		OVERRIDE_IN_DOCKER=0 \
		FILESYSTEM_ROOT="$fs" \
		"$LS_VENV/bin/python" -m localstack.runtime.main
}

# The ports the SQS and DynamoDB endpoints use now: those of the running
# servers when there are any, else the configured ones.
endpoints() {
	local sqs_port=$SQS_PORT ddb_port=$DDB_PORT mode=$SQS_MODE
	if [[ -f "$STATE" ]]; then
		# shellcheck disable=SC1090
		. "$STATE"
		sqs_port=${STATE_SQS_PORT:-$sqs_port} ddb_port=${STATE_DDB_PORT:-$ddb_port} mode=${STATE_SQS_MODE:-$mode}
	fi
	SQS_ENDPOINT="http://$HOST:$sqs_port" DDB_ENDPOINT="http://$HOST:$ddb_port"
	S3_ENDPOINT=$SQS_ENDPOINT
	# moto serves S3 too, in the fallback.
	[[ "$mode" == moto ]] && SQS_ENDPOINT=$DDB_ENDPOINT S3_ENDPOINT=$DDB_ENDPOINT
	return 0
}

cmd_up() {
	mkdir -p "$STACK_DIR"
	warn_fallback
	cmd_install
	start moto "$DDB_PORT" "$PY_VENV/bin/python" "$MOTO_FRONT" "$HOST" "$DDB_PORT"
	if [[ "$SQS_MODE" == localstack ]]; then
		start_localstack
	else
		stop localstack
	fi
	printf 'STATE_SQS_PORT=%s\nSTATE_DDB_PORT=%s\nSTATE_SQS_MODE=%s\n' "$SQS_PORT" "$DDB_PORT" "$SQS_MODE" >"$STATE"
	(
		eval "$(cmd_env base)"
		LEASEHOLD_RESOURCES_ENV="$RESOURCES_ENV.tmp" "$PY_VENV/bin/python" "$RESOURCE_SCRIPT"
	) 2>&1 | sed 's/^/stack: /' >&2
	mv "$RESOURCES_ENV.tmp" "$RESOURCES_ENV"
	endpoints
	say "up: SQS $SQS_ENDPOINT ($SQS_MODE), DynamoDB $DDB_ENDPOINT (moto, serialised)"
	say "point your shell at it with:  eval \"\$(scripts/stack.sh env)\""
}

cmd_down() {
	local any=''
	alive localstack && any=1
	alive moto && any=1
	stop localstack
	stop moto
	rm -f "$STATE" "$RESOURCES_ENV"
	[[ -n "$any" ]] || say "not running"
}

cmd_status() {
	local rc=0 name port
	[[ -f "$PY_VENV/.leasehold-installed" ]] && say "installed: .stack/py-venv (moto, template tools)" || say "moto not installed (run: make stack-install)"
	[[ -f "$LS_VENV/.leasehold-installed" ]] && say "installed: .stack/localstack-venv (LocalStack, aws CLI)" || say "LocalStack not installed (run: make stack-install)"
	endpoints
	for name in moto localstack; do
		if alive "$name"; then
			port=$PORT
			if healthy "$name" "$port"; then
				say "running: $name on http://$HOST:$port (pid $PID, log .stack/$name.log)"
			else
				say "$name (pid $PID) is alive but not answering on port $port"
				rc=3
			fi
		elif [[ "$name" == localstack && "$SQS_ENDPOINT" == "$DDB_ENDPOINT" ]]; then
			say "localstack: not used (LEASEHOLD_STACK_SQS=moto)"
		else
			say "not running: $name (run: make stack-up)"
			rc=3
		fi
	done
	return $rc
}

# cmd_env [base] prints the export lines; with "base", only the endpoints,
# region and credentials (resources.env does not exist yet during `up`).
cmd_env() {
	endpoints
	cat <<-EOF
		export AWS_ENDPOINT_URL_SQS=$SQS_ENDPOINT
		export AWS_ENDPOINT_URL_SCHEDULER=$SQS_ENDPOINT
		export AWS_ENDPOINT_URL_S3=$S3_ENDPOINT
		export AWS_ENDPOINT_URL_DYNAMODB=$DDB_ENDPOINT
		export AWS_REGION=us-east-1
		export AWS_DEFAULT_REGION=us-east-1
		export AWS_ACCESS_KEY_ID=test
		export AWS_SECRET_ACCESS_KEY=test
	EOF
	[[ "${1:-}" == base ]] && return
	# The stack's aws wrapper, and where `go install` puts the leasehold
	# command (GOBIN, else the first GOPATH entry's bin), so that a fresh
	# terminal finds both.
	local gobin='' dir
	if command -v go >/dev/null 2>&1; then
		gobin=$(go env GOBIN 2>/dev/null || true)
		[[ -n "$gobin" ]] || gobin="$(go env GOPATH 2>/dev/null | cut -d: -f1)/bin"
		[[ "$gobin" != /bin ]] || gobin=''
	fi
	for dir in "$gobin" "$BIN"; do
		[[ -n "$dir" ]] || continue
		case ":$PATH:" in
		*":$dir:"*) ;;
		*) printf 'export PATH=%q:"$PATH"\n' "$dir" ;;
		esac
	done
	if [[ -f "$RESOURCES_ENV" ]]; then
		cat "$RESOURCES_ENV"
	else
		say "the stack's resources are not created yet (run: make stack-up); printing endpoints only"
	fi
	return 0
}

case "${1:-}" in
install) warn_fallback; cmd_install ;;
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
*)
	sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac
