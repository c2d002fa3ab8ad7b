#!/usr/bin/env bash
# Checks of the deployment template (template.yaml) with pinned tools
# installed into the git-ignored .stack/tools-venv.
#
#   scripts/template-tools.sh install   venv + pinned aws-sam-cli, cfn-lint, checkov (tools/requirements.txt); no-op when current
#   scripts/template-tools.sh check     install, then: sam validate --lint, cfn-lint, checkov, sam build (offline)
#
# The checks run without AWS credentials and without network access except
# `go mod download`, which fills the Go module cache from the module proxy
# when it lacks something; the build itself then runs with GOPROXY=off.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.stack/tools-venv"
REQUIREMENTS="$ROOT/tools/requirements.txt"
TEMPLATE="$ROOT/template.yaml"

say() { printf 'template: %s\n' "$*"; }
die() { printf 'template: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

cmd_install() {
	venv_install "$VENV" "$REQUIREMENTS" bin/sam "aws-sam-cli, cfn-lint and checkov"
}

# step NAME CMD... runs one check and prints how long it took.
step() {
	local name=$1 start=$SECONDS
	shift
	say "== $name"
	"$@"
	say "   $name passed in $((SECONDS - start))s"
}

cmd_check() {
	cmd_install
	cd "$ROOT"
	# No telemetry, no credentials, no region lookups: the checks are local.
	export SAM_CLI_TELEMETRY=0 AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_REGION:-us-east-1}"
	export PATH="$VENV/bin:$PATH"
	local total=$SECONDS

	step "sam validate --lint" sam validate --lint --template-file "$TEMPLATE"
	step "cfn-lint" cfn-lint -- "$TEMPLATE"
	# --skip-download: use only the policies shipped in the package.
	step "checkov" checkov --quiet --compact --skip-download --framework cloudformation -f "$TEMPLATE"

	step "go mod download" go mod download
	# The build must not need the network: every module comes from the cache.
	# samconfig.toml's [default.build] settings apply.
	step "sam build (offline)" env GOPROXY=off sam build --template-file "$TEMPLATE"
	local bin
	for bin in .aws-sam/build/*/bootstrap; do
		[[ -f "$bin" ]] || die "sam build produced no bootstrap binaries"
		# ELF e_machine (bytes 18-19) is 0xb7 for aarch64.
		[[ "$(od -An -tx1 -j18 -N2 "$bin" | tr -d ' ')" == b700 ]] || die "$bin is not an arm64 executable"
		say "   arm64 $bin: $(stat -c %s "$bin") bytes"
	done
	say "all template checks passed in $((SECONDS - total))s"
}

case "${1:-}" in
install) cmd_install ;;
check) cmd_check ;;
*)
	sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac
