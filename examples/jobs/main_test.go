package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxgen/outboxgen/internal/testdb"
)

func TestAccrualIsGrantedOncePerEmployeePerDay(t *testing.T) {
	d := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, d.DSN, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("output:\n%s", out.String())

	rows, err := d.Query("SELECT name, leave_days FROM employees ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var name string
		var days int
		if err := rows.Scan(&name, &days); err != nil {
			t.Fatal(err)
		}
		n++
		if days != 1 {
			t.Errorf("%s has %d day(s) of leave, want exactly 1 (granted once for the day)", name, days)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Errorf("%d employees, want 5", n)
	}

	var runs int
	if err := d.QueryRow("SELECT COUNT(*) FROM outbox_job_runs WHERE job = 'leave-accrual'").Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != 1 {
		t.Errorf("run ledger rows = %d, want 1", runs)
	}
	// Both instances ticked; exactly one ran the accrual.
	if got := strings.Count(out.String(), "granted one day of leave to 5 employees"); got != 1 {
		t.Errorf("accrual runs = %d, want 1", got)
	}
	if !strings.Contains(out.String(), "runs=0 skipped_held=1") && !strings.Contains(out.String(), "runs=0 skipped_held=0 skipped_done=1") {
		t.Errorf("want the second instance's tick skipped (lock held or day done)")
	}
}

func TestZoneWithMidnightIn(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 3 * time.Second, 90 * time.Minute} {
		loc := zoneWithMidnightIn(d)
		at := time.Now().Add(d).Truncate(time.Second).In(loc)
		// Allow the second boundary the clock may cross between the two calls.
		if h, m, s := at.Clock(); !(h == 0 && m == 0 && s <= 1) && !(h == 23 && m == 59 && s == 59) {
			t.Errorf("zoneWithMidnightIn(%s): %s from now it is %02d:%02d:%02d there, want midnight", d, d, h, m, s)
		}
		if _, off := at.Zone(); off < -12*3600 || off > 12*3600 {
			t.Errorf("zoneWithMidnightIn(%s): offset %ds out of range", d, off)
		}
	}
}

// The premise of the example, checked: without the job runner, two instances running the
// accrual at once grant it twice. The test above passes only because of the lock.
func TestAccrueTwiceAtOnceGrantsTwice(t *testing.T) {
	d := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d.MustExec(t, employeesTable)
	d.MustExec(t, "INSERT INTO employees (id, name) VALUES (1, 'Ada'), (2, 'Grace')")

	var buf bytes.Buffer
	out := &syncWriter{w: &buf} // one lock for both goroutines
	errs := make(chan error, 2)
	for _, instance := range []string{"a", "b"} {
		go func() { errs <- accrue(ctx, d.DB, instance, out) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var total int
	if err := d.QueryRow("SELECT SUM(leave_days) FROM employees").Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 4 {
		t.Errorf("two unguarded runs granted %d days to 2 employees, want 4 (each granted twice)", total)
	}
}
