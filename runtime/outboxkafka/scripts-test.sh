#!/usr/bin/env bash
# Run by scripts/test inside this module: its own go.mod keeps franz-go out of
# the core's dependencies, so the root's `go vet ./...` and `go test ./...` do not reach it.
# Every test runs franz-go's kfake cluster inside the test process; the relay tests also
# need OUTBOX_TEST_DSN (scripts/test exports it, once per server); without it they skip and
# say so, and this script prints the skips.
set -euo pipefail
cd "$(dirname "$0")"

echo "outboxkafka: go vet"
go vet ./...
if command -v staticcheck >/dev/null 2>&1; then
	echo "outboxkafka: staticcheck"
	staticcheck ./...
fi

echo "outboxkafka: go test -race"
log=$(mktemp /tmp/outboxkafka-test.XXXXXX)
status=0
go test -race -count=1 -v ./... >"$log" 2>&1 || status=$?
grep -vE '^\s*(=== (RUN|PAUSE|CONT|NAME)|--- PASS|--- SKIP)' "$log" || true
count() { grep -cE "^\s*--- $1" "$log" || true; }
echo "outboxkafka go test: $(count PASS) passed, $(count FAIL) failed, $(count SKIP) skipped"
if grep -qE '^\s*--- SKIP' "$log"; then
	echo "skipped tests:"; grep -E -A1 '^\s*--- SKIP' "$log" | head -n 40
fi
rm -f "$log"
[ "$status" -eq 0 ] || { echo "outboxkafka: go test failed (exit $status)"; exit "$status"; }
