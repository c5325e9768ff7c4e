#!/usr/bin/env bash
# Run by scripts/test inside this module: its own go.mod keeps client_golang out of the core's
# dependencies, so the root's `go vet ./...` and `go test ./...` do not reach it.
# The integration tests need OUTBOX_TEST_DSN (scripts/test exports it); without it they skip
# and say so, and scripts/module-test.sh (vet, staticcheck, go test -race) prints the skips.
set -euo pipefail
cd "$(dirname "$0")"
exec bash ../../scripts/module-test.sh .
