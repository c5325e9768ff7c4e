#!/usr/bin/env bash
# Run by scripts/test inside this module: its own go.mod keeps GORM, sqlx, ent and bun out of
# the core's dependencies, so the root's `go vet ./...` and `go test ./...` do not reach it.
# The ORM matrix needs OUTBOX_TEST_DSN (scripts/test exports it); without it the tests skip
# and say so, and scripts/module-test.sh (vet, staticcheck, go test -race) prints the skips.
set -euo pipefail
cd "$(dirname "$0")"
exec bash ../../scripts/module-test.sh .
