#!/usr/bin/env bash
# Run by scripts/test inside bench/: a SMOKE run of every workload with tiny sizes (about a
# minute) against the server on OUTBOX_TEST_DSN, so the benchmark cannot rot. outboxbench exits
# non-zero when any run fails, loses a message or delivers one twice.
set -euo pipefail
cd "$(dirname "$0")"
: "${OUTBOX_TEST_DSN:?OUTBOX_TEST_DSN must name a MariaDB or MySQL server (scripts/test sets it)}"
gofmt_out=$(gofmt -l .)
if [ -n "$gofmt_out" ]; then
	echo "gofmt would change: $gofmt_out"; exit 1
fi
go vet ./...
if command -v staticcheck >/dev/null 2>&1; then
	staticcheck ./...
fi
go test -count=1 ./...
./run --dsn "$OUTBOX_TEST_DSN" --smoke
# The retention workloads run only when named: tiny sizes, one driver mode (about 40 s).
./run --dsn "$OUTBOX_TEST_DSN" --smoke --modes default --only retention-load,history,steady
