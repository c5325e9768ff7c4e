#!/usr/bin/env bash
# scripts/module-test.sh DIR [GO TEST FLAGS...]: the checks of a module of its own (a go.mod
# below the root, which the root's `go vet ./...` and `go test ./...` do not reach), for its
# scripts-test.sh, which scripts/test runs once per database server (OUTBOX_TEST_DSN):
# go vet, staticcheck when it is installed, then go test ./... with FLAGS (-race -count=1 when
# none are given) through gotestsum, the verdicts counted and the skipped tests listed (a test
# that needs OUTBOX_TEST_DSN skips without it and says so).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=skips.sh
source "$root/scripts/skips.sh"
# shellcheck source=tools.sh
source "$root/scripts/tools.sh"
tools_ensure_gotestsum
tools_ensure_jq
cd "${1:?usage: scripts/module-test.sh DIR [GO TEST FLAGS...]}"
# The workspace builds the module against this tree's root module, which its go.mod requires at
# the release version (scripts/test runs with GOWORK=off for the root module's own steps).
export GOWORK=$root/go.work
shift
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(-race -count=1)
# runtime/outboxconsole/e2e is "outboxconsole e2e" in what this prints.
case $PWD in
"$root"/*) label=${PWD#"$root"/} ;;
*) label=${PWD##*/} ;;
esac
label=${label#runtime/}
label=${label//\// }

echo "$label: go vet"
go vet ./...
if command -v staticcheck >/dev/null 2>&1; then
	echo "$label: staticcheck"
	staticcheck ./...
fi

echo "$label: go test ${flags[*]}"
log=$(mktemp "/tmp/${label// /-}-test.XXXXXX")
trap 'rm -f "$log"' EXIT
status=0
gotest "$log" "${flags[@]}" ./... || status=$?
read -r p f s < <(test_counts "$log")
echo "$label go test: $p passed, $f failed, $s skipped"
if [ "$s" -gt 0 ]; then
	echo "skipped tests:"; skip_reasons "$log" | head -n 40
fi
[ "$status" -eq 0 ] || { echo "$label: go test failed (exit $status)"; exit "$status"; }
