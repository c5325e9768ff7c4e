# shellcheck shell=bash
# Pinned tools, installed with `go install` into GOBIN (default $(go env GOPATH)/bin) when missing.
SQLC_VERSION=v1.31.1
STATICCHECK_VERSION=v0.8.2

tools_path() {
	local bin
	bin=$(go env GOBIN)
	[ -n "$bin" ] || bin="$(go env GOPATH)/bin"
	export PATH="$bin:$PATH"
}

tools_ensure_sqlc() {
	tools_path
	if command -v sqlc >/dev/null 2>&1 && [ "$(sqlc version 2>/dev/null)" = "$SQLC_VERSION" ]; then
		return 0
	fi
	echo "tools: installing sqlc $SQLC_VERSION (about two minutes)" >&2
	go install "github.com/sqlc-dev/sqlc/cmd/sqlc@$SQLC_VERSION" >&2
}

tools_ensure_staticcheck() {
	tools_path
	if command -v staticcheck >/dev/null 2>&1 && staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
		return 0
	fi
	echo "tools: installing staticcheck $STATICCHECK_VERSION" >&2
	go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" >&2
}
