// Command w1cost takes W1's enqueue apart: what the one INSERT that
// outbox.Enqueue adds to a business transaction costs, and which part of it is the round trip,
// the row, its secondary indexes, the payload and outboxgen's own statement.
//
// Each variant is a business transaction on one connection: BEGIN; INSERT biz; [variant];
// COMMIT. The variants run interleaved, one transaction each in turn, so that a drift of the
// machine (this one's loopback round trip switches between ~8 µs and ~60 µs with CPU
// scheduling) hits them all alike; the report is the median per variant and its difference from
// L0, in microseconds and as W1's ratio L0/variant.
//
//	go run ./cmd/w1cost --dsn "$SERVER_DSN_ROOT" [--n 5000] [--interpolate]
package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/outboxgen/outboxgen/runtime/outbox"
)

// variant is the statement a business transaction adds after its INSERT biz.
type variant struct {
	name, what string
	run        func(ctx context.Context, tx *sql.Tx, i int) error
}

func main() {
	dsn := flag.String("dsn", os.Getenv("OUTBOX_TEST_DSN"), "server-level DSN with CREATE DATABASE rights, ending in /?... (bench/run's SERVER_DSN_ROOT)")
	n := flag.Int("n", 5000, "transactions per variant")
	interpolate := flag.Bool("interpolate", true, "interpolateParams=true for the business statements (one round trip each, as outbox.Enqueue's own INSERT always is)")
	size := flag.Int("payload", 200, "payload bytes (the benchmark's W1 uses 200)")
	flag.BoolVar(&spellings, "spellings", false, "also time spellings of the enqueue statement (what its expressions cost)")
	flag.BoolVar(&watermillVariants, "watermill", false, "also time watermill-sql's publish (its INSERT on its own table)")
	flag.BoolVar(&backfill, "backfill", false, "time backfill variants instead (EnqueueMany against L0 and spellings of its statement); --n is then the rounds")
	flag.StringVar(&backfillSet, "backfill-set", "spell", "backfill variants: spell (EnqueueMany's statement taken apart) or lean (the lean statement's clock and chunk size)")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.IntVar(&backfillN, "backfill-n", 16384, "messages per backfill transaction")
	flag.Parse()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "w1cost:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*dsn, *n, *interpolate, *size); err != nil {
		fmt.Fprintln(os.Stderr, "w1cost:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// cpuProfile: --cpuprofile.
var cpuProfile string

func run(dsn string, n int, interpolate bool, size int) error {
	ctx := context.Background()
	if !strings.Contains(dsn, "/?") {
		return fmt.Errorf("--dsn must name no database and end in /?params (got %q)", dsn)
	}
	root, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer root.Close()
	const dbName = "outboxbench_w1cost"
	for _, s := range []string{"DROP DATABASE IF EXISTS " + dbName, "CREATE DATABASE " + dbName} {
		if _, err := root.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	defer root.ExecContext(ctx, "DROP DATABASE IF EXISTS "+dbName) //nolint:errcheck // best effort
	d := strings.Replace(dsn, "/?", "/"+dbName+"?", 1)
	if interpolate {
		d += "&interpolateParams=true"
	}
	db, err := sql.Open("mysql", d)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection: every variant on the same session
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return err
	}
	ddl := []string{
		`CREATE TABLE biz (id BIGINT NOT NULL AUTO_INCREMENT, seq BIGINT NOT NULL, note VARCHAR(64) NOT NULL,
			n INT NOT NULL DEFAULT 0, created_at DATETIME(6) NOT NULL, PRIMARY KEY (id)) ENGINE = InnoDB`,
		`CREATE TABLE biz2 LIKE biz`,
	}
	for _, s := range ddl {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	if err := outbox.Migrate(ctx, db); err != nil {
		return err
	}
	for _, s := range []string{
		`CREATE TABLE noidx LIKE outbox_messages`,
		`ALTER TABLE noidx DROP KEY outbox_messages_claim, DROP KEY outbox_messages_idempotency_key`,
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return err
		}
	}
	if backfill {
		return runBackfill(ctx, db, version, n, backfillN)
	}
	payload := []byte(`{"seq":1,"pad":"` + strings.Repeat("x", max(0, size-len(`{"seq":1,"pad":""}`))) + `"}`)
	small := []byte(`{"seq":1}`)
	raw := func(table string, p []byte) func(ctx context.Context, tx *sql.Tx, i int) error {
		return func(ctx context.Context, tx *sql.Tx, i int) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (event_type, payload, idempotency_key, max_attempts, next_attempt_at, created_at)
				VALUES ('bench.event', ?, ?, 10, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, p, fmt.Sprint("user:", i))
			return err
		}
	}
	variants := []variant{
		{"L0", "the business transaction alone", nil},
		{"second biz row", "one more INSERT of a business row into another table: the price of any statement", func(ctx context.Context, tx *sql.Tx, i int) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO biz2 (seq, note, created_at) VALUES (?, ?, UTC_TIMESTAMP(6))`, i, "signup")
			return err
		}},
		{"outbox row, no index", "an outbox_messages row by a plain INSERT, into a copy without secondary indexes", raw("noidx", payload)},
		{"outbox row, 9-byte payload", "the same with both indexes and a 9-byte payload", raw("outbox_messages", small)},
		{"outbox row", "the same with both indexes (claim, idempotency key) and the payload", raw("outbox_messages", payload)},
		{"outbox.Enqueue", "outbox.Enqueue of the same message: validation, its statement (inline hex literals)", func(ctx context.Context, tx *sql.Tx, i int) error {
			_, err := outbox.Enqueue(ctx, tx, outbox.Message{EventType: "bench.event", Payload: payload, IdempotencyKey: fmt.Sprint("user:", i)})
			return err
		}},
	}
	if watermillVariants {
		if err := watermillSetup(ctx, db, version); err != nil {
			return err
		}
		variants = append(variants, watermillInsert(payload))
	}
	if spellings {
		variants = append(variants, spellingVariants(payload)...)
	}
	took := make([][]time.Duration, len(variants))
	for i := 0; i < n; i++ {
		for v, vr := range variants {
			t0 := time.Now()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO biz (seq, note, created_at) VALUES (?, ?, UTC_TIMESTAMP(6))`, i, "signup"); err != nil {
				_ = tx.Rollback()
				return err
			}
			if vr.run != nil {
				if err := vr.run(ctx, tx, i); err != nil {
					_ = tx.Rollback()
					return fmt.Errorf("%s: %w", vr.name, err)
				}
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			took[v] = append(took[v], time.Since(t0))
		}
	}
	med := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	fmt.Printf("w1cost on %s: %d transactions per variant, interleaved, one connection, interpolateParams=%v, payload %d bytes\n\n", version, n, interpolate, len(payload))
	fmt.Printf("| variant | median µs | over L0 µs | L0 / variant (W1's ratio) | what |\n|---|---:|---:|---:|---|\n")
	l0 := med(took[0])
	for v, vr := range variants {
		m := med(took[v])
		fmt.Printf("| %s | %.0f | %+.0f | %.2fx | %s |\n", vr.name, us(m), us(m-l0), float64(l0)/float64(m), vr.what)
	}
	return nil
}

// spellings: --spellings.
var spellings bool

// spellingVariants send the enqueue's INSERT as outbox.Enqueue does (one statement, strings as
// hex literals with a charset introducer), spelled in several ways.
func spellingVariants(payload []byte) []variant {
	hexs := func(s string) string { return "_utf8mb4 X'" + hex.EncodeToString([]byte(s)) + "'" }
	const now = "TIMESTAMPADD(MICROSECOND, MICROSECOND(NOW(6)), UTC_TIMESTAMP())"
	stmt := func(cols, vals string) func(ctx context.Context, tx *sql.Tx, i int) error {
		return func(ctx context.Context, tx *sql.Tx, i int) error {
			v := strings.NewReplacer("$T", hexs("bench.event"), "$P", hexs(string(payload)), "$K", hexs(fmt.Sprint("user:", i)), "$NOW", now).Replace(vals)
			_, err := tx.ExecContext(ctx, "INSERT INTO outbox_messages ("+cols+") VALUES ("+v+")")
			return err
		}
	}
	const all = "event_type, payload, idempotency_key, headers, ordering_key, ordering_seq, status, attempts, max_attempts, next_attempt_at, created_at"
	const lean = "event_type, payload, idempotency_key, max_attempts, next_attempt_at, created_at"
	inline := func(clock string) func(ctx context.Context, tx *sql.Tx, i int) error {
		h := func(s string) string { return "X'" + hex.EncodeToString([]byte(s)) + "'" }
		clock = strings.ReplaceAll(clock, "$NOW", now)
		return func(ctx context.Context, tx *sql.Tx, i int) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO outbox_messages (event_type, payload, idempotency_key, headers, max_attempts, next_attempt_at, created_at) VALUES ("+
				h("bench.event")+", "+h(string(payload))+", "+h(fmt.Sprint("user:", i))+", NULL, 10, "+clock+", next_attempt_at)")
			return err
		}
	}
	return []variant{
		{"spelling: MessageInsert", "today's statement, as Enqueue sends it", stmt(all, "$T, $P, IFNULL($K, x''), NULL, NULL, NULL, 'PENDING', 0, 10, TIMESTAMPADD(MICROSECOND, CAST(0 AS SIGNED), $NOW), $NOW")},
		{"spelling: lean", "only the columns without defaults, no IFNULL, no delay arithmetic", stmt(lean, "$T, $P, $K, 10, $NOW, $NOW")},
		{"spelling: lean, UTC_TIMESTAMP(6)", "the same with UTC_TIMESTAMP(6), which sqlc cannot parse", stmt(lean, "$T, $P, $K, 10, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)")},
		{"spelling: lean, one clock", "lean, created_at copied from next_attempt_at in the statement", stmt(lean, "$T, $P, $K, 10, $NOW, next_attempt_at")},
		{"spelling: Enqueue's inline", "the statement Enqueue sends inline: hex literals, headers NULL, the clock once", inline("$NOW")},
		{"spelling: Enqueue's inline, UTC_TIMESTAMP(6)", "the same with UTC_TIMESTAMP(6), which sqlc cannot parse", inline("UTC_TIMESTAMP(6)")},
		{"spelling: Enqueue's inline, quoted", "the same with '..' strings (this message needs no escaping) instead of hex", func(ctx context.Context, tx *sql.Tx, i int) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO outbox_messages (event_type, payload, idempotency_key, headers, max_attempts, next_attempt_at, created_at) VALUES ('bench.event', '"+string(payload)+"', 'user:"+fmt.Sprint(i)+"', NULL, 10, "+now+", next_attempt_at)")
			return err
		}},
		{"spelling: lean, no introducer", "lean with plain hex literals (X'..' without _utf8mb4)", func(ctx context.Context, tx *sql.Tx, i int) error {
			h := func(s string) string { return "X'" + hex.EncodeToString([]byte(s)) + "'" }
			_, err := tx.ExecContext(ctx, "INSERT INTO outbox_messages ("+lean+") VALUES ("+h("bench.event")+", "+h(string(payload))+", "+h(fmt.Sprint("user:", i))+", 10, "+now+", "+now+")")
			return err
		}},
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
