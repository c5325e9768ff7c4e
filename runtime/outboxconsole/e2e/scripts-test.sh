#!/usr/bin/env bash
# Run by scripts/test inside this module, once per database server (OUTBOX_TEST_DSN): the
# console's end-to-end test in real headless Chromium. Its own go.mod keeps chromedp out of the
# core module. The browser is Debian's chromium, installed here with apt-get when missing
# (never a browser that a test tool downloads). Screenshots go to $OUTBOX_E2E_ARTIFACTS
# (default /tmp/outboxconsole-e2e); `go test -run . -docs` also rewrites docs/console.png
# and docs/console-controls.png.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -x /usr/bin/chromium ]; then
	echo "outboxconsole e2e: installing Debian's chromium"
	if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version 2>/dev/null | head -n1 || true

export OUTBOX_E2E_ARTIFACTS=${OUTBOX_E2E_ARTIFACTS:-/tmp/outboxconsole-e2e}
export OUTBOX_E2E_REQUIRE=1 # a missing browser fails here instead of skipping
echo "outboxconsole e2e: screenshots in $OUTBOX_E2E_ARTIFACTS"
# vet, staticcheck when installed, go test -count=1 -v (without -race, as this script always ran it).
exec bash ../../../scripts/module-test.sh . -count=1
