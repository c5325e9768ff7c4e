# shellcheck shell=bash
# Pinned tools, installed with `go install` into GOBIN (default $(go env GOPATH)/bin) when missing.
SQLC_VERSION=v1.31.1
STATICCHECK_VERSION=v0.8.2
GOTESTSUM_VERSION=v1.13.0

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

tools_ensure_gotestsum() {
	tools_path
	if command -v gotestsum >/dev/null 2>&1 && [ "$(gotestsum --version 2>/dev/null)" = "gotestsum version $GOTESTSUM_VERSION" ]; then
		return 0
	fi
	echo "tools: installing gotestsum $GOTESTSUM_VERSION" >&2
	go install "gotest.tools/gotestsum@$GOTESTSUM_VERSION" >&2
}

# jq reads the test2json files that gotestsum saves (scripts/skips.sh).
tools_ensure_jq() {
	command -v jq >/dev/null 2>&1 && return 0
	echo "tools: jq not found; installing Debian's jq with apt-get" >&2
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >&2
}

# The AsyncAPI 3.0.0 JSON Schema, for gen's TestAsyncAPIOfficialSchema: the npm package that the
# AsyncAPI initiative publishes its spec schemas in, unpacked once per machine. Prints the path.
ASYNCAPI_SPECS_VERSION=6.11.1
tools_asyncapi_schema() {
	local dir=/var/cache/outboxgen/asyncapi-specs-$ASYNCAPI_SPECS_VERSION
	local schema="$dir/package/schemas/3.0.0-without-\$id.json"
	if [ ! -f "$schema" ]; then
		if ! command -v npm >/dev/null 2>&1; then
			echo "tools: npm not found; installing Debian's npm with apt-get" >&2
			DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2 || return 1
		fi
		echo "tools: fetching @asyncapi/specs@$ASYNCAPI_SPECS_VERSION with npm (once)" >&2
		mkdir -p "$dir.tmp" && (cd "$dir.tmp" && npm pack "@asyncapi/specs@$ASYNCAPI_SPECS_VERSION" --silent >/dev/null &&
			tar xzf asyncapi-specs-*.tgz) >&2 || return 1
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "$schema"
}
