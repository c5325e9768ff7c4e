package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"runtime/metrics"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// dsnMode is one driver configuration every workload runs with: the issue asks for the
// driver's default (server-side prepared statements, one extra round trip per query) and
// interpolateParams=true (the client inlines arguments), which changes results by 15-80%.
type dsnMode struct {
	Name        string
	Interpolate bool
}

var dsnModes = []dsnMode{{"default", false}, {"interpolate", true}}

// server is the MariaDB or MySQL server the benchmark runs on, reached through a server-level DSN.
type server struct {
	dsn string // server-level, no database
}

// poolSize is set on every pool the benchmark opens. database/sql keeps only 2 idle
// connections by default, so 8 goroutines would open and close connections all the time and
// measure the TCP handshake instead of the outbox.
const poolSize = 32

// dsnFor is the DSN of database name (empty: server-level) with the mode's driver settings.
func (s server) dsnFor(name string, m dsnMode) (string, error) {
	cfg, err := mysql.ParseDSN(s.dsn)
	if err != nil {
		return "", fmt.Errorf("parse --dsn: %w", err)
	}
	cfg.DBName = name
	cfg.ParseTime = true // the outboxgen worker requires it; watermill does not care
	cfg.Loc = time.UTC
	cfg.InterpolateParams = m.Interpolate
	return cfg.FormatDSN(), nil
}

// open opens a pool on database name (empty: server-level) with the mode's driver settings.
func (s server) open(name string, m dsnMode) (*sql.DB, string, error) {
	dsn, err := s.dsnFor(name, m)
	if err != nil {
		return nil, "", err
	}
	db, err := openPool(dsn)
	return db, dsn, err
}

// openPool opens a pool with the benchmark's pool settings.
func openPool(dsn string) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(poolSize)
	db.SetMaxOpenConns(poolSize)
	return db, nil
}

// freshDB creates an empty database for one run and returns its name and a drop function.
func (s server) freshDB(ctx context.Context, label string) (string, func() error, error) {
	admin, _, err := s.open("", dsnModes[0])
	if err != nil {
		return "", nil, err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never returns an error (Go 1.24+).
	name := "ob_" + strings.ReplaceAll(label, "-", "_") + "_" + hex.EncodeToString(rnd[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() error {
		defer admin.Close()
		if os.Getenv("OUTBOXBENCH_KEEP") != "" { // for inspecting a failed run
			fmt.Fprintf(os.Stderr, "  kept database %s\n", name)
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	return name, drop, nil
}

// serverKind is what the report names at its top and what decides watermill's schema adapter
// (see mysqlSchema): "MariaDB" or "MySQL", from SELECT VERSION().
type serverKind struct {
	Name    string // MariaDB or MySQL
	Version string // VERSION(), e.g. 10.11.19-MariaDB or 9.7.4-2
}

func (k serverKind) isMySQL() bool { return k.Name == "MySQL" }

func (k serverKind) String() string { return k.Name + " " + k.Version }

// kindOfVersion tells the two families apart by VERSION(): MariaDB's always contains "MariaDB"
// (10.11.19-MariaDB, 11.8.3-MariaDB-log), Oracle MySQL's never does.
func kindOfVersion(v string) serverKind {
	if strings.Contains(strings.ToLower(v), "mariadb") {
		return serverKind{"MariaDB", v}
	}
	return serverKind{"MySQL", v}
}

// kind asks the server which family and version it is.
func (s server) kind(ctx context.Context) (serverKind, error) {
	db, _, err := s.open("", dsnModes[0])
	if err != nil {
		return serverKind{}, err
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return serverKind{}, fmt.Errorf("SELECT VERSION(): %w", err)
	}
	return kindOfVersion(v), nil
}

// settings returns the server variables that decide the numbers, for the report.
func (s server) settings(ctx context.Context) ([][2]string, error) {
	db, _, err := s.open("", dsnModes[0])
	if err != nil {
		return nil, err
	}
	defer db.Close()
	names := []string{
		"version", "innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin",
		"innodb_buffer_pool_size", "innodb_log_file_size", "innodb_doublewrite",
		"innodb_flush_method", "max_connections", "tx_isolation", "performance_schema",
	}
	var out [][2]string
	for _, n := range names {
		var name, val string
		// SHOW takes no placeholders; the names are constants above.
		err := db.QueryRowContext(ctx, "SHOW GLOBAL VARIABLES LIKE '"+n+"'").Scan(&name, &val)
		if err == sql.ErrNoRows {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("SHOW GLOBAL VARIABLES LIKE %q: %w", n, err)
		}
		out = append(out, [2]string{name, val})
	}
	return out, nil
}

// bizDDL is the application's own table: every W1/W3 transaction inserts one row into it,
// and L0's UPDATE touches it.
const bizDDL = `CREATE TABLE biz (
	id         BIGINT      NOT NULL AUTO_INCREMENT,
	seq        BIGINT      NOT NULL,
	note       VARCHAR(64) NOT NULL,
	n          INT         NOT NULL DEFAULT 0,
	created_at DATETIME(6) NOT NULL,
	PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`

const bizInsert = `INSERT INTO biz (seq, note, created_at) VALUES (?, ?, UTC_TIMESTAMP(6))`

// insertBiz is the business half of every transaction.
func insertBiz(ctx context.Context, tx *sql.Tx, seq int64) error {
	if _, err := tx.ExecContext(ctx, bizInsert, seq, "signup"); err != nil {
		return fmt.Errorf("insert biz: %w", err)
	}
	return nil
}

// statusCounters are server counters that explain a drain independently of machine load:
// statements (round trips), commits, prepares, row-lock waits and rows read, per message.
var statusCounters = []string{"Questions", "Com_commit", "Com_stmt_prepare", "Innodb_row_lock_waits", "Innodb_row_lock_time", "Handler_read_next", "Handler_update"}

// status reads statusCounters (global: meaningful on a server this run has to itself).
func status(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	out := map[string]int64{}
	for _, n := range statusCounters {
		var name string
		var v int64
		if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE '"+n+"'").Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("SHOW GLOBAL STATUS LIKE %q: %w", n, err)
		}
		out[n] = v
	}
	return out, nil
}

// perMessage formats the counter deltas per message, for the log.
func perMessage(before, after map[string]int64, n int) string {
	var parts []string
	for _, c := range statusCounters {
		unit := ""
		if c == "Innodb_row_lock_time" {
			unit = " ms"
		}
		parts = append(parts, fmt.Sprintf("%s %.3f%s", c, float64(after[c]-before[c])/float64(n), unit))
	}
	return strings.Join(parts, ", ")
}

// processCPU is the CPU time (user and system) this process has used: in a drain, what the
// consumer costs the machine besides the server (the producer is idle by then; the tracker and
// the benchmark's own goroutines are included, alike for every system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapUse is what this process has allocated on the heap and how many garbage collections it
// has run: in a drain, per message, the share of the consumer's CPU that goes to the collector
// (with a small live heap, a cycle every few MB allocated).
type heapUse struct {
	bytes, cycles uint64
	gcCPU         float64 // seconds of CPU the collector used (marking, pauses, idle workers)
}

func processHeap() heapUse {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	var h heapUse
	if s[0].Value.Kind() == metrics.KindUint64 {
		h.bytes = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		h.cycles = s[1].Value.Uint64()
	}
	if s[2].Value.Kind() == metrics.KindFloat64 {
		h.gcCPU = s[2].Value.Float64()
	}
	return h
}
