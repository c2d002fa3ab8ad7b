#!/usr/bin/env bash
# Checks of the deployment template (template.yaml) with pinned tools
# installed into the git-ignored .stack/py-venv, the venv scripts/stack.sh
# runs moto from (one venv: they share most of their dependencies).
#
#   scripts/template-tools.sh install           venv + pinned aws-sam-cli, cfn-lint, checkov, moto (tools/requirements.txt); no-op when current
#   scripts/template-tools.sh check [TEMPLATE]  install, then: sam validate --lint, cfn-lint, checkov, sam build (offline)
#
# TEMPLATE defaults to leasehold's template.yaml; another (such as the one
# `leasehold init` writes) is checked the same way from its own directory,
# whose go.mod and samconfig.toml apply.
#
# The checks run without AWS credentials and without network access except
# `go mod download`, which fills the Go module cache from the module proxy
# when it lacks something; the build itself then runs with GOPROXY=off.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.stack/py-venv"
REQUIREMENTS="$ROOT/tools/requirements.txt"
TEMPLATE="$ROOT/template.yaml"

say() { printf 'template: %s\n' "$*"; }
die() { printf 'template: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/venv.sh
. "$ROOT/scripts/venv.sh"

cmd_install() {
	venv_install "$VENV" "$REQUIREMENTS" bin/moto_server "aws-sam-cli, cfn-lint, checkov and moto" python3 "~590 MB, 1-2 minutes"
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
	local template=${1:-$TEMPLATE}
	[[ -f "$template" ]] || die "no template at $template"
	template=$(cd "$(dirname "$template")" && pwd)/$(basename "$template")
	cmd_install
	cd "$(dirname "$template")"
	# No telemetry, no credentials, no region lookups: the checks are local.
	export SAM_CLI_TELEMETRY=0 AWS_REGION="${AWS_REGION:-us-east-1}" AWS_DEFAULT_REGION="${AWS_REGION:-us-east-1}"
	export PATH="$VENV/bin:$PATH"
	local total=$SECONDS

	step "sam validate --lint" sam validate --lint --template-file "$template"
	step "cfn-lint" cfn-lint -- "$template"
	# --skip-download: use only the policies shipped in the package.
	step "checkov" checkov --quiet --compact --skip-download --framework cloudformation -f "$template"

	# The bootstrap builds refuse a toolchain older than go.mod's toolchain
	# line (functions/checktoolchain); GOTOOLCHAIN=auto lets the go command
	# fetch that one here, while the proxy is allowed, where the local go is
	# older, even if GOTOOLCHAIN=local is its default.
	export GOTOOLCHAIN=auto
	step "go mod download" go mod download
	# The build must not need the network: every module comes from the cache.
	# samconfig.toml's [default.build] settings apply.
	step "sam build (offline)" env GOPROXY=off sam build --template-file "$template"
	# Nested stacks (AWS::Serverless::Application) build into subdirectories.
	local bin n=0
	while IFS= read -r bin; do
		# ELF e_machine (bytes 18-19) is 0xb7 for aarch64.
		[[ "$(od -An -tx1 -j18 -N2 "$bin" | tr -d ' ')" == b700 ]] || die "$bin is not an arm64 executable"
		say "   arm64 $bin: $(stat -c %s "$bin") bytes"
		n=$((n + 1))
	done < <(find .aws-sam/build -name bootstrap -type f | sort)
	((n > 0)) || die "sam build produced no bootstrap binaries"
	say "all template checks passed in $((SECONDS - total))s"
}

case "${1:-}" in
install) cmd_install ;;
check) cmd_check "${2:-}" ;;
*)
	sed -n '2,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac
