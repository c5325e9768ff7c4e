package faultdriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/outboxgen/outboxgen/internal/faultdriver"
	"github.com/outboxgen/outboxgen/internal/testdb"
)

func TestRules(t *testing.T) {
	d := testdb.New(t)
	inj := faultdriver.New()
	db, err := sql.Open(faultdriver.DriverName, inj.DSN(d.DSN))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	scanInt := func(q string, args ...any) (sql.NullInt64, error) {
		var v sql.NullInt64
		err := db.QueryRowContext(ctx, q, args...).Scan(&v)
		return v, err
	}

	// No rule: the real server answers, with and without arguments (go-sql-driver returns
	// ErrSkip for the latter, and database/sql prepares).
	if v, err := scanInt("SELECT 40 + 2"); err != nil || v.Int64 != 42 {
		t.Fatalf("passthrough: got %v, %v; want 42", v, err)
	}
	if v, err := scanInt("SELECT ? + 1", 41); err != nil || v.Int64 != 42 {
		t.Fatalf("passthrough with args: got %v, %v; want 42", v, err)
	}

	boom := errors.New("injected")
	h := inj.Add(faultdriver.Rule{Match: `^SELECT 7`, Err: boom, Times: 1})
	if _, err := scanInt("SELECT 7 + ?", 1); !errors.Is(err, boom) {
		t.Fatalf("Err rule: got %v, want the injected error", err)
	}
	if v, err := scanInt("SELECT 7 + ?", 1); err != nil || v.Int64 != 8 {
		t.Fatalf("Times=1 rule must fire once, then the server answers: got %v, %v", v, err)
	}
	if h.Hits() != 1 {
		t.Fatalf("Hits = %d, want 1", h.Hits())
	}

	// Values: the string "0" an old driver sent, and NULL.
	r := inj.Return(`GET_LOCK`, []byte("0"))
	if v, err := scanInt("SELECT GET_LOCK(?, 0)", "x"); err != nil || !v.Valid || v.Int64 != 0 {
		t.Fatalf(`Return "0": got %v, %v; want a valid 0`, v, err)
	}
	r.Remove()
	inj.Return(`GET_LOCK`, nil)
	if v, err := scanInt("SELECT GET_LOCK(?, 0)", "x"); err != nil || v.Valid {
		t.Fatalf("Return NULL: got %v, %v; want NULL", v, err)
	}

	// Passthrough: the statement takes effect on the server, the caller sees the rule's answer.
	d.MustExec(t, "CREATE TABLE t (id INT PRIMARY KEY)")
	inj.Add(faultdriver.Rule{Match: `INSERT INTO t`, Passthrough: true, Err: driver.ErrBadConn, Times: 1})
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (?)", 1); err == nil {
		t.Fatal("passthrough Err rule: want an error")
	}
	var n int
	if err := d.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("passthrough: the insert must have reached the server: count %d, %v", n, err)
	}
	inj.Add(faultdriver.Rule{Match: `UPDATE t`, RowsAffected: 5})
	res, err := db.ExecContext(ctx, "UPDATE t SET id = 2")
	if err != nil {
		t.Fatal(err)
	}
	if ra, _ := res.RowsAffected(); ra != 5 {
		t.Fatalf("RowsAffected = %d, want the rule's 5", ra)
	}
	if err := d.QueryRow("SELECT COUNT(*) FROM t WHERE id = 1").Scan(&n); err != nil || n != 1 {
		t.Fatalf("a non-passthrough rule must not reach the server: count %d, %v", n, err)
	}
	if got := len(inj.Statements()); got < 8 {
		t.Fatalf("Statements recorded %d, want every statement", got)
	}
}

func TestOpenDB(t *testing.T) {
	d := testdb.New(t)
	inj := faultdriver.New()
	db, err := inj.OpenDB(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	inj.Return(`CONNECTION_ID`, int64(-7))
	var id int64
	if err := db.QueryRow("SELECT CONNECTION_ID()").Scan(&id); err != nil || id != -7 {
		t.Fatalf("got %d, %v; want the rule's -7", id, err)
	}
	// database/sql calls OpenConnector in sql.Open, so a bad name fails there.
	if _, err := sql.Open(faultdriver.DriverName, "nope|"+d.DSN); err == nil {
		t.Fatal("an unknown injector id must fail")
	}
	if _, err := sql.Open(faultdriver.DriverName, d.DSN); err == nil {
		t.Fatal("a DSN without an injector id must fail")
	}
}
