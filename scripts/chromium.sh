#!/usr/bin/env bash
# Prints the path of a Chromium (or Chrome) binary for the browser test
# (internal/cli/ui, TestBrowser), installing Debian's chromium package with
# apt-get when none is found. It looks as the test does: LEASEHOLD_CHROMIUM
# when set, else the first of the names below on PATH. The path goes to
# stdout; everything else to stderr.
set -euo pipefail

names=(chromium chromium-browser google-chrome-stable google-chrome)

find_chromium() {
	local name
	for name in "${names[@]}"; do
		if command -v "$name" >/dev/null 2>&1; then
			command -v "$name"
			return 0
		fi
	done
	return 1
}

if [ -n "${LEASEHOLD_CHROMIUM:-}" ]; then
	if [ -x "$LEASEHOLD_CHROMIUM" ] || command -v "$LEASEHOLD_CHROMIUM" >/dev/null 2>&1; then
		echo "$LEASEHOLD_CHROMIUM"
		exit 0
	fi
	echo "chromium.sh: LEASEHOLD_CHROMIUM=$LEASEHOLD_CHROMIUM is not an executable; set it to a Chromium or Chrome binary, or unset it" >&2
	exit 1
fi

if path=$(find_chromium); then
	echo "$path"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "chromium.sh: none of ${names[*]} is on PATH and there is no apt-get to install one; install Chromium or Chrome, or set LEASEHOLD_CHROMIUM" >&2
	exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1 || ! sudo -n true 2>/dev/null; then
		echo "chromium.sh: none of ${names[*]} is on PATH, and installing chromium needs root: run as root, allow passwordless sudo, install Chromium yourself, or set LEASEHOLD_CHROMIUM" >&2
		exit 1
	fi
	sudo=(sudo -n)
fi
apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=300)
echo "chromium.sh: installing chromium with apt-get (for the browser test)" >&2
"${apt[@]}" update >&2
"${apt[@]}" install chromium >&2
if path=$(find_chromium); then
	echo "$path"
	exit 0
fi
echo "chromium.sh: apt-get installed chromium, but none of ${names[*]} is on PATH" >&2
exit 1
