#!/usr/bin/env bash
# Sourced by scripts/test and scripts/module-test.sh.

# skip_reasons LOG: one line per test that a saved `go test -v` log reports skipped, with its
# package and the last line it logged before its verdict: t.Skip's reason. go test -v prints a
# test's log lines as they come, before its "--- SKIP" line, under a "=== RUN/CONT/NAME" line
# that names the test whenever another test printed last; so a line belongs to the test that the
# latest such line or verdict names (go tool test2json's rule), not to the line after a verdict.
skip_reasons() {
	awk '
	function verdict_name(s) { sub(/^ *--- [A-Z]+: /, "", s); sub(/ \([0-9.]+s\)$/, "", s); return s }
	/^ *=== (RUN|PAUSE|CONT|NAME)( |$)/ { cur = $0; sub(/^ *=== [A-Z]+ */, "", cur); next }
	/^ *--- (PASS|FAIL|SKIP): / {
		cur = verdict_name($0)
		if ($0 ~ /^ *--- SKIP: /) { n++; skipped[n] = cur; why[n] = (cur in last) ? last[cur] : "(no reason logged)" }
		next
	}
	/^ +[^ ]+\.go:[0-9]+: / { if (cur != "") { line = $0; sub(/^ +/, "", line); last[cur] = line } next }
	# The end of a package: name its skips.
	/^(ok|FAIL|\?) *\t/ {
		split($0, f, "\t")
		for (i = 1; i <= n; i++) printf "  %s (%s): %s\n", skipped[i], f[2], why[i]
		n = 0; cur = ""; split("", last)
	}
	END { for (i = 1; i <= n; i++) printf "  %s: %s\n", skipped[i], why[i] }
	' "$1"
}
