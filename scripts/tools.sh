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

# tools__ensure NAME VERSION PACKAGE VERSION-COMMAND...: NAME at VERSION on PATH, installed from
# PACKAGE@VERSION when missing or when VERSION-COMMAND prints another version.
tools__ensure() {
	local name=$1 version=$2 pkg=$3 want
	shift 3
	tools_path
	want=${version#v}
	if command -v "$name" >/dev/null 2>&1 && "$@" 2>/dev/null | grep -qE "(^|[^0-9.])${want//./\\.}(\$|[^0-9.])"; then
		return 0
	fi
	echo "tools: installing $name $version" >&2
	go install "$pkg@$version" >&2
}

tools_ensure_sqlc() { tools__ensure sqlc "$SQLC_VERSION" github.com/sqlc-dev/sqlc/cmd/sqlc sqlc version; }
tools_ensure_staticcheck() {
	tools__ensure staticcheck "$STATICCHECK_VERSION" honnef.co/go/tools/cmd/staticcheck staticcheck -version
}
tools_ensure_gotestsum() { tools__ensure gotestsum "$GOTESTSUM_VERSION" gotest.tools/gotestsum gotestsum --version; }

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
