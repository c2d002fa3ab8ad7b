#!/usr/bin/env bash
# Static checks with pinned tools, fetched through the Go module proxy only:
#
#   scripts/lint.sh staticcheck   honnef.co/go/tools staticcheck, 0 findings expected
#   scripts/lint.sh govulncheck   golang.org/x/vuln govulncheck against a local copy
#                                 of the Go vulnerability database
#   scripts/lint.sh               both
#
# vuln.go.dev is not needed: the database's source, the module
# golang.org/x/vulndb, carries every entry as an OSV file under data/osv, and
# govulncheck reads such a directory with -db file:///dir (it builds the index
# in memory). LEASEHOLD_VULNDB_VERSION picks the snapshot (a pseudo-version
# of golang.org/x/vulndb, or "latest"); the default is pinned so that a run is
# reproducible, and should be moved forward from time to time.
#
# Both tools run under the toolchain named by go.mod's toolchain line (the
# go command fetches it from the module proxy), so that the standard library
# they analyse is the one the project is meant to be built with.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOVULNCHECK=golang.org/x/vuln/cmd/govulncheck@v1.9.0
VULNDB_VERSION=${LEASEHOLD_VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}

toolchain=$(awk '$1 == "toolchain" { print $2 }' go.mod)
if [[ -n $toolchain ]]; then
	export GOTOOLCHAIN=$toolchain
fi

run_staticcheck() {
	echo "== staticcheck ($STATICCHECK, $($GO env GOVERSION))"
	$GO run "$STATICCHECK" ./...
}

# vulndb_dir downloads the database module (outside this module, so go.mod
# and go.sum are left alone) and prints its OSV directory.
vulndb_dir() {
	local tmp dir
	tmp=$(mktemp -d)
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" RETURN
	dir=$(cd "$tmp" && GOFLAGS=-mod=mod $GO mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [[ -z $dir || ! -d $dir/data/osv ]]; then
		echo "lint: golang.org/x/vulndb@$VULNDB_VERSION has no data/osv directory" >&2
		return 1
	fi
	echo "$dir/data/osv"
}

run_govulncheck() {
	local db
	db=$(vulndb_dir)
	echo "== govulncheck ($GOVULNCHECK, $($GO env GOVERSION), database golang.org/x/vulndb@$VULNDB_VERSION: $(find "$db" -name '*.json' | wc -l) entries)"
	$GO run "$GOVULNCHECK" -db "file://$db" ./...
}

case "${1:-all}" in
staticcheck) run_staticcheck ;;
govulncheck) run_govulncheck ;;
all)
	run_staticcheck
	run_govulncheck
	;;
*)
	echo "usage: $0 [staticcheck|govulncheck]" >&2
	exit 2
	;;
esac
