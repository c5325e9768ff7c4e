#!/usr/bin/env bash
# Run by scripts/test inside this module: its own go.mod keeps franz-go out of
# the core's dependencies, so the root's `go vet ./...` and `go test ./...` do not reach it.
# Every test runs franz-go's kfake cluster inside the test process; the relay tests also
# need OUTBOX_TEST_DSN (scripts/test exports it, once per server); without it they skip and
# say so, and scripts/module-test.sh (vet, staticcheck, go test -race) prints the skips.
set -euo pipefail
cd "$(dirname "$0")"
exec bash ../../scripts/module-test.sh .
