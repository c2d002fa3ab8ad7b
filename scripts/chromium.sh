#!/usr/bin/env bash
# Prints the path of a Chromium (or Chrome) binary for the browser tests,
# installing Debian's chromium package with apt-get when none is found.
# The path goes to stdout; everything else to stderr.
set -euo pipefail

find_chromium() {
	local name
	for name in chromium chromium-browser google-chrome-stable google-chrome chrome; do
		if command -v "$name" >/dev/null 2>&1; then
			command -v "$name"
			return 0
		fi
	done
	return 1
}

if path=$(find_chromium); then
	echo "$path"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "chromium.sh: no chromium found and no apt-get to install it; install Chromium or Chrome" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
echo "chromium.sh: installing chromium with apt-get (for the browser tests)" >&2
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
if path=$(find_chromium); then
	echo "$path"
	exit 0
fi
echo "chromium.sh: apt-get installed chromium, but no binary was found on PATH" >&2
exit 1
