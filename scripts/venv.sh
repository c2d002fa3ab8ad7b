# Sourced by scripts/stack.sh and scripts/template-tools.sh: a Python venv
# built from a pinned requirements file, rebuilt only when the pins or the
# interpreter change. The sourcing script defines say and die. Both scripts
# install the same .stack/py-venv, so an install holds a lock on the venv
# (`make -j test` runs them at once).

# venv_install VENV REQUIREMENTS PROBE WHAT [PYTHON [SIZE]]
#   VENV          where the venv lives (under the git-ignored .stack/)
#   REQUIREMENTS  the pinned requirements file
#   PROBE         a file the installed venv must have, e.g. bin/moto_server
#   WHAT          what is being installed, for the messages
#   PYTHON        the interpreter to build it with (default: python3)
#   SIZE          what the first install costs, e.g. "~500 MB, about 1 minute"
#
# A first install prints one line per package as pip collects it, then the
# time it took, so a long install is never silent.
venv_install() {
	mkdir -p "$(dirname "$1")"
	if command -v flock >/dev/null; then
		# Released when the subshell exits; the second caller waits, then
		# finds the venv current.
		(
			flock 9
			venv_install_locked "$@"
		) 9>"$1.lock"
	else
		venv_install_locked "$@"
	fi
}

venv_install_locked() {
	local venv=$1 requirements=$2 probe=$3 what=$4 python=${5:-python3} size=${6:-}
	local stamp="$venv/.leasehold-installed" want req_hash py start=$SECONDS
	command -v "$python" >/dev/null || die "$python not found; install Python 3.11+ with its venv module"
	# The stamp records what the venv was built from: the pinned
	# requirements and the interpreter. A change to either rebuilds it.
	req_hash=$(sha256sum "$requirements" | cut -d' ' -f1)
	py=$("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')
	want="requirements=$req_hash python=$py"
	if [[ -x "$venv/$probe" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		say "installed: ${venv#"$ROOT"/}"
		return
	fi
	say "installing $what into ${venv#"$ROOT"/} (pinned by ${requirements#"$ROOT"/}${size:+; $size the first time})"
	rm -rf "$venv"
	"$python" -m venv "$venv" || die "$python -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
	local n=0 line last='' log="$venv.pip.log"
	: >"$log"
	# pip's own progress bars need a terminal; its "Collecting" lines do not.
	# Printed as "[n] package" so a slow install shows it is moving.
	while IFS= read -r line; do
		last=$line
		printf '%s\n' "$line" >>"$log"
		case $line in
		Collecting\ *)
			n=$((n + 1))
			line=${line#Collecting }
			say "  [$n] ${line%% (from *}"
			;;
		esac
	done < <("$venv/bin/python" -m pip install --disable-pip-version-check --no-input \
		--progress-bar off --requirement "$requirements" 2>&1; echo "pip-exit=$?")
	# The last line read above is pip's exit status.
	if [[ "$last" != "pip-exit=0" ]]; then
		tail -n 30 "$log" >&2
		die "pip install of $what failed ($last); pip's output above, all of it in ${log#"$ROOT"/}"
	fi
	# Written last: an interrupted install is redone from scratch next time.
	printf '%s\n' "$want" >"$stamp"
	say "installed $n packages in $((SECONDS - start))s ($(du -sh "$venv" | cut -f1))"
}
