#!/usr/bin/env bash
# Make sure Debian's Chromium is installed at /usr/bin/chromium for the browser tests
# (tests/integration/test_web_ui.py drive it with Playwright through its executable path,
# because `playwright install` cannot download browsers here).
#
# Idempotent and quiet: when /usr/bin/chromium already exists, nothing is done. Otherwise
# the package lists are refreshed and `chromium` is installed without recommends. Must run
# as root (or through sudo when it is available). Exits 1 if Chromium is still missing.
set -euo pipefail

CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"

say() { echo "browser: $*" >&2; }

if [ -x "$CHROMIUM" ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        say "not root and no sudo: install Chromium yourself (apt-get install chromium)"
        exit 1
    fi
fi

if ! command -v apt-get >/dev/null 2>&1; then
    say "apt-get not found: this script installs Debian's chromium; install Chromium at $CHROMIUM another way"
    exit 1
fi

say "installing chromium (apt-get)…"
export DEBIAN_FRONTEND=noninteractive
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-liberation; } >"$LOG" 2>&1; then
    tail -n 30 "$LOG" >&2
    say "apt-get failed (see above)"
    exit 1
fi

if [ ! -x "$CHROMIUM" ]; then
    say "chromium was installed but $CHROMIUM is missing"
    exit 1
fi
say "ready: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
