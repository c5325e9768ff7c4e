#!/usr/bin/env bash
# Sourced by scripts/test and scripts/module-test.sh: go test through gotestsum, which reads go
# test's test2json stream, and two readers of the JSON file it saves.

# gotest JSON ARGS...: go test ARGS, printing what a plain go test prints (a failed test's output
# and one line per package), with its test2json events saved in JSON.
gotest() {
	local json=$1
	shift
	gotestsum --format standard-quiet --hide-summary=skipped --jsonfile "$json" -- "$@"
}

# test_counts JSON: "PASSED FAILED SKIPPED", counting tests and subtests.
test_counts() {
	jq -rs '[.[] | select(.Test != null) | .Action] as $a
		| [$a[] | select(. == "pass")] | length as $p
		| [$a[] | select(. == "fail")] | length as $f
		| [$a[] | select(. == "skip")] | length as $s
		| "\($p) \($f) \($s)"' "$1"
}

# skip_reasons JSON: one line per skipped test, with its package and the last line it logged
# (file.go:N: ...) before its verdict: t.Skip's reason.
skip_reasons() {
	jq -rs '
		def key: .Package + " " + .Test;
		(map(select(.Test != null and .Action == "output" and (.Output | test("^\\s+\\S+\\.go:[0-9]+: "))))
			| group_by(key) | map({key: (.[0] | key), value: (last.Output | sub("^\\s+"; "") | sub("\\s+$"; ""))})
			| from_entries) as $last
		| .[] | select(.Test != null and .Action == "skip")
		| "  \(.Test) (\(.Package)): \($last[key] // "(no reason logged)")"' "$1"
}
