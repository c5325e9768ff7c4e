package main

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"
)

func TestCountsLineRoundTrip(t *testing.T) {
	in := consumerCounts{Claims: 1234, Empty: 56, Stmts: 7890}
	line := formatCounts(in)
	rest, ok := cutCountsPrefix(line)
	if !ok {
		t.Fatalf("formatCounts(%+v) = %q: no counts prefix", in, line)
	}
	got, err := parseCounts(rest)
	if err != nil || got != in {
		t.Fatalf("parseCounts(%q) = %+v, %v; want %+v", rest, got, err, in)
	}
	for _, bad := range []string{"", "1 2", "1 2 x", "1 2 3 4"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q): no error", bad)
		}
	}
	d := consumerCounts{Claims: 10, Empty: 4, Stmts: -1}.minus(consumerCounts{Claims: 3, Empty: 1, Stmts: 5})
	if d != (consumerCounts{Claims: 7, Empty: 3, Stmts: -1}) {
		t.Errorf("minus with an unknown statement count = %+v", d)
	}
}

// TestCountingPoolMatchesServer checks the counting driver against the server's own count of
// the session's statements (Questions, which leaves out prepares and closes, as stmtCounter
// does) in both driver modes: a transaction with an isolation level, an exec and a query with
// arguments (prepared with the default DSN, inline with interpolateParams), a commit.
func TestCountingPoolMatchesServer(t *testing.T) {
	dsn := os.Getenv("OUTBOX_TEST_DSN")
	if dsn == "" {
		t.Skip("OUTBOX_TEST_DSN not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := server{dsn: dsn}
	name, drop, err := srv.freshDB(ctx, "cnttest")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	}()
	setup, _, err := srv.open(name, dsnModes[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = setup.ExecContext(ctx, bizDDL)
	setup.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range dsnModes {
		t.Run(mode.Name, func(t *testing.T) {
			dsn, err := srv.dsnFor(name, mode)
			if err != nil {
				t.Fatal(err)
			}
			db, n, err := openCountingPool(dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			questions := func() int64 {
				var k string
				var v int64
				if err := conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Questions'").Scan(&k, &v); err != nil {
					t.Fatal(err)
				}
				return v
			}
			q0, s0, p0 := questions(), n.Stmts.Load(), n.Prepares.Load()
			tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			if err != nil {
				t.Fatal(err)
			}
			if err := insertBiz(ctx, tx, 1); err != nil {
				t.Fatal(err)
			}
			var got int64
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM biz WHERE seq = ?", 1).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			q1, s1, p1 := questions(), n.Stmts.Load(), n.Prepares.Load()
			// SET TRANSACTION, START TRANSACTION, INSERT, SELECT, COMMIT, and the second SHOW.
			if s1-s0 != 6 || q1-q0 != s1-s0 {
				t.Errorf("counted %d statements, the server %d; want 6 both", s1-s0, q1-q0)
			}
			wantPrep := int64(2)
			if mode.Interpolate {
				wantPrep = 0
			}
			if p1-p0 != wantPrep {
				t.Errorf("counted %d prepares, want %d", p1-p0, wantPrep)
			}
		})
	}
}
