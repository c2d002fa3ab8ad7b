# Sourced by scripts/stack.sh and scripts/template-tools.sh: a Python venv
# built from a pinned requirements file, rebuilt only when the pins or the
# interpreter change. The sourcing script defines say and die.

# venv_install VENV REQUIREMENTS PROBE WHAT
#   VENV          where the venv lives (under the git-ignored .stack/)
#   REQUIREMENTS  the pinned requirements file
#   PROBE         a file the installed venv must have, e.g. bin/moto_server
#   WHAT          what is being installed, for the messages
venv_install() {
	local venv=$1 requirements=$2 probe=$3 what=$4
	local stamp="$venv/.leasehold-installed" want req_hash py
	command -v python3 >/dev/null || die "python3 not found; install Python 3.11+ with its venv module"
	# The stamp records what the venv was built from: the pinned
	# requirements and the interpreter. A change to either rebuilds it.
	req_hash=$(sha256sum "$requirements" | cut -d' ' -f1)
	py=$(python3 -c 'import sys; print(sys.version.split()[0])')
	want="requirements=$req_hash python=$py"
	if [[ -x "$venv/$probe" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
		say "installed: $venv"
		return
	fi
	say "installing $what into $venv (pinned by ${requirements#"$ROOT"/})"
	rm -rf "$venv"
	mkdir -p "$(dirname "$venv")"
	python3 -m venv "$venv" || die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
	"$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
		--requirement "$requirements"
	# Written last: an interrupted install is redone from scratch next time.
	printf '%s\n' "$want" >"$stamp"
	say "installed"
}
