# shellcheck shell=bash
# Sourced by scripts/test, scripts/demo, scripts/reliability and bench/run: start a throwaway
# database server of any supported kind on a free loopback port with a fresh datadir, and stop it
# by pid. No Docker.
#
#   mariadb-10.11  Debian 12's mariadb-server, installed with apt-get when mariadbd is missing.
#   mariadb-11.8   Debian sid's mariadb-server-core, run from a sid root (see sidroot_ensure).
#   mysql-9.7      Debian sid's mysql-server-core (Oracle MySQL 9.7 LTS), from a sid root.
#
#   server_ensure KIND   # install Debian's package or build the sid root the kind runs from
#   server_start KIND    # sets SERVER_KIND, SERVER_DIR, SERVER_PORT, SERVER_PID, SERVER_DSN_ROOT
#                        # (a server-level DSN with CREATE DATABASE rights), SERVER_VERSION
#   server_stop          # by pid; removes the datadir; safe to call twice
#   server_restart       # stop + start on the same datadir and port
#   sidroot_ensure mysql|mariadb   # build the sid root once per machine (cached, see SIDROOT_BASE)
#
# Several servers at once: server_start sets the SERVER_* variables of the last one started;
# save them (server_save NAME / server_load NAME) to juggle more than one.
#
# The fault suite's Go controller (reliability/internal/server) manages its servers' processes
# itself but takes what it runs from here: server__root, server__setup and server__launch_argv.

SERVERS_ALL="mariadb-10.11 mariadb-11.8 mysql-9.7"
# A fixed path so a machine builds each root once (about 2-4 minutes and 1 GB each) and every
# later run, CI included, reuses it.
SIDROOT_BASE=${SIDROOT_BASE:-/var/cache/outboxgen}

server__log() { echo "server: $*" >&2; }

server_free_port() {
	local p
	for _ in $(seq 1 100); do
		p=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	server__log "no free port found"
	return 1
}

mariadb_ensure_installed() {
	if command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; then
		return 0
	fi
	server__log "mariadbd not found; installing mariadb-server with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq mariadb-server >&2
}

# sidroot_ensure FAMILY: a Debian sid root with that family's server and client, built with
# debootstrap from Debian's packages. Bookworm has neither MySQL nor MariaDB 11.8, and sid's
# packages need sid's libc, so they run chrooted. One root per family: the two server packages
# conflict. Built under a lock into a temp directory and renamed, so a half-built root is never used.
sidroot_ensure() {
	local family=$1 root="$SIDROOT_BASE/sid-$1" pkgs
	case "$family" in
	mysql) pkgs="mysql-server-core mysql-client-core" ;;
	mariadb) pkgs="mariadb-server-core mariadb-client-core" ;;
	*) server__log "unknown sid root family $family"; return 1 ;;
	esac
	[ -f "$root/.outboxgen-ready" ] && return 0
	mkdir -p "$SIDROOT_BASE"
	(
		flock 9
		[ -f "$root/.outboxgen-ready" ] && exit 0
		export DEBIAN_FRONTEND=noninteractive
		if ! command -v debootstrap >/dev/null 2>&1; then
			server__log "installing debootstrap with apt-get"
			apt-get update -qq >&2 && apt-get install -y -qq debootstrap >&2 || exit 1
		fi
		server__log "building the sid root for $family at $root (once per machine)"
		rm -rf "$root.tmp"
		debootstrap --variant=minbase sid "$root.tmp" http://deb.debian.org/debian >"$SIDROOT_BASE/$family.log" 2>&1 || {
			tail -n 20 "$SIDROOT_BASE/$family.log" >&2; exit 1; }
		# The mirror's sid Release file can be past its Valid-Until date.
		chroot "$root.tmp" sh -c "apt-get -o Acquire::Check-Valid-Until=false update -qq &&
			DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false install -y -qq --no-install-recommends $pkgs &&
			apt-get clean" >>"$SIDROOT_BASE/$family.log" 2>&1 || {
			tail -n 20 "$SIDROOT_BASE/$family.log" >&2; exit 1; }
		rm -rf "$root"
		mv "$root.tmp" "$root"
		touch "$root/.outboxgen-ready"
	) 9>"$SIDROOT_BASE/.sid-$family.lock"
}

# server__root KIND: the root the server runs in ("" = this system).
server__root() {
	case "$1" in
	mariadb-10.11) echo "" ;;
	mariadb-11.8) echo "$SIDROOT_BASE/sid-mariadb" ;;
	mysql-9.7) echo "$SIDROOT_BASE/sid-mysql" ;;
	*) server__log "unknown server kind '$1' (known: $SERVERS_ALL)"; return 1 ;;
	esac
}

# server__argv_in ROOT CMD...: prints, NUL-separated, the command that runs CMD inside ROOT in a
# private mount namespace with /proc mounted (mysqld reads /proc; the mount vanishes with the
# namespace); with ROOT empty, CMD itself. unshare, sh and chroot each exec the next, so the final
# process is CMD itself: its pid is the server's.
server__argv_in() {
	local root=$1
	shift
	if [ -n "$root" ]; then
		# shellcheck disable=SC2016
		set -- unshare -m --propagation private sh -c 'root=$1; shift; mount -t proc proc "$root/proc" && exec chroot "$root" "$@"' sh "$root" "$@"
	fi
	printf '%s\0' "$@"
}

# server__in ROOT CMD...: run CMD as server__argv_in prints it.
server__in() {
	local argv
	mapfile -d '' argv < <(server__argv_in "$@")
	"${argv[@]}"
}

server__client() {
	local bin=mariadb
	case "$SERVER_KIND" in mysql-*) bin=mysql ;; esac
	if [ -z "$SERVER_ROOT" ]; then
		"$bin" --socket="$SERVER_DIR/sock" -uroot "$@"
	else
		chroot "$SERVER_ROOT" "$bin" --socket="${SERVER_DIR#"$SERVER_ROOT"}/sock" -uroot "$@"
	fi
}

server__install() {
	local d=${SERVER_DIR#"$SERVER_ROOT"}
	case "$SERVER_KIND" in
	mariadb-10.11)
		mariadb-install-db --no-defaults --user=mysql --datadir="$d/data" --tmpdir="$d/tmp" \
			--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve ;;
	mariadb-11.8)
		# --force: the chroot cannot resolve this host's name, which --skip-name-resolve makes moot.
		server__in "$SERVER_ROOT" mariadb-install-db --no-defaults --user=root --datadir="$d/data" --tmpdir="$d/tmp" \
			--auth-root-authentication-method=normal --skip-test-db --skip-name-resolve --force ;;
	mysql-9.7)
		server__in "$SERVER_ROOT" mysqld --no-defaults --initialize-insecure --user=root --datadir="$d/data" \
			--tmpdir="$d/tmp" ;;
	esac
}

# server__setup: SERVER_DIR ready for the kind's server, with a fresh datadir installed.
server__setup() {
	# Its own tmpdir: a mariadbd starting with the default /tmp deletes the #sql* files it finds
	# there, including those of another server's install running at the same moment.
	mkdir -p "$SERVER_DIR/tmp"
	[ -z "$SERVER_ROOT" ] && { chown -R mysql:mysql "$SERVER_DIR" 2>/dev/null || true; }
	chmod 755 "$SERVER_DIR"
	server__install
}

# server__launch_argv: prints, NUL-separated, the command that runs the server of SERVER_KIND on
# SERVER_DIR and SERVER_PORT in the foreground.
server__launch_argv() {
	local d=${SERVER_DIR#"$SERVER_ROOT"}
	# Settings shared by every kind. innodb_flush_log_at_trx_commit=2 (and sync_binlog=0 on MySQL,
	# whose binlog is on by default) keep a throwaway test server fast; the benchmark documents its own.
	local common=(--no-defaults --datadir="$d/data" --port="$SERVER_PORT" --socket="$d/sock"
		--bind-address=127.0.0.1 --tmpdir="$d/tmp" --pid-file="$d/pid" --log-error="$d/err.log"
		--max-connections=1000 --innodb-buffer-pool-size=256M
		--innodb-flush-log-at-trx-commit="${SERVER_FLUSH:-2}" --skip-name-resolve)
	# shellcheck disable=SC2086 # SERVER_EXTRA_ARGS is a list of flags
	case "$SERVER_KIND" in
	mariadb-10.11) server__argv_in "" mariadbd "${common[@]}" --user=mysql ${SERVER_EXTRA_ARGS:-} ;;
	mariadb-11.8) server__argv_in "$SERVER_ROOT" mariadbd "${common[@]}" --user=root ${SERVER_EXTRA_ARGS:-} ;;
	mysql-9.7)
		# It aborts without --secure-file-priv=; X protocol and performance_schema are not used.
		server__argv_in "$SERVER_ROOT" mysqld "${common[@]}" --user=root --mysqlx=OFF --secure-file-priv= \
			--performance-schema=OFF --sync-binlog="${SERVER_SYNC_BINLOG:-0}" ${SERVER_EXTRA_ARGS:-} ;;
	esac
}

server__launch() {
	local argv
	mapfile -d '' argv < <(server__launch_argv)
	"${argv[@]}" >/dev/null 2>&1 &
	local i
	for i in $(seq 1 1200); do
		if [ -f "$SERVER_DIR/pid" ] && server__client -e 'SELECT 1' >/dev/null 2>&1; then
			SERVER_PID=$(cat "$SERVER_DIR/pid")
			export SERVER_PID
			return 0
		fi
		sleep 0.1
	done
	server__log "$SERVER_KIND did not start; log:"
	tail -n 30 "$SERVER_DIR/err.log" >&2 || true
	return 1
}

# server_ensure KIND: the kind's binaries, installed or built once per machine.
server_ensure() {
	case "$1" in
	mariadb-10.11) mariadb_ensure_installed ;;
	mariadb-11.8) sidroot_ensure mariadb ;;
	mysql-9.7) sidroot_ensure mysql ;;
	*) server__log "unknown server kind '$1' (known: $SERVERS_ALL)"; return 1 ;;
	esac
}

server_start() {
	SERVER_KIND=$1
	SERVER_ROOT=$(server__root "$SERVER_KIND") || return 1
	server_ensure "$SERVER_KIND" || return 1
	# The datadir lives inside the root the server runs in, so one path works inside and outside.
	mkdir -p "${SERVER_ROOT:-}/tmp"
	chmod 1777 "${SERVER_ROOT:-}/tmp"
	SERVER_DIR=$(mktemp -d "${SERVER_ROOT:-}/tmp/outboxgen-$SERVER_KIND.XXXXXX")
	SERVER_PORT=$(server_free_port) || return 1
	export SERVER_KIND SERVER_ROOT SERVER_DIR SERVER_PORT
	server__setup >"$SERVER_DIR/install.log" 2>&1 || {
		cat "$SERVER_DIR/install.log" >&2
		return 1
	}
	# A free port can be taken between the check and the bind by another server starting on this
	# machine: retry on a fresh port.
	local tries=0
	until server__launch; do
		tries=$((tries + 1))
		if [ "$tries" -ge 5 ] || ! grep -qi 'already in use' "$SERVER_DIR/err.log"; then
			return 1
		fi
		SERVER_PORT=$(server_free_port)
		export SERVER_PORT
		server__log "port taken, retrying on $SERVER_PORT"
	done
	server__client -e "
		CREATE USER 'outbox'@'127.0.0.1' IDENTIFIED BY 'outbox';
		GRANT ALL PRIVILEGES ON *.* TO 'outbox'@'127.0.0.1' WITH GRANT OPTION;" || return 1
	SERVER_VERSION=$(server__client -N -e 'SELECT VERSION()')
	# Server-level DSN: no database; the test helper creates one per test.
	SERVER_DSN_ROOT="outbox:outbox@tcp(127.0.0.1:$SERVER_PORT)/?parseTime=true&loc=UTC"
	export SERVER_PID SERVER_DSN_ROOT SERVER_VERSION
	server__log "$SERVER_KIND ($SERVER_VERSION) started, pid $SERVER_PID on 127.0.0.1:$SERVER_PORT (datadir $SERVER_DIR)"
}

server__kill() {
	[ -n "${SERVER_PID:-}" ] || return 0
	kill "$SERVER_PID" 2>/dev/null || true
	local i
	for i in $(seq 1 600); do
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$SERVER_PID" 2>/dev/null || true
	SERVER_PID=
}

server_restart() {
	server__kill
	rm -f "$SERVER_DIR/pid"
	server__launch
}

server_stop() {
	server__kill
	if [ -n "${SERVER_DIR:-}" ] && [ -d "$SERVER_DIR" ]; then
		rm -rf "$SERVER_DIR"
	fi
	SERVER_DIR=
}

# server_save NAME / server_load NAME: keep the SERVER_* variables of several servers.
server_save() {
	local v
	for v in KIND ROOT DIR PORT PID DSN_ROOT VERSION; do
		eval "SAVED_${1//[^a-zA-Z0-9]/_}_$v=\${SERVER_$v:-}"
	done
}
server_load() {
	local v
	for v in KIND ROOT DIR PORT PID DSN_ROOT VERSION; do
		eval "SERVER_$v=\${SAVED_${1//[^a-zA-Z0-9]/_}_$v:-}"
		export "SERVER_$v"
	done
}
