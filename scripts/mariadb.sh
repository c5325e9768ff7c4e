# shellcheck shell=bash
# Sourced by scripts/test, scripts/demo and the benchmark command: install MariaDB if missing and
# start a throwaway server on a temp datadir and a free port. No Docker; Debian's mariadb-server.
#
#   mariadb_ensure_installed
#   mariadb_start              # sets MARIADB_DIR, MARIADB_PORT, MARIADB_PID, MARIADB_DSN_ROOT (server-level DSN)
#   mariadb_stop               # by pid; safe to call twice; callers trap it on EXIT
#   mariadb_restart            # stop + start on the same datadir and port (fault tests)

mariadb_ensure_installed() {
	if command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; then
		return 0
	fi
	echo "mariadb: mariadbd not found; installing mariadb-server with apt-get" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq mariadb-server >&2
}

mariadb_free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "mariadb: no free port found" >&2
	return 1
}

mariadb_bin() {
	if command -v "$1" >/dev/null 2>&1; then command -v "$1"; else echo "/usr/sbin/$1"; fi
}

mariadb__launch() {
	# innodb_flush_log_at_trx_commit=2 and a small log keep a throwaway test server fast; the
	# benchmark documents its own settings.
	"$(mariadb_bin mariadbd)" --no-defaults --user=mysql --datadir="$MARIADB_DIR/data" \
		--port="$MARIADB_PORT" --socket="$MARIADB_DIR/sock" --bind-address=127.0.0.1 --tmpdir="$MARIADB_DIR/tmp" \
		--pid-file="$MARIADB_DIR/pid" --log-error="$MARIADB_DIR/err.log" \
		--max-connections=1000 --innodb-buffer-pool-size=256M \
		--innodb-flush-log-at-trx-commit="${MARIADB_FLUSH:-2}" \
		--skip-name-resolve ${MARIADB_EXTRA_ARGS:-} >/dev/null 2>&1 &
	local i
	for i in $(seq 1 300); do
		if "$(mariadb_bin mariadb-admin)" --socket="$MARIADB_DIR/sock" -uroot ping >/dev/null 2>&1; then
			MARIADB_PID=$(cat "$MARIADB_DIR/pid")
			export MARIADB_PID
			return 0
		fi
		sleep 0.1
	done
	echo "mariadb: server did not start; log:" >&2
	tail -n 30 "$MARIADB_DIR/err.log" >&2 || true
	return 1
}

mariadb_start() {
	mariadb_ensure_installed
	MARIADB_DIR=$(mktemp -d /tmp/outboxgen-mariadb.XXXXXX)
	if [ -n "${MARIADB_PORT:-}" ]; then MARIADB_PORT_FIXED=1; fi
	MARIADB_PORT=${MARIADB_PORT:-$(mariadb_free_port)}
	export MARIADB_DIR MARIADB_PORT
	# Its own tmpdir: a mariadbd starting with the default /tmp deletes the #sql* files it finds
	# there, including those of another server's mariadb-install-db running at the same moment.
	mkdir -p "$MARIADB_DIR/data" "$MARIADB_DIR/tmp"
	chown -R mysql:mysql "$MARIADB_DIR" 2>/dev/null || true
	chmod 755 "$MARIADB_DIR"
	"$(mariadb_bin mariadb-install-db)" --user=mysql --datadir="$MARIADB_DIR/data" --tmpdir="$MARIADB_DIR/tmp" \
		--auth-root-authentication-method=normal --skip-test-db >"$MARIADB_DIR/install.log" 2>&1 || {
		cat "$MARIADB_DIR/install.log" >&2
		return 1
	}
	# A free port can be taken between the check and the bind by another server starting on this
	# machine: retry on a fresh port unless the caller fixed one.
	local fixed=${MARIADB_PORT_FIXED:-} tries=0
	until mariadb__launch; do
		tries=$((tries + 1))
		if [ -n "$fixed" ] || [ "$tries" -ge 5 ] || ! grep -q 'already in use' "$MARIADB_DIR/err.log"; then
			return 1
		fi
		MARIADB_PORT=$(mariadb_free_port)
		export MARIADB_PORT
		echo "mariadb: port taken, retrying on $MARIADB_PORT" >&2
	done
	"$(mariadb_bin mariadb)" --socket="$MARIADB_DIR/sock" -uroot -e "
		CREATE USER 'outbox'@'127.0.0.1' IDENTIFIED BY 'outbox';
		GRANT ALL PRIVILEGES ON *.* TO 'outbox'@'127.0.0.1' WITH GRANT OPTION;" || return 1
	# Server-level DSN: no database; the test helper creates one per test.
	MARIADB_DSN_ROOT="outbox:outbox@tcp(127.0.0.1:$MARIADB_PORT)/?parseTime=true&loc=UTC"
	export MARIADB_DSN_ROOT
	echo "mariadb: started pid $MARIADB_PID on 127.0.0.1:$MARIADB_PORT (datadir $MARIADB_DIR)" >&2
}

mariadb__kill() {
	[ -n "${MARIADB_PID:-}" ] || return 0
	kill "$MARIADB_PID" 2>/dev/null || true
	local i
	for i in $(seq 1 300); do
		kill -0 "$MARIADB_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$MARIADB_PID" 2>/dev/null || true
	MARIADB_PID=
}

mariadb_restart() {
	mariadb__kill
	mariadb__launch
}

mariadb_stop() {
	mariadb__kill
	if [ -n "${MARIADB_DIR:-}" ] && [ -d "$MARIADB_DIR" ]; then
		rm -rf "$MARIADB_DIR"
	fi
	MARIADB_DIR=
}
